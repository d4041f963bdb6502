# Many trajectories in one call: the compiled loop of treedyn.rollout.  Every
# sample is stepped by step_project (integrators.pxi: rk_step, the finiteness check
# and, for loops and mimic couplings, the projection), the step of treedyn.simulate's
# _run and of treedyn.Simulator, with the same stage torques (ConstTorque, plus the
# passive forces): a sample's rows are bitwise those of a simulate run of it.
#
# The applied torque of a sample is held over each step (zero-order hold; all
# stages of step k see the same τ_k):
#   open loop        τ_k = T[s, k]                         (T broadcast to (N, nsteps, nv))
#   linear feedback  τ_k = T[s, k] + K_s (x_ref[s, k] ⊖ x_k),
#                    x_ref ⊖ x = (ψ, v_ref − v), q_ref = q ⊕ ψ (exponential coordinates)
#   Python callable  τ_k = controller(t_k, Q_k, V_k) for all samples at once, between
#                    the steps (under the GIL), the steps themselves in parallel.
# Samples run in parallel over OpenMP threads, one Data per thread (a team of the
# model's, as the batch dispatcher uses); a sample whose step fails (non-finite
# state, singular mass matrix) stops there, its code and step recorded, the others
# go on.

cdef struct RolloutShared:
    StepArgs step                   # the method, constraints and projection (the
                                    # per-sample forces and scratch are set per sample)
    int nq, nv
    Py_ssize_t nsteps, save_every, rows
    bint feedback
    const double* tau               # (N, nsteps, nv) with element strides tau_ss, tau_ks
    Py_ssize_t tau_ss, tau_ks
    const double* K                 # (N, nv, 2 nv), sample stride K_ss
    Py_ssize_t K_ss
    const double* xref              # (N, nsteps, nq + nv), strides xr_ss, xr_ks
    Py_ssize_t xr_ss, xr_ks
    const double* grav              # (N, 3), sample stride g_ss (NULL: the model's)
    Py_ssize_t g_ss
    bint passive                    # add −D v − K (q − q_ref)
    const double* D                 # (N, nv), sample stride D_ss
    Py_ssize_t D_ss
    const double* Kp                # passive stiffness (nv,), reference, q index
    const double* qref
    const int* qidx
    double* S                       # (2, N, nq + nv): the state after steps k (k even / odd)
    double* Q                       # (N, rows, nq) saved configurations
    double* V                       # (N, rows, nv) saved velocities
    double* R                       # (N, rows) constraint residuals (constrained)
    int* status                     # (N,) 0, or the code that stopped the sample
    Py_ssize_t* failed              # (N,) the step that failed (-1: none)
    Py_ssize_t N


cdef inline Py_ssize_t _rollout_row(Py_ssize_t k, Py_ssize_t se, Py_ssize_t nsteps,
                                    Py_ssize_t rows) noexcept nogil:
    """Row of the state after k steps, or -1 if it is not saved (as _run)."""
    if k % se == 0:
        return k // se
    if k == nsteps:
        return rows - 1
    return -1


cdef inline void _rollout_torque(ModelCore m, const RolloutShared* sh, Py_ssize_t smp,
                                 Py_ssize_t k, const double* qi, const double* vi, double* tau,
                                 double* dx) noexcept nogil:
    """The applied torque of sample smp over step k (open loop, plus the linear
    feedback at the step's start state (qi, vi)); dx: 2 nv doubles of scratch."""
    cdef int nq = sh.nq, nv = sh.nv, n, j
    cdef const double* xr
    cdef const double* Ks
    cdef double acc
    if sh.tau != NULL:
        for n in range(nv):
            tau[n] = sh.tau[smp * sh.tau_ss + k * sh.tau_ks + n]
    else:
        for n in range(nv):
            tau[n] = 0.0
    if sh.feedback:
        xr = &sh.xref[smp * sh.xr_ss + k * sh.xr_ks]
        config_difference(m, qi, xr, dx)
        for n in range(nv):
            dx[nv + n] = xr[nq + n] - vi[n]
        Ks = &sh.K[smp * sh.K_ss]
        for n in range(nv):
            acc = 0.0
            for j in range(2 * nv):
                acc = acc + Ks[n * 2 * nv + j] * dx[j]
            tau[n] += acc


