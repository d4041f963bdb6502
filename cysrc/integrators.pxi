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
#   SCHEME_SEMI (semi-implicit / symplectic Euler, one stage): v' = v + h a(q, v),
#       q' = q ⊕ h v'  (the update of MuJoCo's and PyBullet's default step).
# Velocities are updated by the same Butcher tableau in all schemes.

cdef enum:
    STEP_DIVERGED = -2000000
    STEP_CONTROLLER_ERROR = -1000000
    STEP_Q_NONFINITE = -3000000       # step_project: the configuration overflowed

cdef enum:
    STAGE_CAP = 15                  # _rk_step_vector: nonzero weights of a stage listed
                                    # (tableaux of up to STAGE_CAP + 1 stages; longer ones
                                    # take rk_step's general form, the same operations)

cdef enum:
    SCHEME_RKMK = 0
    SCHEME_CG = 1
    SCHEME_VECTOR = 2
    SCHEME_SEMI = 3

ctypedef int (*stage_torque_fn)(void* ctx, double t, const double* q, const double* v,
                                double* tau) noexcept nogil


cdef inline Py_ssize_t step_ws_size(int nb, int nq, int nv, int s) noexcept nogil:
    return 2 * <Py_ssize_t>s * nv + <Py_ssize_t>s * nq + 3 * nq + 4 * nv + 8


cdef inline void _stage_state(ModelCore m, int scheme, int s, const double* A, double h,
                              int local, int j, const double* q, const double* v,
                              double* ws) noexcept nogil:
    """Stage j's velocity vs and configuration qs (in ws, laid out as in rk_step)
    from the rates and accelerations of stages 0 … j − 1."""
    cdef int nq = m.nq, nv = m.nv, l, n
    cdef double w
    cdef double* Kp = ws
    cdef double* Kv = &ws[s * nv]
    cdef double* Kq = &ws[2 * s * nv]
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* qt = &qs[nq]
    cdef double* psi = &qt[2 * nq]
    cdef double* vs = &psi[nv]
    for n in range(nv):
        vs[n] = v[n]
        psi[n] = 0.0
    for l in range(j):
        w = h * A[s * j + l]
        if w != 0.0:
            for n in range(nv):
                vs[n] += w * Kv[nv * l + n]
    if scheme == SCHEME_RKMK or scheme == SCHEME_SEMI:
        for l in range(j):
            w = h * A[s * j + l]
            if w != 0.0:
                for n in range(nv):
                    psi[n] += w * Kp[nv * l + n]
        if j == 0:                            # q ⊕ 0 = q bit for bit (cached factors)
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


cdef inline void _stage_rates(ModelCore m, int scheme, int s, int local, int j,
                              double* ws) noexcept nogil:
    """Stage j's configuration rates (Kp or Kq row j, in ws) once its velocity is
    set: dexp⁻¹ of RKMK, the velocity itself (CG, semi-implicit), or q̇."""
    cdef int nq = m.nq, nv = m.nv, n
    cdef double* Kp = ws
    cdef double* Kq = &ws[2 * s * nv]
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* psi = &qs[3 * nq]
    cdef double* vs = &psi[nv]
    if scheme == SCHEME_RKMK:
        local_rates(m, psi, vs, local, &Kp[nv * j])
    elif scheme == SCHEME_CG or scheme == SCHEME_SEMI:
        for n in range(nv):
            Kp[nv * j + n] = vs[n]
    else:
        config_rate(m, qs, vs, &Kq[nq * j])


