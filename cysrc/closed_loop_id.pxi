# Closed-loop inverse dynamics (docs/constraints.md, "Inverse dynamics of closed
# loops"): the actuator forces of a mechanism whose actuated joints follow a
# desired motion (q_a, v_a, v̇_a).
#
#   1. q: g(q) = 0 with the actuated coordinates held, by Levenberg–Marquardt on
#      the other freedoms (assemble_kernel, also Model.assemble: step
#      −(H + μ (tr H / n + 1e-12) I)⁻¹ Gᵀg, H = GᵀG, μ ÷ 3 on success, × 4 on
#      failure), along the joints' groups;
#   2. v_d = −G_d⁺ G_a v_a,   3. v̇_d = −G_d⁺ (G_a v̇_a + Ġv)   (d: the other freedoms);
#   4. τ = M v̇ + h by the body-fixed RNEA;
#   5. [Sᵀ Gᵀ] (τ_a, λ) = τ in the minimal-norm least-squares sense,
# with every ⁺ a minimal-norm least-squares solve by Householder QR with column
# pivoting (rank r: diagonal entries of R below rcond · |R₀₀| dropped, as LAPACK's
# dgelsy decides; the NumPy oracle uses the SVD, the same for well-separated ranks)
# and, for r below the number of unknowns, the minimal-norm member of the solution
# family x = x_b − N y, N = P [R₁₁⁻¹R₁₂; −I], by (NᵀN) y = Nᵀ x_b (NᵀN ⪰ I).  LAPACK
# itself (gelss/gelsy through SciPy) costs 15–25 µs on these 10 × 10 systems, more
# than the rest of the kernel.  The row wrenches of the closures
# (loop_rows) give the wrench maps D (rows × 6) from the child link's twist
# (ω, ṙ of its origin, world axes) to the rows' rates: the constraint wrench on the
# child link is Dᵀ λ.

cdef enum:
    CLID_NO_PROGRESS = -1        # Levenberg–Marquardt: μ > 1e12
    CLID_NOT_CONVERGED = -2      # max_iter iterations
    CLID_OVERFLOW = -3           # the residual at the guess is not finite


cdef struct ClidWork:
    double* A        # least-squares matrix, column-major, or H + μ tr I:
                     # max(m nd, nv (na + m), nd²)
    double* b        # right-hand side / solution: max(m, nv, na + m)
    double* s        # (2 cols + 2 cols²) QR scratch: column norms, the solution in
                     # pivoted order, R₁₁⁻¹R₁₂ and NᵀN
    int* perm        # (cols,) column pivots
    double* H        # (nd, nd)
    double* grad     # (nd,)
    double* step     # (nv,)
    double* qn       # (nq,) trial configuration
    double* gn       # (m,)  its residual
    double* Gn       # (m, nv) its Jacobian
    double* gam      # (m,)


