/* The two sweeps of the inverse-dynamics derivatives (rnea_derivatives.pxi holds the
 * equations), element-generic (lanes.h): the poses and spatial screws (C, J) come from
 * the joint steps of rnea_derivatives.pxi. */

/* ---- the derivative terms (rnea_derivatives.pxi) */

/* Y = [T, W], PZ = [Aw, T] − [W, Y], X = [Vc + W, T] into YPX (18) */
static inline void TD_FN(deriv_column)(const T_* Tc, const T_* W, const T_* Aw, const T_* Vc,
                                       T_* YPX)
{
    T_ t6[6], s6[6];
    TD_FN(twist_bracket)(Tc, W, YPX);
    TD_FN(twist_bracket)(Aw, Tc, &YPX[6]);
    TD_FN(twist_bracket)(W, YPX, t6);
    for (int n = 0; n < 6; n++) {
        YPX[6 + n] -= t6[n];
        s6[n] = Vc[n] + W[n];
    }
    TD_FN(twist_bracket)(s6, Tc, &YPX[12]);
}

/* K (3 × 3) and p of one body's coupling B X = (K ω_X, 2 p × ω_X); with P = I_o ω̂:
   I_o ω̂ − ω̂ I_o = P + Pᵀ, ĥ v̂ + v̂ ĥ = v hᵀ + h vᵀ − 2 (h·v) 1 */
static inline void TD_FN(coupling)(const T_* Ic, const T_* V, T_* Bk)
{
    const T_* h = &Ic[1];
    const T_* w = V;
    const T_* v = &V[3];
    T_ Io[9], P[9], mom[6], hv;
    Io[0] = Ic[4]; Io[1] = Ic[5]; Io[2] = Ic[6];
    Io[3] = Ic[5]; Io[4] = Ic[7]; Io[5] = Ic[8];
    Io[6] = Ic[6]; Io[7] = Ic[8]; Io[8] = Ic[9];
    TD_FN(rigid_apply_packed)(Ic, V, mom);
    for (int r = 0; r < 3; r++) {
        /* row r of I_o ω̂ is (row r of I_o) × ω */
        P[3 * r + 0] = Io[3 * r + 1] * w[2] - Io[3 * r + 2] * w[1];
        P[3 * r + 1] = Io[3 * r + 2] * w[0] - Io[3 * r + 0] * w[2];
        P[3 * r + 2] = Io[3 * r + 0] * w[1] - Io[3 * r + 1] * w[0];
    }
    hv = 2.0 * (h[0] * v[0] + h[1] * v[1] + h[2] * v[2]);
    for (int r = 0; r < 3; r++) {
        for (int c = 0; c < 3; c++)
            Bk[3 * r + c] = P[3 * r + c] + P[3 * c + r] + v[r] * h[c] + h[r] * v[c];
        Bk[4 * r] -= hv;
    }
    /* + σ̂, σ = mom[0:3] */
    Bk[1] -= mom[2]; Bk[2] += mom[1];
    Bk[3] += mom[2]; Bk[5] -= mom[0];
    Bk[6] -= mom[1]; Bk[7] += mom[0];
    Bk[9] = mom[3]; Bk[10] = mom[4]; Bk[11] = mom[5];
}

/* out = B X = (K ω_X, 2 p × ω_X) */
static inline void TD_FN(coupling_apply)(const T_* Bk, const T_* X, T_* out)
{
    TD_FN(rot_vec)(Bk, X, out);
    TD_FN(cross)(&Bk[9], X, &out[3]);
    out[3] *= 2.0; out[4] *= 2.0; out[5] *= 2.0;
}

/* w = angular part of Bᵀ J = Kᵀ ω_J + 2 v_J × p */
static inline void TD_FN(coupling_T_apply)(const T_* Bk, const T_* J, T_* w)
{
    T_ t[3];
    TD_FN(rotT_vec)(Bk, J, w);
    TD_FN(cross)(&J[3], &Bk[9], t);
    w[0] += 2.0 * t[0]; w[1] += 2.0 * t[1]; w[2] += 2.0 * t[2];
}

/* out += the change of the subtree's external wrench sum beyond a rigid transport
   under the motion T: world (E = Σ f about s): −ad_Tᵀ E; hybrid (E = N, F, s, Q):
   (ω × N + s ω − Qᵀ ω, ω × F); body frame: none */
