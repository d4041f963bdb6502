/* The per-body arithmetic of the body-fixed τ̇/τ̈ kernel (rnea_rates.pxi holds the
 * equations), always inlined in its loops: the parent's twist and its two rates
 * (and the gravity in body axes) seen from the body in one pass over the pose, the
 * body's wrench and its rate in Newton–Euler form about the COM, and two wrenches
 * moved to the parent.  Multiply-adds are explicit (td_fma, simd.h): fused in the
 * AVX2 twin, a product and a sum in the baseline build. */
#ifndef TREEDYN_RNEA_RATES_BODY_H
#define TREEDYN_RNEA_RATES_BODY_H
#include "simd.h"

/* se3_lanes.h's products for one state, twice: td_rates_* with the multiply-adds
 * fused (td_fma; the cross product a_i b_j − (a_j b_i) with the difference fused) and
 * td_rates_plain_* (a product, then a sum: se3.pxd's bits), the latter for the scalar
 * fallbacks below (TD_SIMD 0) */
#define T_ double
#define TD_SPLAT(x) (x)
#define TD_MUL0(a, b) ((a) * (b))
#define TD_PR(name) td_rates_##name
#define TD_MADD(a, b, c) td_fma(a, b, c)
#define TD_MSUB(a, b, c) td_fms(a, b, c)
#define TD_NMADD(a, b, c) td_fnma(a, b, c)
#include "se3_lanes.h"
#undef TD_PR
#undef TD_MADD
#undef TD_MSUB
#undef TD_NMADD
#define TD_PR(name) td_rates_plain_##name
#define TD_MADD(a, b, c) ((a) * (b) + (c))
#define TD_MSUB(a, b, c) ((a) * (b) - (c))
#define TD_NMADD(a, b, c) ((c) - (a) * (b))
#include "se3_lanes.h"
#undef TD_PR
#undef TD_MADD
#undef TD_MSUB
#undef TD_NMADD
#undef T_
#undef TD_SPLAT
#undef TD_MUL0

/* c = a × b as td_rates_cross, written out as a macro: called as a function (inlined
 * or not at gcc's choice) it spends the inlining budget of the kernel's loops, which
 * then calls joint_pose_rev out of line (measured: τ̇ about 2 % slower) */
#define TD_CROSS(a, b, c) do { \
    (c)[0] = td_fms((a)[1], (b)[2], (a)[2] * (b)[1]); \
    (c)[1] = td_fms((a)[2], (b)[0], (a)[0] * (b)[2]); \
    (c)[2] = td_fms((a)[0], (b)[1], (a)[1] * (b)[0]); } while (0)

#if TD_SIMD
/* Σ_k x_k r_k for three rows (or columns) r_k as 4-wide vectors, the sum fused (the
 * elements of one product in the lanes: se3_lanes.h's lanes hold states, not elements) */
#define TD_ROWS3(x0, x1, x2, r0, r1, r2) \
    td_fma4(td_s4(x2), (r2), td_fma4(td_s4(x1), (r1), td_s4(x0) * (r0)))
#endif

/* y = Ad_{(R,p)}⁻¹ x = (Rᵀω, Rᵀ(v − p × ω)) (twist_Ad_inv, se3.pxd), T = (R, p).
 * With vectors: Rᵀx = Σ_k x_k (row k of R), the rows loaded as vectors whose fourth
 * lane (the next element of T) is never read out; per element the products and sums of rotT_vec in its order (the baseline
 * build: its bits; the AVX2 twin fuses the multiply-adds of TD_ROWS3 and TD_CROSS). */
#if TD_SIMD
TD_ALWAYS_INLINE
static inline void td_rates_ad_inv_rows(const td_a4 r0, const td_a4 r1, const td_a4 r2,
                                        const double* p, const double* x, double* y)
{
    double t[3];
    TD_CROSS(p, x, t);
    t[0] = x[3] - t[0]; t[1] = x[4] - t[1]; t[2] = x[5] - t[2];
    const td_a4 w = TD_ROWS3(x[0], x[1], x[2], r0, r1, r2);
    const td_a4 v = TD_ROWS3(t[0], t[1], t[2], r0, r1, r2);
    y[0] = w[0]; y[1] = w[1]; y[2] = w[2];
    y[3] = v[0]; y[4] = v[1]; y[5] = v[2];
}

TD_ALWAYS_INLINE
static inline void td_rates_ad_inv(const double* T, const double* x, double* y)
{
    const td_a4 r0 = TD_A4(&T[0]);       /* row k in lanes 0–2 (lane 3 unused) */
    const td_a4 r1 = TD_A4(&T[3]);
    const td_a4 r2 = TD_A4(&T[6]);
    td_rates_ad_inv_rows(r0, r1, r2, &T[9], x, y);
}