cdef int _rollout_sample(ModelCore m, DataC* d, RolloutShared* sh, Py_ssize_t smp,
                         Py_ssize_t k0, Py_ssize_t k1, double* ws) noexcept nogil:
    """Steps k0 … k1 − 1 of sample smp (its state after k0 steps in sh.S); ws:
    step_ws_size + 3 nv + 2 (nq + nv) doubles.  Returns 0 or the code that stopped it.
    The sample's two rows of S are stepped in ws and written back at the end: the
    threads step neighbouring samples, whose rows of S share cache lines, so writing
    S at every step would move those lines between the cores at every step."""
    cdef int w = sh.nq + sh.nv, code
    cdef Py_ssize_t N = sh.N
    cdef double* xs = &ws[step_ws_size(m.nb, sh.nq, sh.nv, sh.step.s) + 3 * sh.nv]
    memcpy(xs, &sh.S[smp * w], w * sizeof(double))
    memcpy(&xs[w], &sh.S[(N + smp) * w], w * sizeof(double))
    code = _rollout_steps(m, d, sh, smp, k0, k1, ws, xs)
    memcpy(&sh.S[smp * w], xs, w * sizeof(double))
    memcpy(&sh.S[(N + smp) * w], &xs[w], w * sizeof(double))
    return code


cdef int _rollout_steps(ModelCore m, DataC* d, RolloutShared* sh, Py_ssize_t smp,
                        Py_ssize_t k0, Py_ssize_t k1, double* ws, double* xs) noexcept nogil:
    """_rollout_sample's steps, the state after k steps in xs[(k & 1) w …]."""
    cdef int nq = sh.nq, nv = sh.nv, w = nq + nv, code = 0
    cdef Py_ssize_t k, row
    cdef double* tau = &ws[step_ws_size(m.nb, nq, nv, sh.step.s)]
    cdef double* dx = &tau[nv]
    cdef double* qi
    cdef double* vi
    cdef double* qo
    cdef double* vo
    cdef const double* gp = &m.grav[0] if sh.grav == NULL else &sh.grav[smp * sh.g_ss]
    cdef double rk = 0.0
    cdef ConstTorque ct
    cdef PassiveTorque pt
    cdef StepArgs sa = sh.step      # the method and projection (a copy), with this
    ct.nv = nv                      # sample's stage torques, gravity and scratch
    ct.tau = tau
    sa.torque = constant_torque
    sa.tctx = <void*>&ct
    sa.grav = gp
    sa.ws = ws
    if sh.passive:
        pt.inner = constant_torque
        pt.ictx = <void*>&ct
        pt.nv = nv
        pt.D = &sh.D[smp * sh.D_ss]
        pt.K = sh.Kp
        pt.qref = sh.qref
        pt.qidx = sh.qidx
        sa.torque = passive_torque
        sa.tctx = <void*>&pt
    if sh.step.constrained:         # d's joint steps and rows of this sample's q
        code = project_kernel(m, d, &xs[(k0 & 1) * w], NULL, sh.step.tol, 0, 1e-10, &rk)
        if code:
            memcpy(&xs[((k0 + 1) & 1) * w], &xs[(k0 & 1) * w], w * sizeof(double))
            return code
    for k in range(k0, k1):
        qi = &xs[(k & 1) * w]
        vi = &qi[nq]
        qo = &xs[((k + 1) & 1) * w]
        vo = &qo[nq]
        _rollout_torque(m, sh, smp, k, qi, vi, tau, dx)
        code = step_project(m, d, &sa, k * sh.step.h, qi, vi, qo, vo, &rk)
        if code:                    # both rows of S: the last state (a controller's view)
            memcpy(qo, qi, w * sizeof(double))
            sh.failed[smp] = k
            return STEP_DIVERGED if code == STEP_Q_NONFINITE else code
        row = _rollout_row(k + 1, sh.save_every, sh.nsteps, sh.rows)
        if row >= 0:
            memcpy(&sh.Q[(smp * sh.rows + row) * nq], qo, nq * sizeof(double))
            memcpy(&sh.V[(smp * sh.rows + row) * nv], vo, nv * sizeof(double))
            if sh.step.constrained:
                sh.R[smp * sh.rows + row] = rk
    return 0


