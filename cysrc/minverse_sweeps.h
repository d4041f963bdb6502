/* Passes 2 and 3 of the inverse mass matrix (minverse.pxi holds the equations),
 * element-generic (lanes.h), from the articulated inertias pass 1 leaves.  The column
 * loops are minverse.pxi's td_minv_row / td_minv_dot / td_minv_axpy for one state
 * and plain loops over lane vectors (the same expressions) for lanes. */

#if TD_LANES == 1
#define TD_F6(F, nv) (F), (F) + (nv), (F) + 2 * (nv), (F) + 3 * (nv), (F) + 4 * (nv), \
    (F) + 5 * (nv)
static inline void TD_FN(minv_row)(long j0, long j1, int keep, T_* row, T_* F, long nv,
                                   const T_* u, const T_* s)
{
    td_minv_row(j0, j1, keep, row, TD_F6(F, nv), u, s);
}
static inline void TD_FN(minv_dot)(long j0, long j1, T_* row, T_* F, long nv, const T_* u)
{
    td_minv_dot(j0, j1, row, TD_F6(F, nv), u);
}
static inline void TD_FN(minv_axpy)(long j0, long j1, double c, const T_* row, T_* F, long nv,
                                    const T_* s)
{
    td_minv_axpy(j0, j1, c, row, TD_F6(F, nv), s);
}
#undef TD_F6
#else
#define TD_F6_DECL(F, nv) T_* __restrict__ F0 = (F); T_* __restrict__ F1 = (F) + (nv); \
    T_* __restrict__ F2 = (F) + 2 * (nv); T_* __restrict__ F3 = (F) + 3 * (nv);          \
    T_* __restrict__ F4 = (F) + 4 * (nv); T_* __restrict__ F5 = (F) + 5 * (nv)
static inline void TD_FN(minv_row)(long j0, long j1, int keep, T_* __restrict__ row, T_* F,
                                   long nv, const T_* u, const T_* s)
{
    TD_F6_DECL(F, nv);
    const T_ u0 = u[0], u1 = u[1], u2 = u[2], u3 = u[3], u4 = u[4], u5 = u[5];
    const T_ s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5];
    for (long j = j0; j < j1; j++) {
        const T_ x = (keep ? row[j] : TD_SPLAT(0.0))
                     - (u0 * F0[j] + u1 * F1[j] + u2 * F2[j] + u3 * F3[j] + u4 * F4[j]
                        + u5 * F5[j]);
        row[j] = x;
        F0[j] += s0 * x; F1[j] += s1 * x; F2[j] += s2 * x;
        F3[j] += s3 * x; F4[j] += s4 * x; F5[j] += s5 * x;
    }
}
static inline void TD_FN(minv_dot)(long j0, long j1, T_* __restrict__ row, T_* F, long nv,
                                   const T_* u)
{
    TD_F6_DECL(F, nv);
    const T_ u0 = u[0], u1 = u[1], u2 = u[2], u3 = u[3], u4 = u[4], u5 = u[5];
    for (long j = j0; j < j1; j++)
        row[j] = -(u0 * F0[j] + u1 * F1[j] + u2 * F2[j] + u3 * F3[j] + u4 * F4[j]
                   + u5 * F5[j]);
}
static inline void TD_FN(minv_axpy)(long j0, long j1, double c, const T_* __restrict__ row,
                                    T_* F, long nv, const T_* s)
{
    TD_F6_DECL(F, nv);
    const T_ s0 = c * s[0], s1 = c * s[1], s2 = c * s[2], s3 = c * s[3], s4 = c * s[4],
             s5 = c * s[5];
    for (long j = j0; j < j1; j++) {
        F0[j] += s0 * row[j]; F1[j] += s1 * row[j]; F2[j] += s2 * row[j];
        F3[j] += s3 * row[j]; F4[j] += s4 * row[j]; F5[j] += s5 * row[j];
    }
}
#undef TD_F6_DECL
#endif

/* ---- packed symmetric 6 × 6 (aba.pxi's layout: A upper triangle, B row-major, C
   upper triangle) */
