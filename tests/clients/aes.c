/* AES-NI instructions in a named function, for the disassembler's crypto flag.
 * Built with cc -O1 -maes; encrypts a block in a loop for argv[1] seconds. */
#include <stdlib.h>
#include <time.h>
#include <wmmintrin.h>

volatile int sink;

__attribute__((noinline)) __m128i aes_rounds(__m128i block, __m128i key)
{
    for (int i = 0; i < 9; i++)
        block = _mm_aesenc_si128(block, key);
    block = _mm_aesenclast_si128(block, key);
    return _mm_aesdec_si128(block, _mm_aesimc_si128(key));
}

int main(int argc, char **argv)
{
    double limit = argc > 1 ? atof(argv[1]) : 0.0;
    __m128i b = _mm_set1_epi32(1), k = _mm_set1_epi32(7);
    time_t t0 = time(NULL);
    do {
        for (int i = 0; i < 100000; i++)
            b = aes_rounds(b, k);
        sink += _mm_cvtsi128_si32(b);
    } while (difftime(time(NULL), t0) < limit);
    return 0;
}
