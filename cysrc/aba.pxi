# Forward dynamics by the O(n) articulated-body algorithm in body-fixed form
# (Featherstone's ABA with the body-fixed twists of Müller 2018, eqs. 66-67):
#   pass 1: V_i, bias acceleration c_i = ad_{V_i} S_i q̇_i + Ṡ_i q̇_i,
#           Iᴬ_i = M_i, pᴬ_i = −ad_{V_i}ᵀ M_i V_i − W_i^ext
#   pass 2: U = Iᴬ S, D = Sᵀ U + armature, u = τ − Sᵀ pᴬ,
#           Iᵃ = Iᴬ − U D⁻¹ Uᵀ, pᵃ = pᴬ + Iᵃ c + U D⁻¹ u, carried to the parent
#           by Ad_{T⁻¹}ᵀ (·) Ad_{T⁻¹}
#   pass 3: a'_i = Ad_{T⁻¹} a_p + c_i, q̈_i = D⁻¹ (u − Uᵀ a'_i), a_i = a'_i + S q̈_i
# Gravity is the base acceleration (0, −g).  The 6×6 congruence is done blockwise
# with rotations and cross products.

cdef inline Py_ssize_t aba_ws_size(int nb, int nv) noexcept nogil:
    return 78 * <Py_ssize_t>nb + 19 * <Py_ssize_t>(nv if nv > 0 else 1) + 36


cdef inline void sym6_congruence_to_parent(const double* R, const double* p,
                                           const double* I, double* out) noexcept nogil:
    """out += Xᵀ I X, X = Ad_{(R,p)⁻¹} = diag(Rᵀ, Rᵀ) [[1, 0], [−p̂, 1]]: a child-frame
    symmetric 6×6 inertia expressed in the parent frame.  Blocks I = [[A, B], [Bᵀ, C]]
    are first rotated (R A Rᵀ, R B Rᵀ, R C Rᵀ), then shifted:
    A' = A + p̂ Bᵀ + (p̂ Bᵀ)ᵀ − p̂ C p̂,  B' = B + p̂ C,  C' = C."""
    cdef double t[9]
    cdef double A[9]
    cdef double Bm[9]
    cdef double C[9]
    cdef double E[9]      # p̂ C
    cdef double G[9]      # p̂ Bᵀ
    cdef double px = p[0], py = p[1], pz = p[2]
    cdef int a, b
    # rotated blocks: t = R X (X read straight from the 6×6), then (t Rᵀ)
    for a in range(3):
        for b in range(3):
            t[3 * a + b] = R[3 * a] * I[b] + R[3 * a + 1] * I[6 + b] + R[3 * a + 2] * I[12 + b]
    for a in range(3):
        for b in range(a, 3):
            A[3 * a + b] = t[3 * a] * R[3 * b] + t[3 * a + 1] * R[3 * b + 1] + t[3 * a + 2] * R[3 * b + 2]
            A[3 * b + a] = A[3 * a + b]
    for a in range(3):
        for b in range(3):
            t[3 * a + b] = R[3 * a] * I[3 + b] + R[3 * a + 1] * I[9 + b] + R[3 * a + 2] * I[15 + b]
    for a in range(3):
        for b in range(3):
            Bm[3 * a + b] = t[3 * a] * R[3 * b] + t[3 * a + 1] * R[3 * b + 1] + t[3 * a + 2] * R[3 * b + 2]
    for a in range(3):
        for b in range(3):
            t[3 * a + b] = R[3 * a] * I[21 + b] + R[3 * a + 1] * I[27 + b] + R[3 * a + 2] * I[33 + b]
    for a in range(3):
        for b in range(a, 3):
            C[3 * a + b] = t[3 * a] * R[3 * b] + t[3 * a + 1] * R[3 * b + 1] + t[3 * a + 2] * R[3 * b + 2]
            C[3 * b + a] = C[3 * a + b]
    # E = p̂ C and G = p̂ Bᵀ, column by column: (p̂ x) = p × x
    for b in range(3):
        E[b] = py * C[6 + b] - pz * C[3 + b]
        E[3 + b] = pz * C[b] - px * C[6 + b]
        E[6 + b] = px * C[3 + b] - py * C[b]
        G[b] = py * Bm[3 * b + 2] - pz * Bm[3 * b + 1]
        G[3 + b] = pz * Bm[3 * b] - px * Bm[3 * b + 2]
        G[6 + b] = px * Bm[3 * b + 1] - py * Bm[3 * b]
    # p̂ C p̂ = E p̂: row a of E p̂ is −(p × row a of E) = row_a × p
    for a in range(3):
        t[3 * a] = E[3 * a + 1] * pz - E[3 * a + 2] * py
        t[3 * a + 1] = E[3 * a + 2] * px - E[3 * a] * pz
        t[3 * a + 2] = E[3 * a] * py - E[3 * a + 1] * px
    for a in range(3):
        for b in range(3):
            out[6 * a + b] += A[3 * a + b] + G[3 * a + b] + G[3 * b + a] - t[3 * a + b]
            out[6 * a + 3 + b] += Bm[3 * a + b] + E[3 * a + b]
            out[6 * (3 + b) + a] += Bm[3 * a + b] + E[3 * a + b]
            out[6 * (3 + a) + 3 + b] += C[3 * a + b]


cdef inline void _rot_congruence(const double* R, const double* X, double* out) noexcept nogil:
    """out = R X Rᵀ (3 × 3)."""
    cdef double t[9]
    cdef int a, b
    rot_mul(R, X, t)
    for a in range(3):
        for b in range(3):
            out[3 * a + b] = t[3 * a] * R[3 * b] + t[3 * a + 1] * R[3 * b + 1] + t[3 * a + 2] * R[3 * b + 2]


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


