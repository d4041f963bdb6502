/* Passes 1–3 of the articulated-body algorithm (aba.pxi holds the equations and the
 * one-state kernel), element-generic (lanes.h), for states whose poses C, spatial
 * screws J and, for the joints without a fast path, body-frame rates Ṡ q̇ (Sdq) are
 * in lanes (lanes.pxi _lane_joint_steps, td_lanes_spatial_poses).  The per-body
 * arithmetic is aba_simd.h's, element by element in its order: aba_rigid6 and
 * aba_back1 of the double instantiation are its scalar forms (the compilers without
 * vector extensions use them), and every lane of the td_vec one gives the bits of
 * the hand-vectorised one-state kernel.  External wrenches are not taken (the
 * rollouts have none).  A singular articulated inertia (D ≤ 1e-13 · trace) is a
 * mask: codes[l] = −(i + 1) of the first such joint of lane l (pass 2's order, the
 * code the one-state kernel returns); that lane's results are then not used, the
 * other lanes go on.  The double instantiation stops at the first one. */

static inline T_ TD_FN(dot6_tree)(const T_* a, const T_* b)
{
    return (TD_FMA(a[1], b[1], a[0] * b[0]) + TD_FMA(a[3], b[3], a[2] * b[2]))
        + TD_FMA(a[5], b[5], a[4] * b[4]);
}

/* p = −ad_Vᵀ y (aba_simd.h td_neg_coad) */
static inline void TD_FN(neg_coad)(const T_* V, const T_* y, T_* p)
{
    p[0] = TD_FMS(V[1], y[2], V[2] * y[1]) + TD_FMS(V[4], y[5], V[5] * y[4]);
    p[1] = TD_FMS(V[2], y[0], V[0] * y[2]) + TD_FMS(V[5], y[3], V[3] * y[5]);
    p[2] = TD_FMS(V[0], y[1], V[1] * y[0]) + TD_FMS(V[3], y[4], V[4] * y[3]);
    p[3] = TD_FMS(V[1], y[5], V[2] * y[4]);
    p[4] = TD_FMS(V[2], y[3], V[0] * y[5]);
    p[5] = TD_FMS(V[0], y[4], V[1] * y[3]);
}

/* M (36) = the spatial inertia about the origin of frame s of a body at pose C with
 * inr = (m, COM, Θ_COM), and pA = −ad_Vᵀ M V (aba_simd.h td_aba_rigid6) */
static inline void TD_FN(aba_rigid6)(const T_* C, const double* inr, const T_* V, T_* M,
                                     T_* pA)
{
    const T_* R = C;
    const double* Th = &inr[4];
    const double m = inr[0];
    T_ c[3], h[3], Y[9], y[6];
    int r, k;
    for (r = 0; r < 3; r++)
        c[r] = TD_FMA(R[3 * r + 2], TD_SPLAT(inr[3]), TD_FMA(R[3 * r + 1], TD_SPLAT(inr[2]),
                      TD_FMA(R[3 * r], TD_SPLAT(inr[1]), C[9 + r])));
    for (r = 0; r < 3; r++)
        h[r] = m * c[r];
    const T_ mcc = m * TD_FMA(c[2], c[2], TD_FMA(c[1], c[1], c[0] * c[0]));
    for (k = 0; k < 3; k++)
        for (r = 0; r < 3; r++)
            Y[3 * k + r] = TD_FMA(TD_SPLAT(Th[3 * k + 2]), R[3 * r + 2],
                                  TD_FMA(TD_SPLAT(Th[3 * k + 1]), R[3 * r + 1],
                                         Th[3 * k] * R[3 * r]));
    for (r = 0; r < 3; r++)
        for (k = 0; k < 3; k++)
            M[6 * r + k] = TD_FNMA(h[r], c[k], TD_FMA(R[3 * r + 2], Y[6 + k],
                                   TD_FMA(R[3 * r + 1], Y[3 + k], R[3 * r] * Y[k])));
    M[0] += mcc; M[7] += mcc; M[14] += mcc;
    M[3] = TD_SPLAT(0.0); M[4] = -h[2]; M[5] = h[1];
    M[9] = h[2];  M[10] = TD_SPLAT(0.0); M[11] = -h[0];
    M[15] = -h[1]; M[16] = h[0]; M[17] = TD_SPLAT(0.0);
    for (r = 0; r < 3; r++)
        for (k = 0; k < 3; k++) {
            M[6 * (3 + r) + k] = M[6 * k + 3 + r];
            M[6 * (3 + r) + 3 + k] = TD_SPLAT(r == k ? m : 0.0);
        }
    for (r = 0; r < 6; r++)
        y[r] = (TD_FMA(M[6 + r], V[1], M[r] * V[0]) + TD_FMA(M[18 + r], V[3], M[12 + r] * V[2]))
            + TD_FMA(M[30 + r], V[5], M[24 + r] * V[4]);
    TD_FN(neg_coad)(V, y, pA);
}

