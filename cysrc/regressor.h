/* The regressor's (regressor.pxi) inner product and its output.
 *
 * td_reg_row: one row of a body's block, row[c] = s · K_c for its ten wrenches K_c,
 * from K transposed (Kt[TD_REG_KT n + c] = K_c[n]) so that the ten sums run side by side
 * in vector lanes; each is summed in n order, s[0] K_c[0] + s[1] K_c[1] + …, the
 * order of dot6 (se3.pxd; the builds do not contract a * b + c).  The rotational-
 * inertia columns (c >= 4) are pure torques (K_c[3..5] = 0): their sums stop after
 * the three angular terms, which leaves every value as dot6 has it (adding exact
 * zeros; only the sign of an exactly zero entry may differ).
 * It returns chk plus the entries times zero (a register's worth, td_chk): zero
 * while the entries are finite, NaN for good from the first that is not (an
 * overflow; td_bits_above on each row of ten cost a quarter of the kernel).
 *
 * Writing a large output once, in address order, span after span (zeros or copies):
 * the regressor's Y (regressor.pxi), mostly structural zeros.
 *
 * With `stream` set (a batch's outputs, far larger than the caches and not read
 * again soon) the AVX builds write whole aligned 32-byte chunks with non-temporal
 * stores: no read of the destination's cache lines before they are written, and
 * no eviction of the kernel's working set.  Values that do not fill a chunk yet
 * wait in td_out.c; the output's own first and last partial chunks (they share
 * cache lines with the neighbouring sample) take plain stores.  The baseline
 * build, and `stream` unset, take plain stores throughout.  Either way the
 * values written are the same bits (copies and zeros). */
#ifndef TD_REGRESSOR_H
#define TD_REGRESSOR_H

#include <stdint.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

#define TD_REG_KT 12    /* Kt's row length: ten columns and two unused (zeros) */

#if defined(__AVX__)
typedef __m256d td_chk;
static inline td_chk td_chk_zero(void) { return _mm256_setzero_pd(); }
static inline int td_chk_ok(td_chk c)
{
    return _mm256_movemask_pd(_mm256_cmp_pd(c, _mm256_setzero_pd(), _CMP_NEQ_UQ)) == 0;
}
#else
typedef double td_chk;
static inline td_chk td_chk_zero(void) { return 0.0; }
static inline int td_chk_ok(td_chk c) { return c == 0.0; }
#endif

static inline td_chk td_reg_row(const double* s, const double* Kt, double* row, td_chk chk)
{
#if defined(__AVX__)
    __m256d b = _mm256_set1_pd(s[0]);
    __m256d a0 = _mm256_mul_pd(b, _mm256_loadu_pd(Kt));
    __m256d a1 = _mm256_mul_pd(b, _mm256_loadu_pd(Kt + 4));
    __m256d a2 = _mm256_mul_pd(b, _mm256_loadu_pd(Kt + 8));
    for (int n = 1; n < 3; n++) {
        const double* k = Kt + TD_REG_KT * n;
        b = _mm256_set1_pd(s[n]);
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(b, _mm256_loadu_pd(k)));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(b, _mm256_loadu_pd(k + 4)));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(b, _mm256_loadu_pd(k + 8)));
    }
    for (int n = 3; n < 6; n++) {
        b = _mm256_set1_pd(s[n]);
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(b, _mm256_loadu_pd(Kt + TD_REG_KT * n)));
    }
    _mm256_storeu_pd(row, a0);
    _mm256_storeu_pd(row + 4, a1);
    _mm_storeu_pd(row + 8, _mm256_castpd256_pd128(a2));
    const __m256d z = _mm256_setzero_pd();     /* (a2's last two: s · 0, no entry) */
    return _mm256_add_pd(chk, _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a0, z),
                                                          _mm256_mul_pd(a1, z)),
                                            _mm256_mul_pd(a2, z)));
#else
    const double s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5];
    double t = 0.0;
    for (int c = 0; c < 4; c++) {
        row[c] = s0 * Kt[c] + s1 * Kt[TD_REG_KT + c] + s2 * Kt[2 * TD_REG_KT + c]
                 + s3 * Kt[3 * TD_REG_KT + c] + s4 * Kt[4 * TD_REG_KT + c]
                 + s5 * Kt[5 * TD_REG_KT + c];
        t += row[c] * 0.0;
    }
    for (int c = 4; c < 10; c++) {
        row[c] = s0 * Kt[c] + s1 * Kt[TD_REG_KT + c] + s2 * Kt[2 * TD_REG_KT + c];
        t += row[c] * 0.0;
    }
    return chk + t;
#endif
}

typedef struct {
    double* p;      /* the next value's address */
    double c[4];    /* streaming: the values of p's 32-byte chunk before p */
    int k;          /* how many (p's index in its chunk), or -1 before the first chunk */
    int stream;
} td_out;

static inline void td_out_begin(td_out* o, double* p, int stream)
{
    o->p = p;
#if defined(__AVX__)
    o->stream = stream;
#else
    o->stream = 0;
    (void)stream;
#endif
    o->k = ((uintptr_t)p & 31) ? -1 : 0;
}

#if defined(__AVX__)
/* one value, streaming: the slow path (chunk edges) */
static inline void td_out_one(td_out* o, double x)
{
    if (o->k < 0) {                      /* the output's first, partial chunk */
        *o->p++ = x;
        if (((uintptr_t)o->p & 31) == 0)
            o->k = 0;
        return;
    }
    o->c[o->k++] = x;
    o->p++;
    if (o->k == 4) {
        _mm256_stream_pd(o->p - 4, _mm256_loadu_pd(o->c));
        o->k = 0;
    }
}
#endif

/* n zeros */
static inline void td_out_zeros(td_out* o, long n)
{
#if defined(__AVX__)
    if (o->stream) {
        const __m256d z = _mm256_setzero_pd();
        while (n > 0 && o->k != 0) {
            td_out_one(o, 0.0);
            n--;
        }
        for (; n >= 4; n -= 4) {
            _mm256_stream_pd(o->p, z);
            o->p += 4;
        }
        for (; n > 0; n--)
            td_out_one(o, 0.0);
        return;
    }
#endif
    memset(o->p, 0, (size_t)n * sizeof(double));
    o->p += n;
}

/* n values from s */
static inline void td_out_copy(td_out* o, const double* s, long n)
{
#if defined(__AVX__)
    if (o->stream) {
        while (n > 0 && o->k != 0) {
            td_out_one(o, *s++);
            n--;
        }
        for (; n >= 4; n -= 4, s += 4) {
            _mm256_stream_pd(o->p, _mm256_loadu_pd(s));
            o->p += 4;
        }
        for (; n > 0; n--)
            td_out_one(o, *s++);
        return;
    }
#endif
    memcpy(o->p, s, (size_t)n * sizeof(double));
    o->p += n;
}

/* the values still waiting (plain stores: the last chunk is partial), and the
 * non-temporal stores ordered before whatever the thread stores next */
static inline void td_out_end(td_out* o)
{
#if defined(__AVX__)
    if (o->stream) {
        for (int t = 0; t < o->k; t++)
            o->p[t - o->k] = o->c[t];
        o->k = 0;
        _mm_sfence();
    }
#else
    (void)o;
#endif
}

#endif