static inline void TD_FN(fext_correction)(int frame, const T_* E, const T_* Tm, T_* out)
{
    T_ t[3];
    if (frame == 0) {
        TD_FN(add_gyroscopic)(Tm, E, out);
    } else if (frame == 2) {
        TD_FN(cross)(Tm, E, t);
        out[0] += t[0] + E[6] * Tm[0] - (E[7] * Tm[0] + E[10] * Tm[1] + E[13] * Tm[2]);
        out[1] += t[1] + E[6] * Tm[1] - (E[8] * Tm[0] + E[11] * Tm[1] + E[14] * Tm[2]);
        out[2] += t[2] + E[6] * Tm[2] - (E[9] * Tm[0] + E[12] * Tm[1] + E[15] * Tm[2]);
        TD_FN(cross)(Tm, &E[3], t);
        out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
    }
}

/* e with J·(fext_correction of T) = e·T for every T */
static inline void TD_FN(fext_row)(int frame, const T_* E, const T_* J, T_* e)
{
    T_ t[3];
    for (int n = 0; n < 6; n++)
        e[n] = TD_SPLAT(0.0);
    if (frame == 0) {
        /* J·(ω × n + v × f, ω × f) = ω·(n × ω_J + f × v_J) + v·(f × ω_J) */
        TD_FN(cross)(E, J, e);
        TD_FN(cross)(&E[3], &J[3], t);
        e[0] += t[0]; e[1] += t[1]; e[2] += t[2];
        TD_FN(cross)(&E[3], J, &e[3]);
    } else if (frame == 2) {
        TD_FN(cross)(E, J, e);
        TD_FN(cross)(&E[3], &J[3], t);
        e[0] += t[0] + E[6] * J[0] - (E[7] * J[0] + E[8] * J[1] + E[9] * J[2]);
        e[1] += t[1] + E[6] * J[1] - (E[10] * J[0] + E[11] * J[1] + E[12] * J[2]);
        e[2] += t[2] + E[6] * J[2] - (E[13] * J[0] + E[14] * J[1] + E[15] * J[2]);
    }
}

static inline int TD_FN(carries)(int kind, int a, int b)
{
    if (kind == TD_KIND_SCREWS)
        return b > a;
    if (kind == TD_KIND_FREE_SO3R3)
        return b < 3;
    return 1;
}

/* Forward sweep: twists V, accelerations A (gravity as base acceleration a0), the
   per-freedom vectors YPX = (Y, P − Z, X), and per body the wrench F (about s, minus
   the external wrench Fx in frame s if Fx is not NULL), the inertia Ic about s and the
   coupling Bc; from the poses C
   (12 per body) and spatial screws J (6 per freedom) in frame s.  fast[i] != 0:
   a one-freedom fast-path joint, which is treated as a chain of screws. */