cdef void _lstsq(double* A, int rows, int cols, double* b, double rcond,
                 ClidWork* w) noexcept nogil:
    """Minimal-norm least-squares solution of A x = b (A column-major rows × cols,
    overwritten; b of length max(rows, cols), x in b[:cols])."""
    cdef int i, j, k, p, r, t, nf, kmax = min(rows, cols), tmp
    cdef double nrm, alpha, beta, sv, big = 0.0
    cdef double* cn = w.s                   # column norms²
    cdef double* xp = &w.s[cols]            # solution, pivoted order
    cdef double* Wm = &w.s[2 * cols]        # R₁₁⁻¹R₁₂ (r × nf, column-major), then NᵀN
    cdef double* col
    for j in range(cols):
        w.perm[j] = j
        nrm = 0.0
        for i in range(rows):
            nrm += A[i + j * rows] * A[i + j * rows]
        cn[j] = nrm
    r = 0
    for k in range(kmax):
        p = k                                           # pivot: largest remaining norm
        for j in range(k + 1, cols):
            if cn[j] > cn[p]:
                p = j
        if p != k:
            for i in range(rows):
                sv = A[i + k * rows]; A[i + k * rows] = A[i + p * rows]; A[i + p * rows] = sv
            sv = cn[k]; cn[k] = cn[p]; cn[p] = sv
            tmp = w.perm[k]; w.perm[k] = w.perm[p]; w.perm[p] = tmp
        col = &A[k * rows]
        nrm = 0.0
        for i in range(k, rows):
            nrm += col[i] * col[i]
        nrm = sqrt(nrm)
        if k == 0:
            big = nrm
        if not nrm > rcond * big or nrm == 0.0:
            break
        alpha = -nrm if col[k] >= 0.0 else nrm          # H = I − β u uᵀ, u = (col[k] − α, …)
        col[k] -= alpha
        beta = 1.0 / (-alpha * col[k])
        for j in range(k + 1, cols):                    # apply H to the later columns
            sv = 0.0
            for i in range(k, rows):
                sv += col[i] * A[i + j * rows]
            sv *= beta
            for i in range(k, rows):
                A[i + j * rows] -= sv * col[i]
            cn[j] = 0.0                                 # remaining norm, recomputed
            for i in range(k + 1, rows):
                cn[j] += A[i + j * rows] * A[i + j * rows]
        sv = 0.0                                        # and to b
        for i in range(k, rows):
            sv += col[i] * b[i]
        sv *= beta
        for i in range(k, rows):
            b[i] -= sv * col[i]
        col[k] = alpha                                  # R_kk (u is not needed again)
        r = k + 1
    # R₁₁ z = (Qᵀb)[:r]
    for i in range(r - 1, -1, -1):
        sv = b[i]
        for j in range(i + 1, r):
            sv -= A[i + j * rows] * xp[j]
        xp[i] = sv / A[i + i * rows]
    nf = cols - r
    if nf > 0:
        # Wm = R₁₁⁻¹ R₁₂, then x = [z − Wm y; y] with (I + WmᵀWm) y = Wmᵀ z
        for t in range(nf):
            for i in range(r - 1, -1, -1):
                sv = A[i + (r + t) * rows]
                for j in range(i + 1, r):
                    sv -= A[i + j * rows] * Wm[j + t * r]
                Wm[i + t * r] = sv / A[i + i * rows]
        for t in range(nf):
            sv = 0.0
            for i in range(r):
                sv += Wm[i + t * r] * xp[i]
            xp[r + t] = sv
        col = &Wm[r * nf]                               # NᵀN (nf × nf) after Wm
        for t in range(nf):
            for j in range(nf):
                sv = 1.0 if t == j else 0.0
                for i in range(r):
                    sv += Wm[i + t * r] * Wm[i + j * r]
                col[t * nf + j] = sv
        _cholesky(col, nf, 0.0, NULL, NULL)
        _solve_L(col, nf, nf, NULL, &xp[r])
        _solve_Lt(col, nf, nf, NULL, &xp[r])
        for i in range(r):
            sv = 0.0
            for t in range(nf):
                sv += Wm[i + t * r] * xp[r + t]
            xp[i] -= sv
    for j in range(cols):
        b[w.perm[j]] = xp[j]


