# rk_step (integrators.pxi) of TD_VL states side by side, for the rollouts of tree
# models (rollout.pxi _rollout_group): every lane's stage states, stage torques and
# update are rk_step's, one lane at a time, in its order; the stage accelerations of
# all lanes come from one call of the lanes' ABA (lanes.pxi _aba_lanes,
# aba_sweeps.h), bitwise each state's aba_kernel.  So each lane's step is bitwise
# rk_step's (tests/test_rollout_lanes.py).  Unconstrained steps without an error
# estimate only (closed loops and mimic couplings step one state at a time).

cdef enum:
    LANES_CAP = 8                   # ≥ TD_VL (4 with AVX, 2 with SSE2/NEON)


cdef inline void _stage_state(ModelCore m, const StepArgs* a, int j, const double* q,
                              const double* v, double* ws) noexcept nogil:
    """rk_step's stage velocity vs and configuration qs of stage j (in ws)."""
    cdef int nq = m.nq, nv = m.nv, s = a.s, scheme = a.scheme, local = a.local, l, n
    cdef const double* A = a.A
    cdef double h = a.h, w
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
        if j == 0:
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


cdef inline void _stage_rates(ModelCore m, const StepArgs* a, int j, double* ws) noexcept nogil:
    """rk_step's rates of stage j after its accelerations (Kp or Kq, in ws)."""
    cdef int nq = m.nq, nv = m.nv, s = a.s, scheme = a.scheme, n
    cdef double* Kp = ws
    cdef double* Kq = &ws[2 * s * nv]
    cdef double* qs = &ws[2 * s * nv + s * nq]
    cdef double* psi = &qs[3 * nq]
    cdef double* vs = &psi[nv]
    if scheme == SCHEME_RKMK:
        local_rates(m, psi, vs, a.local, &Kp[nv * j])
    elif scheme == SCHEME_CG or scheme == SCHEME_SEMI:
        for n in range(nv):
            Kp[nv * j + n] = vs[n]
    else:
        config_rate(m, qs, vs, &Kq[nq * j])


cdef inline int _step_update(ModelCore m, const StepArgs* a, const double* q, const double* v,
                             double* ws, double* q_out, double* v_out) noexcept nogil:
    """rk_step's update from the stages' rates (no error estimate); 0 or
    STEP_DIVERGED."""
    cdef int nq = m.nq, nv = m.nv, s = a.s, scheme = a.scheme, local = a.local, j, n
    cdef const double* b = a.b
    cdef double h = a.h
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


cdef void rk_step_lanes(ModelCore m, DataC* d, const StepArgs* const* a, double* const* ws,
                        double t, const double* const* q, const double* const* v,
                        double* const* q_out, double* const* v_out, int* codes) noexcept nogil:
    """One unconstrained step of TD_VL states: lane l from (q[l], v[l]) with a[l]'s
    stage torques and gravity (the method, h, local map: a[0]'s, the same for all)
    and a[l]'s scratch ws[l] (step_ws_size doubles), into (q_out[l], v_out[l]);
    codes[l]: 0 or the code rk_step returns for that state.  A lane that fails
    goes on computing with the others (its results are not to be used)."""
    cdef int L = TD_VL, nq = m.nq, nv = m.nv, s = a[0].s, j, l, code
    cdef const double* c = a[0].c
    cdef double h = a[0].h
    cdef double* qs[LANES_CAP]
    cdef double* vs[LANES_CAP]
    cdef double* tau[LANES_CAP]
    cdef double* kv[LANES_CAP]
    cdef const double* g[LANES_CAP]
    cdef int acodes[LANES_CAP]
    cdef double* w
    for l in range(L):
        codes[l] = 0
        w = ws[l]
        qs[l] = &w[2 * s * nv + s * nq]
        vs[l] = &qs[l][3 * nq + nv]
        tau[l] = &vs[l][nv]
        g[l] = a[l].grav
    for j in range(s):
        for l in range(L):
            _stage_state(m, a[l], j, q[l], v[l], ws[l])
            code = a[l].torque(a[l].tctx, t + c[j] * h, qs[l], vs[l], tau[l])
            if code and codes[l] == 0:
                codes[l] = code
            kv[l] = &ws[l][s * nv + nv * j]
        _aba_lanes(m, d, qs, vs, tau, g, kv, acodes)
        for l in range(L):
            if codes[l]:
                continue
            code = acodes[l]
            if code == CODE_MASS_NOT_PD and not (_finite_bits(qs[l], nq)
                                                 and _finite_bits(vs[l], nv)):
                code = STEP_DIVERGED
            if code:
                codes[l] = code
                continue
            _stage_rates(m, a[l], j, ws[l])
    for l in range(L):
        if codes[l] == 0:
            codes[l] = _step_update(m, a[l], q[l], v[l], ws[l], q_out[l], v_out[l])
