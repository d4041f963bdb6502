/* 4- and 2-wide vectors of doubles within one state (GCC/Clang vector extensions;
 * a build without AVX splits the 4-wide operations in two), for the kernels whose
 * per-body rows fill them (aba_simd.h, td_pose_mul12 below).  Each element is one
 * IEEE operation in the order the scalar expressions state (the compiler contracts
 * nothing: -ffp-contract=off), so the vector code gives the bits of the scalar code
 * with that order.  Fused multiply-adds are explicit (td_fma below, TD_FMA in the
 * element-generic sweeps): one rounding in the AVX2 twin (-mfma), a product and a
 * sum elsewhere; the one-state and the lanes code fuse the same operations, so each
 * build is bitwise consistent, and the two builds differ in the last bits where
 * td_fma is used.  TD_SIMD 0: compilers without vector extensions take the scalar
 * forms. */
#ifndef TREEDYN_SIMD_H
#define TREEDYN_SIMD_H
#include "compat.h"

#if defined(__GNUC__)
typedef double td_a4 __attribute__((vector_size(32), aligned(8)));   /* unaligned rows */
typedef double td_a2 __attribute__((vector_size(16), aligned(8)));
#define TD_A4(p) (*(td_a4*)(p))
#define TD_A2(p) (*(td_a2*)(p))
#define TD_SIMD 1
#else
#define TD_SIMD 0
#endif

#if defined(__GNUC__)
#define TD_ALWAYS_INLINE __attribute__((always_inline))
#else
#define TD_ALWAYS_INLINE
#endif

/* td_fma(a, b, c) = a b + c, td_fms = a b − c, td_fnma = c − a b: rounded once where
 * the build has FMA (__FMA__: the AVX2 twin), else the product rounded, then the sum
 * (never libm's software fma).  The 4 and 2 suffixes: td_a4, td_a2 (a scalar a
 * splatted by td_s4, td_s2); v: the lanes' td_vec (compat.h). */
#if defined(__FMA__) && defined(__GNUC__)
#include <immintrin.h>
#define TD_FUSED 1
#define td_fma(a, b, c) __builtin_fma((a), (b), (c))
#define td_fms(a, b, c) __builtin_fma((a), (b), -(c))
#define td_fnma(a, b, c) __builtin_fma(-(a), (b), (c))
#else
#define TD_FUSED 0
#define td_fma(a, b, c) ((a) * (b) + (c))
#define td_fms(a, b, c) ((a) * (b) - (c))
#define td_fnma(a, b, c) ((c) - (a) * (b))
#endif
#if TD_SIMD
#define td_s4(x) ((td_a4){(x), (x), (x), (x)})
#define td_s2(x) ((td_a2){(x), (x)})
#if TD_FUSED
#define td_fma4(a, b, c) ((td_a4)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define td_fms4(a, b, c) ((td_a4)_mm256_fmsub_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define td_fnma4(a, b, c) ((td_a4)_mm256_fnmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define td_fma2(a, b, c) ((td_a2)_mm_fmadd_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#define td_fms2(a, b, c) ((td_a2)_mm_fmsub_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#define td_fnma2(a, b, c) ((td_a2)_mm_fnmadd_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#else
#define td_fma4(a, b, c) ((a) * (b) + (c))
#define td_fms4(a, b, c) ((a) * (b) - (c))
#define td_fnma4(a, b, c) ((c) - (a) * (b))
#define td_fma2(a, b, c) ((a) * (b) + (c))
#define td_fms2(a, b, c) ((a) * (b) - (c))
#define td_fnma2(a, b, c) ((c) - (a) * (b))
#endif
#endif
#if TD_VL == 4 && TD_FUSED
#define td_fmav(a, b, c) ((td_vec)_mm256_fmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define td_fmsv(a, b, c) ((td_vec)_mm256_fmsub_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#define td_fnmav(a, b, c) ((td_vec)_mm256_fnmadd_pd((__m256d)(a), (__m256d)(b), (__m256d)(c)))
#elif TD_VL == 2 && TD_FUSED
#define td_fmav(a, b, c) ((td_vec)_mm_fmadd_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#define td_fmsv(a, b, c) ((td_vec)_mm_fmsub_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#define td_fnmav(a, b, c) ((td_vec)_mm_fnmadd_pd((__m128d)(a), (__m128d)(b), (__m128d)(c)))
#else
#define td_fmav(a, b, c) ((a) * (b) + (c))
#define td_fmsv(a, b, c) ((a) * (b) - (c))
#define td_fnmav(a, b, c) ((c) - (a) * (b))
#endif