/* Pass 2 of a joint with one freedom (aba_simd.h td_aba_back1); returns the mask of
 * D ≤ 1e-13 · scale (then, for one state, nothing is written past u) */
static inline TD_MASK TD_FN(aba_back1)(const T_* M, const T_* pA, const T_* J, const T_* c,
                                       T_ tau, double arm, T_ scale, T_* U, T_* Dinv, T_* u,
                                       T_* Ip, T_* pAp)
{
    T_ Ic[6], UD[6];
    int r, k;
    for (r = 0; r < 6; r++)
        U[r] = (TD_FMA(M[6 + r], J[1], M[r] * J[0]) + TD_FMA(M[18 + r], J[3], M[12 + r] * J[2]))
            + TD_FMA(M[30 + r], J[5], M[24 + r] * J[4]);
    const T_ D = (TD_FMA(J[1], U[1], J[0] * U[0]) + TD_FMA(J[3], U[3], J[2] * U[2]))
        + TD_FMA(J[5], U[5], TD_FMA(J[4], U[4], TD_SPLAT(arm)));
    const T_ uu = tau - TD_FN(dot6_tree)(J, pA);
    *u = uu;
    const TD_MASK bad = TD_LE(D, 1e-13 * scale);
#if TD_LANES == 1
    if (bad)
        return bad;
#endif
    const T_ Di = 1.0 / D;
    *Dinv = Di;
    if (Ip == NULL)
        return bad;
    for (r = 0; r < 6; r++) {
        Ic[r] = (TD_FMA(M[6 + r], c[1], M[r] * c[0]) + TD_FMA(M[18 + r], c[3], M[12 + r] * c[2]))
            + TD_FMA(M[30 + r], c[5], M[24 + r] * c[4]);
        UD[r] = U[r] * Di;
    }
    const T_ w = uu - TD_FN(dot6_tree)(U, c);
    for (r = 0; r < 6; r++)
        pAp[r] = TD_FMA(UD[r], w, pAp[r] + (pA[r] + Ic[r]));
    for (r = 0; r < 6; r++)
        for (k = 0; k < 6; k++)
            Ip[6 * r + k] = TD_FNMA(U[r], UD[k], Ip[6 * r + k] + M[6 * r + k]);
    return bad;
}

#ifndef TD_ABA_SCALAR_ONLY
/* x <- (L Lᵀ)⁻¹ x (aba.pxi small_cho_solve) */
static inline void TD_FN(aba_cho_solve)(int k, const T_* L, T_* x)
{
    for (int a = 0; a < k; a++) {
        for (int c = 0; c < a; c++)
            x[a] -= L[k * a + c] * x[c];
        x[a] /= L[k * a + a];
    }
    for (int a = k - 1; a >= 0; a--) {
        for (int c = a + 1; c < k; c++)
            x[a] -= L[k * c + a] * x[c];
        x[a] /= L[k * a + a];
    }
}