static inline void TD_FN(sym6_apply)(const T_* P, const T_* x, T_* y)
{
    const T_* A = P;
    const T_* B = &P[6];
    const T_* C = &P[15];
    y[0] = (A[0] * x[0] + A[1] * x[1] + A[2] * x[2] + B[0] * x[3] + B[1] * x[4] + B[2] * x[5]);
    y[1] = (A[1] * x[0] + A[3] * x[1] + A[4] * x[2] + B[3] * x[3] + B[4] * x[4] + B[5] * x[5]);
    y[2] = (A[2] * x[0] + A[4] * x[1] + A[5] * x[2] + B[6] * x[3] + B[7] * x[4] + B[8] * x[5]);
    y[3] = (B[0] * x[0] + B[3] * x[1] + B[6] * x[2] + C[0] * x[3] + C[1] * x[4] + C[2] * x[5]);
    y[4] = (B[1] * x[0] + B[4] * x[1] + B[7] * x[2] + C[1] * x[3] + C[3] * x[4] + C[4] * x[5]);
    y[5] = (B[2] * x[0] + B[5] * x[1] + B[8] * x[2] + C[2] * x[3] + C[4] * x[4] + C[5] * x[5]);
}

static inline void TD_FN(sym6_unpack)(const T_* P, T_* I6)
{
    I6[0] = P[0]; I6[1] = P[1]; I6[2] = P[2];
    I6[6] = P[1]; I6[7] = P[3]; I6[8] = P[4];
    I6[12] = P[2]; I6[13] = P[4]; I6[14] = P[5];
    I6[21] = P[15]; I6[22] = P[16]; I6[23] = P[17];
    I6[27] = P[16]; I6[28] = P[18]; I6[29] = P[19];
    I6[33] = P[17]; I6[34] = P[19]; I6[35] = P[20];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            I6[6 * a + 3 + b] = P[6 + 3 * a + b];
            I6[6 * (3 + b) + a] = P[6 + 3 * a + b];
        }
}

static inline void TD_FN(sym6_pack)(const T_* I6, T_* P)
{
    P[0] = I6[0]; P[1] = I6[1]; P[2] = I6[2]; P[3] = I6[7]; P[4] = I6[8]; P[5] = I6[14];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            P[6 + 3 * a + b] = I6[6 * a + 3 + b];
    P[15] = I6[21]; P[16] = I6[22]; P[17] = I6[23]; P[18] = I6[28]; P[19] = I6[29];
    P[20] = I6[35];
}

/* [[Io, ĥ], [ĥᵀ, m 1]] of a rigid-body inertia Ic = (m, h, Io packed) */
static inline void TD_FN(sym6_from_rigid)(const T_* Ic, T_* P)
{
    const T_ m = Ic[0], hx = Ic[1], hy = Ic[2], hz = Ic[3];
    for (int n = 0; n < 6; n++)
        P[n] = Ic[4 + n];
    P[6] = TD_SPLAT(0.0); P[7] = -hz; P[8] = hy;
    P[9] = hz; P[10] = TD_SPLAT(0.0); P[11] = -hx;
    P[12] = -hy; P[13] = hx; P[14] = TD_SPLAT(0.0);
    P[15] = m; P[16] = TD_SPLAT(0.0); P[17] = TD_SPLAT(0.0); P[18] = m;
    P[19] = TD_SPLAT(0.0); P[20] = m;
}

/* In-place lower Cholesky factor of the k × k SPD D; the mask of a pivot ≤ 1e-13 ·
   scale (singular articulated inertia; the factor is then not used) */
static inline TD_MASK TD_FN(small_cholesky)(int k, T_* D, T_ scale)
{
    TD_MASK bad = {0};
    for (int a = 0; a < k; a++)
        for (int b = 0; b <= a; b++) {
            T_ s = D[k * a + b];
            for (int c = 0; c < b; c++)
                s -= D[k * a + c] * D[k * b + c];
            if (a == b) {
                bad |= TD_LE(s, 1e-13 * scale);
                D[k * a + a] = TD_SQRT(s);
            } else {
                D[k * a + b] = s / D[k * b + b];
            }
        }
    return bad;
}

/* Di = (L Lᵀ)⁻¹ (k × k, both triangles): W = L⁻¹ by forward substitution, Di = Wᵀ W */
static inline void TD_FN(spd_inverse)(int k, const T_* L, T_* Di)
{
    T_ W[36], t;
    for (int a = 0; a < k; a++) {
        W[k * a + a] = 1.0 / L[k * a + a];
        for (int b = 0; b < a; b++) {
            t = TD_SPLAT(0.0);
            for (int c = b; c < a; c++)
                t += L[k * a + c] * W[k * c + b];
            W[k * a + b] = -t * W[k * a + a];
        }
    }
    for (int a = 0; a < k; a++)
        for (int b = 0; b <= a; b++) {
            t = TD_SPLAT(0.0);
            for (int c = a; c < k; c++)
                t += W[k * c + a] * W[k * c + b];
            Di[k * a + b] = t;
            Di[k * b + a] = t;
        }
}