cdef void _rollout_group(ModelCore m, DataC* d, RolloutShared* sh, Py_ssize_t s0,
                         Py_ssize_t k0, Py_ssize_t k1, double* ws, Py_ssize_t wl) noexcept nogil:
    """Steps k0 … k1 − 1 of the TD_VL samples s0 … s0 + TD_VL − 1 in lock-step
    (rk_step_lanes; unconstrained models), each bitwise _rollout_sample's: the same
    torques, steps and checks per sample.  A sample that stops gets its status and
    step as there; its lane then steps a copy of another sample's state into scratch
    (the others are not affected).  ws: TD_VL blocks of wl doubles (step_ws_size +
    3 nv, then 3 (nq + nv) of scratch: the lane's two rows of S, stepped there and
    written back at the end as in _rollout_sample, and a stopped lane's output)."""
    cdef int L = TD_VL, nq = sh.nq, nv = sh.nv, w = nq + nv, l, a, code
    cdef Py_ssize_t k, row, smp, N = sh.N
    cdef Py_ssize_t sws = step_ws_size(m.nb, nq, nv, sh.step.s)
    cdef ConstTorque ct[LANES_CAP]
    cdef PassiveTorque pt[LANES_CAP]
    cdef StepArgs sa[LANES_CAP]
    cdef const StepArgs* sap[LANES_CAP]
    cdef double* wsl[LANES_CAP]
    cdef const double* qi[LANES_CAP]
    cdef const double* vi[LANES_CAP]
    cdef double* qo[LANES_CAP]
    cdef double* vo[LANES_CAP]
    cdef double* xs[LANES_CAP]
    cdef bint active[LANES_CAP]
    cdef bint loaded[LANES_CAP]
    cdef int codes[LANES_CAP]
    for l in range(L):              # as _rollout_sample: each sample's torques, gravity
        smp = s0 + l                # and scratch
        active[l] = sh.status[smp] == 0
        loaded[l] = active[l]
        wsl[l] = &ws[l * wl]
        xs[l] = &wsl[l][sws + 3 * nv]
        if loaded[l]:
            memcpy(xs[l], &sh.S[smp * w], w * sizeof(double))
            memcpy(&xs[l][w], &sh.S[(N + smp) * w], w * sizeof(double))
        ct[l].nv = nv
        ct[l].tau = &wsl[l][sws]
        sa[l] = sh.step
        sa[l].torque = constant_torque
        sa[l].tctx = <void*>&ct[l]
        sa[l].grav = &m.grav[0] if sh.grav == NULL else &sh.grav[smp * sh.g_ss]
        sa[l].ws = wsl[l]
        if sh.passive:
            pt[l].inner = constant_torque
            pt[l].ictx = <void*>&ct[l]
            pt[l].nv = nv
            pt[l].D = &sh.D[smp * sh.D_ss]
            pt[l].K = sh.Kp
            pt[l].qref = sh.qref
            pt[l].qidx = sh.qidx
            sa[l].torque = passive_torque
            sa[l].tctx = <void*>&pt[l]
    for k in range(k0, k1):
        a = -1
        for l in range(L):
            if not active[l]:
                continue
            if a < 0:
                a = l
            smp = s0 + l
            qi[l] = &xs[l][(k & 1) * w]
            vi[l] = &qi[l][nq]
            qo[l] = &xs[l][((k + 1) & 1) * w]
            vo[l] = &qo[l][nq]
            sap[l] = &sa[l]
            _rollout_torque(m, sh, smp, k, qi[l], vi[l], &wsl[l][sws], &wsl[l][sws + nv])
        if a < 0:
            break
        for l in range(L):          # a stopped sample's lane: a copy of lane a
            if not active[l]:
                qi[l] = qi[a]
                vi[l] = vi[a]
                qo[l] = &xs[l][2 * w]
                vo[l] = &qo[l][nq]
                sap[l] = &sa[a]
        rk_step_lanes(m, d, sap, wsl, k * sh.step.h, qi, vi, qo, vo, codes)
        row = _rollout_row(k + 1, sh.save_every, sh.nsteps, sh.rows)
        for l in range(L):
            if not active[l]:
                continue
            smp = s0 + l
            code = codes[l]
            if code == 0 and sh.step.check_q and not _finite_bits(qo[l], nq):
                code = STEP_Q_NONFINITE
            if code:
                memcpy(qo[l], qi[l], w * sizeof(double))
                sh.failed[smp] = k
                sh.status[smp] = STEP_DIVERGED if code == STEP_Q_NONFINITE else code
                active[l] = False
                continue
            if row >= 0:
                memcpy(&sh.Q[(smp * sh.rows + row) * nq], qo[l], nq * sizeof(double))
                memcpy(&sh.V[(smp * sh.rows + row) * nv], vo[l], nv * sizeof(double))
    for l in range(L):
        if loaded[l]:
            smp = s0 + l
            memcpy(&sh.S[smp * w], xs[l], w * sizeof(double))
            memcpy(&sh.S[(N + smp) * w], &xs[l][w], w * sizeof(double))


