# Forward dynamics by the O(n) articulated-body algorithm in hybrid form
# (Featherstone's ABA written with the hybrid twists of Müller 2018, eqs. 75-76:
# twists (ω, ṙ) and wrenches at each body origin, in world axes).  All
# quantities share the world axes, so carrying an articulated inertia to the
# parent is a shift of reference point only, never a rotation:
#   pass 1: V_i = Ad_{r_{i,p}} V_p + ⁰X_i q̇_i,
#           c_i = ad_{(0, ṙ_p − ṙ_i)} V_p + ad_{Vʷ_i} ⁰X_i q̇_i + Ad_{R_i} Ṡ_i q̇_i,
#           Iᴬ_i = Mʰ_i,  pᴬ_i = ad_{Vʷ_i} Mʰ_i Vʷ_i − W_i^ext
#   pass 2: U = Iᴬ ⁰X, D = ⁰Xᵀ U + armature, u = τ − ⁰Xᵀ pᴬ,
#           Iᵃ = Iᴬ − U D⁻¹ Uᵀ,  pᵃ = pᴬ + Iᵃ c + U D⁻¹ u,
#           Iᴬ_p += Ad_{r_{i,p}}ᵀ Iᵃ Ad_{r_{i,p}},  pᴬ_p += Ad_{r_{i,p}}ᵀ pᵃ
#   pass 3: a'_i = Ad_{r_{i,p}} a_p + c_i,  q̈_i = D⁻¹ (u − Uᵀ a'_i),  a_i = a'_i + ⁰X q̈_i
# with r_{i,p} = r_p − r_i and gravity as the base acceleration (0, −g).

cdef inline Py_ssize_t aba_ws_size(int nb, int nv) noexcept nogil:
    return 78 * <Py_ssize_t>nb + 19 * <Py_ssize_t>(nv if nv > 0 else 1) + 36


cdef inline void sym6_shift_to_parent(const double* d, const double* I,
                                      double* out) noexcept nogil:
    """out += Ad_dᵀ I Ad_d with Ad_d = [[1, 0], [d̂, 1]], d = r_p − r_i: a symmetric
    6×6 inertia about the child origin moved to the parent origin (same axes).
    Blocks I = [[A, B], [Bᵀ, C]]:  A' = A + B d̂ − d̂ Bᵀ − d̂ C d̂,  B' = B − d̂ C."""
    cdef double E[9]      # d̂ C
    cdef double G[9]      # B d̂
    cdef double F[9]      # d̂ C d̂ = E d̂
    cdef double dx = d[0], dy = d[1], dz = d[2]
    cdef int a, b
    for b in range(3):    # column b of d̂ C is d × C[:, b]
        E[b] = dy * I[6 * 5 + 3 + b] - dz * I[6 * 4 + 3 + b]
        E[3 + b] = dz * I[6 * 3 + 3 + b] - dx * I[6 * 5 + 3 + b]
        E[6 + b] = dx * I[6 * 4 + 3 + b] - dy * I[6 * 3 + 3 + b]
    for a in range(3):    # row a of X d̂ is X[a, :] × d
        G[3 * a] = I[6 * a + 4] * dz - I[6 * a + 5] * dy
        G[3 * a + 1] = I[6 * a + 5] * dx - I[6 * a + 3] * dz
        G[3 * a + 2] = I[6 * a + 3] * dy - I[6 * a + 4] * dx
        F[3 * a] = E[3 * a + 1] * dz - E[3 * a + 2] * dy
        F[3 * a + 1] = E[3 * a + 2] * dx - E[3 * a] * dz
        F[3 * a + 2] = E[3 * a] * dy - E[3 * a + 1] * dx
    for a in range(3):
        for b in range(3):
            # −d̂ Bᵀ = (B d̂)ᵀ since d̂ᵀ = −d̂
            out[6 * a + b] += I[6 * a + b] + G[3 * a + b] + G[3 * b + a] - F[3 * a + b]
            out[6 * a + 3 + b] += I[6 * a + 3 + b] - E[3 * a + b]
            out[6 * (3 + b) + a] += I[6 * a + 3 + b] - E[3 * a + b]
            out[6 * (3 + a) + 3 + b] += I[6 * (3 + a) + 3 + b]


