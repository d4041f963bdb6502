/* 4- and 2-wide vectors of doubles within one state (GCC/Clang vector extensions;
 * a build without AVX splits the 4-wide operations in two), for the kernels whose
 * per-body rows fill them (aba_simd.h, td_pose_mul12 below).  Each element is one
 * IEEE operation in the order the scalar expressions state (no fused multiply-adds:
 * the builds do not enable them), so every build gives the same bits, and the same
 * bits as the scalar code with that order.  TD_SIMD 0: compilers without vector
 * extensions take the scalar forms. */
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

#if TD_SIMD
/* C = A B for poses of 12 doubles (R row-major, p): the rows of [R | p] as 4-wide
 * vectors, row r of C = Σ_k A[r][k] [B.R | B.p]_k + (0, 0, 0, A.p_r): per element
 * the products and sums of pose_mul (se3.pxd) in its order, so the same bits.
 * C must not alias A or B. */
static inline void td_pose_mul12(const double* A, const double* B, double* C)
{
    /* element loads: B was just written element by element (joint_step), and a
       4-wide load over several pending stores would wait for them */
    const td_a4 B0 = {B[0], B[1], B[2], B[9]};
    const td_a4 B1 = {B[3], B[4], B[5], B[10]};
    const td_a4 B2 = {B[6], B[7], B[8], B[11]};
    const td_a4 C0 = (A[0] * B0 + A[1] * B1 + A[2] * B2);
    const td_a4 C1 = (A[3] * B0 + A[4] * B1 + A[5] * B2);
    const td_a4 C2 = (A[6] * B0 + A[7] * B1 + A[8] * B2);
    const double p0 = C0[3] + A[9], p1 = C1[3] + A[10], p2 = C2[3] + A[11];
    TD_A4(&C[0]) = C0;
    TD_A4(&C[3]) = C1;
    TD_A4(&C[6]) = C2;
    C[9] = p0; C[10] = p1; C[11] = p2;
}

#else
static inline void td_pose_mul12(const double* A, const double* B, double* C)
{
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 3; k++)
            C[3 * r + k] = A[3 * r] * B[k] + A[3 * r + 1] * B[3 + k] + A[3 * r + 2] * B[6 + k];
        C[9 + r] = A[3 * r] * B[9] + A[3 * r + 1] * B[10] + A[3 * r + 2] * B[11] + A[9 + r];
    }
}

#endif

#endif
