# Forward dynamics by the O(n) articulated-body algorithm in spatial form
# (Featherstone's ABA written with the spatial twists of Müller 2018, eqs. 70-71:
# twists, accelerations and wrenches in world axes about one fixed point, the
# current origin of the subtree's root body; see root_relative_pose).  Every
# articulated inertia is about the same point in the same axes, so it reaches
# the parent by a plain sum, never by a rotation or a shift:
#   pass 1: J_i = Ad_{C_i} S_i,  V_i = V_p + J_i q̇_i,
#           c_i = ad_{V_i} J_i q̇_i + Ad_{C_i} Ṡ_i q̇_i,
#           Iᴬ_i = Mˢ_i,  pᴬ_i = −ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext
#   pass 2: U = Iᴬ J, D = Jᵀ U + armature, u = τ − Jᵀ pᴬ,
#           Iᵃ = Iᴬ − U D⁻¹ Uᵀ,  pᵃ = pᴬ + Iᵃ c + U D⁻¹ u,
#           Iᴬ_p += Iᵃ,  pᴬ_p += pᵃ
#   pass 3: a'_i = a_p + c_i,  q̈_i = D⁻¹ (u − Uᵀ a'_i),  a_i = a'_i + J q̈_i
# with gravity as the base acceleration (0, −g).

# Articulated inertias are symmetric 6×6 matrices I = [[A, B], [Bᵀ, C]] stored
# packed in 21 doubles: A upper triangle (a00 a01 a02 a11 a12 a22), B row-major
# (9), C upper triangle (6).
cdef inline void sym6_apply(const double* P, const double* x, double* y) noexcept nogil:
    """y = I x for a packed symmetric 6×6 I."""
    cdef const double* A = P
    cdef const double* B = &P[6]
    cdef const double* C = &P[15]
    y[0] = (A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
            + B[0] * x[3] + B[1] * x[4] + B[2] * x[5])
    y[1] = (A[1] * x[0] + A[3] * x[1] + A[4] * x[2]
            + B[3] * x[3] + B[4] * x[4] + B[5] * x[5])
    y[2] = (A[2] * x[0] + A[4] * x[1] + A[5] * x[2]
            + B[6] * x[3] + B[7] * x[4] + B[8] * x[5])
    y[3] = (B[0] * x[0] + B[3] * x[1] + B[6] * x[2]
            + C[0] * x[3] + C[1] * x[4] + C[2] * x[5])
    y[4] = (B[1] * x[0] + B[4] * x[1] + B[7] * x[2]
            + C[1] * x[3] + C[3] * x[4] + C[4] * x[5])
    y[5] = (B[2] * x[0] + B[5] * x[1] + B[8] * x[2]
            + C[2] * x[3] + C[4] * x[4] + C[5] * x[5])


cdef inline void sym6_unpack(const double* P, double* I) noexcept nogil:
    """Full row-major 6×6 from packed."""
    cdef int a, b
    I[0] = P[0]; I[1] = P[1]; I[2] = P[2]
    I[6] = P[1]; I[7] = P[3]; I[8] = P[4]
    I[12] = P[2]; I[13] = P[4]; I[14] = P[5]
    I[21] = P[15]; I[22] = P[16]; I[23] = P[17]
    I[27] = P[16]; I[28] = P[18]; I[29] = P[19]
    I[33] = P[17]; I[34] = P[19]; I[35] = P[20]
    for a in range(3):
        for b in range(3):
            I[6 * a + 3 + b] = P[6 + 3 * a + b]
            I[6 * (3 + b) + a] = P[6 + 3 * a + b]


cdef inline void sym6_pack(const double* I, double* P) noexcept nogil:
    """Packed from a full row-major symmetric 6×6 (upper triangle read)."""
    cdef int a, b
    P[0] = I[0]; P[1] = I[1]; P[2] = I[2]; P[3] = I[7]; P[4] = I[8]; P[5] = I[14]
    for a in range(3):
        for b in range(3):
            P[6 + 3 * a + b] = I[6 * a + 3 + b]
    P[15] = I[21]; P[16] = I[22]; P[17] = I[23]; P[18] = I[28]; P[19] = I[29]; P[20] = I[35]


