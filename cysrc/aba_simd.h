/* The per-body arithmetic of the articulated-body algorithm (aba.pxi) on full
 * 6 × 6 articulated inertias (row-major, rows of 6 doubles), with the vectors of
 * simd.h: a row is columns 0–3 and 4–5.  Only the articulated inertias' rows and
 * the rotation of the rigid inertias use vectors; the rest stays scalar, where
 * three-vectors would leave lanes empty. */
#ifndef TREEDYN_ABA_SIMD_H
#define TREEDYN_ABA_SIMD_H
#include "simd.h"

/* The one-state (double) instantiation of aba_sweeps.h's per-body functions, the
 * lanes' source: td_dot6_tree_scalar, td_neg_coad_scalar, td_aba_rigid6_scalar,
 * td_aba_back1_scalar. */
#define T_ double
#define TD_LANES 1
#define TD_FN(name) td_##name##_scalar
#define TD_SPLAT(x) (x)
#define TD_FMA(a, b, c) td_fma(a, b, c)
#define TD_FMS(a, b, c) td_fms(a, b, c)
#define TD_FNMA(a, b, c) td_fnma(a, b, c)
#define TD_MASK int
#define TD_LE(a, b) ((a) <= (b))
#define TD_ABA_SCALAR_ONLY
#include "aba_sweeps.h"
#undef TD_ABA_SCALAR_ONLY
#undef TD_LE
#undef TD_MASK
#undef TD_FNMA
#undef TD_FMS
#undef TD_FMA
#undef TD_SPLAT
#undef TD_FN
#undef TD_LANES
#undef T_

/* a · b summed as a tree (the order every form of the ABA uses) */
static inline double td_dot6_tree(const double* a, const double* b)
{
    return td_dot6_tree_scalar(a, b);
}

/* p = −ad_Vᵀ y = (ω × y_t + v × y_f, ω × y_f) for a twist V = (ω, v) and a
 * wrench y = (y_t, y_f): the gyroscopic force of a body with momentum y. */
static inline void td_neg_coad(const double* V, const double* y, double* p)
{
    td_neg_coad_scalar(V, y, p);
}

#if TD_SIMD
/* M (36) = the spatial inertia of a rigid body about the origin of frame s, world
 * axes, from its pose C (12: R row-major, p) in s and inr = (m, COM in body axes (3),
 * Θ about the COM in body axes (9, row-major)):
 *     M = [[Io, ĥ], [ĥᵀ, m 1]],  h = m c,  c = p + R d,  Io = R Θ Rᵀ + m (|c|² 1 − c cᵀ);
 * and pA (6) = −ad_Vᵀ M V, the body's velocity-product force at twist V (frame s). */