cdef inline void _spatial_inertia_matrix(double mass, const double* c, const double* Io,
                                         double* I) noexcept nogil:
    """The 6×6 body inertia [[Io, m ĉ], [m ĉᵀ, m 1]] (row-major)."""
    cdef int a, b
    for a in range(3):
        for b in range(3):
            I[6 * a + b] = Io[3 * a + b]
            I[6 * (3 + a) + 3 + b] = mass if a == b else 0.0
    I[6 * 0 + 3] = 0.0;             I[6 * 0 + 4] = -mass * c[2];   I[6 * 0 + 5] = mass * c[1]
    I[6 * 1 + 3] = mass * c[2];     I[6 * 1 + 4] = 0.0;            I[6 * 1 + 5] = -mass * c[0]
    I[6 * 2 + 3] = -mass * c[1];    I[6 * 2 + 4] = mass * c[0];    I[6 * 2 + 5] = 0.0
    for a in range(3):
        for b in range(3):
            I[6 * (3 + b) + a] = I[6 * a + 3 + b]


cdef inline int small_cholesky(int k, double* D, double scale) noexcept nogil:
    """In-place lower Cholesky factor of the k × k SPD matrix D (row-major).
    Returns 1 if a pivot is ≤ 1e-13 · scale (singular articulated inertia)."""
    cdef int a, b, c
    cdef double s
    for a in range(k):
        for b in range(a + 1):
            s = D[k * a + b]
            for c in range(b):
                s -= D[k * a + c] * D[k * b + c]
            if a == b:
                if s <= 1e-13 * scale:
                    return 1
                D[k * a + a] = sqrt(s)
            else:
                D[k * a + b] = s / D[k * b + b]
    return 0


cdef inline void small_cho_solve(int k, const double* L, double* x) noexcept nogil:
    """x <- (L Lᵀ)⁻¹ x."""
    cdef int a, c
    for a in range(k):
        for c in range(a):
            x[a] -= L[k * a + c] * x[c]
        x[a] /= L[k * a + a]
    for a in range(k - 1, -1, -1):
        for c in range(a + 1, k):
            x[a] -= L[k * c + a] * x[c]
        x[a] /= L[k * a + a]


cdef inline int _aba_backward_1dof(ModelCore m, int i, int o, const double* tau,
                                   const double* Cw, const double* S, double* U,
                                   double* Dl, double* u, double* IA, double* pA,
                                   const double* cb, double scale) noexcept nogil:
    """Pass 2 for a joint with one freedom (D scalar; Dl[6 o] = 1/D)."""
    cdef const double* s6 = &S[6 * o]
    cdef double* Ui = &U[6 * o]
    cdef double* I = &IA[36 * i]
    cdef double Ia[36]
    cdef double h[6]
    cdef double D, Dinv, ud
    cdef int a, b, par
    if s6[3] == 0.0 and s6[4] == 0.0 and s6[5] == 0.0:
        # a rotation about an axis through the body origin (most robot joints):
        # ⁰X = (s, 0) touches only the first three columns of Iᴬ
        for a in range(6):
            Ui[a] = I[6 * a] * s6[0] + I[6 * a + 1] * s6[1] + I[6 * a + 2] * s6[2]
        D = s6[0] * Ui[0] + s6[1] * Ui[1] + s6[2] * Ui[2] + m.armature[o]
    else:
        for a in range(6):
            Ui[a] = (I[6 * a] * s6[0] + I[6 * a + 1] * s6[1] + I[6 * a + 2] * s6[2]
                     + I[6 * a + 3] * s6[3] + I[6 * a + 4] * s6[4] + I[6 * a + 5] * s6[5])
        D = (s6[0] * Ui[0] + s6[1] * Ui[1] + s6[2] * Ui[2] + s6[3] * Ui[3] + s6[4] * Ui[4]
             + s6[5] * Ui[5]) + m.armature[o]
    if D <= 1e-13 * (scale if scale > 0.0 else 1e-300):
        return 1
    Dinv = 1.0 / D
    Dl[6 * o] = Dinv
    u[o] = tau[o] - (s6[0] * pA[6 * i] + s6[1] * pA[6 * i + 1] + s6[2] * pA[6 * i + 2]
                     + s6[3] * pA[6 * i + 3] + s6[4] * pA[6 * i + 4] + s6[5] * pA[6 * i + 5])
    par = m.parent[i]
    if par < 0:
        return 0
    for a in range(6):
        for b in range(a, 6):
            Ia[6 * a + b] = I[6 * a + b] - Ui[a] * Ui[b] * Dinv
            Ia[6 * b + a] = Ia[6 * a + b]
    ud = u[o] * Dinv
    for a in range(6):
        h[a] = (pA[6 * i + a] + Ui[a] * ud + Ia[6 * a] * cb[6 * i] + Ia[6 * a + 1] * cb[6 * i + 1]
                + Ia[6 * a + 2] * cb[6 * i + 2] + Ia[6 * a + 3] * cb[6 * i + 3]
                + Ia[6 * a + 4] * cb[6 * i + 4] + Ia[6 * a + 5] * cb[6 * i + 5])
    _carry_to_parent(&Cw[12 * i + 9], &Cw[12 * par + 9], Ia, h, &IA[36 * par], &pA[6 * par])
    return 0


