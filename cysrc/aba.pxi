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

# Articulated inertias are full row-major 6 × 6 matrices (d.sIA6), so that their
# rows fill vectors (aba_simd.h).
cdef extern from "aba_simd.h" nogil:
    void td_aba_rigid6(const double* C, const double* inr, const double* V, double* I,
                       double* pA)
    int td_aba_back1(const double* I, const double* pA, const double* J, const double* c,
                     double tau, double arm, double scale, double* U, double* Dinv,
                     double* u, double* Ip, double* pAp)
    double td_dot6_tree(const double* a, const double* b)
    double td_aba_fwd1(const double* Ap, const double* c, const double* U, const double* J,
                       double u, double Dinv, double* A)


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


cdef inline int _aba_velocities_and_bias(ModelCore m, DataC* d, const double* q, const double* qd,
                                         const double* fext, int fext_frame) noexcept nogil:
    """ABA pass 1, root to leaves: the joint steps (poses C_i in frame s, screws
    J_i = d.sJ), the twists V_i = V_p + J_i q̇_i (d.sv), the bias accelerations
    c_i = ad_{V_i} J_i q̇_i + Ad_{C_i} Ṡ_i q̇_i (d.sc), and each body's rigid inertia
    and bias force as the start of its articulated ones (d.sIA6 full 6 × 6, d.spA):
        Iᴬ_i = Mˢ_i,    pᴬ_i = −ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext.  Returns 0 or i + 1 for a non-unit quaternion of joint i."""
    cdef int nb = m.nb, i, n, par, o, nvi, fast
    cdef double qdi
    cdef int bad = 0
    cdef double* T = d.liMi
    cdef double* V = d.sv
    cdef double* cb = d.sc
    cdef double* IA = d.sIA6
    cdef double* pA = d.spA
    cdef double* S = d.sJ
    cdef double cJ[6]
    cdef double vr[6]
    cdef double t6[6]
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
        td_aba_rigid6(Ci, &m.inert[i, 0], Vi, &IA[36 * i], &pA[6 * i])
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
    d.sIA6 keeps each body's Iᴬ_i.  Returns 0, or −(i + 1) if D_i is singular
    (relative to the trace of Iᴬ_i)."""
    cdef int nb = m.nb, i, k, l, n, par, o, nvi, a, b
    cdef double* cb = d.sc
    cdef double* IA = d.sIA6
    cdef double* pA = d.spA
    cdef double* S = d.sJ
    cdef double* U = d.U
    cdef double* Dl = d.Dinv
    cdef double* u = d.u
    cdef double* I
    cdef double* Ip
    cdef double h[6]
    cdef double x[6]
    cdef double scale
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        I = &IA[36 * i]
        # scale for the singularity test: the trace of the (PSD) articulated inertia
        scale = (I[0] + I[7] + I[14]) + (I[21] + I[28] + I[35])
        for k in range(nvi):
            scale += m.armature[o + k]
        if scale <= 0.0:
            scale = 1e-300
        if nvi == 1:
            if td_aba_back1(I, &pA[6 * i], &S[6 * o], &cb[6 * i], tau[o], m.armature[o], scale,
                            &U[6 * o], &Dl[6 * o], &u[o],
                            NULL if par < 0 else &IA[36 * par],
                            NULL if par < 0 else &pA[6 * par]):
                return -(i + 1)
            continue
        for k in range(nvi):
            for n in range(6):
                U[6 * (o + k) + n] = (I[6 * n] * S[6 * (o + k)]
                    + I[6 * n + 1] * S[6 * (o + k) + 1]
                    + I[6 * n + 2] * S[6 * (o + k) + 2]
                    + I[6 * n + 3] * S[6 * (o + k) + 3]
                    + I[6 * n + 4] * S[6 * (o + k) + 4]
                    + I[6 * n + 5] * S[6 * (o + k) + 5])
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
        if small_cholesky(nvi, &Dl[6 * o], scale):
            return -(i + 1)
        if par < 0:
            continue
        # Iᴬ_p += Iᴬ − U D⁻¹ Uᵀ, and h = Iᴬ c (then − U D⁻¹ (Uᵀ c − u), below)
        Ip = &IA[36 * par]
        for a in range(6):
            h[a] = 0.0
            for b in range(6):
                h[a] += I[6 * a + b] * cb[6 * i + b]
        for a in range(6):
            for k in range(nvi):
                x[k] = U[6 * (o + k) + a]
            small_cho_solve(nvi, &Dl[6 * o], x)      # x = D⁻¹ U[a, :]ᵀ
            for b in range(6):
                Ip[6 * a + b] += I[6 * a + b]
                for k in range(nvi):
                    Ip[6 * a + b] -= U[6 * (o + k) + b] * x[k]
        # pᴬ_p += pᴬ + Iᵃ c + U D⁻¹ u = pᴬ + Iᴬ c + U D⁻¹ (u − Uᵀ c)
        for k in range(nvi):
            x[k] = u[o + k] - dot6(&U[6 * (o + k)], &cb[6 * i])
        small_cho_solve(nvi, &Dl[6 * o], x)
        for a in range(6):
            for k in range(nvi):
                h[a] += U[6 * (o + k) + a] * x[k]
            pA[6 * par + a] += pA[6 * i + a] + h[a]
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
    cdef double a0[6]
    cdef const double* Ap
    a0[0] = 0.0; a0[1] = 0.0; a0[2] = 0.0
    a0[3] = -g[0]; a0[4] = -g[1]; a0[5] = -g[2]
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if par < 0:
            Ap = &a0[0]
        else:
            Ap = &Aacc[6 * par]
        if nvi == 1:
            qdd[o] = td_aba_fwd1(Ap, &cb[6 * i], &U[6 * o], &S[6 * o], u[o], Dl[6 * o],
                                 &Aacc[6 * i])
            continue
        for n in range(6):
            ap[n] = Ap[n] + cb[6 * i + n]
        for k in range(nvi):
            x[k] = u[o + k] - dot6(&U[6 * (o + k)], ap)
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
    fills d.liMi, d.S, d.sMi, d.sJ, d.sv, d.sc, d.sIA6, d.spA, d.U, d.Dinv, d.u and
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


