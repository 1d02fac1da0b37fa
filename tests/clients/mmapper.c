/* Three threads map, touch, protect and unmap anonymous memory in a loop: the
 * OS face of a database's memory operations (Oracle's 'PGA memory operation').
 * Several threads share one address space, so they queue on its mmap lock
 * inside mmap/munmap, and the /proc sampler sees them in those syscalls. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

static void *churn(void *arg)
{
    size_t len = 16 << 20;
    (void)arg;
    for (;;) {
        /* MAP_POPULATE faults the pages in inside mmap itself, so the time
         * goes to the syscall rather than to user-space page faults. */
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            exit(1);
        mprotect(p, len, PROT_READ);
        munmap(p, len);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, churn, NULL);
    pthread_join(t[0], NULL);
    return 0;
}
