/* A multi-threaded "server" for the eBPF backend: threads created after the probe is attached.
 *
 * decrypt_page(in, len, out, pgno) XORs a 4096-byte page with a keystream (in rdi, len rsi,
 * out rdx, pgno ecx). Prints its pid, waits for a line on stdin, then starts argv[1] threads
 * (default 4) that each decrypt argv[2] pages (default 500), page numbers thread*100000 + i,
 * checks every result, and prints "ok N" with the number of pages verified.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAGE 4096
#define NOINL __attribute__((noinline, noipa, used))

static int per_thread = 500;
static long verified[64];

static uint8_t key(size_t i) { return (uint8_t)(i * 31u + 7u); }

NOINL int decrypt_page(const uint8_t *in, size_t len, uint8_t *out, int pgno)
{
    for (size_t i = 0; i < len; i++) out[i] = in[i] ^ key(i);
    return pgno;
}

static void *worker(void *arg)
{
    long t = (long)arg;
    uint8_t plain[PAGE], cipher[PAGE], out[PAGE];
    for (int n = 0; n < per_thread; n++) {
        int pgno = (int)(t * 100000 + n);
        memset(plain, 0, PAGE);
        snprintf((char *)plain, PAGE, "tdescope-thread-page %d", pgno);
        for (size_t i = 0; i < PAGE; i++) cipher[i] = plain[i] ^ key(i);
        decrypt_page(cipher, PAGE, out, pgno);
        if (memcmp(out, plain, PAGE) == 0) verified[t]++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    per_thread = argc > 2 ? atoi(argv[2]) : 500;
    if (threads < 1 || threads > 64) return 2;
    printf("%d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 3;
    pthread_t tid[64];
    for (long t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, (void *)t);
    long total = 0;
    for (long t = 0; t < threads; t++) {
        pthread_join(tid[t], NULL);
        total += verified[t];
    }
    printf("ok %ld\n", total);
    return 0;
}