cdef inline Py_ssize_t _unit_start(Py_ssize_t u, Py_ssize_t ng, int L) noexcept nogil:
    """First sample of unit u of a rollout (units < ng: groups of L samples)."""
    return u * L if u <= ng else ng * L + (u - ng)


cdef inline void _rollout_unit(ModelCore m, DataC* d, RolloutShared* sh, Py_ssize_t u,
                               Py_ssize_t ng, Py_ssize_t k0, Py_ssize_t k1, double* ws,
                               Py_ssize_t wl) noexcept nogil:
    """Steps k0 … k1 − 1 of unit u: a group of TD_VL samples on the lanes (u < ng) or
    one sample."""
    cdef Py_ssize_t s = _unit_start(u, ng, TD_VL)
    if u < ng:
        _rollout_group(m, d, sh, s, k0, k1, ws, wl)
    elif sh.status[s] == 0:
        sh.status[s] = _rollout_sample(m, d, sh, s, k0, k1, ws)


cdef int _rollout_start(ModelCore m, DataC* d, RolloutShared* sh, Py_ssize_t smp) noexcept nogil:
    """The initial state of sample smp (loops: projected as _run does) into S and
    row 0."""
    cdef int nq = sh.nq, nv = sh.nv, code = 0
    cdef double* q = &sh.S[smp * (nq + nv)]
    cdef double rk = 0.0
    if sh.step.constrained:
        code = project_kernel(m, d, q, &q[nq] if (nv and sh.step.project) else NULL,
                              sh.step.tol, sh.step.max_iter if sh.step.project else 0, 1e-10,
                              &rk)
        sh.R[smp * sh.rows] = rk
        if code:
            sh.failed[smp] = 0
            memcpy(&sh.S[(sh.N + smp) * (nq + nv)], q, (nq + nv) * sizeof(double))
    memcpy(&sh.Q[smp * sh.rows * nq], q, nq * sizeof(double))
    memcpy(&sh.V[smp * sh.rows * nv], &q[nq], nv * sizeof(double))
    return code


cdef inline Py_ssize_t _stride(cnp.ndarray a, int axis):
    return cnp.PyArray_STRIDES(a)[axis] // <Py_ssize_t>sizeof(double)