/* XD (6 × k) = X D⁻¹ for X given as k columns of 6 */
static inline void TD_FN(times_dinv)(int k, const T_* X, const T_* Di, T_* XD)
{
    for (int r = 0; r < 6; r++)
        for (int a = 0; a < k; a++) {
            T_ t = TD_SPLAT(0.0);
            for (int b = 0; b < k; b++)
                t += X[6 * b + r] * Di[k * b + a];
            XD[k * r + a] = t;
        }
}

/* The columns j0 ≤ j < j1 of the k rows of a joint with k ≠ 1 freedoms (o its first):
   M⁻¹[o + a, j] = (M⁻¹[o + a, j] if j < keep else 0) − Σ_r XD[r, a] F[r, j], then
   F[:, j] += Σ_a Y_a M⁻¹[o + a, j] (XD 6 × k; Y: k columns of 6) */
static inline void TD_FN(minv_cols_multi)(long nv, int o, int k, long j0, long j1, long keep,
                                          const T_* XD, const T_* Y, T_* F, T_* Mi)
{
    T_ x[6], t;
    for (long j = j0; j < j1; j++) {
        for (int a = 0; a < k; a++) {
            t = j < keep ? Mi[(o + a) * nv + j] : TD_SPLAT(0.0);
            for (int r = 0; r < 6; r++)
                t -= XD[k * r + a] * F[r * nv + j];
            x[a] = t;
            Mi[(o + a) * nv + j] = t;
        }
        for (int r = 0; r < 6; r++) {
            t = TD_SPLAT(0.0);
            for (int a = 0; a < k; a++)
                t += Y[6 * a + r] * x[a];
            F[r * nv + j] += t;
        }
    }
}

/* Pass 2 for a joint with one freedom (IA: its articulated inertia, IAp: the
   parent's, U, Dinv at the freedom's slots); the mask of a singular D */
static TD_MASK TD_FN(minv_backward_1dof)(long nv, int o, int e, int par, double arm,
                                         T_ scale, const T_* s6, T_* Ui, T_* Dinv,
                                         const T_* Ia, T_* Ip, T_* F, T_* Mi)
{
    T_ sd[6], D, Dv;
    TD_MASK bad;
    int n;
    TD_FN(sym6_apply)(Ia, s6, Ui);
    D = TD_FN(dot6)(s6, Ui) + arm;
    bad = TD_LE(D, 1e-13 * TD_POS_OR(scale, 1e-300));
#if TD_LANES == 1
    if (bad)
        return bad;
#endif
    Dv = 1.0 / D;
    Dinv[0] = Dv;
    Mi[o * nv + o] = Dv;
    for (n = 0; n < 6; n++)
        sd[n] = s6[n] * Dv;
    if (par < 0) {              /* a root's forces are not needed further */
        TD_FN(minv_dot)(o + 1, e, &Mi[o * nv], F, nv, sd);
        return bad;
    }
    for (n = 0; n < 6; n++)
        F[n * nv + o] = Ui[n] * Dv;
    TD_FN(minv_row)(o + 1, e, 0, &Mi[o * nv], F, nv, sd, Ui);
    /* Iᴬ_p += Iᴬ − U D⁻¹ Uᵀ (packed) */
    for (n = 0; n < 6; n++)
        sd[n] = Ui[n] * Dv;
    n = 0;
    for (int a = 0; a < 3; a++)
        for (int b = a; b < 3; b++) {
            Ip[n] += Ia[n] - sd[a] * Ui[b];
            n++;
        }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            Ip[6 + 3 * a + b] += Ia[6 + 3 * a + b] - sd[a] * Ui[3 + b];
    n = 15;
    for (int a = 0; a < 3; a++)
        for (int b = a; b < 3; b++) {
            Ip[n] += Ia[n] - sd[3 + a] * Ui[3 + b];
            n++;
        }
    return bad;
}