cdef inline void sym6_from_rigid(const double* Ic, double* P) noexcept nogil:
    """Packed 6×6 of a rigid-body inertia Ic = (m, h, Io packed):
    [[Io, ĥ], [ĥᵀ, m 1]]."""
    cdef double m = Ic[0], hx = Ic[1], hy = Ic[2], hz = Ic[3]
    cdef int n
    for n in range(6):
        P[n] = Ic[4 + n]
    P[6] = 0.0; P[7] = -hz;  P[8] = hy
    P[9] = hz;  P[10] = 0.0; P[11] = -hx
    P[12] = -hy; P[13] = hx; P[14] = 0.0
    P[15] = m; P[16] = 0.0; P[17] = 0.0; P[18] = m; P[19] = 0.0; P[20] = m


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
                                          const double* J, double* U, double* Dl, double* u,
                                          double* IA, double* pA, const double* cb,
                                          double scale) noexcept nogil:
    """Pass 2 for a joint with one freedom (D scalar; Dl[6 o] = 1/D)."""
    cdef const double* s6 = &J[6 * o]
    cdef double* Ui = &U[6 * o]
    cdef double* I = &IA[21 * i]
    cdef double* Ip
    cdef double* pAi = &pA[6 * i]
    cdef double* pAp
    cdef double h[6]
    cdef double D, Dinv, ud
    cdef int a, b, n, par
    sym6_apply(I, s6, Ui)
    D = dot6(s6, Ui) + m.armature[o]
    u[o] = tau[o] - dot6(s6, pAi)
    if D <= 1e-13 * (scale if scale > 0.0 else 1e-300):
        return 1
    Dinv = 1.0 / D
    Dl[6 * o] = Dinv
    par = m.parent[i]
    if par < 0:
        return 0
    # Iᴬ_p += Iᵃ = Iᴬ − U D⁻¹ Uᵀ (packed); first Iᵃ in place, then the sum
    n = 0
    for a in range(3):
        for b in range(a, 3):
            I[n] -= Ui[a] * Ui[b] * Dinv
            n += 1
    for a in range(3):
        for b in range(3):
            I[6 + 3 * a + b] -= Ui[a] * Ui[3 + b] * Dinv
    n = 15
    for a in range(3):
        for b in range(a, 3):
            I[n] -= Ui[3 + a] * Ui[3 + b] * Dinv
            n += 1
    # pᴬ_p += pᵃ = pᴬ + Iᵃ c + U D⁻¹ u
    ud = u[o] * Dinv
    sym6_apply(I, &cb[6 * i], h)
    Ip = &IA[21 * par]
    for n in range(21):
        Ip[n] += I[n]
    pAp = &pA[6 * par]
    for a in range(6):
        pAp[a] += h[a] + pAi[a] + Ui[a] * ud
    return 0