cdef inline void _carry_to_parent(const double* ri, const double* rp, const double* Ia,
                                  const double* h, double* IAp, double* pAp) noexcept nogil:
    """Iᴬ_p += Ad_dᵀ Iᵃ Ad_d and pᴬ_p += Ad_dᵀ pᵃ with d = r_p − r_i."""
    cdef double d[3]
    cdef double t[3]
    d[0] = rp[0] - ri[0]; d[1] = rp[1] - ri[1]; d[2] = rp[2] - ri[2]
    sym6_shift_to_parent(d, Ia, IAp)
    cross(d, &h[3], t)               # moment about r_p: t − d × f
    pAp[0] += h[0] - t[0]; pAp[1] += h[1] - t[1]; pAp[2] += h[2] - t[2]
    pAp[3] += h[3]; pAp[4] += h[4]; pAp[5] += h[5]


cdef int aba_kernel(ModelCore m, const double* q, const double* qd, const double* tau,
                    const double* g, const double* fext, int fext_frame, double* ws,
                    double* qdd) noexcept nogil:
    """Joint accelerations q̈ (nv).  Returns 0, i + 1 for a non-unit quaternion of
    joint i, or −(i + 1) if the articulated inertia of joint i is singular."""
    cdef int nb = m.nb, nv = m.nv, i, k, l, n, par, o, nvi, a, b
    cdef int bad = 0
    cdef double* T = ws
    cdef double* Cw = &ws[12 * nb]
    cdef double* V = &ws[24 * nb]
    cdef double* cb = &ws[30 * nb]
    cdef double* IA = &ws[36 * nb]        # 36 per body
    cdef double* pA = &ws[72 * nb]        # 6 per body
    cdef double* S = &ws[78 * nb]         # 6 per freedom: hybrid screws ⁰X
    cdef double* U = &ws[78 * nb + 6 * nv]
    cdef double* Dl = &ws[78 * nb + 12 * nv]   # k × k factor per body (≤ 6 per freedom)
    cdef double* u = &ws[78 * nb + 18 * nv]
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double vr[6]
    cdef double t6[6]
    cdef double h[6]
    cdef double Ia[36]
    cdef double x[6]
    cdef double ap[6]
    cdef double d[3]
    cdef double w3[3]
    cdef double ch[3]
    cdef double tmp[9]
    cdef double Io[9]
    cdef double scale
    cdef const double* B
    cdef const double* inr
    cdef double* Ti
    cdef double* Ci
    cdef double* Vi
    cdef double* ci
    # ---- pass 1
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        Ci = &Cw[12 * i]
        Vi = &V[6 * i]
        ci = &cb[6 * i]
        B = &m.Bref[i, 0]
        if m.fast[i] != FAST_NONE:
            joint_pose_1dof(m.fast[i], &m.X[o, 0], B, q[m.qoff[i]], Ti)
            for n in range(6):
                cJ[n] = 0.0
            par = m.parent[i]
            world_pose(NULL if par < 0 else &Cw[12 * par], Ti, Ci)
            if m.fast[i] == FAST_SCREW:
                rotate_twist(Ci, &m.X[o, 0], &S[6 * o])
            else:
                # ±e_k about the body origin: ⁰X = (±R[:, k], 0)
                k = m.fast[i] - FAST_REV_X
                S[6 * o] = m.X[o, k] * Ci[k]
                S[6 * o + 1] = m.X[o, k] * Ci[3 + k]
                S[6 * o + 2] = m.X[o, k] * Ci[6 + k]
                S[6 * o + 3] = 0.0; S[6 * o + 4] = 0.0; S[6 * o + 5] = 0.0
        else:
            if joint_calc(m.kind[i], nvi, &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]], &qd[o],
                          RJ, pJ, &S[6 * o], cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
            par = m.parent[i]
            world_pose(NULL if par < 0 else &Cw[12 * par], Ti, Ci)
            for k in range(nvi):
                for n in range(6):
                    t6[n] = S[6 * (o + k) + n]
                rotate_twist(Ci, t6, &S[6 * (o + k)])
        subspace_times(nvi, &S[6 * o], &qd[o], vr)
        rotate_twist(Ci, cJ, ci)                        # Ad_R Ṡ q̇
        if par < 0:
            for n in range(6):
                Vi[n] = vr[n]
        else:
            for n in range(3):
                d[n] = Cw[12 * par + 9 + n] - Ci[9 + n]
            cross(d, &V[6 * par], w3)
            for n in range(3):
                Vi[n] = V[6 * par + n] + vr[n]
                Vi[3 + n] = V[6 * par + 3 + n] + w3[n] + vr[3 + n]
            # ad_{(0, ṙ_p − ṙ_i)} V_p = (0, (ṙ_p − ṙ_i) × ω_p)
            for n in range(3):
                d[n] = V[6 * par + 3 + n] - Vi[3 + n]
            cross(d, &V[6 * par], w3)
            ci[3] += w3[0]; ci[4] += w3[1]; ci[5] += w3[2]
        # ad_{Vʷ_i} ⁰X q̇ = (ω × vr_ω, ω × vr_v)
        cross(Vi, vr, w3)
        ci[0] += w3[0]; ci[1] += w3[1]; ci[2] += w3[2]
        cross(Vi, &vr[3], w3)
        ci[3] += w3[0]; ci[4] += w3[1]; ci[5] += w3[2]
        # Iᴬ = Mʰ: COM offset R c and inertia R Θ_o Rᵀ about the body origin (world axes)
        inr = &m.inert[i, 0]
        rot_vec(Ci, &inr[1], ch)
        rot_mul(Ci, &inr[13], tmp)
        for a in range(3):
            for b in range(a, 3):
                Io[3 * a + b] = tmp[3 * a] * Ci[3 * b] + tmp[3 * a + 1] * Ci[3 * b + 1] \
                    + tmp[3 * a + 2] * Ci[3 * b + 2]
                Io[3 * b + a] = Io[3 * a + b]
        _spatial_inertia_matrix(inr[0], ch, Io, &IA[36 * i])
        # pᴬ = ad_{Vʷ} Mʰ Vʷ − W^ext, Vʷ = (ω, 0)
        x[0] = Vi[0]; x[1] = Vi[1]; x[2] = Vi[2]
        x[3] = 0.0; x[4] = 0.0; x[5] = 0.0
        inertia_apply(inr[0], ch, Io, x, h)
        for n in range(6):
            pA[6 * i + n] = 0.0
        add_gyroscopic(x, h, &pA[6 * i])
        if fext != NULL:
            if fext_frame == 2:
                for n in range(6):
                    pA[6 * i + n] -= fext[6 * i + n]
            else:
                wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
                wrench_from_world(2, Ci, &Ci[9], t6, h)
                for n in range(6):
                    pA[6 * i + n] -= h[n]
    if bad:
        return bad
    # ---- pass 2
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        # scale for the singularity test: the trace of the (PSD) articulated inertia
        scale = (IA[36 * i] + IA[36 * i + 7] + IA[36 * i + 14] + IA[36 * i + 21]
                 + IA[36 * i + 28] + IA[36 * i + 35])
        for k in range(nvi):
            scale += m.armature[o + k]
        if nvi == 1:
            if _aba_backward_1dof(m, i, o, tau, Cw, S, U, Dl, u, IA, pA, cb, scale):
                return -(i + 1)
            continue
        for k in range(nvi):
            for n in range(6):
                U[6 * (o + k) + n] = (IA[36 * i + 6 * n] * S[6 * (o + k)]
                    + IA[36 * i + 6 * n + 1] * S[6 * (o + k) + 1]
                    + IA[36 * i + 6 * n + 2] * S[6 * (o + k) + 2]
                    + IA[36 * i + 6 * n + 3] * S[6 * (o + k) + 3]
                    + IA[36 * i + 6 * n + 4] * S[6 * (o + k) + 4]
                    + IA[36 * i + 6 * n + 5] * S[6 * (o + k) + 5])
            u[o + k] = tau[o + k]
            for n in range(6):
                u[o + k] -= S[6 * (o + k) + n] * pA[6 * i + n]
        for k in range(nvi):
            for l in range(nvi):
                Dl[6 * o + nvi * k + l] = (S[6 * (o + k)] * U[6 * (o + l)]
                    + S[6 * (o + k) + 1] * U[6 * (o + l) + 1] + S[6 * (o + k) + 2] * U[6 * (o + l) + 2]
                    + S[6 * (o + k) + 3] * U[6 * (o + l) + 3] + S[6 * (o + k) + 4] * U[6 * (o + l) + 4]
                    + S[6 * (o + k) + 5] * U[6 * (o + l) + 5])
            Dl[6 * o + nvi * k + k] += m.armature[o + k]
        if small_cholesky(nvi, &Dl[6 * o], scale if scale > 0.0 else 1e-300):
            return -(i + 1)
        par = m.parent[i]
        if par < 0:
            continue
        for n in range(36):
            Ia[n] = IA[36 * i + n]
        for a in range(6):
            for k in range(nvi):
                x[k] = U[6 * (o + k) + a]
            small_cho_solve(nvi, &Dl[6 * o], x)      # x = D⁻¹ U[a, :]ᵀ
            for b in range(6):
                for k in range(nvi):
                    Ia[6 * a + b] -= U[6 * (o + k) + b] * x[k]
        for k in range(nvi):
            x[k] = u[o + k]
        small_cho_solve(nvi, &Dl[6 * o], x)
        for a in range(6):
            h[a] = pA[6 * i + a]
            for b in range(6):
                h[a] += Ia[6 * a + b] * cb[6 * i + b]
            for k in range(nvi):
                h[a] += U[6 * (o + k) + a] * x[k]
        _carry_to_parent(&Cw[12 * i + 9], &Cw[12 * par + 9], Ia, h, &IA[36 * par], &pA[6 * par])
    # ---- pass 3 (accelerations stored in cb)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if par < 0:
            ap[0] = 0.0; ap[1] = 0.0; ap[2] = 0.0
            ap[3] = -g[0]; ap[4] = -g[1]; ap[5] = -g[2]
        else:
            for n in range(3):
                d[n] = Cw[12 * par + 9 + n] - Cw[12 * i + 9 + n]
            cross(d, &cb[6 * par], w3)
            for n in range(3):
                ap[n] = cb[6 * par + n]
                ap[3 + n] = cb[6 * par + 3 + n] + w3[n]
        twist_add(ap, &cb[6 * i])
        for k in range(nvi):
            x[k] = u[o + k]
            for n in range(6):
                x[k] -= U[6 * (o + k) + n] * ap[n]
        if nvi == 1:
            x[0] *= Dl[6 * o]
        else:
            small_cho_solve(nvi, &Dl[6 * o], x)
        for k in range(nvi):
            qdd[o + k] = x[k]
            for n in range(6):
                ap[n] += S[6 * (o + k) + n] * x[k]
        for n in range(6):
            cb[6 * i + n] = ap[n]
    return 0