/* Pass 2 for a joint with k ≠ 1 freedoms (Dinv keeps D⁻¹, k × k) */
static TD_MASK TD_FN(minv_backward_multi)(long nv, int o, int k, int e, int par,
                                          const double* arm, T_ scale, const T_* S, T_* U,
                                          T_* L, const T_* IA, T_* IAp, T_* F, T_* Mi)
{
    T_ Ifull[36], Ip[21], UD[36], SD[36], Di[36], x[6];
    TD_MASK bad = {0};
    if (k == 0) {
        if (par >= 0)
            for (int n = 0; n < 21; n++)
                IAp[n] += IA[n];
        return bad;
    }
    TD_FN(sym6_unpack)(IA, Ifull);
    for (int a = 0; a < k; a++)
        for (int n = 0; n < 6; n++)
            U[6 * a + n] = (Ifull[6 * n] * S[6 * a] + Ifull[6 * n + 1] * S[6 * a + 1]
                            + Ifull[6 * n + 2] * S[6 * a + 2] + Ifull[6 * n + 3] * S[6 * a + 3]
                            + Ifull[6 * n + 4] * S[6 * a + 4] + Ifull[6 * n + 5] * S[6 * a + 5]);
    for (int a = 0; a < k; a++) {
        for (int b = 0; b < k; b++)
            L[k * a + b] = TD_FN(dot6)(&S[6 * a], &U[6 * b]);
        L[k * a + a] += arm[a];
    }
    bad = TD_FN(small_cholesky)(k, L, TD_POS_OR(scale, 1e-300));
#if TD_LANES == 1
    if (bad)
        return bad;
#endif
    TD_FN(spd_inverse)(k, L, Di);
    for (int n = 0; n < k * k; n++)
        L[n] = Di[n];           /* Dinv keeps D⁻¹ */
    TD_FN(times_dinv)(k, S, Di, SD);
    for (int a = 0; a < k; a++)  /* M⁻¹[i, i] = D⁻¹ */
        for (int b = 0; b < k; b++)
            Mi[(o + a) * nv + o + b] = Di[k * a + b];
    if (par < 0) {              /* a root: M⁻¹[i, j] = −(J D⁻¹)ᵀ F[:, j], no forces further */
        for (int a = 0; a < k; a++) {
            for (int r = 0; r < 6; r++)
                x[r] = SD[k * r + a];
            TD_FN(minv_dot)(o + k, e, &Mi[(o + a) * nv], F, nv, x);
        }
        return bad;
    }
    TD_FN(times_dinv)(k, U, Di, UD);
    for (int b = 0; b < k; b++)
        for (int r = 0; r < 6; r++)
            F[r * nv + o + b] = UD[k * r + b];
    /* the descendants' columns: M⁻¹[i, j] = −(J D⁻¹)ᵀ F[:, j], F[:, j] += U M⁻¹[i, j] */
    TD_FN(minv_cols_multi)(nv, o, k, o + k, e, 0, SD, U, F, Mi);
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            for (int l = 0; l < k; l++)
                Ifull[6 * a + b] -= UD[k * a + l] * U[6 * l + b];
    TD_FN(sym6_pack)(Ifull, Ip);
    for (int n = 0; n < 21; n++)
        IAp[n] += Ip[n];
    return bad;
}

/* Pass 3 for a joint with k ≠ 1 freedoms and a parent */
static inline void TD_FN(minv_forward_multi)(long nv, int o, int k, int e, int te,
                                             const T_* S, const T_* U, const T_* Dinv,
                                             T_* F, T_* Mi)
{
    T_ UD[36];
    if (k == 0)
        return;
    TD_FN(times_dinv)(k, U, Dinv, UD);
    TD_FN(minv_cols_multi)(nv, o, k, o, te, e, UD, S, F, Mi);
}

/* Copy the upper triangle of Mi (nv × nv) to the lower, four rows at a time */
static inline void TD_FN(minv_lower_from_upper)(long nv, T_* Mi)
{
    long i;
    for (i = 0; i + 3 < nv; i += 4) {
        for (long k = 0; k < i; k++) {
            const T_* p = &Mi[k * nv + i];
            Mi[i * nv + k] = p[0];
            Mi[(i + 1) * nv + k] = p[1];
            Mi[(i + 2) * nv + k] = p[2];
            Mi[(i + 3) * nv + k] = p[3];
        }
        for (int r = 1; r < 4; r++)
            for (int c = 0; c < r; c++)
                Mi[(i + r) * nv + i + c] = Mi[(i + c) * nv + i + r];
    }
    for (i = nv - nv % 4; i < nv; i++)
        for (long k = 0; k < i; k++)
            Mi[i * nv + k] = Mi[k * nv + i];
}