static inline void td_aba_rigid6(const double* C, const double* inr, const double* V,
                                 double* M, double* pA)
{
    const double* R = C;
    const double* Th = &inr[4];
    const double m = inr[0];
    double c[3], h[3], y[8];
    c[0] = td_fma(R[2], inr[3], td_fma(R[1], inr[2], td_fma(R[0], inr[1], C[9])));
    c[1] = td_fma(R[5], inr[3], td_fma(R[4], inr[2], td_fma(R[3], inr[1], C[10])));
    c[2] = td_fma(R[8], inr[3], td_fma(R[7], inr[2], td_fma(R[6], inr[1], C[11])));
    h[0] = m * c[0]; h[1] = m * c[1]; h[2] = m * c[2];
    const double mcc = m * td_fma(c[2], c[2], td_fma(c[1], c[1], c[0] * c[0]));
    /* the columns of R; Y_k = row k of Θ Rᵀ; row r of R Θ Rᵀ = Σ_k R[r][k] Y_k */
    const td_a4 K0 = {R[0], R[3], R[6], 0.0};
    const td_a4 K1 = {R[1], R[4], R[7], 0.0};
    const td_a4 K2 = {R[2], R[5], R[8], 0.0};
    const td_a4 Y0 = td_fma4(td_s4(Th[2]), K2, td_fma4(td_s4(Th[1]), K1, Th[0] * K0));
    const td_a4 Y1 = td_fma4(td_s4(Th[5]), K2, td_fma4(td_s4(Th[4]), K1, Th[3] * K0));
    const td_a4 Y2 = td_fma4(td_s4(Th[8]), K2, td_fma4(td_s4(Th[7]), K1, Th[6] * K0));
    const td_a4 cv = {c[0], c[1], c[2], 0.0};
    td_a4 W0 = td_fnma4(td_s4(h[0]), cv,
                        td_fma4(td_s4(R[2]), Y2, td_fma4(td_s4(R[1]), Y1, R[0] * Y0)));
    td_a4 W1 = td_fnma4(td_s4(h[1]), cv,
                        td_fma4(td_s4(R[5]), Y2, td_fma4(td_s4(R[4]), Y1, R[3] * Y0)));
    td_a4 W2 = td_fnma4(td_s4(h[2]), cv,
                        td_fma4(td_s4(R[8]), Y2, td_fma4(td_s4(R[7]), Y1, R[6] * Y0)));
    W0[0] += mcc; W1[1] += mcc; W2[2] += mcc;
    W0[3] = 0.0; W1[3] = h[2]; W2[3] = -h[1];
    const td_a4 W3 = {0.0, h[2], -h[1], m};
    const td_a4 W4 = {-h[2], 0.0, h[0], 0.0};
    const td_a4 W5 = {h[1], -h[0], 0.0, 0.0};
    const td_a2 E0 = {-h[2], h[1]}, E1 = {0.0, -h[0]}, E2 = {h[0], 0.0};
    const td_a2 E3 = {0.0, 0.0}, E4 = {m, 0.0}, E5 = {0.0, m};
    TD_A4(&M[0]) = W0;  TD_A2(&M[4]) = E0;
    TD_A4(&M[6]) = W1;  TD_A2(&M[10]) = E1;
    TD_A4(&M[12]) = W2; TD_A2(&M[16]) = E2;
    TD_A4(&M[18]) = W3; TD_A2(&M[22]) = E3;
    TD_A4(&M[24]) = W4; TD_A2(&M[28]) = E4;
    TD_A4(&M[30]) = W5; TD_A2(&M[34]) = E5;
    /* y = M V (M symmetric: the sum of its rows weighted by V) */
    TD_A4(&y[0]) = (td_fma4(W1, td_s4(V[1]), W0 * V[0]) + td_fma4(W3, td_s4(V[3]), W2 * V[2]))
        + td_fma4(W5, td_s4(V[5]), W4 * V[4]);
    TD_A2(&y[4]) = (td_fma2(E1, td_s2(V[1]), E0 * V[0]) + td_fma2(E3, td_s2(V[3]), E2 * V[2]))
        + td_fma2(E5, td_s2(V[5]), E4 * V[4]);
    td_neg_coad(V, y, pA);
}

/* ABA pass 2 for a joint with one freedom, spatial screw J (6), bias acceleration c:
 *     U = Iᴬ J,  D = Jᵀ U + armature,  u = τ − Jᵀ pᴬ,
 *     Iᴬ_p = (Iᴬ_p + Iᴬ) − U (U D⁻¹)ᵀ,
 *     pᴬ_p = (pᴬ_p + (pᴬ + Iᴬ c)) + (U D⁻¹) (u − Uᵀ c)
 * (the last adds pᴬ + Iᵃ c + U D⁻¹ u with Iᵃ c = Iᴬ c − U D⁻¹ Uᵀ c).  Writes U (6),
 * *Dinv = 1/D, *u; Ip, pAp NULL for a root.  Returns 1 if D ≤ 1e-13 · scale
 * (nothing added to the parent), else 0. */
