/* Writing a large output once, in address order, span after span (zeros or copies):
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
#ifndef TD_REGRESSOR_OUT_H
#define TD_REGRESSOR_OUT_H

#include <stdint.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

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