cdef inline int _aba_velocities_and_bias(ModelCore m, DataC* d, const double* q, const double* qd,
                                         const double* fext, int fext_frame) noexcept nogil:
    """ABA pass 1, root to leaves: the joint steps (poses C_i in frame s, screws
    J_i = d.sJ), the twists V_i = V_p + J_i q̇_i (d.sv), the bias accelerations
    c_i = ad_{V_i} J_i q̇_i + Ad_{C_i} Ṡ_i q̇_i (d.sc), and each body's rigid inertia
    and bias force as the start of its articulated ones (d.sIA packed, d.spA):
        Iᴬ_i = Mˢ_i,    pᴬ_i = −ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext.  Returns 0 or i + 1 for a non-unit quaternion of joint i."""
    cdef int nb = m.nb, i, n, par, o, nvi, fast
    cdef double qdi
    cdef int bad = 0
    cdef double* T = d.liMi
    cdef double* V = d.sv
    cdef double* cb = d.sc
    cdef double* IA = d.sIA
    cdef double* pA = d.spA
    cdef double* S = d.sJ
    cdef double cJ[6]
    cdef double vr[6]
    cdef double t6[6]
    cdef double h[6]
    cdef double Ic[10]
    cdef double* Ci
    cdef double* Vi
    cdef double* ci
    cdef double* Ji
    angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ci = &d.sMi[12 * i]
        Vi = &V[6 * i]
        ci = &cb[6 * i]
        Ji = &S[6 * o]
        par = m.parent[i]
        fast = m.fast[i]
        if spatial_step(m, d, i, q, qd, cJ) and bad == 0:
            bad = i + 1
        if fast != FAST_NONE:
            qdi = qd[o]
            for n in range(6):
                vr[n] = Ji[n] * qdi
            # one freedom: Ṡq̇ = 0 and ad_{V_i} J q̇ = ad_{V_p} J q̇
            if par < 0:
                for n in range(6):
                    Vi[n] = vr[n]
                    ci[n] = 0.0
            else:
                twist_bracket(&V[6 * par], vr, ci)
                for n in range(6):
                    Vi[n] = V[6 * par + n] + vr[n]
        else:
            subspace_times(nvi, Ji, &qd[o], vr)
            for n in range(6):
                Vi[n] = vr[n] if par < 0 else V[6 * par + n] + vr[n]
            twist_Ad(Ci, &Ci[9], cJ, ci)                # Ad_C Ṡ q̇
            twist_bracket(Vi, vr, t6)
            twist_add(ci, t6)
        # Iᴬ = Mˢ about the reference point;  pᴬ = −ad_Vᵀ Mˢ V − W^ext
        rigid_world_inertia(Ci, &Ci[9], &m.inert[i, 0], Ic)
        sym6_from_rigid(Ic, &IA[21 * i])
        rigid_apply_packed(Ic, Vi, h)
        for n in range(6):
            pA[6 * i + n] = 0.0
        add_gyroscopic(Vi, h, &pA[6 * i])
        if fext != NULL:
            wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
            if fext_frame == 0:
                world_wrench_to_root(&T[12 * m.root[i] + 9], t6)
            for n in range(6):
                pA[6 * i + n] -= t6[n]
    return bad


cdef inline int _aba_articulated_inertias(ModelCore m, DataC* d, const double* tau) noexcept nogil:
    """ABA pass 2, leaves to root: per joint U_i = Iᴬ_i J_i (d.U), D_i = J_iᵀ U_i +
    armature (its inverse or Cholesky factor in d.Dinv), u_i = τ_i − J_iᵀ pᴬ_i (d.u),
    and the parent's articulated inertia and bias force
        Iᴬ_p += Iᵃ_i = Iᴬ_i − U_i D_i⁻¹ U_iᵀ,    pᴬ_p += pᴬ_i + Iᵃ_i c_i + U_i D_i⁻¹ u_i.
    Returns 0, or −(i + 1) if D_i is singular (relative to the trace of Iᴬ_i)."""
    cdef int nb = m.nb, i, k, l, n, par, o, nvi, a, b
    cdef double* cb = d.sc
    cdef double* IA = d.sIA
    cdef double* pA = d.spA
    cdef double* S = d.sJ
    cdef double* U = d.U
    cdef double* Dl = d.Dinv
    cdef double* u = d.u
    cdef double h[6]
    cdef double Ia[36]
    cdef double Ifull[36]
    cdef double Ip[21]
    cdef double x[6]
    cdef double scale
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        # scale for the singularity test: the trace of the (PSD) articulated inertia
        scale = (IA[21 * i] + IA[21 * i + 3] + IA[21 * i + 5] + IA[21 * i + 15]
                 + IA[21 * i + 18] + IA[21 * i + 20])
        for k in range(nvi):
            scale += m.armature[o + k]
        if nvi == 1:
            if _aba_backward_1dof(m, i, o, tau, S, U, Dl, u, IA, pA, cb, scale):
                return -(i + 1)
            continue
        sym6_unpack(&IA[21 * i], Ifull)
        for k in range(nvi):
            for n in range(6):
                U[6 * (o + k) + n] = (Ifull[6 * n] * S[6 * (o + k)]
                    + Ifull[6 * n + 1] * S[6 * (o + k) + 1]
                    + Ifull[6 * n + 2] * S[6 * (o + k) + 2]
                    + Ifull[6 * n + 3] * S[6 * (o + k) + 3]
                    + Ifull[6 * n + 4] * S[6 * (o + k) + 4]
                    + Ifull[6 * n + 5] * S[6 * (o + k) + 5])
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
            Ia[n] = Ifull[n]
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
        sym6_pack(Ia, Ip)
        for n in range(21):
            IA[21 * par + n] += Ip[n]
        for n in range(6):
            pA[6 * par + n] += h[n]
    return 0