static inline int td_aba_back1(const double* M, const double* pA, const double* J,
                               const double* c, double tau, double arm, double scale,
                               double* U, double* Dinv, double* u, double* Ip, double* pAp)
{
    const td_a4 R0 = TD_A4(&M[0]), R1 = TD_A4(&M[6]), R2 = TD_A4(&M[12]);
    const td_a4 R3 = TD_A4(&M[18]), R4 = TD_A4(&M[24]), R5 = TD_A4(&M[30]);
    const td_a2 Q0 = TD_A2(&M[4]), Q1 = TD_A2(&M[10]), Q2 = TD_A2(&M[16]);
    const td_a2 Q3 = TD_A2(&M[22]), Q4 = TD_A2(&M[28]), Q5 = TD_A2(&M[34]);
    const td_a4 U4 = (td_fma4(R1, td_s4(J[1]), R0 * J[0]) + td_fma4(R3, td_s4(J[3]), R2 * J[2]))
        + td_fma4(R5, td_s4(J[5]), R4 * J[4]);
    const td_a2 U2 = (td_fma2(Q1, td_s2(J[1]), Q0 * J[0]) + td_fma2(Q3, td_s2(J[3]), Q2 * J[2]))
        + td_fma2(Q5, td_s2(J[5]), Q4 * J[4]);
    TD_A4(&U[0]) = U4;
    TD_A2(&U[4]) = U2;
    const double D = (td_fma(J[1], U4[1], J[0] * U4[0]) + td_fma(J[3], U4[3], J[2] * U4[2]))
        + td_fma(J[5], U2[1], td_fma(J[4], U2[0], arm));
    const double uu = tau - td_dot6_tree(J, pA);
    *u = uu;
    if (D <= 1e-13 * scale)
        return 1;
    const double Di = 1.0 / D;
    *Dinv = Di;
    if (Ip == NULL)
        return 0;
    const td_a4 C4 = (td_fma4(R1, td_s4(c[1]), R0 * c[0]) + td_fma4(R3, td_s4(c[3]), R2 * c[2]))
        + td_fma4(R5, td_s4(c[5]), R4 * c[4]);
    const td_a2 C2 = (td_fma2(Q1, td_s2(c[1]), Q0 * c[0]) + td_fma2(Q3, td_s2(c[3]), Q2 * c[2]))
        + td_fma2(Q5, td_s2(c[5]), Q4 * c[4]);
    /* U D⁻¹ by products: one division per joint (the divider is not pipelined: the
     * lanes' six more divisions of U / D cost more than the product's latency) */
    const td_a4 UD4 = U4 * Di;
    const td_a2 UD2 = U2 * Di;
    const double w = uu - ((td_fma(U4[1], c[1], U4[0] * c[0]) + td_fma(U4[3], c[3], U4[2] * c[2]))
                           + td_fma(U2[1], c[5], U2[0] * c[4]));
    /* the sums that do not wait for D first */
    TD_A4(&pAp[0]) = td_fma4(UD4, td_s4(w), TD_A4(&pAp[0]) + (TD_A4(&pA[0]) + C4));
    TD_A2(&pAp[4]) = td_fma2(UD2, td_s2(w), TD_A2(&pAp[4]) + (TD_A2(&pA[4]) + C2));
#define TD_IP_ROW(r, ur)                                                    \
    TD_A4(&Ip[6 * r]) = td_fnma4(td_s4(ur), UD4, TD_A4(&Ip[6 * r]) + R##r);   \
    TD_A2(&Ip[6 * r + 4]) = td_fnma2(td_s2(ur), UD2, TD_A2(&Ip[6 * r + 4]) + Q##r);
    TD_IP_ROW(0, U4[0]) TD_IP_ROW(1, U4[1]) TD_IP_ROW(2, U4[2])
    TD_IP_ROW(3, U4[3]) TD_IP_ROW(4, U2[0]) TD_IP_ROW(5, U2[1])
#undef TD_IP_ROW
    return 0;
}
#endif

/* ABA pass 3 for a joint with one freedom: q̈ = D⁻¹ ((u − Uᵀ c) − Uᵀ A_p) and
 * A = (A_p + c) + J q̈ (A_p: the parent's acceleration, −g for a root).  Uᵀ c does
 * not wait for A_p, so the chain from body to body is one dot product (summed as a
 * tree), a product and the update of A. */
static inline double td_aba_fwd1(const double* Ap, const double* c, const double* U,
                                 const double* J, double u, double Dinv, double* A)
{
    const double x = Dinv * ((u - td_dot6_tree(U, c)) - td_dot6_tree(U, Ap));
    for (int n = 0; n < 6; n++)
        A[n] = td_fma(J[n], x, Ap[n] + c[n]);
    return x;
}

#if !TD_SIMD
/* Compilers without vector extensions: the same formulas, scalar (the one-state
 * instantiation of aba_sweeps.h's per-body functions above, the lanes' source). */
static inline void td_aba_rigid6(const double* C, const double* inr, const double* V,
                                 double* M, double* pA)
{
    td_aba_rigid6_scalar(C, inr, V, M, pA);
}

static inline int td_aba_back1(const double* M, const double* pA, const double* J,
                               const double* c, double tau, double arm, double scale,
                               double* U, double* Dinv, double* u, double* Ip, double* pAp)
{
    return td_aba_back1_scalar(M, pA, J, c, tau, arm, scale, U, Dinv, u, Ip, pAp);
}
#endif

#endif