#if TD_SIMD
/* C = A B for poses of 12 doubles (R row-major, p): the rows of [R | p] as 4-wide
 * vectors, row r of C = Σ_k A[r][k] [B.R | B.p]_k + (0, 0, 0, A.p_r): per element
 * the products and sums of pose_mul (se3.pxd) in its order, so the same bits.
 * C must not alias A or B.  Not fused (td_fma4), nor td_rev_step's c B ± s B: the
 * pose recursion is latency-bound and was slower fused (docs/algorithms.md). */
__attribute__((always_inline))
static inline void td_pose_mul12_rows(const double* A, const td_a4 B0, const td_a4 B1,
                                      const td_a4 B2, double* C)
{
    /* td_pose_mul12 with the rows of B given as vectors (B.R row | B.p element) */
    const td_a4 C0 = (A[0] * B0 + A[1] * B1 + A[2] * B2);
    const td_a4 C1 = (A[3] * B0 + A[4] * B1 + A[5] * B2);
    const td_a4 C2 = (A[6] * B0 + A[7] * B1 + A[8] * B2);
    const double p0 = C0[3] + A[9], p1 = C1[3] + A[10], p2 = C2[3] + A[11];
    TD_A4(&C[0]) = C0;
    TD_A4(&C[3]) = C1;
    TD_A4(&C[6]) = C2;
    C[9] = p0; C[10] = p1; C[11] = p2;
}

__attribute__((always_inline))
static inline void td_pose_mul12(const double* A, const double* B, double* C)
{
    /* element loads: B was just written element by element (joint_step), and a
       4-wide load over several pending stores would wait for them */
    const td_a4 B0 = {B[0], B[1], B[2], B[9]};
    const td_a4 B1 = {B[3], B[4], B[5], B[10]};
    const td_a4 B2 = {B[6], B[7], B[8], B[11]};
    td_pose_mul12_rows(A, B0, B1, B2, C);
}

typedef long long td_i4 __attribute__((vector_size(32)));

/* td_sincos (compat.h) of four angles at once: its operations lane by lane, so its
 * bits.  The quadrant n is read from the low bits of x·2/π + 1.5·2⁵² (that sum's
 * last mantissa bits are n mod 4), the two branches of td_sincos are lanes redone
 * by it: |x| > 2¹⁹ π/2, NaN and infinities (libm), and |x| < 2⁻²⁷. */
__attribute__((always_inline))
static inline void td_sincos4v(const td_a4 x, double* s4, double* c4)
{
    TD_SINCOS_CONSTANTS
    const td_a4 big = x * invpio2 + 6755399441055744.0;
    const td_a4 fn = big - 6755399441055744.0;
    const td_i4 n = (td_i4)big, one = {1, 1, 1, 1}, two = {2, 2, 2, 2};
    const td_a4 r = x - fn * pio2_1;
    const td_a4 t = fn * pio2_2;
    const td_a4 y0 = r - t;
    td_a4 ylo = ((r - y0) - t) - fn * pio2_3;
    const td_a4 y = y0 + ylo;
    ylo -= y - y0;
    const td_a4 z = y * y;
    const td_a4 sy = y + (y * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6))))) + ylo);
    const td_a4 hz = 0.5 * z;
    const td_a4 w = 1.0 - hz;
    const td_a4 cy = w + (((1.0 - w) - hz)
                          + (z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))))
                             - y * ylo));
    const td_a4 pos = {1.0, 1.0, 1.0, 1.0}, neg = {-1.0, -1.0, -1.0, -1.0};
    const td_i4 n1 = n + one;
    const td_i4 ms = (n & one) != 0, mc = (n1 & one) != 0;      /* cy, else sy */
    const td_i4 gs = (n & two) != 0, gc = (n1 & two) != 0;      /* negated */
    const td_a4 vs = (td_a4)((ms & (td_i4)cy) | (~ms & (td_i4)sy));
    const td_a4 vc = (td_a4)((mc & (td_i4)cy) | (~mc & (td_i4)sy));
    const td_a4 ss = (td_a4)((gs & (td_i4)neg) | (~gs & (td_i4)pos));
    const td_a4 sc = (td_a4)((gc & (td_i4)neg) | (~gc & (td_i4)pos));
    /* lanes that td_sincos's branches take (NaN compares false) */
    const td_a4 a = (td_a4)((td_i4)x & 0x7fffffffffffffffLL);
    const td_i4 other = ~(a <= 823549.6562) | (a < 7.450580596923828e-09);
    TD_A4(s4) = ss * vs;
    TD_A4(c4) = sc * vc;
    if ((other[0] | other[1]) | (other[2] | other[3])) {
        for (int l = 0; l < 4; l++)
            if (other[l])
                td_sincos(x[l], &s4[l], &c4[l]);
    }
}