/* y_k = Ad_T⁻¹ x_k for the parent's V, V̇, V̈ */
TD_ALWAYS_INLINE
static inline void td_rates_ad_inv3(const double* T, const double* x0, const double* x1,
                                    const double* x2, double* y0, double* y1, double* y2)
{
    const td_a4 r0 = TD_A4(&T[0]);       /* row k in lanes 0–2 (lane 3 unused) */
    const td_a4 r1 = TD_A4(&T[3]);
    const td_a4 r2 = TD_A4(&T[6]);
    td_rates_ad_inv_rows(r0, r1, r2, &T[9], x0, y0);
    td_rates_ad_inv_rows(r0, r1, r2, &T[9], x1, y1);
    td_rates_ad_inv_rows(r0, r1, r2, &T[9], x2, y2);
}

/* td_rates_ad_inv3 and the gravity in body axes γ = Rᵀ γ_p (g: γ_p, out: γ) */
TD_ALWAYS_INLINE
static inline void td_rates_ad_inv3g(const double* T, const double* x0, const double* x1,
                                     const double* x2, const double* g, double* y0,
                                     double* y1, double* y2, double* out)
{
    td_rates_ad_inv3(T, x0, x1, x2, y0, y1, y2);
    const td_a4 w = TD_ROWS3(g[0], g[1], g[2], TD_A4(&T[0]), TD_A4(&T[3]), TD_A4(&T[6]));
    out[0] = w[0]; out[1] = w[1]; out[2] = w[2];
}
#else
TD_ALWAYS_INLINE
static inline void td_rates_ad_inv(const double* T, const double* x, double* y)
{
    const double* p = &T[9];
    double t[3];
    TD_CROSS(p, x, t);
    t[0] = x[3] - t[0]; t[1] = x[4] - t[1]; t[2] = x[5] - t[2];
    td_rates_plain_rotT_vec(T, x, y);
    td_rates_plain_rotT_vec(T, t, &y[3]);
}

TD_ALWAYS_INLINE
static inline void td_rates_ad_inv3(const double* T, const double* x0, const double* x1,
                                    const double* x2, double* y0, double* y1, double* y2)
{
    td_rates_ad_inv(T, x0, y0);
    td_rates_ad_inv(T, x1, y1);
    td_rates_ad_inv(T, x2, y2);
}

TD_ALWAYS_INLINE
static inline void td_rates_ad_inv3g(const double* T, const double* x0, const double* x1,
                                     const double* x2, const double* g, double* y0,
                                     double* y1, double* y2, double* out)
{
    td_rates_ad_inv(T, x0, y0);
    td_rates_ad_inv(T, x1, y1);
    td_rates_ad_inv(T, x2, y2);
    td_rates_plain_rotT_vec(T, g, out);
}
#endif

/* W = M Ā − ad_Vᵀ M V and Ẇ (body frame, M about the body origin) in Newton–Euler
 * form about the COM d: with u = v + ω × d, c̈ = ā + ω̇ × d + ω × u,
 *   W = (Θ ω̇ + ω × Θ ω + d × m c̈, m c̈),
 * and, differentiating the numbers (u̇ = v̇ + ω̇ × d, c⃛ = ā̇ + ω̈ × d + ω̇ × u + ω × u̇),
 *   Ẇ = (Θ ω̈ + ω̇ × Θ ω + ω × Θ ω̇ + d × m c⃛, m c⃛).
 * V = (ω, v), A = V̇ = (ω̇, v̇) (no gravity), J = V̈; ā = v̇ − γ, ā̇ = v̈ − γ̇ for the
 * gravity γ in body axes and its rate γ̇.  inr = (m, d (3), Θ about the COM (9)). */