static void TD_FN(deriv_forward)(int nb, const int* parent, const int* voff, const int* nvj,
                                 const int* kind, const int* fast, const double* inert,
                                 const T_* C, const T_* J, const T_* qd, const T_* qdd,
                                 const T_* a0, const T_* Fx, T_* V, T_* A, T_* F, T_* Ic,
                                 T_* Bc, T_* YPX)
{
    T_ z6[6], vr[6], vt[6], W[6], Aw[6], t6[6];
    for (int n = 0; n < 6; n++)
        z6[n] = TD_SPLAT(0.0);
    for (int i = 0; i < nb; i++) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        const T_* Ci = &C[12 * i];
        T_* Vi = &V[6 * i];
        T_* Ai = &A[6 * i];
        const T_* Ji = &J[6 * o];
        const T_* Vp = par < 0 ? z6 : &V[6 * par];
        const T_* Ap = par < 0 ? a0 : &A[6 * par];
        const double* inr = &inert[22 * i];
        if (fast[i] || kind[i] == TD_KIND_SCREWS) {
            /* a chain of screws: each moves relative to the ones before (with Vc the
               twist before column b and W = Vc + J_b q̇_b after it: Y = [J_b, W] =
               [J_b, Vc], the bias [Vc, J_b q̇_b] = −q̇_b Y and X = [Vc + W, J_b] = −2 Y) */
            for (int n = 0; n < 6; n++) {
                Vi[n] = Vp[n];
                Ai[n] = Ap[n];
            }
            for (int b = 0; b < nvi; b++) {
                const T_* Ta = &Ji[6 * b];
                T_* Yb = &YPX[18 * (o + b)];
                const T_ x = qd[o + b], y = qdd[o + b];
                TD_FN(twist_bracket)(Ta, Vi, Yb);
                for (int n = 0; n < 6; n++) {
                    Vi[n] += Ta[n] * x;
                    Ai[n] += Ta[n] * y - x * Yb[n];
                    Yb[12 + n] = -2.0 * Yb[n];
                }
                TD_FN(twist_bracket)(Ai, Ta, &Yb[6]);
                TD_FN(twist_bracket)(Vi, Yb, t6);
                for (int n = 0; n < 6; n++)
                    Yb[6 + n] -= t6[n];
            }
        } else {
            /* body-fixed columns (spherical, free SE(3), rotations of SO(3)×R³) move
               with body i; SO(3)×R³ translations are carried by the parent */
            int k;
            for (int n = 0; n < 6; n++) {
                W[n] = Vp[n];
                Aw[n] = Ap[n];
            }
            if (kind[i] == TD_KIND_FREE_SO3R3) {
                TD_FN(subspace_times)(3, &Ji[18], &qd[o + 3], vt);
                TD_FN(twist_bracket)(Vp, vt, t6);
                for (int n = 0; n < 6; n++) {
                    W[n] += vt[n];
                    Aw[n] += t6[n] + Ji[18 + n] * qdd[o + 3] + Ji[24 + n] * qdd[o + 4]
                             + Ji[30 + n] * qdd[o + 5];
                }
                TD_FN(subspace_times)(3, Ji, &qd[o], vr);
                k = 3;
            } else {
                TD_FN(subspace_times)(nvi, Ji, &qd[o], vr);
                k = nvi;
            }
            for (int n = 0; n < 6; n++)
                Vi[n] = W[n] + vr[n];
            TD_FN(twist_bracket)(Vi, vr, t6);
            for (int n = 0; n < 6; n++)
                Ai[n] = Aw[n] + t6[n];
            for (int b = 0; b < k; b++)
                for (int n = 0; n < 6; n++)
                    Ai[n] += Ji[6 * b + n] * qdd[o + b];
            for (int b = 0; b < nvi; b++)
                TD_FN(deriv_column)(&Ji[6 * b], W, Aw, b < k ? Vi : Vp, &YPX[18 * (o + b)]);
        }
        /* body wrench about s (as rnea_spatial.pxi), inertia and coupling terms */
        TD_FN(body_wrench)(Ci, inr, Vi, Ai, &F[6 * i]);
        if (Fx != NULL)
            for (int n = 0; n < 6; n++)
                F[6 * i + n] -= Fx[6 * i + n];
        TD_FN(rigid_world_inertia)(Ci, &Ci[9], inr, &Ic[10 * i]);
        TD_FN(coupling)(&Ic[10 * i], Vi, &Bc[12 * i]);
    }
}

/* S (21 × nv) by component: T (J), P − Z, X, angular part of Y */
static void TD_FN(deriv_components)(int nv, const T_* J, const T_* YPX, T_* S)
{
    for (int a = 0; a < nv; a++) {
        for (int n = 0; n < 6; n++)
            S[n * nv + a] = J[6 * a + n];
        for (int n = 0; n < 12; n++)
            S[(6 + n) * nv + a] = YPX[18 * a + 6 + n];
        for (int n = 0; n < 3; n++)
            S[(18 + n) * nv + a] = YPX[18 * a + n];
    }
}

/* Backward sweep: subtree sums of F, Ic, Bc (and E, the external wrench sums, unless
   NULL), the entries of each body's freedoms with each other and with its ancestors'
   freedoms, into dq[l], dv[l], M[l] (l < TD_LANES; M may be NULL), which the caller
   has zeroed. */