/* Passes 1 (the inertias; the poses C and screws J are given) to 3 of M⁻¹ into Mi
   (nv × nv), with scratch IA (nb × 21), F (6 × nv), U (nv × 6), Dinv (nv × 6) and the
   subtree ends se (nb, state-independent: set here).  codes[l]: 0 or −(i + 1) for the
   first joint i (leaves to roots) whose articulated inertia is singular in lane l;
   one state stops there. */
static void TD_FN(minverse)(int nb, long nv, const int* parent, const int* voff,
                            const int* nvj, const int* root, const double* inert,
                            const double* armature, const T_* C, const T_* J, T_* IA, T_* F,
                            T_* U, T_* Dinv, int* se, T_* Mi, int* codes)
{
    T_ Ic[10], ud[6], scale;
    TD_MASK bad;
    for (int i = 0; i < nb; i++) {
        const T_* Ci = &C[12 * i];
        TD_FN(rigid_world_inertia)(Ci, &Ci[9], &inert[22 * i], Ic);
        TD_FN(sym6_from_rigid)(Ic, &IA[21 * i]);
        se[i] = voff[i] + nvj[i];
    }
    for (int l = 0; l < TD_LANES; l++)
        codes[l] = 0;
    /* pass 2 (depth-first order: the subtree of i holds the freedoms [voff i, se i)) */
    for (int i = nb - 1; i >= 0; i--) {
        const int o = voff[i], nvi = nvj[i], par = parent[i];
        const T_* Ia = &IA[21 * i];
        scale = (Ia[0] + Ia[3] + Ia[5] + Ia[15] + Ia[18] + Ia[20]);
        for (int k = 0; k < nvi; k++)
            scale += armature[o + k];
        if (nvi == 1)
            bad = TD_FN(minv_backward_1dof)(nv, o, se[i], par, armature[o], scale, &J[6 * o],
                                            &U[6 * o], &Dinv[6 * o], Ia,
                                            par >= 0 ? &IA[21 * par] : NULL, F, Mi);
        else
            bad = TD_FN(minv_backward_multi)(nv, o, nvi, se[i], par, &armature[o], scale,
                                             &J[6 * o], &U[6 * o], &Dinv[6 * o], Ia,
                                             par >= 0 ? &IA[21 * par] : NULL, F, Mi);
#if TD_LANES == 1
        if (bad) {
            codes[0] = -(i + 1);
            return;
        }
#else
        for (int l = 0; l < TD_LANES; l++)
            if (bad[l] && codes[l] == 0)
                codes[l] = -(i + 1);
#endif
        if (par >= 0 && se[par] < se[i])
            se[par] = se[i];
    }
    /* pass 3: F holds the accelerations A of the current path */
    for (int i = 0; i < nb; i++) {
        const int o = voff[i], nvi = nvj[i], par = parent[i], e = se[i], te = se[root[i]];
        for (int k = 0; k < nvi; k++)       /* other subtrees hanging from the world: 0 */
            for (long n = te; n < nv; n++)
                Mi[(o + k) * nv + n] = TD_SPLAT(0.0);
        if (par < 0) {
            /* A_i = J M⁻¹[i, :] (pass 2 gave the final rows of a root) */
            for (int n = 0; n < 6; n++)
                for (long j = o; j < te; j++)
                    F[n * nv + j] = TD_SPLAT(0.0);
            for (int k = 0; k < nvi; k++)
                TD_FN(minv_axpy)(o, te, 1.0, &Mi[(o + k) * nv], F, nv, &J[6 * (o + k)]);
            continue;
        }
        /* take the bodies after par on the previous body's path off A */
        for (int b = i - 1; b != par && b >= 0; b = parent[b])
            for (int k = 0; k < nvj[b]; k++)
                TD_FN(minv_axpy)(o, te, -1.0, &Mi[(voff[b] + k) * nv], F, nv,
                                 &J[6 * (voff[b] + k)]);
        if (nvi == 1) {
            for (int n = 0; n < 6; n++)
                ud[n] = U[6 * o + n] * Dinv[6 * o];
            TD_FN(minv_row)(o, e, 1, &Mi[o * nv], F, nv, ud, &J[6 * o]);
            TD_FN(minv_row)(e, te, 0, &Mi[o * nv], F, nv, ud, &J[6 * o]);
        } else {
            TD_FN(minv_forward_multi)(nv, o, nvi, e, te, &J[6 * o], &U[6 * o], &Dinv[6 * o],
                                      F, Mi);
        }
    }
    TD_FN(minv_lower_from_upper)(nv, Mi);
}