cdef int assemble_kernel(ModelCore m, DataC* d, const int* dep, int nd, double* q,
                         double tol, int max_iter, double* g, double* G, ClidWork* w,
                         int* iters) noexcept nogil:
    """Step 1 in place on q (also Model.assemble): Levenberg–Marquardt on the freedoms
    dep; on return g, G are the rows at q and iters the iterations done.  Returns 0,
    a quaternion code (> 0) or CLID_*."""
    cdef int nv = m.nv, nq = m.nq, mr = m.n_crows, it, i, j, k, bad
    cdef double cost, cost_new, mu = 1e-3, tr, s
    iters[0] = 0
    bad = loop_rows_kernel(m, d, q, NULL, g, G, w.gam)
    if bad:
        return bad
    cost = _half_norm2(g, mr)
    if not isfinite(cost):
        return CLID_OVERFLOW
    for it in range(max_iter):
        iters[0] = it
        if mr == 0 or _max_abs(g, mr) <= tol:
            return 0
        # H = G_dᵀ G_d, grad = G_dᵀ g
        tr = 0.0
        for i in range(nd):
            s = 0.0
            for k in range(mr):
                s += G[k * nv + dep[i]] * g[k]
            w.grad[i] = s
            for j in range(i, nd):
                s = 0.0
                for k in range(mr):
                    s += G[k * nv + dep[i]] * G[k * nv + dep[j]]
                w.H[i * nd + j] = s
            tr += w.H[i * nd + i]
        tr = tr / nd + 1e-12 if nd > 0 else 1e-12
        while True:
            for i in range(nd):                         # A = H + μ tr I (upper → full)
                for j in range(i, nd):
                    w.A[i * nd + j] = w.H[i * nd + j]
                    w.A[j * nd + i] = w.H[i * nd + j]
                w.A[i * nd + i] += mu * tr
            for j in range(nv):
                w.step[j] = 0.0
            if _cholesky(w.A, nd, 0.0, NULL, NULL):
                for i in range(nd):
                    w.b[i] = -w.grad[i]
                _solve_L(w.A, nd, nd, NULL, w.b)
                _solve_Lt(w.A, nd, nd, NULL, w.b)
                for i in range(nd):
                    w.step[dep[i]] = w.b[i]
                config_retract(m, q, w.step, LOCAL_EXP, w.qn)
                bad = loop_rows_kernel(m, d, w.qn, NULL, w.gn, w.Gn, w.gam)
                if bad:
                    return bad
                cost_new = _half_norm2(w.gn, mr)
                if cost_new < cost:
                    memcpy(q, w.qn, nq * sizeof(double))
                    memcpy(g, w.gn, mr * sizeof(double))
                    memcpy(G, w.Gn, mr * nv * sizeof(double))
                    cost = cost_new
                    mu = fmax(mu / 3.0, 1e-12)
                    break
            mu *= 4.0
            if mu > 1e12:
                return CLID_NO_PROGRESS
    iters[0] = max_iter
    if mr == 0 or _max_abs(g, mr) <= tol:
        return 0
    return CLID_NOT_CONVERGED


