/* A stand-in for page-level pg_tde (2.x / open_pg_tde) decrypting a block, for tdescope's recipe.
 *
 * Built twice: with -DPG_TDE_LIBRARY -shared -fPIC as pg_tde.so, exporting
 *   void tde_decrypt_smgr_block(InternalKey *rel_key, ForkNumber forknum, BlockNumber blocknum,
 *                               const unsigned char *in, unsigned char *out)
 * (the signature of pg_tde 2.x's src/smgr/pg_tde_smgr.c: rdi key, esi fork, edx block, rcx in,
 * r8 out), which decrypts BLCKSZ bytes in place (in == out, the shared buffer) with a keystream;
 * and without it as the program, linked against that library, that prints its pid and loops for
 * argv[1] seconds: a free-space-map block (fork 1: the recipe must skip it), then block 7 of the
 * main fork, whose plaintext is a valid PostgreSQL heap page holding one tuple with a marker.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLCKSZ 8192
typedef struct InternalKey { unsigned char key[16]; uint32_t start_lsn; } InternalKey;

static unsigned char keystream(size_t i, uint32_t block) { return (unsigned char)(i * 131u + block * 7u + 29u); }

#ifdef PG_TDE_LIBRARY
__attribute__((noinline, used, visibility("default")))
void tde_decrypt_smgr_block(InternalKey *rel_key, int forknum, uint32_t blocknum, const unsigned char *in,
                            unsigned char *out)
{
    for (size_t i = 0; i < BLCKSZ; i++)
        out[i] = in[i] ^ keystream(i, blocknum) ^ rel_key->key[i % 16];
}
#else
void tde_decrypt_smgr_block(InternalKey *, int, uint32_t, const unsigned char *, unsigned char *);

static unsigned char plain[BLCKSZ], buffer[BLCKSZ] __attribute__((aligned(4096)));

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }

/* A heap page: header, one line pointer, one tuple (int4 id 7, text 'PAGE-TDE-ROW-7'). */
static void make_page(void)
{
    const char *text = "PAGE-TDE-ROW-7";
    size_t tlen = strlen(text), hoff = 24, len = hoff + 4 + 1 + tlen;
    uint16_t upper = (uint16_t)((BLCKSZ - len) & ~7u);
    memset(plain, 0, BLCKSZ);
    put16(plain + 12, 28);          /* pd_lower: one line pointer */
    put16(plain + 14, upper);       /* pd_upper */
    put16(plain + 16, BLCKSZ);      /* pd_special: a heap page has none */
    put16(plain + 18, BLCKSZ | 4);  /* pd_pagesize_version */
    put32(plain + 24, upper | (1u << 15) | ((uint32_t)len << 17));  /* lp 1: LP_NORMAL */
    unsigned char *t = plain + upper;
    put32(t, 2);                    /* t_xmin */
    put16(t + 14, 7);               /* t_ctid block lo */
    put16(t + 16, 1);               /* t_ctid offset */
    put16(t + 18, 2);               /* t_infomask2: natts 2 */
    put16(t + 20, 0x0800 | 0x0002); /* XMAX_INVALID | HASVARWIDTH */
    t[22] = (unsigned char)hoff;
    put32(t + hoff, 7);
    t[hoff + 4] = (unsigned char)(((1 + tlen) << 1) | 1);  /* a short varlena header */
    memcpy(t + hoff + 5, text, tlen);
}

static void encrypt_into_buffer(const InternalKey *key, uint32_t block)
{
    for (size_t i = 0; i < BLCKSZ; i++)
        buffer[i] = plain[i] ^ keystream(i, block) ^ key->key[i % 16];
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 30;
    unsigned block = argc > 2 ? (unsigned)atoi(argv[2]) : 7;  /* another block: an "io worker" told apart */
    InternalKey key = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, 0};
    make_page();
    printf("%d\n", (int)getpid());
    fflush(stdout);
    time_t end = time(NULL) + seconds;
    while (time(NULL) < end) {
        encrypt_into_buffer(&key, 2);
        tde_decrypt_smgr_block(&key, 1, 2, buffer, buffer);  /* the free space map: not a heap page */
        encrypt_into_buffer(&key, block);
        tde_decrypt_smgr_block(&key, 0, block, buffer, buffer);  /* the main fork, block 7, in place */
        if (memcmp(buffer, plain, BLCKSZ) != 0)
            return 2;
        usleep(2000);
    }
    return 0;
}
#endif
