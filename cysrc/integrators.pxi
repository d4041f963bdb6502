# One time step of the Lie-group integrators (treedyn/integrators.py has the
# tableaux and the documentation).  The state (q, v) lives on G × R^nv, G the
# product of the joints' groups (lie_groups.pxi); v̇ comes from the ABA kernel.
#
#   SCHEME_RKMK (Munthe-Kaas [Munthe-Kaas 1998]; [Müller & Terze 2013] eqs. 36-37,
#       left-trivialized form):
#       Ψ_j = h Σ_l a_jl k_l,  q_j = q ⊕ Ψ_j,  v_j = v + h Σ_l a_jl kv_l,
#       k_j = dτ⁻¹_{−Ψ_j} v_j,  kv_j = a(q_j, v_j);  q' = q ⊕ h Σ b_j k_j
#   SCHEME_CG (Crouch–Grossman [Crouch & Grossman 1993]): q_j = q ⊕ h a_j1 v_1 ⊕ ⋯ ⊕ h a_j,j−1 v_{j−1},
#       q' = q ⊕ h b_1 v_1 ⊕ ⋯ ⊕ h b_s v_s  (products of exponentials)
#   SCHEME_VECTOR: classical explicit RK on (q, v) ∈ R^nq × R^nv with q̇ from
#       config_rate, quaternions renormalized at stages and after the step.
# Velocities are updated by the same Butcher tableau in all schemes.

cdef enum:
    STEP_DIVERGED = -2000000
    STEP_CONTROLLER_ERROR = -1000000

cdef enum:
    SCHEME_RKMK = 0
    SCHEME_CG = 1
    SCHEME_VECTOR = 2

ctypedef int (*stage_torque_fn)(void* ctx, double t, const double* q, const double* v,
                                double* tau) noexcept nogil


cdef inline Py_ssize_t step_ws_size(int nb, int nq, int nv, int s) noexcept nogil:
    return 2 * <Py_ssize_t>s * nv + <Py_ssize_t>s * nq + 3 * nq + 4 * nv + 8


