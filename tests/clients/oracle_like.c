/* A stand-in for an Oracle server process reading a TDE-encrypted block, for the probe recipes.
 *
 * Exports functions named as in seed 003 (Oracle 12.1/12.2 on Linux x86-64) that take the same
 * arguments in the same registers, called in the order Hoogland's debugtrace shows:
 *   _intel_fast_memcpy(cache_buf, read_buf, 8192)   block into the buffer cache, still encrypted
 *   kcbzvb(cache_buf, tsn)                          verify the read buffer
 *   kcbztek_trace_blk(&kcbztek_global, 0)           encryption check (first arg is NOT the buffer)
 *   kcbz_encdec_tbsblk(tsn, block#, cache_buf)      decrypt the tablespace block:
 *     kgce_dec(ctx, cache_buf+20, 8168, pga)        body decrypted into PGA
 *     _intel_fast_memcpy(cache_buf+20, pga, 8168)   copied back over the buffer
 *     kcbchk_ctx(cache_buf, 0)                      check the decrypted block
 *   kskthbwt(t, 0, 524) / kskthewt(t, 524)          'PGA memory operation' wait begin / end
 * Built without -g (no DWARF), like the oracle binary. Prints its pid, then loops for argv[1]
 * seconds (default 30), one block every argv[2] microseconds (default 2000).
 * The plain block is a valid Oracle data block header: type 6, frmt 0xa2, rdba 5/907, scn
 * 0x4e9af4, seq 1, flg 0x06 with chkval making all 16-bit words XOR to 0, tail 0x9af40601.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 8192
#define NOINL __attribute__((noinline, noipa, used))  /* no clones: calls must reach these symbols */

volatile uint64_t sink;
uint64_t kcbztek_global[4];
static uint8_t read_buf[BLOCK] __attribute__((aligned(4096)));
static uint8_t cache_buf[BLOCK] __attribute__((aligned(4096)));
static uint8_t pga[BLOCK];
static uint8_t plain[BLOCK];

static void set_chkval(uint8_t *b);
static uint8_t keystream(size_t i) { return (uint8_t)(i * 167u + 13u) ^ 0x5a; }

NOINL void *_intel_fast_memcpy(void *dest, const void *src, size_t n)
{
    unsigned char *d = dest;
    const unsigned char *s = src;
    while (n--) *d++ = *s++;   /* not memcpy(): the compiler could turn it back into a tail call */
    return dest;
}

NOINL int kcbzvb(void *buf, long tsn) { sink += ((uint8_t *)buf)[0] + tsn; return 1; }

NOINL void *kcbztek_trace_blk(void *global, long zero) { sink += (uint64_t)global + zero; return cache_buf; }

NOINL int kgce_dec(void *ctx, const uint8_t *in, size_t len, uint8_t *out)
{
    for (size_t i = 0; i < len; i++) out[i] = in[i] ^ keystream(i);
    sink += (uint64_t)ctx;
    return 0;
}

NOINL int kcbchk_ctx(void *buf, long flags) { sink += ((uint8_t *)buf)[15] + flags; return 0; }

NOINL int kcbz_encdec_tbsblk(long tsn, long blockno, uint8_t *buf)
{
    uint64_t ctx[8] = {0};
    kgce_dec(ctx, buf + 20, BLOCK - 24, pga);
    _intel_fast_memcpy(buf + 20, pga, BLOCK - 24);
    buf[15] = 0x06;   /* the E flag (0x10) is cleared once the buffer holds the clear block */
    set_chkval(buf);
    sink += tsn + blockno;
    return kcbchk_ctx(buf, 0);
}

NOINL long kskthbwt(long tim, long unused, long event) { sink += tim + unused + event; return 0; }
NOINL long kskthewt(long tim, long event) { sink += tim + event; return 0x23; }

static void set_chkval(uint8_t *b)   /* chkval makes every 16-bit word of the block XOR to 0 */
{
    uint16_t x = 0, w;
    b[16] = b[17] = 0;
    for (int i = 0; i < BLOCK; i += 2) { memcpy(&w, b + i, 2); x ^= w; }
    memcpy(b + 16, &x, 2);
}

static void build_plain(void)
{
    memset(plain, 0, BLOCK);
    uint32_t rdba = (5u << 22) | 907u, scn = 0x004e9af4u, tail = ((scn & 0xffffu) << 16) | (6u << 8) | 1u;
    plain[0] = 0x06; plain[1] = 0xa2;
    memcpy(plain + 4, &rdba, 4);
    memcpy(plain + 8, &scn, 4);
    plain[14] = 1; plain[15] = 0x06;
    for (int i = BLOCK - 1004; i < BLOCK - 4; i += 20)   /* "rows" at the end, free space before */
        memcpy(plain + i, "row AAAAAAAAAA 0123 ", 20);
    memcpy(plain + BLOCK - 4, &tail, 4);
    set_chkval(plain);
}

static void build_on_disk(void)
{
    memcpy(read_buf, plain, BLOCK);
    for (size_t i = 0; i < BLOCK - 24; i++) read_buf[20 + i] = plain[20 + i] ^ keystream(i);
    read_buf[15] = 0x16;   /* E flag set: encrypted on disk */
    set_chkval(read_buf);  /* the checksum on disk covers the encrypted image */
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 30.0;
    long pause_us = argc > 2 ? atol(argv[2]) : 2000;
    build_plain();
    build_on_disk();
    printf("%d\n", (int)getpid());
    fflush(stdout);
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        kskthbwt(1, 0, 524);
        kskthewt(2, 524);
        _intel_fast_memcpy(cache_buf, read_buf, BLOCK);
        kcbzvb(cache_buf, 5);
        kcbztek_trace_blk(kcbztek_global, 0);
        kcbz_encdec_tbsblk(5, 907, cache_buf);
        if (memcmp(cache_buf, plain, BLOCK) != 0) { fprintf(stderr, "decrypt mismatch\n"); return 3; }
        usleep(pause_us);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    return 0;
}