cdef cnp.ndarray _broadcast3(object x, Py_ssize_t N, Py_ssize_t T, int w, str name):
    """x as a float64 array broadcast to (N, T, w), contiguous along w."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0 or a.shape[a.ndim - 1] != w or not a.flags.c_contiguous:
        raise InputError(f"rollout: {name}: expected a C-contiguous array ending in {w}, "
                         f"got shape {a.shape}")
    return np.broadcast_to(a, (N, T, w))


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line; called by treedyn.rollout)
def _rollout(ModelCore self, Q0, V0, double h, Py_ssize_t nsteps, int scheme, A, b, c,
             int local, tau=None, K=None, xref=None, gravity=None, damping=None, passive=None,
             bint constrained=False, double k1=0.0, double k2=0.0, bint project=False,
             double tol=1e-12, int max_iter=20, Py_ssize_t save_every=1, controller=None,
             progress=None, int threads=0):
    """Step N samples nsteps fixed steps of h from (Q0 (N, nq), V0 (N, nv)) (checked
    by treedyn.rollout).  Returns (Q (N, rows, nq), V (N, rows, nv), R (N, rows) or
    None, status (N,) int32, failed (N,) intp).

    tau (N or 1, nsteps or 1, nv) broadcast: the open-loop torque of each step (or
    the feed-forward with K); K (N or 1, nv, 2 nv) and xref (N or 1, nsteps or 1,
    nq + nv): the linear feedback τ += K (x_ref ⊖ x) at each step's start;
    gravity (N or 1, 3); damping (N or 1, nv) replaces the passive tables' D (the
    passive forces then apply even without passive tables: zero stiffness).
    controller(t, Q, V, status) -> (N, nv): evaluated before every step for all
    samples (views of the current states; the samples that stopped, status != 0,
    hold their last state: both rows of S are set to it when a sample stops).  Rows
    as _run's save_every.
    Between chunks (blocks of samples × up to 1024 steps, 10–40 ms) ``progress(sample
    steps done)`` is called and signals are handled (Ctrl-C: KeyboardInterrupt, the
    partial run dropped)."""
    from time import perf_counter
    cdef int nq = self.nq, nv = self.nv, w = nq + nv, n
    cdef cnp.ndarray qa = np.ascontiguousarray(Q0, dtype=np.float64)
    cdef cnp.ndarray va = np.ascontiguousarray(V0, dtype=np.float64)
    if qa.ndim != 2 or qa.shape[1] != nq or va.ndim != 2 or va.shape[1] != nv \
            or va.shape[0] != qa.shape[0]:
        raise InputError(f"rollout: q0, v0: expected (N, {nq}) and (N, {nv}), got "
                         f"{np.shape(Q0)} and {np.shape(V0)}")
    if save_every < 1:
        raise InputError(f"rollout: save_every: expected an integer >= 1, got {save_every}")
    if constrained:
        self._require_loops()
    cdef Py_ssize_t N = qa.shape[0], T = max(nsteps, 1), s, ka, kb, i0, i1, per
    cdef Py_ssize_t rows = nsteps // save_every + 1 + (1 if nsteps % save_every else 0)
    cdef RolloutShared sh
    cdef double[:, ::1] Ab = np.ascontiguousarray(A, dtype=np.float64)
    cdef double[::1] bb = np.ascontiguousarray(b, dtype=np.float64)
    cdef double[::1] cb_ = np.ascontiguousarray(c, dtype=np.float64)
    sh.nq = nq
    sh.nv = nv
    sh.nsteps = nsteps
    sh.save_every = save_every
    sh.rows = rows
    sh.N = N
    sh.step.scheme = scheme
    sh.step.s = bb.shape[0]
    sh.step.local = local
    sh.step.A = &Ab[0, 0]
    sh.step.b = &bb[0]
    sh.step.c = &cb_[0]
    sh.step.bhat = NULL
    sh.step.h = h
    sh.step.torque = constant_torque
    sh.step.tctx = NULL
    sh.step.grav = NULL
    sh.step.fext = NULL
    sh.step.fframe = 0
    sh.step.ws = NULL
    sh.step.err = NULL
    sh.step.check_q = True
    sh.step.constrained = constrained
    sh.step.project = project
    sh.step.k1 = k1
    sh.step.k2 = k2
    sh.step.tol = tol
    sh.step.max_iter = max_iter
    cdef cnp.ndarray ta = None, Ka = None, xa = None, ga = None, Da = None
    cdef cnp.ndarray zeros_v = np.zeros(nv + 1)
    cdef cnp.ndarray tb = None
    if controller is not None:
        tb = np.zeros((N, nv))
        ta = np.broadcast_to(tb[:, None, :], (N, T, nv))
    elif tau is not None:
        ta = _broadcast3(tau, N, T, nv, "tau")
    sh.tau = NULL
    sh.tau_ss = sh.tau_ks = 0
    if ta is not None and nv:
        sh.tau = <double*>cnp.PyArray_DATA(ta)
        sh.tau_ss = _stride(ta, 0)
        sh.tau_ks = _stride(ta, 1)
    sh.feedback = K is not None and nv > 0
    sh.K = sh.xref = NULL
    sh.K_ss = sh.xr_ss = sh.xr_ks = 0
    if sh.feedback:
        Ka = np.broadcast_to(np.ascontiguousarray(K, dtype=np.float64).reshape(-1, nv * 2 * nv),
                             (N, nv * 2 * nv))
        xa = _broadcast3(xref, N, T, w, "x_ref")
        sh.K = <double*>cnp.PyArray_DATA(Ka)
        sh.K_ss = _stride(Ka, 0)
        sh.xref = <double*>cnp.PyArray_DATA(xa)
        sh.xr_ss = _stride(xa, 0)
        sh.xr_ks = _stride(xa, 1)
    sh.grav = NULL
    sh.g_ss = 0
    if gravity is not None:
        ga = np.broadcast_to(np.ascontiguousarray(gravity, dtype=np.float64).reshape(-1, 3),
                             (N, 3))
        sh.grav = <double*>cnp.PyArray_DATA(ga)
        sh.g_ss = _stride(ga, 0)
    cdef _PassiveArrays pas = _PassiveArrays(passive, nv)
    cdef cnp.ndarray Kz = np.zeros(nv + 1), qz = np.zeros(nv + 1)
    cdef cnp.ndarray iz = -np.ones(nv + 1, dtype=np.intc)
    sh.passive = nv > 0 and (pas.active or damping is not None)
    if sh.passive:
        if damping is not None:
            Da = np.broadcast_to(np.ascontiguousarray(damping, dtype=np.float64).reshape(-1, nv),
                                 (N, nv))
            sh.D = <double*>cnp.PyArray_DATA(Da)
            sh.D_ss = _stride(Da, 0)
        else:
            sh.D = &pas.D[0]
            sh.D_ss = 0
        if pas.active:
            sh.Kp = &pas.K[0]
            sh.qref = &pas.qref[0]
            sh.qidx = &pas.qidx[0]
        else:
            sh.Kp = <double*>cnp.PyArray_DATA(Kz)
            sh.qref = <double*>cnp.PyArray_DATA(qz)
            sh.qidx = <int*>cnp.PyArray_DATA(iz)
    Q = np.empty((N, rows, nq))
    V = np.empty((N, rows, nv))
    R = np.zeros((N, rows)) if constrained else None
    cdef cnp.ndarray Rb = R if constrained else np.zeros(1)
    status = np.zeros(N, dtype=np.int32)
    failed = np.full(N, -1, dtype=np.intp)
    S = np.empty((2, N, w + 1))[:, :, :w].copy()
    S[0, :, :nq] = qa
    S[0, :, nq:] = va
    sh.S = <double*>cnp.PyArray_DATA(S)
    sh.Q = <double*>cnp.PyArray_DATA(Q)
    sh.V = <double*>cnp.PyArray_DATA(V)
    sh.R = <double*>cnp.PyArray_DATA(Rb)
    cdef int[::1] st = status
    sh.status = &st[0] if N else NULL
    cdef Py_ssize_t[::1] fl = failed
    sh.failed = &fl[0] if N else NULL
    if N == 0:
        return Q, V, R, status, failed
    cdef int nth = threads if threads > 0 else _batch_threads()
    if nth > N:
        nth = <int>N
    # groups of TD_VL samples in lock-step on the vector lanes (_rollout_group), the
    # last N mod TD_VL one at a time; units 0 … ng − 1 are the groups, the rest samples
    cdef int L = TD_VL
    cdef bint lanes = (_lanes_enabled and L > 1 and L <= LANES_CAP and not constrained
                       and nv > 0 and N >= L)
    cdef Py_ssize_t ng = N // L if lanes else 0, nunits = N - ng * (L - 1) if lanes else N
    cdef Py_ssize_t wsz = step_ws_size(self.nb, nq, nv, sh.step.s) + 3 * nv + 2 * w + 8
    cdef Py_ssize_t wl = wsz + w + 8
    if lanes:
        wsz = L * wl
    if lanes and nth > nunits:
        nth = <int>nunits
    cdef double[:, ::1] work = np.empty((nth, wsz))
    cdef _Team team = self._team(nth, lanes)
    global _lane_groups_run
    global _omp_started
    # steps in chunks of kc (1 with a Python controller); samples in blocks of 10–40 ms:
    # each block ends with the threads' barrier, whose wait can cost a time slice when
    # the cores are shared, so a block must hold much more work than that
    cdef Py_ssize_t kc = 1 if controller is not None else min(max(nsteps, 1), 1024)
    cdef double tick
    try:
        with nogil:
            if nth == 1:
                for s in range(N):
                    st[s] = _rollout_start(self, &team.c[0], &sh, s)
            else:
                _omp_started = True
                for s in prange(N, schedule="dynamic", chunksize=4, num_threads=nth):
                    st[s] = _rollout_start(self, &team.c[threadid()], &sh, s)
        ka = 0
        per = 4 * nth
        while ka < nsteps:
            kb = min(nsteps, ka + kc)
            if controller is not None:       # (checked by treedyn.rollout's wrapper)
                tb[...] = controller(ka * h, S[ka & 1, :, :nq], S[ka & 1, :, nq:], status)
            i0 = 0
            while i0 < nunits:
                i1 = min(nunits, i0 + per)
                tick = perf_counter()
                with nogil:
                    if nth == 1:
                        for s in range(i0, i1):
                            _rollout_unit(self, &team.c[0], &sh, s, ng, ka, kb, &work[0, 0],
                                          wl)
                    else:
                        for s in prange(i0, i1, schedule="dynamic", chunksize=1,
                                        num_threads=nth):
                            _rollout_unit(self, &team.c[threadid()], &sh, s, ng, ka, kb,
                                          &work[threadid(), 0], wl)
                tick = perf_counter() - tick
                _lane_groups_run += max(0, min(i1, ng) - i0) if lanes else 0
                if progress is not None:
                    progress((_unit_start(i1, ng, L) - _unit_start(i0, ng, L)) * (kb - ka))
                i0 = i1
                if tick < 1e-2:
                    per *= 2
                elif tick > 4e-2 and per > nth:
                    per //= 2
                PyErr_CheckSignals()        # Ctrl-C: KeyboardInterrupt, the run dropped
            ka = kb
    finally:
        self._team_done(team)
    for s in range(N):                      # the stopped samples' remaining rows
        if st[s]:
            r0 = _rollout_row_after(failed[s], save_every, nsteps, rows)
            Q[s, r0:] = np.nan
            V[s, r0:] = np.nan
            if constrained:
                R[s, r0:] = np.nan
    return Q, V, R, status, failed


def _rollout_row_after(Py_ssize_t k, Py_ssize_t se, Py_ssize_t nsteps, Py_ssize_t rows):
    """First row not written when step k (0-based) failed: rows of states after
    steps ≤ k are written (the state after k steps is the last good one)."""
    if k < 0:
        return 0
    return k // se + 1