/* codes[l] = code for the lanes of bad that have none yet */
#if TD_LANES == 1
#define TD_ABA_RECORD(bad, code) do { if (bad) { codes[0] = (code); return; } } while (0)
#else
#define TD_ABA_RECORD(bad, code) do { const TD_MASK b_ = (bad);                \
        for (int l_ = 0; l_ < TD_VL; l_++)                                  \
            if (b_[l_] && codes[l_] == 0) codes[l_] = (code); } while (0)
#endif

/* Passes 1–3 (aba.pxi _aba_velocities_and_bias, _aba_articulated_inertias,
 * _aba_accelerations): q̈ (qdd) from the poses C (nb × 12), screws J (nv × 6), Ṡ q̇
 * Sdq (nb × 6, joints without a fast path), q̇, τ and the root's parent acceleration
 * a0 = (0, −g); scratch V, cb (nb × 6), IA (nb × 36), pA (nb × 6), A (nb × 6), U,
 * Dl (nv × 6), u (nv).  codes[l] must be 0 on entry. */
static inline void TD_FN(aba_sweeps)(int nb, const int* parent, const int* voff,
                                     const int* nvj, const int* fast, const double* inert,
                                     const double* armature, const T_* C, const T_* J,
                                     const T_* Sdq, const T_* qd, const T_* tau, const T_* a0,
                                     T_* V, T_* cb, T_* IA, T_* pA, T_* A, T_* U, T_* Dl,
                                     T_* u, T_* qdd, int* codes)
{
    T_ vr[6], t6[6], h[6], x[6], ap[6];
    int i, k, l, n, a, b;
    /* pass 1, root to leaves */
    for (i = 0; i < nb; i++) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        const T_* Ci = &C[12 * i];
        const T_* Ji = &J[6 * o];
        T_* Vi = &V[6 * i];
        T_* ci = &cb[6 * i];
        if (fast[i] != 0) {
            const T_ qdi = qd[o];
            for (n = 0; n < 6; n++)
                vr[n] = Ji[n] * qdi;
            if (par < 0) {
                for (n = 0; n < 6; n++) {
                    Vi[n] = vr[n];
                    ci[n] = TD_SPLAT(0.0);
                }
            } else {
                TD_FN(twist_bracket)(&V[6 * par], vr, ci);
                for (n = 0; n < 6; n++)
                    Vi[n] = V[6 * par + n] + vr[n];
            }
        } else {
            TD_FN(subspace_times)(nvi, Ji, &qd[o], vr);
            for (n = 0; n < 6; n++)
                Vi[n] = par < 0 ? vr[n] : V[6 * par + n] + vr[n];
            TD_FN(twist_Ad)(Ci, &Ci[9], &Sdq[6 * i], ci);
            TD_FN(twist_bracket)(Vi, vr, t6);
            for (n = 0; n < 6; n++)
                ci[n] += t6[n];
        }
        TD_FN(aba_rigid6)(Ci, &inert[22 * i], Vi, &IA[36 * i], &pA[6 * i]);
    }
    /* pass 2, leaves to root */
    for (i = nb - 1; i >= 0; i--) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        T_* Ia = &IA[36 * i];
        T_ scale = (Ia[0] + Ia[7] + Ia[14]) + (Ia[21] + Ia[28] + Ia[35]);
        for (k = 0; k < nvi; k++)
            scale += armature[o + k];
#if TD_LANES == 1
        if (scale <= 0.0)
            scale = 1e-300;
#else
        scale = td_select(scale <= TD_SPLAT(0.0), TD_SPLAT(1e-300), scale);
