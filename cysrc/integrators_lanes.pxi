# rk_step (integrators.pxi) of TD_VL states side by side, for the rollouts of tree
# models (rollout.pxi _rollout_group): every lane's stage states, stage torques and
# update are rk_step's own functions (_stage_state, _stage_rates, _step_update), one
# lane at a time; the stage accelerations of all lanes come from one call of the
# lanes' ABA (lanes.pxi _aba_lanes, aba_sweeps.h), bitwise each state's aba_kernel.
# So each lane's step is bitwise rk_step's (tests/test_rollout_lanes.py).
# Unconstrained steps without an error estimate only (closed loops and mimic
# couplings step one state at a time).

cdef enum:
    LANES_CAP = 8                   # ≥ TD_VL (4 with AVX, 2 with SSE2/NEON)


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
            _stage_state(m, a[l].scheme, a[l].s, a[l].A, a[l].h, a[l].local, j, q[l], v[l],
                         ws[l])
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
            _stage_rates(m, a[l].scheme, a[l].s, a[l].local, j, ws[l])
    for l in range(L):
        if codes[l] == 0:
            codes[l] = _step_update(m, a[l].scheme, a[l].s, a[l].b, a[l].h, a[l].local, q[l],
                                    v[l], ws[l], q_out[l], v_out[l])