cdef int closed_loop_id_kernel(ModelCore m, DataC* d, const int* act, int na,
                               const int* dep, int nd, double* q, const double* v_act,
                               const double* a_act, const double* grav, double tol,
                               int max_iter, double rcond, double* g, double* G,
                               double* v, double* a, double* tau, double* x, double* D,
                               double* residual, ClidWork* w) noexcept nogil:
    """Steps 1–5 above.  q (nq) in: the guess with the actuated coordinates set; out:
    the assembled q.  Outputs g (m), G (m, nv) at q, v, a, τ (nv), x = (τ_a, λ)
    (na + m), D (m, 6) the wrench maps (loop_rows), residual max |[Sᵀ Gᵀ] x − τ|.
    Returns 0, a quaternion code (> 0) or CLID_*."""
    cdef int nv = m.nv, mr = m.n_crows, i, j, k, code, nc = na + mr, iters
    cdef double s
    code = assemble_kernel(m, d, dep, nd, q, tol, max_iter, g, G, w, &iters)
    if code:
        return code
    # 2. v_d = −G_d⁺ G_a v_a
    for j in range(nv):
        v[j] = 0.0
    for i in range(na):
        v[act[i]] = v_act[i]
    for k in range(mr):
        s = 0.0
        for i in range(na):
            s += G[k * nv + act[i]] * v_act[i]
        w.b[k] = -s
        for i in range(nd):
            w.A[i * mr + k] = G[k * nv + dep[i]]
    _lstsq(w.A, mr, nd, w.b, rcond, w)
    for i in range(nd):
        v[dep[i]] = w.b[i]
    # 3. rows at (q, v): v̇_d = −G_d⁺ (G_a v̇_a + Ġv)
    code = body_motion_kernel(m, d, q, v, d.zero_v)
    if code:
        return code
    world_screws(m, d, d.oJ)
    d.q_loop = q
    loop_rows(m, d, g, G, w.gam, D)
    for j in range(nv):
        a[j] = 0.0
    for i in range(na):
        a[act[i]] = a_act[i]
    for k in range(mr):
        s = w.gam[k]
        for i in range(na):
            s += G[k * nv + act[i]] * a_act[i]
        w.b[k] = -s
        for i in range(nd):
            w.A[i * mr + k] = G[k * nv + dep[i]]
    _lstsq(w.A, mr, nd, w.b, rcond, w)
    for i in range(nd):
        a[dep[i]] = w.b[i]
    # 4. τ = M v̇ + h
    code = rnea_body_kernel(m, d, q, v, a, grav, NULL, 0, tau)
    if code:
        return code
    # 5. [Sᵀ Gᵀ] x = τ: column i < na is e_act[i], column na + k is row k of G
    for j in range(nc):
        for i in range(nv):
            w.A[j * nv + i] = 0.0
    for i in range(na):
        w.A[i * nv + act[i]] = 1.0
    for k in range(mr):
        for i in range(nv):
            w.A[(na + k) * nv + i] = G[k * nv + i]
    for i in range(nv):
        w.b[i] = tau[i]
    _lstsq(w.A, nv, nc, w.b, rcond, w)
    for j in range(nc):
        x[j] = w.b[j]
    for i in range(nv):                                 # r = [Sᵀ Gᵀ] x − τ
        s = -tau[i]
        for k in range(mr):
            s += G[k * nv + i] * x[na + k]
        w.step[i] = s
    for i in range(na):
        w.step[act[i]] += x[i]
    residual[0] = _max_abs(w.step, nv)
    return 0


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
cdef tuple _clid_work(ModelCore self, object act, ClidWork* w):
    """Scratch of the closed-loop kernels (closed_loop_id.pxi) for the actuated
    velocity indices ``act``: returns (ib, buffer, na); ib holds act, then the
    other freedoms, then the QR pivots; the buffer backs w's arrays.  Both must
    stay alive while a kernel uses w."""
    cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, j
    cdef const int[::1] act_in = np.asarray(act, dtype=np.int32).reshape(-1)
    cdef int na = act_in.shape[0]
    cdef int nd = nv - na
    cdef int big = max(mr, nv, na + mr, 1)
    cdef int ns = 3 * big + 2 * big * big
    cdef int nA = max(mr * max(nd, 1), nv * (na + mr), nd * nd, 1)
    ib = np.empty(na + nv + big + 1, dtype=np.int32)
    cdef int[::1] ibv = ib
    cdef int* ia = &ibv[0]
    cdef int* idp = &ibv[na]
    for k in range(nv):
        idp[k] = 1
    for k in range(na):
        ia[k] = act_in[k]
        if not 0 <= ia[k] < nv or idp[ia[k]] == 0:
            raise InputError(f"act: expected distinct velocity indices in [0, {nv}), "
                             f"got {np.asarray(act_in).tolist()}")
        idp[ia[k]] = 0
    j = 0
    for k in range(nv):
        if idp[k]:
            idp[j] = k
            j += 1
    buf = np.empty(nA + big + ns + nd * nd + nd + nv + nq + mr + 2 * mr * nv + mr + 8)
    cdef double[::1] bv = buf
    cdef double* p = &bv[0]
    w.A = p; p += nA
    w.b = p; p += big
    w.s = p; p += ns
    w.perm = &ibv[na + nv]
    w.H = p; p += nd * nd
    w.grad = p; p += nd
    w.step = p; p += nv
    w.qn = p; p += nq
    w.gn = p; p += mr
    w.Gn = p; p += mr * nv
    w.gam = p; p += mr
    return ib, buf, na


def _assemble(ModelCore self, q, free, double tol=1e-12, int max_iter=200):
    """Compiled Levenberg–Marquardt assembly (closed_loop_id.pxi assemble_kernel)
    of one configuration: g(q) = 0 moving only the velocity indices ``free``.
    Inputs are checked by the caller (treedyn.constraints.assemble).  Returns
    (status, q, max |g(q)|, iterations), status "ok", "no progress" (the damping
    grew past 1e12), "not converged" (max_iter iterations) or "overflow" (the
    residual at the guess is not finite); a non-unit quaternion raises."""
    cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, iters = 0, code
    self._require_loops()
    fixed = np.ones(nv, dtype=bool)
    fixed[np.asarray(free, dtype=np.intp)] = False
    cdef ClidWork w
    ib, wbuf, na_ = _clid_work(self, np.flatnonzero(fixed), &w)
    cdef int[::1] ibv = ib
    cdef int na = na_
    qo = np.array(q, dtype=np.float64)
    g = np.empty(mr)
    G = np.empty((mr, nv))
    cdef double[::1] qv = qo, gv = g
    cdef double[:, ::1] Gv = G
    cdef Data data = self._data(None)
    with nogil:
        code = assemble_kernel(self, &data.c, &ibv[na], nv - na, &qv[0], tol, max_iter,
                               &gv[0] if mr else NULL, &Gv[0, 0] if mr else NULL, &w,
                               &iters)
    self._done(data, None)
    if code > 0:
        self._raise_code(code, -1, "assemble")
    status = {0: "ok", CLID_NO_PROGRESS: "no progress", CLID_NOT_CONVERGED: "not converged",
              CLID_OVERFLOW: "overflow"}[code]
    return status, qo, float(np.abs(g).max()) if mr else 0.0, iters