cdef inline void _rot_congruence_sym(const double* R, const double* X,
                                     double* out) noexcept nogil:
    """out = R X Rᵀ for a symmetric X (upper triangle computed, then mirrored)."""
    cdef double t[9]
    cdef int a, b
    rot_mul(R, X, t)
    for a in range(3):
        for b in range(a, 3):
            out[3 * a + b] = t[3 * a] * R[3 * b] + t[3 * a + 1] * R[3 * b + 1] + t[3 * a + 2] * R[3 * b + 2]
            out[3 * b + a] = out[3 * a + b]


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
                                   const double* T, const double* S, double* U, double* Dl,
                                   double* u, double* IA, double* pA, const double* cb,
                                   double scale) noexcept nogil:
    """Pass 2 of the ABA for a joint with one freedom (D scalar; Dl[6 o] = 1/D)."""
    cdef const double* s6 = &S[6 * o]
    cdef double* Ui = &U[6 * o]
    cdef double* I = &IA[36 * i]
    cdef double Ia[36]
    cdef double h[6]
    cdef double D, Dinv, ud
    cdef int a, b, par
    cdef int fast = m.fast[i], k
    cdef double sg
    if fast != FAST_NONE and fast != FAST_SCREW:
        # S = ±e_k: U is a column of Iᴬ, D a diagonal entry
        k = fast - FAST_REV_X
        sg = s6[k]
        for a in range(6):
            Ui[a] = sg * I[6 * a + k]
        D = I[7 * k] + m.armature[o]
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
    sym6_congruence_to_parent(&T[12 * i], &T[12 * i + 9], Ia, &IA[36 * par])
    wrench_to_parent(&T[12 * i], &T[12 * i + 9], h, &pA[6 * par])
    return 0


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
    cdef double* S = &ws[78 * nb]         # 6 per freedom
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
    cdef double scale
    cdef const double* B
    cdef const double* inr
    cdef double* Ti
    # ---- pass 1
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        B = &m.Bref[i, 0]
        if m.fast[i] != FAST_NONE:
            joint_pose_1dof(m.fast[i], &m.X[o, 0], B, q[m.qoff[i]], Ti)
            for n in range(6):
                S[6 * o + n] = m.X[o, n]
                cJ[n] = 0.0
        if m.fast[i] != FAST_NONE and m.fast[i] != FAST_SCREW:
            k = m.fast[i] - FAST_REV_X
            par = m.parent[i]
            if par < 0:
                for n in range(6):
                    V[6 * i + n] = 0.0
            else:
                twist_Ad_inv(Ti, &Ti[9], &V[6 * par], &V[6 * i])
            for n in range(6):
                cb[6 * i + n] = 0.0
            cross_add_axis(k, S[6 * o + k] * qd[o], &V[6 * i], &cb[6 * i])
            cross_add_axis(k, S[6 * o + k] * qd[o], &V[6 * i + 3], &cb[6 * i + 3])
            V[6 * i + k] += S[6 * o + k] * qd[o]
        elif m.fast[i] != FAST_NONE:
            pass
        else:
            if joint_calc(m.kind[i], nvi, &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]], &qd[o],
                          RJ, pJ, &S[6 * o], cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
        par = m.parent[i]
        if m.fast[i] == FAST_NONE or m.fast[i] == FAST_SCREW:
            subspace_times(nvi, &S[6 * o], &qd[o], vr)
            if par < 0:
                for n in range(6):
                    V[6 * i + n] = vr[n]
            else:
                twist_Ad_inv(Ti, &Ti[9], &V[6 * par], &V[6 * i])
                twist_add(&V[6 * i], vr)
            twist_bracket(&V[6 * i], vr, &cb[6 * i])
            twist_add(&cb[6 * i], cJ)
        # Iᴬ = Mᵇ = [[Io, m ĉ], [m ĉᵀ, m 1]] as a full 6×6
        inr = &m.inert[i, 0]
        _spatial_inertia_matrix(inr[0], &inr[1], &inr[13], &IA[36 * i])
        inertia_apply(inr[0], &inr[1], &inr[13], &V[6 * i], h)
        for n in range(6):
            pA[6 * i + n] = 0.0
        add_gyroscopic(&V[6 * i], h, &pA[6 * i])
        if fext != NULL:
            if fext_frame == 1:
                for n in range(6):
                    pA[6 * i + n] -= fext[6 * i + n]
            else:
                world_pose(NULL if par < 0 else &Cw[12 * par], Ti, &Cw[12 * i])
                wrench_to_world(fext_frame, &Cw[12 * i], &Cw[12 * i + 9], &fext[6 * i], t6)
                wrench_from_world(1, &Cw[12 * i], &Cw[12 * i + 9], t6, h)
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
            if _aba_backward_1dof(m, i, o, tau, T, S, U, Dl, u, IA, pA, cb, scale):
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
        # Iᵃ = Iᴬ − U D⁻¹ Uᵀ ; pᵃ = pᴬ + Iᵃ c + U D⁻¹ u
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
        sym6_congruence_to_parent(&T[12 * i], &T[12 * i + 9], Ia, &IA[36 * par])
        wrench_to_parent(&T[12 * i], &T[12 * i + 9], h, &pA[6 * par])
    # ---- pass 3 (accelerations stored in cb)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if par < 0:
            t6[0] = 0.0; t6[1] = 0.0; t6[2] = 0.0
            t6[3] = -g[0]; t6[4] = -g[1]; t6[5] = -g[2]
            twist_Ad_inv(&T[12 * i], &T[12 * i + 9], t6, ap)
        else:
            twist_Ad_inv(&T[12 * i], &T[12 * i + 9], &cb[6 * par], ap)
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