cdef int rk_step(ModelCore m, DataC* d, int scheme, int s, const double* A, const double* b,
                 const double* c, const double* bhat, int local, double t, double h,
                 const double* q, const double* v, stage_torque_fn torque, void* tctx,
                 const double* g, const double* fext, int fframe, double* ws,
                 double* q_out, double* v_out, double* err, bint constrained=False,
                 double k1=0.0, double k2=0.0, bint joints_ready=False) noexcept nogil:
    """One step; returns 0, or the first nonzero code of a stage (ABA / torque).
    ws holds step_ws_size doubles; the stage accelerations use d (ABA, or the
    index-1 constrained dynamics of loops.pxi with Baumgarte gains k1, k2 if
    ``constrained``).  ``joints_ready``: d's joint steps are those of q (the step
    follows project_kernel on q), so the first stage does not redo them."""
    cdef int nq = m.nq, nv = m.nv, nb = m.nb, j, l, n, code
    cdef double* Kp = ws                      # s × nv: local-coordinate rates / stage velocities
    cdef double* Kv = &ws[s * nv]             # s × nv: accelerations
    cdef double* Kq = &ws[2 * s * nv]         # s × nq: q̇ (vector scheme)
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* qt = &qs[nq]
    cdef double* qn = &qt[nq]
    cdef double* psi = &qn[nq]
    cdef double* vs = &psi[nv]
    cdef double* tau = &vs[nv]
    cdef double* dv = &tau[nv]
    cdef double w
    for j in range(s):
        # stage velocity
        for n in range(nv):
            vs[n] = v[n]
            psi[n] = 0.0
        for l in range(j):
            w = h * A[s * j + l]
            if w != 0.0:
                for n in range(nv):
                    vs[n] += w * Kv[nv * l + n]
        # stage configuration
        if scheme == SCHEME_RKMK:
            for l in range(j):
                w = h * A[s * j + l]
                if w != 0.0:
                    for n in range(nv):
                        psi[n] += w * Kp[nv * l + n]
            if j == 0:                        # q ⊕ 0 = q bit for bit (cached factors)
                memcpy(qs, q, nq * sizeof(double))
            else:
                config_retract(m, q, psi, local, qs)
        elif scheme == SCHEME_CG:
            for n in range(nq):
                qs[n] = q[n]
            for l in range(j):
                w = h * A[s * j + l]
                if w != 0.0:
                    for n in range(nv):
                        psi[n] = w * Kp[nv * l + n]
                    config_retract(m, qs, psi, local, qt)
                    for n in range(nq):
                        qs[n] = qt[n]
        else:
            for n in range(nq):
                qs[n] = q[n]
            for l in range(j):
                w = h * A[s * j + l]
                if w != 0.0:
                    for n in range(nq):
                        qs[n] += w * Kq[nq * l + n]
            normalize_quaternions(m, qs)
        code = torque(tctx, t + c[j] * h, qs, vs, tau)
        if code:
            return code
        if constrained:
            code = constrained_fd_kernel(m, d, qs, vs, tau, g, fext, fframe, k1, k2, 1e-10,
                                         &Kv[nv * j], NULL, d.cg,
                                         joints_ready and j == 0 and scheme != SCHEME_VECTOR)
        else:
            code = aba_kernel(m, d, qs, vs, tau, g, fext, fframe, &Kv[nv * j])
        if code == CODE_MASS_NOT_PD and not (_finite_bits(qs, nq) and _finite_bits(vs, nv)):
            return STEP_DIVERGED              # an earlier stage overflowed: not the model
        if code:
            return code
        if scheme == SCHEME_RKMK:
            local_rates(m, psi, vs, local, &Kp[nv * j])
        elif scheme == SCHEME_CG:
            for n in range(nv):
                Kp[nv * j + n] = vs[n]
        else:
            config_rate(m, qs, vs, &Kq[nq * j])
    # update
    for n in range(nv):
        dv[n] = 0.0
        psi[n] = 0.0
    for j in range(s):
        for n in range(nv):
            dv[n] += h * b[j] * Kv[nv * j + n]
    for n in range(nv):
        v_out[n] = v[n] + dv[n]
    if scheme == SCHEME_RKMK:
        for j in range(s):
            for n in range(nv):
                psi[n] += h * b[j] * Kp[nv * j + n]
        config_retract(m, q, psi, local, q_out)
    elif scheme == SCHEME_CG:
        for n in range(nq):
            qn[n] = q[n]
        for j in range(s):
            if b[j] != 0.0:
                for n in range(nv):
                    psi[n] = h * b[j] * Kp[nv * j + n]
                config_retract(m, qn, psi, local, qt)
                for n in range(nq):
                    qn[n] = qt[n]
        for n in range(nq):
            q_out[n] = qn[n]
    else:
        for n in range(nq):
            q_out[n] = q[n]
        for j in range(s):
            for n in range(nq):
                q_out[n] += h * b[j] * Kq[nq * j + n]
        normalize_quaternions(m, q_out)
    if not _finite_bits(v_out, nv):
        return STEP_DIVERGED
    if bhat != NULL and err != NULL:
        # embedded error estimate: (Ψ − Ψ̂, v − v̂)
        for n in range(2 * nv):
            err[n] = 0.0
        for j in range(s):
            w = h * (b[j] - bhat[j])
            for n in range(nv):
                err[n] += w * Kp[nv * j + n]
                err[nv + n] += w * Kv[nv * j + n]
    return 0


cdef struct ConstTorque:
    int nv
    const double* tau


cdef int constant_torque(void* ctx, double t, const double* q, const double* v,
                         double* tau) noexcept nogil:
    """Stage torque from a constant array (ctx: ConstTorque*)."""
    cdef ConstTorque* ct = <ConstTorque*>ctx
    cdef int n
    for n in range(ct.nv):
        tau[n] = ct.tau[n]
    return 0


cdef int python_torque(void* ctx, double t, const double* q, const double* v,
                       double* tau) noexcept nogil:
    """Stage torque from a Python controller(t, q, v) -> tau (ctx: _Controller)."""
    with gil:
        return (<_Controller>ctx).call(t, q, v, tau)


cdef class _Controller:
    """Calls controller(t, q, v) from a kernel; remembers the exception it raised."""
    cdef object fn
    cdef int nq, nv
    cdef double[::1] tau0
    cdef public object error

    def __init__(self, fn, int nq, int nv, tau0):
        self.fn = fn
        self.nq = nq
        self.nv = nv
        self.tau0 = tau0
        self.error = None

    cdef int call(self, double t, const double* q, const double* v, double* tau):
        cdef int n
        if self.fn is None:
            for n in range(self.nv):
                tau[n] = self.tau0[n]
            return 0
        try:
            qa = np.array(<double[:self.nq]>q) if self.nq else np.zeros(0)
            va = np.array(<double[:self.nv]>v) if self.nv else np.zeros(0)
            out = np.asarray(self.fn(t, qa, va), dtype=np.float64)
            if out.shape != (self.nv,):
                raise InputError(f"controller returned shape {out.shape}, expected "
                                 f"({self.nv},)")
            if not np.all(np.isfinite(out)):
                raise InputError(f"controller returned NaN or infinity at t = {t}")
            for n in range(self.nv):
                tau[n] = out[n]
        except BaseException as exc:
            self.error = exc
            return STEP_CONTROLLER_ERROR
        return 0