def _closed_loop_inverse_dynamics(ModelCore self, q, act, v_act, a_act, gravity=None,
                                  double tol=1e-12, int max_iter=200,
                                  double rcond=1e-10, closure_rows=None):
    """Compiled closed-loop inverse dynamics (closed_loop_id.pxi) of one state.
    q (nq,): the guess with the actuated coordinates set; act: the actuated
    velocity indices; v_act, a_act their rates; closure_rows: the number of rows
    of each closure (for the wrenches).  Inputs are checked by the caller.
    Returns (code, q, v, a, τ, x = (τ_a, λ), D (m, 6), residual, wrenches
    (n_closures, 6) = per closure Dᵀλ); code 0, or a CLID_* / quaternion code, or
    CODE_OVERFLOW for a result that is not finite (then the other entries are
    undefined)."""
    cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, j
    self._require_loops()
    cdef ClidWork w
    ib, wbuf, na_ = _clid_work(self, act, &w)        # kept alive until the call returns
    cdef int[::1] ibv = ib
    cdef int na = na_
    cdef int nd = nv - na
    cdef int* ia = &ibv[0]
    cdef int* idp = &ibv[na]
    # the outputs (views of one buffer) and the inputs' copies
    cdef int nout = nq + 3 * nv + na + mr + 6 * mr
    buf = np.empty(nout + 2 * na + mr + mr * nv + 1)
    cdef double[::1] bv = buf
    cdef const double[::1] qin = np.asarray(q, dtype=np.float64)
    cdef const double[::1] vin = np.asarray(v_act, dtype=np.float64)
    cdef const double[::1] ain = np.asarray(a_act, dtype=np.float64)
    qo = buf[:nq]
    v = buf[nq:nq + nv]
    a = buf[nq + nv:nq + 2 * nv]
    tau = buf[nq + 2 * nv:nq + 3 * nv]
    x = buf[nq + 3 * nv:nq + 3 * nv + na + mr]
    D = buf[nq + 3 * nv + na + mr:nout].reshape(mr, 6)
    cdef double* p = &bv[0]
    cdef double* qp = p
    cdef double* vp = &p[nq]
    cdef double* ap = &p[nq + nv]
    cdef double* tp = &p[nq + 2 * nv]
    cdef double* xp = &p[nq + 3 * nv]
    cdef double* Dp = &p[nq + 3 * nv + na + mr]
    cdef double* vap = &p[nout]
    cdef double* aap = &p[nout + na]
    cdef double* gp_ = &p[nout + 2 * na]
    cdef double* Gp = &p[nout + 2 * na + mr]
    for k in range(nq):
        qp[k] = qin[k]
    for k in range(na):
        vap[k] = vin[k]
        aap[k] = ain[k]
    cdef double gbuf[3]
    cdef const double* gp = self._gravity_ptr(gravity, gbuf)
    cdef double res = 0.0
    cdef int code
    cdef Data data = self._data(None)
    cdef const int[::1] crows = np.asarray(closure_rows if closure_rows is not None
                                           else [mr], dtype=np.int32)
    cdef int ncl = crows.shape[0], c, r0
    W = np.zeros((ncl, 6))
    cdef double[:, ::1] Wv = W
    with nogil:
        code = closed_loop_id_kernel(self, &data.c, ia, na, idp, nd, qp, vap, aap, gp, tol,
                                     max_iter, rcond, gp_, Gp, vp, ap, tp, xp, Dp, &res, &w)
        if code == 0 and not (_finite_bits(&bv[0], nout) and isfinite(res)):
            code = CODE_OVERFLOW
        if code == 0:                               # closure c's wrench: D_cᵀ λ_c
            r0 = 0
            for c in range(ncl):
                for k in range(r0, r0 + crows[c]):
                    for j in range(6):
                        Wv[c, j] += Dp[6 * k + j] * xp[na + k]
                r0 += crows[c]
    self._done(data, None)
    return code, qo, v, a, tau, x, D, res, W