#endif
        if (nvi == 1) {
            TD_ABA_RECORD(TD_FN(aba_back1)(Ia, &pA[6 * i], &J[6 * o], &cb[6 * i], tau[o],
                                           armature[o], scale, &U[6 * o], &Dl[6 * o], &u[o],
                                           par < 0 ? NULL : &IA[36 * par],
                                           par < 0 ? NULL : &pA[6 * par]),
                          -(i + 1));
            continue;
        }
        const T_* S = J;
        for (k = 0; k < nvi; k++) {
            for (n = 0; n < 6; n++)
                U[6 * (o + k) + n] = (Ia[6 * n] * S[6 * (o + k)]
                    + Ia[6 * n + 1] * S[6 * (o + k) + 1]
                    + Ia[6 * n + 2] * S[6 * (o + k) + 2]
                    + Ia[6 * n + 3] * S[6 * (o + k) + 3]
                    + Ia[6 * n + 4] * S[6 * (o + k) + 4]
                    + Ia[6 * n + 5] * S[6 * (o + k) + 5]);
            u[o + k] = tau[o + k];
            for (n = 0; n < 6; n++)
                u[o + k] -= S[6 * (o + k) + n] * pA[6 * i + n];
        }
        for (k = 0; k < nvi; k++) {
            for (l = 0; l < nvi; l++)
                Dl[6 * o + nvi * k + l] = (S[6 * (o + k)] * U[6 * (o + l)]
                    + S[6 * (o + k) + 1] * U[6 * (o + l) + 1]
                    + S[6 * (o + k) + 2] * U[6 * (o + l) + 2]
                    + S[6 * (o + k) + 3] * U[6 * (o + l) + 3]
                    + S[6 * (o + k) + 4] * U[6 * (o + l) + 4]
                    + S[6 * (o + k) + 5] * U[6 * (o + l) + 5]);
            Dl[6 * o + nvi * k + k] += armature[o + k];
        }
        TD_ABA_RECORD(TD_FN(small_cholesky)(nvi, &Dl[6 * o], scale), -(i + 1));
        if (par < 0)
            continue;
        T_* Ip = &IA[36 * par];
        for (a = 0; a < 6; a++) {
            h[a] = TD_SPLAT(0.0);
            for (b = 0; b < 6; b++)
                h[a] += Ia[6 * a + b] * cb[6 * i + b];
        }
        for (a = 0; a < 6; a++) {
            for (k = 0; k < nvi; k++)
                x[k] = U[6 * (o + k) + a];
            TD_FN(aba_cho_solve)(nvi, &Dl[6 * o], x);
            for (b = 0; b < 6; b++) {
                Ip[6 * a + b] += Ia[6 * a + b];
                for (k = 0; k < nvi; k++)
                    Ip[6 * a + b] -= U[6 * (o + k) + b] * x[k];
            }
        }
        for (k = 0; k < nvi; k++)
            x[k] = u[o + k] - TD_FN(dot6)(&U[6 * (o + k)], &cb[6 * i]);
        TD_FN(aba_cho_solve)(nvi, &Dl[6 * o], x);
        for (a = 0; a < 6; a++) {
            for (k = 0; k < nvi; k++)
                h[a] += U[6 * (o + k) + a] * x[k];
            pA[6 * par + a] += pA[6 * i + a] + h[a];
        }
    }
    /* pass 3, root to leaves */
    for (i = 0; i < nb; i++) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        const T_* Ap = par < 0 ? a0 : &A[6 * par];
        const T_* ci = &cb[6 * i];
        if (nvi == 1) {
            const T_ xx = Dl[6 * o] * ((u[o] - TD_FN(dot6_tree)(&U[6 * o], ci))
                                       - TD_FN(dot6_tree)(&U[6 * o], Ap));
            for (n = 0; n < 6; n++)
                A[6 * i + n] = TD_FMA(J[6 * o + n], xx, Ap[n] + ci[n]);
            qdd[o] = xx;
            continue;
        }
        for (n = 0; n < 6; n++)
            ap[n] = Ap[n] + ci[n];
        for (k = 0; k < nvi; k++)
            x[k] = u[o + k] - TD_FN(dot6)(&U[6 * (o + k)], ap);
        TD_FN(aba_cho_solve)(nvi, &Dl[6 * o], x);
        for (k = 0; k < nvi; k++) {
            qdd[o + k] = x[k];
            for (n = 0; n < 6; n++)
                ap[n] += J[6 * (o + k) + n] * x[k];
        }
        for (n = 0; n < 6; n++)
            A[6 * i + n] = ap[n];
    }
}
#undef TD_ABA_RECORD
#endif