cdef inline int _step_update(ModelCore m, int scheme, int s, const double* b, double h,
                             int local, const double* q, const double* v, double* ws,
                             double* q_out, double* v_out) noexcept nogil:
    """The step's end (q_out, v_out) from the stages' rates and accelerations in ws;
    0 or STEP_DIVERGED."""
    cdef int nq = m.nq, nv = m.nv, j, n
    cdef double* Kp = ws
    cdef double* Kv = &ws[s * nv]
    cdef double* Kq = &ws[2 * s * nv]
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* qt = &qs[nq]
    cdef double* qn = &qt[nq]
    cdef double* psi = &qn[nq]
    cdef double* vs = &psi[nv]
    cdef double* tau = &vs[nv]
    cdef double* dv = &tau[nv]
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
    elif scheme == SCHEME_SEMI:
        for n in range(nv):
            psi[n] = h * v_out[n]
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
    return 0


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
    follows project_kernel on q), so the first stage does not redo them.  The
    stages and the update are _stage_state, _stage_rates and _step_update, which
    rk_step_lanes (integrators_lanes.pxi) runs lane by lane."""
    cdef int nq = m.nq, nv = m.nv, j, n, code
    cdef double* Kp = ws                      # s × nv: local-coordinate rates / stage velocities
    cdef double* Kv = &ws[s * nv]             # s × nv: accelerations
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* vs = &qs[3 * nq + nv]
    cdef double* tau = &vs[nv]
    cdef double w
    if scheme == SCHEME_RKMK and nq == nv and s <= STAGE_CAP + 1:
        return _rk_step_vector(m, d, s, A, b, c, bhat, t, h, q, v, torque, tctx, g, fext,
                               fframe, ws, q_out, v_out, err, constrained, k1, k2,
                               joints_ready)
    for j in range(s):
        _stage_state(m, scheme, s, A, h, local, j, q, v, ws)
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
        _stage_rates(m, scheme, s, local, j, ws)
    code = _step_update(m, scheme, s, b, h, local, q, v, ws, q_out, v_out)
    if code:
        return code
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


cdef int _rk_step_vector(ModelCore m, DataC* d, int s, const double* A, const double* b,
                         const double* c, const double* bhat, double t, double h,
                         const double* q, const double* v, stage_torque_fn torque,
                         void* tctx, const double* g, const double* fext, int fframe,
                         double* ws, double* q_out, double* v_out, double* err,
                         bint constrained, double k1, double k2,
                         bint joints_ready) noexcept nogil:
    """rk_step's SCHEME_RKMK when every joint is a screw chain (nq = nv): the group is
    R^nv, q ⊕ ψ = q + ψ and dτ⁻¹ = I, so the stage rates are the stage velocities,
    kept in place (Kp row j = v_j), and the stages are RK4's axpys.  The same
    operations, per element and in the same order, as the general form."""
    cdef int nv = m.nv, j, l, n, code
    cdef double* Kp = ws                      # s × nv: stage velocities (= local rates)
    cdef double* Kv = &ws[s * nv]             # s × nv: accelerations
    cdef double* qs = &ws[2 * s * nv + s * nv]
    cdef double* tau = &qs[3 * nv]
    cdef double* vs
    cdef const double* qj
    cdef double w, x
    cdef double wl[STAGE_CAP]
    cdef int kl[STAGE_CAP]
    cdef int nw
    for j in range(s):
        vs = &Kp[nv * j]
        if j == 0:                            # q ⊕ 0 = q bit for bit
            qj = q
            memcpy(vs, v, nv * sizeof(double))
        else:
            # v_j = v + Σ h a_jl kv_l,  q_j = q + Σ h a_jl v_l  (element by element:
            # no vector load over the element stores just made), over the nonzero
            # weights h a_jl, listed first (the stores to ws may alias A for the compiler)
            nw = 0
            for l in range(j):
                w = h * A[s * j + l]
                if w != 0.0:
                    wl[nw] = w
                    kl[nw] = nv * l
                    nw += 1
            for n in range(nv):
                x = v[n]
                w = 0.0
                for l in range(nw):
                    x += wl[l] * Kv[kl[l] + n]
                    w += wl[l] * Kp[kl[l] + n]
                vs[n] = x
                qs[n] = q[n] + w
            qj = qs
        code = torque(tctx, t + c[j] * h, qj, vs, tau)
        if code:
            return code
        if constrained:
            code = constrained_fd_kernel(m, d, qj, vs, tau, g, fext, fframe, k1, k2, 1e-10,
                                         &Kv[nv * j], NULL, d.cg, joints_ready and j == 0)
        else:
            code = aba_kernel(m, d, qj, vs, tau, g, fext, fframe, &Kv[nv * j])
        if code == CODE_MASS_NOT_PD and not (_finite_bits(qj, nv) and _finite_bits(vs, nv)):
            return STEP_DIVERGED              # an earlier stage overflowed: not the model
        if code:
            return code
    # update: v' = v + Σ h b_j kv_j, q' = q + Σ h b_j v_j
    for n in range(nv):
        x = 0.0
        w = 0.0
        for j in range(s):
            x += h * b[j] * Kv[nv * j + n]
            w += h * b[j] * Kp[nv * j + n]
        v_out[n] = v[n] + x
        q_out[n] = q[n] + w
    if not _finite_bits(v_out, nv):
        return STEP_DIVERGED
    if bhat != NULL and err != NULL:
        for n in range(2 * nv):
            err[n] = 0.0
        for j in range(s):
            w = h * (b[j] - bhat[j])
            for n in range(nv):
                err[n] += w * Kp[nv * j + n]
                err[nv + n] += w * Kv[nv * j + n]
    return 0


cdef struct StepArgs:
    # what a step of treedyn.simulate's _run, treedyn.Simulator and treedyn.rollout
    # needs besides the state: the method, the stage torques and loads, and (loops,
    # mimic couplings) the constrained stages and the projection after the step
    int scheme, s, local
    const double* A                 # Butcher tableau (s × s), weights, nodes
    const double* b
    const double* c
    const double* bhat              # embedded weights (NULL: no error estimate)
    double h
    stage_torque_fn torque          # stage torques and their context
    void* tctx
    const double* grav              # gravity (3,)
    const double* fext              # external wrenches (nb, 6) or NULL, and their frame
    int fframe
    double* ws                      # step_ws_size doubles of scratch
    double* err                     # 2 nv: the error estimate (with bhat), or NULL
    bint check_q                    # a non-finite q after the step: STEP_Q_NONFINITE
    bint constrained                # index-1 stages (Baumgarte gains k1, k2) and the
    bint project                    # projection: rows only (project False: no
    double k1, k2, tol              # iterations, no velocity) or q to tol in at most
    int max_iter                    # max_iter Gauss–Newton steps, then v


cdef int step_project(ModelCore m, DataC* d, const StepArgs* a, double t, const double* qi,
                      const double* vi, double* qo, double* vo,
                      double* residual) noexcept nogil:
    """One step of the method from (qi, vi) at time t into (qo, vo) (vi, vo NULL when
    nv = 0), then, with a.check_q, STEP_Q_NONFINITE if qo is not finite (vo is:
    rk_step checks it), then for loops and mimic couplings the projection of (qo, vo)
    onto the constraints (project_kernel; residual: max |g| of qo).  With
    ``a.constrained``, d's joint steps and factors must be those of qi (project_kernel
    ran on qi last: the first stage reuses them) and are those of qo on return.
    Returns 0 or the first nonzero code (rk_step, STEP_Q_NONFINITE, project_kernel).
    The one sequence of simulate's _run, Simulator and rollout's samples."""
    cdef int code = rk_step(m, d, a.scheme, a.s, a.A, a.b, a.c, a.bhat, a.local, t, a.h,
                            qi, vi, a.torque, a.tctx, a.grav, a.fext, a.fframe, a.ws, qo, vo,
                            a.err, a.constrained, a.k1, a.k2, a.constrained)
    if code:
        return code
    if a.check_q and not _finite_bits(qo, m.nq):
        return STEP_Q_NONFINITE
    if a.constrained:
        return project_kernel(m, d, qo, vo if a.project else NULL, a.tol,
                              a.max_iter if a.project else 0, 1e-10, residual)
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


cdef struct PassiveTorque:
    stage_torque_fn inner           # the applied torques (constant or a controller)
    void* ictx
    int nv
    const double* D                 # damping (nv,)
    const double* K                 # stiffness (nv,)
    const double* qref              # spring reference (nv,)
    const int* qidx                 # q index of each freedom, -1: none (quaternion joints)


cdef int passive_torque(void* ctx, double t, const double* q, const double* v,
                        double* tau) noexcept nogil:
    """The inner stage torque plus the passive joint forces −D v − K (q − q_ref)
    (ctx: PassiveTorque*; Model.passive_forces is the same sum)."""
    cdef PassiveTorque* p = <PassiveTorque*>ctx
    cdef int n, code = p.inner(p.ictx, t, q, v, tau)
    if code:
        return code
    for n in range(p.nv):
        tau[n] -= p.D[n] * v[n]
        if p.qidx[n] >= 0:
            tau[n] -= p.K[n] * (q[p.qidx[n]] - p.qref[n])
    return 0


cdef int constant_passive_torque(void* ctx, double t, const double* q, const double* v,
                                 double* tau) noexcept nogil:
    """passive_torque around constant_torque in one loop (ctx: PassiveTorque* whose
    ictx is a ConstTorque*): the same operations."""
    cdef PassiveTorque* p = <PassiveTorque*>ctx
    cdef const double* tc = (<ConstTorque*>p.ictx).tau
    cdef int n, k
    for n in range(p.nv):
        k = p.qidx[n]
        tau[n] = tc[n] - p.D[n] * v[n]
        if k >= 0:
            tau[n] -= p.K[n] * (q[k] - p.qref[n])
    return 0


cdef int constant_damping_torque(void* ctx, double t, const double* q, const double* v,
                                 double* tau) noexcept nogil:
    """constant_passive_torque for tables without springs (every K zero): τ − D v, the
    same values for every finite q (the spring terms would subtract zeros)."""
    cdef PassiveTorque* p = <PassiveTorque*>ctx
    cdef const double* tc = (<ConstTorque*>p.ictx).tau
    cdef int n
    for n in range(p.nv):
        tau[n] = tc[n] - p.D[n] * v[n]
    return 0


cdef class _PassiveArrays:
    """Keeps the arrays of a PassiveTorque alive: (D, K, q_ref, qidx) from
    treedyn.dynamics.passive_tables, or None (no passive forces)."""
    cdef const double[::1] D, K, qref
    cdef const int[::1] qidx
    cdef bint active, springs

    def __init__(self, tables, int nv):
        self.active = tables is not None and nv > 0
        if self.active:
            D, K, qref, qidx = tables
            self.D = D
            self.K = K
            self.qref = qref
            self.qidx = qidx
            if not (self.D.shape[0] == nv and self.K.shape[0] == nv
                    and self.qref.shape[0] == nv and self.qidx.shape[0] == nv):
                raise InputError(f"passive: the tables need {nv} entries each")
            self.springs = bool(np.any(np.asarray(self.K) != 0.0))

    cdef void wrap(self, PassiveTorque* p, stage_torque_fn inner, void* ictx, int nv,
                   stage_torque_fn* fn, void** ctx):
        """Point (fn, ctx) at the passive wrapper of (inner, ictx) if active."""
        fn[0] = inner
        ctx[0] = ictx
        if not self.active:
            return
        p.inner = inner
        p.ictx = ictx
        p.nv = nv
        p.D = &self.D[0]
        p.K = &self.K[0]
        p.qref = &self.qref[0]
        p.qidx = &self.qidx[0]
        if inner != constant_torque:
            fn[0] = passive_torque
        elif self.springs:
            fn[0] = constant_passive_torque
        else:
            fn[0] = constant_damping_torque
        ctx[0] = <void*>p


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


cdef struct RunLoop:
    # _run's steps: where the states go (rows saved every save_every steps, the
    # others in two scratch rows) and where the loop stands
    Py_ssize_t k, row, nsteps, save_every
    double t0, rk
    int nq, nv
    double* Q                       # (rows, nq) saved configurations
    double* V                       # (rows, nv) saved velocities (NULL: nv = 0)
    double* Sq                      # (2, nq + 1), (2, nv + 1): the unsaved states
    double* Sv
    double* R                       # (rows,) max |g| of the saved configurations
    const double* qi                # the current state
    const double* vi
    bint stop                       # a non-finite q: the run stops (no code)


cdef int _run_steps(ModelCore m, DataC* d, const StepArgs* a, RunLoop* r, Py_ssize_t k0,
                    Py_ssize_t kend) noexcept nogil:
    """Steps k0 … kend − 1 of _run (step_project each); returns 0 or the code that
    stopped them (r.k: that step; r.stop: a non-finite q, code 0)."""
    cdef Py_ssize_t k
    cdef int code = 0
    cdef bint saved
    cdef double* qo
    cdef double* vo
    for k in range(k0, kend):
        r.k = k
        saved = (k + 1) % r.save_every == 0 or k + 1 == r.nsteps
        if saved:
            qo = &r.Q[(r.row + 1) * r.nq]
            vo = &r.V[(r.row + 1) * r.nv] if r.nv else NULL
        else:
            qo = &r.Sq[(k & 1) * (r.nq + 1)]
            vo = &r.Sv[(k & 1) * (r.nv + 1)] if r.nv else NULL
        code = step_project(m, d, a, r.t0 + k * a.h, r.qi, r.vi, qo, vo, &r.rk)
        if code == STEP_Q_NONFINITE:
            code = 0
            r.stop = True
        if saved:
            r.row += 1
            r.R[r.row] = r.rk
        r.qi = qo
        r.vi = vo
        if code or r.stop:
            return code
    return 0


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def _run(ModelCore self, q0, v0, double t0, double h, Py_ssize_t nsteps, int scheme, A, b, c, bhat,
         int local, controller, tau0, f_ext, f_ext_frame, gravity, progress=None,
         Py_ssize_t chunk=0, bint constrained=False, double k1=0.0, double k2=0.0,
         bint project=False, double tol=1e-12, int max_iter=20, Py_ssize_t save_every=1,
         passive=None):
    """Integrate nsteps fixed steps (or one step with an error estimate when bhat
    is given and nsteps == 1).  Returns (Q (rows, nq), V (rows, nv), err).

    ``save_every`` k ≥ 1: Q and V hold the initial state, the state after every
    k-th step and the final state: rows = nsteps // k + 1, plus one if k does not
    divide nsteps (k = 1: every step).  The other steps' states live in two
    scratch rows; every row is bitwise the one of a k = 1 run.  With k > 1 a
    non-finite state raises InputError here (naming the step and its time).

    The steps run in chunks of a few milliseconds (at most ``chunk`` steps if
    chunk > 0); between chunks ``progress(steps done)`` is called (if given) and
    signals are handled: Ctrl-C raises KeyboardInterrupt within milliseconds and
    the partial run is dropped (this run's Data is its own: the model is
    untouched).

    ``constrained``: the stages solve the index-1 equations of the loop closures
    (loops.pxi, Baumgarte gains k1 = 2α/Δt, k2 = (β/Δt)²); with ``project`` the
    initial state and every step are projected onto the constraints
    (project_kernel: positions to ``tol`` in at most ``max_iter`` Gauss–Newton
    steps, then velocities).  Then returns (Q, V, err, R), R (rows,) the
    max |g| of every saved configuration.

    ``passive``: (D, K, q_ref, qidx) of treedyn.dynamics.passive_tables: every
    stage's torque gets −D v − K (q − q_ref) added (None: nothing added)."""
    from time import perf_counter
    cdef cnp.ndarray qa = self._states(q0, self.nq, "q0")
    cdef cnp.ndarray va = self._like(qa, v0, self.nv, "v0")
    if cnp.PyArray_NDIM(qa) != 1:
        raise InputError("q0: one initial state expected, shape (nq,)")
    if save_every < 1:
        raise InputError(f"save_every: expected an integer >= 1, got {save_every}")
    self._check_unit_quaternions(qa, "q0")
    cdef int nq = self.nq, nv = self.nv, nb = self.nb
    cdef double[:, ::1] Ab = np.ascontiguousarray(A, dtype=np.float64)
    cdef double[::1] bb = np.ascontiguousarray(b, dtype=np.float64)
    cdef double[::1] cb_ = np.ascontiguousarray(c, dtype=np.float64)
    cdef double[::1] bh
    cdef int s = bb.shape[0]
    cdef double* bhp = NULL
    if bhat is not None:
        bh = np.ascontiguousarray(bhat, dtype=np.float64)
        bhp = &bh[0]
    cdef double[::1] tau_c
    if tau0 is None:
        tau_c = np.zeros(nv)
    else:
        tarr = self._states(tau0, nv, "tau")
        if cnp.PyArray_NDIM(tarr) != 1:
            raise InputError(f"tau: constant torques of shape ({nv},) expected")
        tau_c = tarr
    cdef ConstTorque ct
    ct.nv = nv
    ct.tau = &tau_c[0] if nv else NULL
    cdef _Controller pyc = _Controller(controller, nq, nv, np.asarray(tau_c))
    cdef stage_torque_fn fn
    cdef void* ctx
    cdef PassiveTorque pt
    cdef _PassiveArrays pas = _PassiveArrays(passive, nv)
    pas.wrap(&pt, constant_torque if controller is None else python_torque,
             <void*>&ct if controller is None else <void*>pyc, nv, &fn, &ctx)
    cdef double gbuf[3]
    cdef const double* gp = self._gravity_ptr(gravity, gbuf)
    cdef cnp.ndarray fa = None
    cdef const double* fp = NULL
    cdef int fframe = 0
    if f_ext is not None:
        fframe = self._wrench_frame(f_ext_frame)
        fa = self._wrenches(qa, f_ext)
        fp = <double*>cnp.PyArray_DATA(fa)
    cdef Py_ssize_t rows = nsteps // save_every + 1 + (1 if nsteps % save_every else 0)
    Q = np.empty((rows, nq))
    V = np.empty((rows, nv))
    err = np.zeros(2 * nv)
    Q[0] = qa
    V[0] = va
    cdef double[:, ::1] Qv = Q, Vv = V
    # the unsaved steps' states alternate between two scratch rows
    cdef double[:, ::1] Sq = np.empty((2, nq + 1)), Sv = np.empty((2, nv + 1))
    cdef double[::1] ev = err
    cdef double[::1] work = np.empty(step_ws_size(nb, nq, nv, s))
    cdef Data data = Data(self)     # this run's own Data: runs may go on in parallel
    cdef Py_ssize_t k0 = 0, kend, cap = chunk
    cdef int code = 0
    cdef double tick
    cdef StepArgs sa
    cdef RunLoop rl
    sa.scheme = scheme
    sa.s = s
    sa.local = local
    sa.A = &Ab[0, 0]
    sa.b = &bb[0]
    sa.c = &cb_[0]
    sa.bhat = bhp
    sa.h = h
    sa.torque = fn
    sa.tctx = ctx
    sa.grav = gp
    sa.fext = fp
    sa.fframe = fframe
    sa.ws = &work[0]
    sa.err = &ev[0] if nv else NULL
    # a non-finite q (overflow) stops the run, reported by the caller's check of
    # the rows (with loops, before the rows are evaluated at it; else only with
    # save_every > 1, whose unsaved states the caller does not see)
    sa.check_q = constrained or save_every > 1
    sa.constrained = constrained
    sa.project = project
    sa.k1 = k1
    sa.k2 = k2
    sa.tol = tol
    sa.max_iter = max_iter
    rl.k = 0
    rl.row = 0
    rl.nsteps = nsteps
    rl.save_every = save_every
    rl.t0 = t0
    rl.nq = nq
    rl.nv = nv
    rl.Q = &Qv[0, 0]
    rl.V = &Vv[0, 0] if nv else NULL
    rl.Sq = &Sq[0, 0]
    rl.Sv = &Sv[0, 0]
    rl.qi = rl.Q
    rl.vi = rl.V
    rl.rk = 0.0
    rl.stop = False
    # with loops, project_kernel runs on every step's q before the step (with
    # max_iter = 0 it only evaluates the rows): its joint steps and factors serve
    # the step's first stage (rk_step joints_ready, loops.pxi _factors_cached)
    R = np.zeros(rows)
    cdef double[::1] Rv = R
    rl.R = &Rv[0]
    if constrained:
        self._require_loops()
        code = project_kernel(self, &data.c, &Qv[0, 0], &Vv[0, 0] if (nv and project) else NULL,
                              tol, max_iter if project else 0, 1e-10, &Rv[0])
    chunk = 1                       # grown or shrunk to 1–4 ms of steps
    while k0 < nsteps and code == 0 and not rl.stop:
        kend = min(nsteps, k0 + chunk)
        tick = perf_counter()
        if controller is None:
            with nogil:
                code = _run_steps(self, &data.c, &sa, &rl, k0, kend)
        else:                       # the controller's stages take the GIL: keep it
            code = _run_steps(self, &data.c, &sa, &rl, k0, kend)
        if progress is not None and code == 0:
            progress(kend - k0)
        k0 = kend
        tick = perf_counter() - tick
        if tick < 1e-3 and (cap <= 0 or chunk < cap):
            chunk *= 2
        elif tick > 4e-3 and chunk > 1:
            chunk //= 2
        PyErr_CheckSignals()        # Ctrl-C: KeyboardInterrupt, the run is dropped
    cdef Py_ssize_t k = rl.k, row = rl.row
    cdef bint stop = rl.stop
    if stop and save_every > 1:
        raise InputError(f"simulate: the simulation diverged: the state overflowed to "
                         f"infinity or NaN at step {k + 1} (t = {t0 + (k + 1) * h:.6g} s) "
                         f"although the inputs are finite: they are too large for "
                         f"float64, or dt is too large for this motion")
    if stop:                        # never hand back uninitialized rows
        Q[row + 1:] = np.nan
        V[row + 1:] = np.nan
    if code == STEP_CONTROLLER_ERROR:
        raise pyc.error
    if code == STEP_DIVERGED:
        raise InputError(f"the simulation diverged (non-finite state) in the step "
                         f"starting at t = {t0 + k * h:.6g} s: reduce dt or use a "
                         f"higher-order method")
    if code == CODE_MASS_NOT_PD:
        raise SingularModelError("simulate: the mass matrix is not positive definite "
                                 "(massless subtree without armature?)")
    if code > 0:
        self._raise_bad_quaternion(code - 1, -1)
    if code < 0:
        self._raise_singular(-code - 1)
    if constrained:
        return Q, V, err, R
    return Q, V, err