static void TD_FN(deriv_backward)(int nb, int nv, const int* parent, const int* voff,
                                  const int* nvj, const int* kind, const int* anc_ptr,
                                  const int* anc_run, const double* armature, const T_* J,
                                  const T_* YPX, const T_* S, T_* F, T_* Ic, T_* Bc,
                                  T_* E, int fext_frame, double* const* dq,
                                  double* const* dv, double* const* M)
{
    T_ ub[6][6], wb[6][3], eb[6][6], Ga[6][6], Ha[6][6], t6[6], x;
    const int with_e = E != NULL;
    for (int i = nb - 1; i >= 0; i--) {
        const int o = voff[i], nvi = nvj[i], kd = kind[i], par = parent[i];
        const int c0 = anc_ptr[i], c1 = anc_ptr[i + 1];
        for (int a = 0; a < nvi; a++) {
            const T_* Ta = &J[6 * (o + a)];
            /* G_a = −ad_Tᵀ F + Ic (P − Z) + B Y (+ external wrench correction) */
            TD_FN(rigid_apply_packed)(&Ic[10 * i], &YPX[18 * (o + a) + 6], Ga[a]);
            TD_FN(coupling_apply)(&Bc[12 * i], &YPX[18 * (o + a)], t6);
            for (int n = 0; n < 6; n++)
                Ga[a][n] += t6[n];
            TD_FN(add_gyroscopic)(Ta, &F[6 * i], Ga[a]);
            if (with_e)
                TD_FN(fext_correction)(fext_frame, &E[16 * i], Ta, Ga[a]);
            /* H_a = −B T + Ic X */
            TD_FN(rigid_apply_packed)(&Ic[10 * i], &YPX[18 * (o + a) + 12], Ha[a]);
            TD_FN(coupling_apply)(&Bc[12 * i], Ta, t6);
            for (int n = 0; n < 6; n++)
                Ha[a][n] -= t6[n];
        }
        for (int b = 0; b < nvi; b++) {
            const T_* Tb = &J[6 * (o + b)];
            TD_FN(rigid_apply_packed)(&Ic[10 * i], Tb, ub[b]);
            TD_FN(coupling_T_apply)(&Bc[12 * i], Tb, wb[b]);
            if (with_e)
                TD_FN(fext_row)(fext_frame, &E[16 * i], Tb, eb[b]);
        }
        /* freedoms of body i with each other */
        for (int b = 0; b < nvi; b++) {
            const T_* Tb = &J[6 * (o + b)];
            for (int a = 0; a < nvi; a++) {
                const T_* Ta = &J[6 * (o + a)];
                if (M != NULL && a >= b) {
                    x = TD_FN(dot6)(ub[b], Ta);
                    TD_PUT(M, (long)(o + b) * nv + o + a, x);
                    TD_PUT(M, (long)(o + a) * nv + o + b, x);
                }
                TD_PUT(dv, (long)(o + b) * nv + o + a, TD_FN(dot6)(Tb, Ha[a]));
                if (TD_FN(carries)(kd, a, b)) {
                    x = TD_FN(dot6)(ub[b], &YPX[18 * (o + a) + 6])
                        + TD_FN(dot3)(wb[b], &YPX[18 * (o + a)]);
                    if (with_e)
                        x += TD_FN(dot6)(eb[b], Ta);
                } else {
                    x = TD_FN(dot6)(Tb, Ga[a]);
                }
                TD_PUT(dq, (long)(o + b) * nv + o + a, x);
            }
            if (M != NULL)
                TD_ADD1(M, (long)(o + b) * nv + o + b, armature[o + b]);
        }
        /* with every freedom a of an ancestor: τ_b (b in i) moves with q_a, v_a; τ_a
           moves with q_b, v_b through the subtree wrench (ancestor freedoms in runs) */
        if (c1 > c0)
            for (int b = 0; b < nvi; b++)
                TD_FN(ancestor_pairs)(nv, o + b, &anc_run[2 * c0], c1 - c0, S, nv, ub[b],
                                      wb[b], with_e ? eb[b] : NULL, Ga[b], Ha[b], dq, dv, M);
        if (par >= 0) {
            for (int n = 0; n < 6; n++)
                F[6 * par + n] += F[6 * i + n];
            for (int n = 0; n < 10; n++)
                Ic[10 * par + n] += Ic[10 * i + n];
            for (int n = 0; n < 12; n++)
                Bc[12 * par + n] += Bc[12 * i + n];
            if (with_e)
                for (int n = 0; n < 16; n++)
                    E[16 * par + n] += E[16 * i + n];
        }
    }
}
