/* Inverse dynamics in spatial form (rnea_spatial.pxi holds the equations),
 * element-generic (lanes.h): the forward sweep of twists, accelerations (gravity as
 * the roots' base acceleration) and body wrenches, the backward sweep of subtree
 * wrenches and joint forces, from the poses C, spatial screws J and, for the joints
 * without a fast path, the body-frame Ṡ q̇ (Sdq, nb × 6) of rnea_spatial.pxi's joint
 * steps; Fx (if not NULL): the external wrenches in frame s. */

/* The products are se3_lanes.h's fused flavour (lanes.h: TD_FN(name##_fused), their
 * multiply-adds TD_FMA: one rounding in the AVX2 build, alike for one state and for
 * lanes; the terms in se3_lanes.h's order, so the baseline build's results are those
 * of the plain products). */
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
                TD_FN(twist_bracket_fused)(&V[6 * par], vr, t6);
                for (int n = 0; n < 6; n++) {
                    Vi[n] = V[6 * par + n] + vr[n];
                    Ai[n] = TD_FMA(Ji[n], qddi, A[6 * par + n]) + t6[n];
                }
            }
        } else {
            TD_FN(subspace_times_fused)(nvi, Ji, &qd[o], vr);
            TD_FN(subspace_times_fused)(nvi, Ji, &qdd[o], ar);
            TD_FN(twist_Ad_fused)(Ci, &Ci[9], &Sdq[6 * i], t6);
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
            TD_FN(twist_bracket_fused)(Vi, vr, t6);
            for (int n = 0; n < 6; n++)
                Ai[n] += t6[n];
        }
        if (td_massless(inr))       /* no own wrench (compat.h) */
            for (int n = 0; n < 6; n++)
                F[6 * i + n] = TD_SPLAT(0.0);
        else
            TD_FN(body_wrench_fused)(Ci, inr, Vi, Ai, &F[6 * i]);
        if (Fx != NULL)
            for (int n = 0; n < 6; n++)
                F[6 * i + n] -= Fx[6 * i + n];
    }
    for (int i = nb - 1; i >= 0; i--) {
        const int o = voff[i], par = parent[i];
        for (int k = 0; k < nvj[i]; k++)
            tau[o + k] = TD_FN(dot6_fused)(&J[6 * (o + k)], &F[6 * i]);
        for (int k = 0; k < nvj[i]; k++)
            tau[o + k] = TD_FMA(TD_SPLAT(armature[o + k]), qdd[o + k], tau[o + k]);
        if (par >= 0)
            for (int n = 0; n < 6; n++)
                F[6 * par + n] += F[6 * i + n];
    }
}
