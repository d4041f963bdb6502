/* Inverse dynamics in spatial form (rnea_spatial.pxi holds the equations),
 * element-generic (lanes.h): the forward sweep of twists, accelerations (gravity as
 * the roots' base acceleration) and body wrenches, the backward sweep of subtree
 * wrenches and joint forces, from the poses C, spatial screws J and, for the joints
 * without a fast path, the body-frame Ṡ q̇ (Sdq, nb × 6) of rnea_spatial.pxi's joint
 * steps; Fx (if not NULL): the external wrenches in frame s. */

/* se3_lanes.h's cross, rotations, twist_bracket, twist_Ad, subspace_times, dot6 and
 * body_wrench with their multiply-adds fused (TD_FMA: one rounding in the AVX2 build,
 * alike for one state and for lanes); the terms are summed in se3_lanes.h's order, so
 * the baseline build's results are unchanged. */
static inline T_ TD_FN(rs_row)(T_ a0, T_ a1, T_ a2, T_ x0, T_ x1, T_ x2)
{
    return TD_FMA(a2, x2, TD_FMA(a1, x1, a0 * x0));
}

static inline void TD_FN(rs_cross)(const T_* a, const T_* b, T_* c)
{
    c[0] = TD_FMS(a[1], b[2], a[2] * b[1]);
    c[1] = TD_FMS(a[2], b[0], a[0] * b[2]);
    c[2] = TD_FMS(a[0], b[1], a[1] * b[0]);
}

static inline void TD_FN(rs_rot)(const T_* R, const T_* x, T_* y)
{
    for (int r = 0; r < 3; r++)
        y[r] = TD_FN(rs_row)(R[3 * r], R[3 * r + 1], R[3 * r + 2], x[0], x[1], x[2]);
}

