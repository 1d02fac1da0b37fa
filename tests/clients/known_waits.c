/* Syscalls whose number and sizes are known, for the exact wait tracer's tests.
 *
 * Prints its pid, then waits for a line on stdin; on each line "go" it starts a NEW thread (so the
 * tracer must follow threads created after it attached) that does exactly:
 *   N x mmap(128 KiB, MAP_PRIVATE|MAP_ANONYMOUS) + touch + munmap(128 KiB)   ('PGA memory operation')
 *   N x pread(fd, 8192) from FILE, N x pwrite(devnull, 4096), N x madvise(1 MiB, MADV_DONTNEED)
 * then prints "done" once the thread is joined. EOF on stdin ends it.
 * Usage: known_waits N FILE */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long n;
static int file_fd, null_fd;

static void *work(void *arg)
{
    static char buf[8192];
    (void)arg;
    for (long i = 0; i < n; i++) {
        char *p = mmap(NULL, 128 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            exit(1);
        p[0] = 1;
        munmap(p, 128 << 10);
    }
    for (long i = 0; i < n; i++)
        if (pread(file_fd, buf, 8192, (i % 16) * 8192) != 8192)
            exit(2);
    for (long i = 0; i < n; i++)
        if (pwrite(null_fd, buf, 4096, 0) != 4096)
            exit(3);
    char *big = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (long i = 0; i < n; i++)
        madvise(big, 1 << 20, MADV_DONTNEED);
    munmap(big, 1 << 20);
    return NULL;
}

int main(int argc, char **argv)
{
    char line[64];
    if (argc != 3)
        return 64;
    n = atol(argv[1]);
    file_fd = open(argv[2], O_RDONLY);
    null_fd = open("/dev/null", O_WRONLY);
    if (file_fd < 0 || null_fd < 0)
        return 66;
    printf("%d\n", (int)getpid());
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        pthread_t t;
        if (strncmp(line, "go", 2) != 0)
            continue;
        pthread_create(&t, NULL, work, NULL);
        pthread_join(t, NULL);
        printf("done\n");
        fflush(stdout);
    }
    return 0;
}