TD_ALWAYS_INLINE
static inline void td_rates_wrench(const double* inr, const double* V, const double* A,
                                   const double* J, const double* gam, const double* gam1,
                                   double* W, double* W1)
{
    const double m = inr[0];
    const double* d = &inr[1];
    const double* Th = &inr[4];
    double u[3], ud[3], c2[3], c3[3], t[3], s[3], h[3], ha[3], hj[3];
    TD_CROSS(V, d, u);
    u[0] += V[3]; u[1] += V[4]; u[2] += V[5];
    TD_CROSS(A, d, t);
    ud[0] = A[3] + t[0]; ud[1] = A[4] + t[1]; ud[2] = A[5] + t[2];
    TD_CROSS(V, u, s);
    c2[0] = m * ((ud[0] - gam[0]) + s[0]);
    c2[1] = m * ((ud[1] - gam[1]) + s[1]);
    c2[2] = m * ((ud[2] - gam[2]) + s[2]);
    TD_CROSS(J, d, t);
    TD_CROSS(A, u, s);
    c3[0] = (J[3] - gam1[0]) + t[0] + s[0];
    c3[1] = (J[4] - gam1[1]) + t[1] + s[1];
    c3[2] = (J[5] - gam1[2]) + t[2] + s[2];
    TD_CROSS(V, ud, s);
    c3[0] = m * (c3[0] + s[0]); c3[1] = m * (c3[1] + s[1]); c3[2] = m * (c3[2] + s[2]);
#if TD_SIMD
    {
        /* Θ x = Σ_k x_k (column k of Θ) for ω, ω̇, ω̈ */
        const td_a4 k0 = {Th[0], Th[3], Th[6], 0.0};
        const td_a4 k1 = {Th[1], Th[4], Th[7], 0.0};
        const td_a4 k2 = {Th[2], Th[5], Th[8], 0.0};
        const td_a4 hv = TD_ROWS3(V[0], V[1], V[2], k0, k1, k2);
        const td_a4 hav = TD_ROWS3(A[0], A[1], A[2], k0, k1, k2);
        const td_a4 hjv = TD_ROWS3(J[0], J[1], J[2], k0, k1, k2);
        h[0] = hv[0]; h[1] = hv[1]; h[2] = hv[2];
        ha[0] = hav[0]; ha[1] = hav[1]; ha[2] = hav[2];
        hj[0] = hjv[0]; hj[1] = hjv[1]; hj[2] = hjv[2];
    }
#else
    td_rates_plain_rot_vec_cR(Th, V, h);
    td_rates_plain_rot_vec_cR(Th, A, ha);
    td_rates_plain_rot_vec_cR(Th, J, hj);
#endif
    TD_CROSS(V, h, s);
    TD_CROSS(d, c2, t);
    W[0] = ha[0] + s[0] + t[0]; W[1] = ha[1] + s[1] + t[1]; W[2] = ha[2] + s[2] + t[2];
    W[3] = c2[0]; W[4] = c2[1]; W[5] = c2[2];
    TD_CROSS(A, h, s);
    TD_CROSS(V, ha, t);
    hj[0] += s[0] + t[0]; hj[1] += s[1] + t[1]; hj[2] += s[2] + t[2];
    TD_CROSS(d, c3, t);
    W1[0] = hj[0] + t[0]; W1[1] = hj[1] + t[1]; W1[2] = hj[2] + t[2];
    W1[3] = c3[0]; W1[4] = c3[1]; W1[5] = c3[2];
}

/* out += Ad_T⁻ᵀ W = (R t + p × R f, R f) (wrench_to_parent, se3.pxd) */
TD_ALWAYS_INLINE
static inline void td_rates_to_parent(const double* T, const double* W, double* out)
{
    /* R x written out (td_rates_plain_rot_vec's terms): this one runs in the AVX2
     * build's loops too, where a function spends their inlining budget (TD_CROSS) */
    const double* R = T;
    const double* p = &T[9];
    double f[3], pf[3];
    f[0] = R[0] * W[3] + R[1] * W[4] + R[2] * W[5];
    f[1] = R[3] * W[3] + R[4] * W[4] + R[5] * W[5];
    f[2] = R[6] * W[3] + R[7] * W[4] + R[8] * W[5];
    TD_CROSS(p, f, pf);
    out[0] += (R[0] * W[0] + R[1] * W[1] + R[2] * W[2]) + pf[0];
    out[1] += (R[3] * W[0] + R[4] * W[1] + R[5] * W[2]) + pf[1];
    out[2] += (R[6] * W[0] + R[7] * W[1] + R[8] * W[2]) + pf[2];
    out[3] += f[0]; out[4] += f[1]; out[5] += f[2];
}

/* td_rates_to_parent of two wrenches, W into outW and X into outX.  With vectors:
 * R x = Σ_k x_k (column k of R), the columns built once for the four products. */
TD_ALWAYS_INLINE
static inline void td_rates_to_parent2(const double* T, const double* W, const double* X,
                                       double* outW, double* outX)
{
#if TD_SIMD
    const double* p = &T[9];
    const td_a4 c0 = {T[0], T[3], T[6], 0.0};
    const td_a4 c1 = {T[1], T[4], T[7], 0.0};
    const td_a4 c2 = {T[2], T[5], T[8], 0.0};
    const td_a4 fw = TD_ROWS3(W[3], W[4], W[5], c0, c1, c2);
    const td_a4 tw = TD_ROWS3(W[0], W[1], W[2], c0, c1, c2);
    const td_a4 fx = TD_ROWS3(X[3], X[4], X[5], c0, c1, c2);
    const td_a4 tx = TD_ROWS3(X[0], X[1], X[2], c0, c1, c2);
    double f[3], pf[3];
    f[0] = fw[0]; f[1] = fw[1]; f[2] = fw[2];
    TD_CROSS(p, f, pf);
    outW[0] += tw[0] + pf[0]; outW[1] += tw[1] + pf[1]; outW[2] += tw[2] + pf[2];
    outW[3] += f[0]; outW[4] += f[1]; outW[5] += f[2];
    f[0] = fx[0]; f[1] = fx[1]; f[2] = fx[2];
    TD_CROSS(p, f, pf);
    outX[0] += tx[0] + pf[0]; outX[1] += tx[1] + pf[1]; outX[2] += tx[2] + pf[2];
    outX[3] += f[0]; outX[4] += f[1]; outX[5] += f[2];
#else
    td_rates_to_parent(T, W, outW);
    td_rates_to_parent(T, X, outX);
#endif
}

#undef TD_CROSS
#if TD_SIMD
#undef TD_ROWS3
#endif
#endif