static inline void TD_FN(rs_bracket)(const T_* x, const T_* y, T_* out)
{
    T_ t[3];
    TD_FN(rs_cross)(x, y, out);
    TD_FN(rs_cross)(x, &y[3], &out[3]);
    TD_FN(rs_cross)(&x[3], y, t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}

static inline void TD_FN(rs_twist_Ad)(const T_* R, const T_* p, const T_* V, T_* out)
{
    T_ t[3];
    TD_FN(rs_rot)(R, V, out);
    TD_FN(rs_rot)(R, &V[3], &out[3]);
    TD_FN(rs_cross)(p, out, t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}

static inline void TD_FN(rs_subspace_times)(int k, const T_* S, const T_* x, T_* out)
{
    for (int n = 0; n < 6; n++)
        out[n] = S[n] * x[0];
    for (int c = 1; c < k; c++)
        for (int n = 0; n < 6; n++)
            out[n] = TD_FMA(S[6 * c + n], x[c], out[n]);
}

static inline T_ TD_FN(rs_dot6)(const T_* a, const T_* b)
{
    T_ s = a[0] * b[0];
    for (int n = 1; n < 6; n++)
        s = TD_FMA(a[n], b[n], s);
    return s;
}

/* se3_lanes.h body_wrench and com_wrench (the equations there) */
static inline void TD_FN(rs_body_wrench)(const T_* C, const double* inr, const T_* V,
                                         const T_* A, T_* F)
{
    const double* Th = &inr[4];
    const T_ m = TD_SPLAT(inr[0]);
    T_ cw[3], u[3], acc[3], wb[3], ab[3], hb[3], nb[3], t[3];
    for (int r = 0; r < 3; r++)
        cw[r] = TD_FN(rs_row)(C[3 * r], C[3 * r + 1], C[3 * r + 2], TD_SPLAT(inr[1]),
                              TD_SPLAT(inr[2]), TD_SPLAT(inr[3])) + C[9 + r];
    TD_FN(rs_cross)(V, cw, u);
    u[0] += V[3]; u[1] += V[4]; u[2] += V[5];
    TD_FN(rs_cross)(V, u, acc);
    TD_FN(rs_cross)(A, cw, u);
    for (int n = 0; n < 3; n++)
        acc[n] += u[n] + A[3 + n];
    for (int r = 0; r < 3; r++) {            /* Rᵀω, Rᵀω̇ */
        wb[r] = TD_FN(rs_row)(C[r], C[3 + r], C[6 + r], V[0], V[1], V[2]);
        ab[r] = TD_FN(rs_row)(C[r], C[3 + r], C[6 + r], A[0], A[1], A[2]);
    }
    for (int r = 0; r < 3; r++)
        hb[r] = TD_FN(rs_row)(TD_SPLAT(Th[3 * r]), TD_SPLAT(Th[3 * r + 1]),
                              TD_SPLAT(Th[3 * r + 2]), wb[0], wb[1], wb[2]);
    TD_FN(rs_cross)(wb, hb, nb);
    for (int r = 0; r < 3; r++)
        nb[r] += TD_FN(rs_row)(TD_SPLAT(Th[3 * r]), TD_SPLAT(Th[3 * r + 1]),
                               TD_SPLAT(Th[3 * r + 2]), ab[0], ab[1], ab[2]);
    TD_FN(rs_rot)(C, nb, F);
    F[3] = m * acc[0]; F[4] = m * acc[1]; F[5] = m * acc[2];
    TD_FN(rs_cross)(cw, &F[3], t);
    F[0] += t[0]; F[1] += t[1]; F[2] += t[2];
}

static void TD_FN(rnea_spatial_sweeps)(int nb, const int* parent, const int* voff,
                                       const int* nvj, const int* fast, const double* inert,
                                       const double* armature, const double* g, const T_* C,
                                       const T_* J, const T_* Sdq, const T_* qd,
                                       const T_* qdd, const T_* Fx, T_* V, T_* A, T_* F,
                                       T_* tau)
{
    T_ vr[6], ar[6], t6[6];
    for (int i = 0; i < nb; i++) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        const T_* Ci = &C[12 * i];
        const T_* Ji = &J[6 * o];
        const double* inr = &inert[22 * i];
        T_* Vi = &V[6 * i];
        T_* Ai = &A[6 * i];
        if (fast[i]) {
            /* one freedom: Ṡq̇ = 0 and ad_{V_i} J q̇ = ad_{V_p} J q̇ */
            const T_ qdi = qd[o], qddi = qdd[o];
            for (int n = 0; n < 6; n++)
                vr[n] = Ji[n] * qdi;
            if (par < 0) {
                for (int n = 0; n < 6; n++) {
                    Vi[n] = vr[n];
                    Ai[n] = Ji[n] * qddi;
                }
                Ai[3] -= g[0]; Ai[4] -= g[1]; Ai[5] -= g[2];
            } else {
                TD_FN(rs_bracket)(&V[6 * par], vr, t6);
                for (int n = 0; n < 6; n++) {
                    Vi[n] = V[6 * par + n] + vr[n];
                    Ai[n] = TD_FMA(Ji[n], qddi, A[6 * par + n]) + t6[n];
                }
            }
        } else {
            TD_FN(rs_subspace_times)(nvi, Ji, &qd[o], vr);
            TD_FN(rs_subspace_times)(nvi, Ji, &qdd[o], ar);
            TD_FN(rs_twist_Ad)(Ci, &Ci[9], &Sdq[6 * i], t6);
            for (int n = 0; n < 6; n++)
                ar[n] += t6[n];
            if (par < 0) {
                for (int n = 0; n < 6; n++) {
                    Vi[n] = vr[n];
                    Ai[n] = ar[n];
                }
                Ai[3] -= g[0]; Ai[4] -= g[1]; Ai[5] -= g[2];
            } else {
                for (int n = 0; n < 6; n++) {
                    Vi[n] = V[6 * par + n] + vr[n];
                    Ai[n] = A[6 * par + n] + ar[n];
                }
            }
            TD_FN(rs_bracket)(Vi, vr, t6);
            for (int n = 0; n < 6; n++)
                Ai[n] += t6[n];
        }
        if (td_massless(inr))       /* no own wrench (compat.h) */
            for (int n = 0; n < 6; n++)
                F[6 * i + n] = TD_SPLAT(0.0);
        else
            TD_FN(rs_body_wrench)(Ci, inr, Vi, Ai, &F[6 * i]);
        if (Fx != NULL)
            for (int n = 0; n < 6; n++)
                F[6 * i + n] -= Fx[6 * i + n];
    }
    for (int i = nb - 1; i >= 0; i--) {
        const int o = voff[i], par = parent[i];
        for (int k = 0; k < nvj[i]; k++)
            tau[o + k] = TD_FN(rs_dot6)(&J[6 * (o + k)], &F[6 * i]);
        for (int k = 0; k < nvj[i]; k++)
            tau[o + k] = TD_FMA(TD_SPLAT(armature[o + k]), qdd[o + k], tau[o + k]);
        if (par >= 0)
            for (int n = 0; n < 6; n++)
                F[6 * par + n] += F[6 * i + n];
    }
}