static inline void td_sincos4(const double* xs, double* s4, double* c4)
{
    const td_a4 x = {xs[0], xs[1], xs[2], xs[3]};
    td_sincos4v(x, s4, c4);
}

/* sin and cos of the n <= 8 angles q[qi[k]], k < n, into sc[2 s], sc[2 s + 1] with
 * s = slot[k] (td_sincos4's lanes, the same bits as td_sincos): two vectors in one
 * sequence, so that their latency chains overlap.  The lanes are filled from q
 * element by element (a vector load over the stores that just wrote a gathered
 * copy would wait for them); unused lanes hold 1.0, in the polynomial's range. */
static inline void td_sincos_joints(int n, const int* slot, const int* qi, const double* q,
                                    double* sc)
{
    double s4[8], c4[8];
#define TD_ANGLE(l) ((l) < n ? q[qi[l]] : 1.0)
    if (n == 1) {
        td_sincos(q[qi[0]], &sc[2 * slot[0]], &sc[2 * slot[0] + 1]);
        return;
    }
    {
        const td_a4 x0 = {TD_ANGLE(0), TD_ANGLE(1), TD_ANGLE(2), TD_ANGLE(3)};
        td_sincos4v(x0, s4, c4);
    }
    if (n > 4) {
        const td_a4 x1 = {TD_ANGLE(4), TD_ANGLE(5), TD_ANGLE(6), TD_ANGLE(7)};
        td_sincos4v(x1, &s4[4], &c4[4]);
    }
#undef TD_ANGLE
    for (int l = 0; l < n; l++) {
        sc[2 * slot[l]] = s4[l];
        sc[2 * slot[l] + 1] = c4[l];
    }
}

/* sin and cos of the angle q[l][qoff[i]] of every joint i < nb with lo <= fast[i] <= hi
 * (the revolute fast paths) for the TD_VL states l into sc[2 i TD_VL + l] and
 * sc[(2 i + 1) TD_VL + l] (the lanes' layout of d.lsc): td_sincos4v's lanes, the same
 * bits as td_sincos.  The angles enter the vector element by element from q and the
 * results leave it by whole-row stores: a vector load over element stores just made
 * (a gathered copy of the angles) waits for them. */
static inline void td_sincos_lanes(int nb, const int* fast, int lo, int hi, const int* qoff,
                                   double* const* q, double* sc)
{
#if TD_VL == 4
    for (int i = 0; i < nb; i++) {
        if (fast[i] < lo || fast[i] > hi)
            continue;
        const int o = qoff[i];
        const td_a4 x = {q[0][o], q[1][o], q[2][o], q[3][o]};
        td_sincos4v(x, &sc[8 * i], &sc[8 * i + 4]);
    }
#else
    int j = -1;
    for (int i = 0; i <= nb; i++) {
        if (i < nb && (fast[i] < lo || fast[i] > hi))
            continue;
        if (i < nb && j < 0) {
            j = i;                      /* the first of a pair */
            continue;
        }
        if (j < 0)
            break;
        /* joints j and i (i == nb: j alone, the other half 1.0, in the polynomial's
           range) */
        double s4[4], c4[4];
        const td_a4 x = {q[0][qoff[j]], q[1][qoff[j]], i < nb ? q[0][qoff[i]] : 1.0,
                         i < nb ? q[1][qoff[i]] : 1.0};
        td_sincos4v(x, s4, c4);
        for (int l = 0; l < 2; l++) {
            sc[4 * j + l] = s4[l];
            sc[4 * j + 2 + l] = c4[l];
            if (i < nb) {
                sc[4 * i + l] = s4[2 + l];
                sc[4 * i + 2 + l] = c4[2 + l];
            }
        }
        j = -1;
    }
#endif
}

