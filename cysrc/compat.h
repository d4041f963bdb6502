/* Portability shims and small numeric helpers for the treedyn kernels. */
#ifndef TREEDYN_COMPAT_H
#define TREEDYN_COMPAT_H
#include <math.h>
#include <stdint.h>

#if defined(__GLIBC__)
#define td_libm_sincos sincos         /* GNU extension (_GNU_SOURCE, see setup.py) */
#elif defined(__APPLE__)
#define td_libm_sincos __sincos
#else
static inline void td_libm_sincos(double x, double *s, double *c) { *s = sin(x); *c = cos(x); }
#endif

/* The constants of td_sincos (and of its four-lane twin, td_sincos4 in simd.h):
 * 2/π, π/2 in three parts of 33 bits, and fdlibm's sin and cos coefficients. */
#define TD_SINCOS_CONSTANTS const double \
    invpio2 = 6.36619772367581382433e-01, \
    pio2_1 = 1.57079632673412561417e+00,   /* first 33 bits of pi/2 */ \
    pio2_2 = 6.07710050630396597660e-11,   /* next 33 bits */ \
    pio2_3 = 2.02226624871116645580e-21,   /* next 33 bits */ \
    S1 = -1.66666666666666324348e-01, S2 = 8.33333333332248946124e-03, \
    S3 = -1.98412698298579493134e-04, S4 = 2.75573137070700676789e-06, \
    S5 = -2.50507602534068634195e-08, S6 = 1.58969099521155010221e-10, \
    C1 = 4.16666666666666019037e-02, C2 = -1.38888888888741095749e-03, \
    C3 = 2.48015872894767294178e-05, C4 = -2.75573143513906633035e-07, \
    C5 = 2.08757232129817482790e-09, C6 = -1.13596475577881948265e-11;

/* sin and cos of a joint angle, inlined.  Every revolute joint needs one pair per
 * kernel call, and a call into libm costs about as much as the rest of a joint's
 * work in the body-fixed RNEA.  For |x| <= 2^19 (any joint angle) the argument is
 * reduced by x - n pi/2 with pi/2 split in three parts of 33 significant bits
 * (Cody-Waite; n pi/2_k is exact), and sin/cos on [-pi/4, pi/4] are the degree-13
 * and degree-14 minimax polynomials whose coefficients fdlibm's __kernel_sin and
 * __kernel_cos use (error below 1 ulp of the result on that interval).  Larger
 * or non-finite arguments go to libm.  Tested against libm in
 * tests/test_kernels_numeric.py. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void td_sincos(double x, double *s, double *c)
{
    TD_SINCOS_CONSTANTS
    double fn, r, t, y0, y, ylo, z, sy, cy, hz, w;
    long n;
    if (!(fabs(x) <= 823549.6562)) {    /* 2^19 pi/2; also NaN and infinities */
        td_libm_sincos(x, s, c);
        return;
    }
    if (fabs(x) < 7.450580596923828e-09) {   /* 2^-27: sin x = x, cos x = 1 to 1 ulp */
        *s = x;
        *c = 1.0;
        return;
    }
    fn = (x * invpio2 + 6755399441055744.0) - 6755399441055744.0;   /* round (1.5 2^52) */
    n = (long)fn;
    /* y + ylo = x - fn pi/2 (a double-double): the products fn pio2_k are exact */
    r = x - fn * pio2_1;
    t = fn * pio2_2;
    y0 = r - t;
    ylo = ((r - y0) - t) - fn * pio2_3;
    y = y0 + ylo;
    ylo -= y - y0;
    z = y * y;
    sy = y + (y * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6))))) + ylo);
    hz = 0.5 * z;
    w = 1.0 - hz;
    cy = w + (((1.0 - w) - hz)
              + (z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6))))) - y * ylo));
    /* quadrant n: (s, c) = (sy, cy), (cy, -sy), (-sy, -cy), (-cy, sy), selected
       without branches (random angles would mispredict a switch): an indexed load
       and a product with +-1, which is exact */
    {
        const double v[2] = {sy, cy};
        const double sign[2] = {1.0, -1.0};
        *s = sign[(n >> 1) & 1] * v[n & 1];
        *c = sign[((n + 1) >> 1) & 1] * v[(n + 1) & 1];
    }
}
/* Vectors of TD_VL doubles for kernels written for SIMD lanes (GCC/Clang vector
 * extensions: 4 lanes where the build has AVX, else 2, the SSE2/NEON width;
 * TD_VL 0 elsewhere, where those kernels take their scalar loops).  td_uvec is
 * the unaligned form for loads and stores from double arrays. */
#if defined(__GNUC__) && defined(__AVX__)
typedef double td_vec __attribute__((vector_size(32)));
typedef double td_uvec __attribute__((vector_size(32), aligned(8)));
typedef long long td_ivec __attribute__((vector_size(32)));   /* comparison masks */
#define TD_VL 4
#elif defined(__GNUC__)
typedef double td_vec __attribute__((vector_size(16)));
typedef double td_uvec __attribute__((vector_size(16), aligned(8)));
typedef long long td_ivec __attribute__((vector_size(16)));
#define TD_VL 2
#else
#define TD_VL 0
#endif

/* acc OR-ed with a word whose top bit is set iff some |x[k]| exceeds the double
 * whose bits are lim (a positive finite value) or is NaN or infinite: on the bits
 * with the sign cleared, the order of magnitudes is that of the integers, so
 * |x| > lim iff lim − bits < 0.  Integer operations only: it vectorizes. */
static inline uint64_t td_bits_above(const double* x, long n, uint64_t lim, uint64_t acc)
{
    const uint64_t* b = (const uint64_t*)x;
    for (long k = 0; k < n; k++)
        acc |= lim - (b[k] & 0x7fffffffffffffffULL);
    return acc;
}
#define TD_BITS_DBL_MAX 0x7fefffffffffffffULL   /* |x| <= DBL_MAX: finite */
#define TD_BITS_1E90 0x52a6ef6a5e15a3a2ULL      /* 1e90 */

/* A massless body (the compiler's inertia row, tables.py inert: m, COM, Θ_COM, …):
 * zero mass and zero rotational inertia.  Its own wrench M V̇ − ad_Vᵀ M V and its
 * rigid inertia are exactly zero, so the kernels skip them (MJCF bodies with k > 1
 * joints bring k − 1 such bodies). */
static inline int td_massless(const double* inr)
{
    if (inr[0] != 0.0)
        return 0;
    for (int k = 4; k < 13; k++)
        if (inr[k] != 0.0)
            return 0;
    return 1;
}

#endif