cdef inline void _aba_accelerations(ModelCore m, DataC* d, const double* g,
                                    double* qdd) noexcept nogil:
    """ABA pass 3, root to leaves: with a'_i = A_p + c_i (A_root's parent: −g),
        q̈_i = D_i⁻¹ (u_i − U_iᵀ a'_i),    A_i = a'_i + J_i q̈_i   (d.sa_gf)."""
    cdef int nb = m.nb, i, k, n, par, o, nvi
    cdef double* cb = d.sc
    cdef double* S = d.sJ
    cdef double* U = d.U
    cdef double* Dl = d.Dinv
    cdef double* u = d.u
    cdef double* Aacc = d.sa_gf
    cdef double x[6]
    cdef double ap[6]
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if par < 0:
            ap[0] = 0.0; ap[1] = 0.0; ap[2] = 0.0
            ap[3] = -g[0]; ap[4] = -g[1]; ap[5] = -g[2]
        else:
            for n in range(6):
                ap[n] = Aacc[6 * par + n]
        twist_add(ap, &cb[6 * i])
        for k in range(nvi):
            x[k] = u[o + k] - dot6(&U[6 * (o + k)], ap)
        if nvi == 1:
            x[0] *= Dl[6 * o]
        else:
            small_cho_solve(nvi, &Dl[6 * o], x)
        for k in range(nvi):
            qdd[o + k] = x[k]
            for n in range(6):
                ap[n] += S[6 * (o + k) + n] * x[k]
        for n in range(6):
            Aacc[6 * i + n] = ap[n]


cdef int aba_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                    const double* tau, const double* g, const double* fext, int fext_frame,
                    double* qdd) noexcept nogil:
    """Joint accelerations q̈ (nv) by the articulated-body algorithm, in three passes;
    fills d.liMi, d.S, d.sMi, d.sJ, d.sv, d.sc, d.sIA, d.spA, d.U, d.Dinv, d.u and
    d.sa_gf (frame s).  Returns 0, i + 1 for a non-unit quaternion of joint i, or
    −(i + 1) if the articulated inertia of joint i is singular."""
    cdef int code = _aba_velocities_and_bias(m, d, q, qd, fext, fext_frame)
    if code:
        return code
    code = _aba_articulated_inertias(m, d, tau)
    if code:
        return code
    _aba_accelerations(m, d, g, qdd)
    return 0


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_aba(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return aba_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def forward_dynamics(ModelCore self, q, v, tau, f_ext=None, gravity=None, f_ext_frame="world",
                     method="aba", data=None, out=None):
    """Joint accelerations q̈ = M⁻¹ (τ − h(q, v) + Σ Jᵀ f_ext).

    Parameters
    ----------
    q, v, tau : array_like, shapes (nq,), (nv,), (nv,) or with a leading batch axis
    f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics`
    method : {"aba", "cholesky"}
        "aba": the O(n) articulated-body kernel (default); "cholesky": M from
        the CRBA kernel and h from inverse dynamics, solved by a Cholesky
        factorization (LAPACK).
    data, out : as in :meth:`inverse_dynamics` (method "aba"; ``out`` (nv,) or (N, nv))

    Returns
    -------
    ndarray, shape (nv,) or (N, nv)

    Raises
    ------
    SingularModelError
        If the model has no finite acceleration (e.g. a massless subtree
        without armature); the message names the joint.
    """
    if method != "aba":
        if method == "cholesky":
            if data is not None or out is not None:
                raise InputError("data= and out= are for method='aba'")
            return self._forward_dynamics_cholesky(q, v, tau, f_ext, gravity, f_ext_frame)
        raise InputError(f"method must be 'aba' or 'cholesky', got {method!r}")
    return self._joint_space_call(_k_aba, q, v, tau, "tau", f_ext, gravity, f_ext_frame,
                                  data, out)