#else
static inline void td_sincos4(const double* xs, double* s4, double* c4)
{
    for (int l = 0; l < 4; l++)
        td_sincos(xs[l], &s4[l], &c4[l]);
}

static inline void td_sincos_joints(int n, const int* slot, const int* qi, const double* q,
                                    double* sc)
{
    for (int k = 0; k < n; k++)
        td_sincos(q[qi[k]], &sc[2 * slot[k]], &sc[2 * slot[k] + 1]);
}

static inline void td_sincos_lanes(int nb, const int* fast, int lo, int hi, const int* qoff,
                                   double* const* q, double* sc)
{
    for (int i = 0; i < nb; i++)
        if (fast[i] >= lo && fast[i] <= hi)
            for (int l = 0; l < TD_VL; l++)
                td_sincos(q[l][qoff[i]], &sc[2 * i * TD_VL + l], &sc[(2 * i + 1) * TD_VL + l]);
}

static inline void td_pose_mul12(const double* A, const double* B, double* C)
{
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 3; k++)
            C[3 * r + k] = A[3 * r] * B[k] + A[3 * r + 1] * B[3 + k] + A[3 * r + 2] * B[6 + k];
        C[9 + r] = A[3 * r] * B[9] + A[3 * r + 1] * B[10] + A[3 * r + 2] * B[11] + A[9 + r];
    }
}

#endif

/* The joint step of a body whose revolute joint turns about its body axis k
 * (FAST_REV_*, joints.pxi): T = B Rot_k(q) (joint_pose_rev, given s = sin q, c = cos q;
 * neg: the axis points along −e_k) into T, C = A T (td_pose_mul12) or, for a root
 * (A NULL), C = (T.R, 0) (root_relative_pose) into C, and the spatial screw
 * J = (w, p × w), w = ±C.R[:, k], p = C.p (spatial_screw_1dof) into J.  T's rows go
 * from registers into the product and C's into J, not through memory (a load over
 * element stores just made waits for them).  Same bits as those functions. */
