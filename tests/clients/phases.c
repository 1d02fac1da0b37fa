/* A profiling target in two phases, for windows cut by time: waits for a line on stdin, spins in
 * leaf_one (called main -> run -> middle_one -> leaf_one) for argv[1] seconds, prints the moment it
 * switches ("switch SECONDS", CLOCK_MONOTONIC), then spins in leaf_two for argv[2] seconds and exits.
 * Built by tests with -fomit-frame-pointer: only DWARF unwinding finds the callers. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long leaf_one(unsigned long n)
{
    unsigned long acc = 1;
    for (unsigned long i = 0; i < n; i++)
        acc = (acc ^ (acc >> 7)) * 6364136223846793005UL + i;
    return acc;
}

__attribute__((noinline)) unsigned long leaf_two(unsigned long n)
{
    unsigned long acc = 3;
    for (unsigned long i = 0; i < n; i++)
        acc = (acc + i) * 2862933555777941757UL ^ (acc >> 11);
    return acc;
}

__attribute__((noinline)) unsigned long middle_one(void) { return leaf_one(200000) + 1; }
__attribute__((noinline)) unsigned long middle_two(void) { return leaf_two(200000) + 2; }

__attribute__((noinline)) void run(unsigned long (*middle)(void), double seconds)
{
    double end = now() + seconds;
    while (now() < end)
        sink += middle();
}

int main(int argc, char **argv)
{
    char line[16];
    if (argc < 3 || !fgets(line, sizeof line, stdin))
        return 2;
    run(middle_one, atof(argv[1]));
    printf("switch %.6f\n", now());
    fflush(stdout);
    run(middle_two, atof(argv[2]));
    return 0;
}
