/* A tiny profiling target: one known hot function, one colder one.
 * Built by tests with cc -O1 -g -fno-omit-frame-pointer; runs until killed
 * (or for argv[1] seconds) so perf can sample it. */
#include <stdlib.h>
#include <time.h>

/* Volatile so the compiler cannot prove hot_loop pure and hoist the call out
 * of main's loop (it did: -O1 infers `const` and computes it once). */
volatile unsigned long sink;
volatile unsigned long hot_n = 2000000, cold_n = 200000;

__attribute__((noinline)) unsigned long hot_loop(unsigned long n)
{
    unsigned long acc = 1;
    for (unsigned long i = 0; i < n; i++) {
        acc = acc * 6364136223846793005UL + i;
        acc ^= acc >> 13;
    }
    return acc;
}

__attribute__((noinline)) unsigned long cold_loop(unsigned long n)
{
    unsigned long acc = 0;
    for (unsigned long i = 0; i < n; i++)
        acc += i * 3;
    return acc;
}

int main(int argc, char **argv)
{
    double limit = argc > 1 ? atof(argv[1]) : 30.0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        sink += hot_loop(hot_n);
        sink += cold_loop(cold_n);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > limit)
            break;
    }
    return 0;
}