TD_ALWAYS_INLINE
static inline void td_rev_step(int k, int neg, const double* B, double s, double c,
                               const double* A, double* T, double* C, double* J)
{
    double t0, t1, t2, t3, t4, t5, t6, t7, t8, w0, w1, w2, p0, p1, p2;
    const double t9 = B[9], t10 = B[10], t11 = B[11];
    if (neg)
        s = -s;
    /* T.R = B.R Rot_k(q): only the two columns other than k mix */
    if (k == 2) {
        t0 = c * B[0] + s * B[1]; t1 = c * B[1] - s * B[0]; t2 = B[2];
        t3 = c * B[3] + s * B[4]; t4 = c * B[4] - s * B[3]; t5 = B[5];
        t6 = c * B[6] + s * B[7]; t7 = c * B[7] - s * B[6]; t8 = B[8];
    } else if (k == 0) {
        t0 = B[0]; t1 = c * B[1] + s * B[2]; t2 = c * B[2] - s * B[1];
        t3 = B[3]; t4 = c * B[4] + s * B[5]; t5 = c * B[5] - s * B[4];
        t6 = B[6]; t7 = c * B[7] + s * B[8]; t8 = c * B[8] - s * B[7];
    } else {
        t0 = c * B[0] - s * B[2]; t1 = B[1]; t2 = c * B[2] + s * B[0];
        t3 = c * B[3] - s * B[5]; t4 = B[4]; t5 = c * B[5] + s * B[3];
        t6 = c * B[6] - s * B[8]; t7 = B[7]; t8 = c * B[8] + s * B[6];
    }
    T[0] = t0; T[1] = t1; T[2] = t2; T[3] = t3; T[4] = t4; T[5] = t5;
    T[6] = t6; T[7] = t7; T[8] = t8; T[9] = t9; T[10] = t10; T[11] = t11;
    if (A == NULL) {
        C[0] = t0; C[1] = t1; C[2] = t2; C[3] = t3; C[4] = t4; C[5] = t5;
        C[6] = t6; C[7] = t7; C[8] = t8;
        C[9] = 0.0; C[10] = 0.0; C[11] = 0.0;
        w0 = k == 0 ? t0 : (k == 1 ? t1 : t2);
        w1 = k == 0 ? t3 : (k == 1 ? t4 : t5);
        w2 = k == 0 ? t6 : (k == 1 ? t7 : t8);
        p0 = 0.0; p1 = 0.0; p2 = 0.0;
    } else {
#if TD_SIMD
        /* td_pose_mul12 with T's elements from registers */
        const td_a4 B0 = {t0, t1, t2, t9};
        const td_a4 B1 = {t3, t4, t5, t10};
        const td_a4 B2 = {t6, t7, t8, t11};
        td_pose_mul12_rows(A, B0, B1, B2, C);
#else
        td_pose_mul12(A, T, C);
#endif
        p0 = C[9]; p1 = C[10]; p2 = C[11];
        w0 = C[k]; w1 = C[3 + k]; w2 = C[6 + k];
    }
    /* spatial_screw_1dof: sg = ±1 as the axis (neg), products exact */
    {
        const double sg = neg ? -1.0 : 1.0;
        w0 = sg * w0; w1 = sg * w1; w2 = sg * w2;
        J[0] = w0; J[1] = w1; J[2] = w2;
        J[3] = p1 * w2 - p2 * w1;
        J[4] = p2 * w0 - p0 * w2;
        J[5] = p0 * w1 - p1 * w0;
    }
}

/* The joint step of a prismatic joint, X = (0, u) (FAST_SCREW): exp(X q) = (I, u q),
 * T = (B.R, B.R (u q) + B.p) (joint_pose_1dof) into T, C = A T or (T.R, 0) for a root
 * (root_relative_pose) into C and J = (0, C.R u) (spatial_screw_1dof) into J.  Same
 * bits as those functions. */
TD_ALWAYS_INLINE
static inline void td_prism_step(const double* u, const double* B, double q, const double* A,
                                 double* T, double* C, double* J)
{
    const double x0 = u[0] * q, x1 = u[1] * q, x2 = u[2] * q;
    const double t9 = (B[0] * x0 + B[1] * x1 + B[2] * x2) + B[9];
    const double t10 = (B[3] * x0 + B[4] * x1 + B[5] * x2) + B[10];
    const double t11 = (B[6] * x0 + B[7] * x1 + B[8] * x2) + B[11];
    for (int n = 0; n < 9; n++)
        T[n] = B[n];
    T[9] = t9; T[10] = t10; T[11] = t11;
    if (A == NULL) {
        for (int n = 0; n < 9; n++)
            C[n] = B[n];
        C[9] = 0.0; C[10] = 0.0; C[11] = 0.0;
    } else {
#if TD_SIMD
        const td_a4 B0 = {B[0], B[1], B[2], t9};
        const td_a4 B1 = {B[3], B[4], B[5], t10};
        const td_a4 B2 = {B[6], B[7], B[8], t11};
        td_pose_mul12_rows(A, B0, B1, B2, C);
#else
        td_pose_mul12(A, T, C);
#endif
    }
    J[0] = 0.0; J[1] = 0.0; J[2] = 0.0;
    J[3] = C[0] * u[0] + C[1] * u[1] + C[2] * u[2];
    J[4] = C[3] * u[0] + C[4] * u[1] + C[5] * u[2];
    J[5] = C[6] * u[0] + C[7] * u[1] + C[8] * u[2];
}

#endif
