# Derivatives of forward dynamics v̇ = M⁻¹ (τ − h(q, v)):
#   ∂v̇/∂q = −M⁻¹ ∂τ/∂q,   ∂v̇/∂v = −M⁻¹ ∂τ/∂v,   ∂v̇/∂τ = M⁻¹,
# the inverse-dynamics derivatives taken at (q, v, v̇) ([Carpentier & Mansard 2018]).
# M⁻¹ from the O(n²) recursion of minverse.pxi, v̇ = M⁻¹(τ − h) with h from the
# spatial RNEA, ∂τ/∂(q, v) from rnea_derivatives.pxi (both reusing the poses of
# M⁻¹'s first pass).  The products M⁻¹ ∂τ/∂x either as dense products that use
# only the nonzero entries of ∂τ/∂x (freedoms on different branches do not
# couple) and contiguous rows of the symmetric M⁻¹, or, where that costs less (long
# chains: O(nb) instead of O(nv) per column), by the articulated-body recursion on
# M⁻¹'s factors; ModelCore.fd_recursive holds the choice (treedyn/tables.py).

cdef extern from *:
    """
    /* D <- -M⁻¹ D in place (nv × nv, row-major, M⁻¹ symmetric), four columns of D
       at a time.  The rows of the four columns with a nonzero entry (freedoms on
       other branches do not couple) are packed first, into rows and P (4 per row).
       Then each block of 2·TD_VL output rows (two vectors) is summed in eight
       vector registers over those rows, reading M⁻¹[r, n .. n + 2·TD_VL) (the
       column entries, by symmetry), with no loads or stores of the sums.  Every
       sum runs over r in increasing order, so the result is bitwise that of the
       plain loop −Σ_r M⁻¹[n, r] D[r, a + k]. */
    static void td_neg_minv_times(const double* __restrict__ Mi, double* __restrict__ D,
                                  long nv, double* __restrict__ P, int* __restrict__ rows)
    {
        for (long a = 0; a < nv; a += 4) {
            const long w = nv - a < 4 ? nv - a : 4;
            long cnt = 0;
            for (long r = 0; r < nv; r++) {
                const double* x = D + r * nv + a;
                const double x0 = x[0], x1 = w > 1 ? x[1] : 0.0,
                             x2 = w > 2 ? x[2] : 0.0, x3 = w > 3 ? x[3] : 0.0;
                if (x0 == 0.0 && x1 == 0.0 && x2 == 0.0 && x3 == 0.0)
                    continue;
                rows[cnt] = (int)r;
                P[4 * cnt] = x0; P[4 * cnt + 1] = x1;
                P[4 * cnt + 2] = x2; P[4 * cnt + 3] = x3;
                cnt++;
            }
            long n = 0;
    #if TD_VL
            for (; n + 2 * TD_VL <= nv; n += 2 * TD_VL) {
                td_vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
                td_vec t0 = {0}, t1 = {0}, t2 = {0}, t3 = {0};
                for (long i = 0; i < cnt; i++) {
                    const double* m = Mi + (long)rows[i] * nv + n;
                    const td_vec m0 = *(const td_uvec*)m, m1 = *(const td_uvec*)(m + TD_VL);
                    const double p0 = P[4 * i], p1 = P[4 * i + 1],
                                 p2 = P[4 * i + 2], p3 = P[4 * i + 3];
                    s0 += m0 * p0; s1 += m0 * p1; s2 += m0 * p2; s3 += m0 * p3;
                    t0 += m1 * p0; t1 += m1 * p1; t2 += m1 * p2; t3 += m1 * p3;
                }
                for (int t = 0; t < TD_VL; t++) {
                    double* y = D + (n + t) * nv + a;
                    double* z = D + (n + TD_VL + t) * nv + a;
                    y[0] = -s0[t]; z[0] = -t0[t];
                    if (w > 1) { y[1] = -s1[t]; z[1] = -t1[t]; }
                    if (w > 2) { y[2] = -s2[t]; z[2] = -t2[t]; }
                    if (w > 3) { y[3] = -s3[t]; z[3] = -t3[t]; }
                }
            }
    #endif
            for (; n < nv; n++) {
                double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
                for (long i = 0; i < cnt; i++) {
                    const double m = Mi[(long)rows[i] * nv + n];
                    s0 += m * P[4 * i]; s1 += m * P[4 * i + 1];
                    s2 += m * P[4 * i + 2]; s3 += m * P[4 * i + 3];
                }
                double* y = D + n * nv + a;
                y[0] = -s0;
                if (w > 1) y[1] = -s1;
                if (w > 2) y[2] = -s2;
                if (w > 3) y[3] = -s3;
            }
        }
    }

    /* X <- M⁻¹ X for W columns of X (nv rows, row stride ld) by the articulated-body
       recursion (zero velocity and gravity) on the factors minverse_kernel leaves,
       all in frame s: J (6 per freedom), U = Iᴬ J (6 per freedom), D⁻¹ (k × k at
       6·voff of each joint).  O(nb) per column where the dense product with M⁻¹
       costs O(nv), so a chain's ∂v̇/∂x takes O(n²) instead of O(n³).
         backward (leaves to roots):  p = Σ of the children's contributions,
             u = X[i] − Jᵀ p (stored in X[i]),  contribution p + U D⁻¹ u
         forward (roots to leaves):   X[i] = D⁻¹ (u − Uᵀ a_parent),  a_i = a_parent + J X[i]
       The children's contributions wait on a stack (the parent of a body is
       processed after all of its subtree, so a body's children are the top
       entries; at most maxp at once); the forward pass keeps one acceleration
       array for the current path and takes the bodies left behind off it (each
       body once), the bodies being in depth-first order (the column updates of
       the 6 × W arrays are minverse.pxi's td_minv_axpy).  Scratch: stack
       (maxp·6·W), sb (maxp ints), A and T (6·W each). */
    #define TD_ROWS6(A, W) (A), (A) + (W), (A) + 2 * (W), (A) + 3 * (W), (A) + 4 * (W), \
        (A) + 5 * (W)
    static void td_aba_solve_cols(int nb, const int* parent, const int* voff, const int* nvj,
                                  const double* J, const double* U, const double* Dinv,
                                  double* X, long ld, long W, double* stack, int* sb,
                                  double* __restrict__ A, double* __restrict__ T)
    {
        int top = 0;
        for (int i = nb - 1; i >= 0; i--) {
            const long o = voff[i];
            const int k = nvj[i];
            double* p = T;
            int have = 0;
            while (top > 0 && parent[sb[top - 1]] == i) {
                const double* q = stack + (long)(top - 1) * 6 * W;
                if (have)
                    for (long n = 0; n < 6 * W; n++) p[n] += q[n];
                else
                    for (long n = 0; n < 6 * W; n++) p[n] = q[n];
                have = 1;
                top--;
            }
            if (!have)
                for (long n = 0; n < 6 * W; n++) p[n] = 0.0;
            for (int a = 0; a < k; a++) {
                double* __restrict__ x = X + (o + a) * ld;
                const double* j6 = J + 6 * (o + a);
                for (int r = 0; r < 6; r++) {
                    const double jr = j6[r];
                    const double* __restrict__ pr = p + r * W;
                    for (long c = 0; c < W; c++)
                        x[c] -= jr * pr[c];
                }
            }
            if (parent[i] < 0 || (k == 0 && !have))
                continue;
            {
                double* dst = stack + (long)top * 6 * W;
                double UD[36];                   /* column a of U D⁻¹ at UD[6 a] */
                const double* Di = Dinv + 6 * o;
                sb[top++] = i;
                for (int a = 0; a < k; a++)
                    for (int r = 0; r < 6; r++) {
                        double t = 0.0;
                        for (int b = 0; b < k; b++)
                            t += U[6 * (o + b) + r] * Di[k * b + a];
                        UD[6 * a + r] = t;
                    }
                memcpy(dst, p, 6 * W * sizeof(double));
                for (int a = 0; a < k; a++)
                    td_minv_axpy(0, W, 1.0, X + (o + a) * ld, TD_ROWS6(dst, W), &UD[6 * a]);
            }
        }
        for (int i = 0; i < nb; i++) {
            const long o = voff[i];
            const int k = nvj[i], par = parent[i];
            if (par < 0) {
                for (long n = 0; n < 6 * W; n++) A[n] = 0.0;
            } else {
                for (int b = i - 1; b != par && b >= 0; b = parent[b])
                    for (int a = 0; a < nvj[b]; a++)
                        td_minv_axpy(0, W, -1.0, X + (voff[b] + a) * ld, TD_ROWS6(A, W),
                                     J + 6 * (voff[b] + a));
            }
            if (k == 0)
                continue;
            for (int a = 0; a < k; a++) {        /* T[a] = u_a − U_aᵀ A */
                double* __restrict__ t = T + a * W;
                const double* __restrict__ x = X + (o + a) * ld;
                const double* u6 = U + 6 * (o + a);
                for (long c = 0; c < W; c++)
                    t[c] = x[c];
                for (int r = 0; r < 6; r++) {
                    const double ur = u6[r];
                    const double* __restrict__ ar = A + r * W;
                    for (long c = 0; c < W; c++)
                        t[c] -= ur * ar[c];
                }
            }
            {
                const double* Di = Dinv + 6 * o;
                for (int a = 0; a < k; a++) {    /* X[i] = D⁻¹ T */
                    double* __restrict__ x = X + (o + a) * ld;
                    for (long c = 0; c < W; c++)
                        x[c] = Di[k * a] * T[c];
                    for (int b = 1; b < k; b++) {
                        const double db = Di[k * a + b];
                        const double* __restrict__ t = T + b * W;
                        for (long c = 0; c < W; c++)
                            x[c] += db * t[c];
                    }
                }
            }
            for (int a = 0; a < k; a++)          /* A += J X[i] */
                td_minv_axpy(0, W, 1.0, X + (o + a) * ld, TD_ROWS6(A, W), J + 6 * (o + a));
        }
    }

    /* y += x row (n entries) */
    static inline void td_axpy(long n, double x, const double* __restrict__ row,
                               double* __restrict__ y)
    {
        for (long k = 0; k < n; k++)
            y[k] += row[k] * x;
    }
    """
    void td_neg_minv_times(const double* Mi, double* D, long nv, double* P,
                           int* rows) noexcept nogil
    void td_axpy(long n, double x, const double* row, double* y) noexcept nogil
    void td_aba_solve_cols(int nb, const int* parent, const int* voff, const int* nvj,
                           const double* J, const double* U, const double* Dinv, double* X,
                           long ld, long W, double* stack, int* sb, double* A,
                           double* T) noexcept nogil


cdef enum:
    # columns per block of the recursive M⁻¹ product (Data scratch ∝ this)
    FD_REC_COLUMNS = 64

# 0: each model's choice (ModelCore.fd_recursive); 1: dense products; 2: the
# recursion (a test hook: _set_fd_products in _kernels.pyx)
cdef int _fd_products = 0


cdef void _neg_minv_times_rec(ModelCore m, DataC* d, double* D) noexcept nogil:
    """D ← −M⁻¹ D (nv × nv) by the articulated-body recursion (td_aba_solve_cols) on
    the factors of the last minverse_kernel call, FD_REC_COLUMNS columns at a time."""
    cdef long nv = m.nv, c0 = 0, w, n
    for n in range(nv * nv):
        D[n] = -D[n]
    while c0 < nv:
        w = nv - c0 if nv - c0 < FD_REC_COLUMNS else FD_REC_COLUMNS
        td_aba_solve_cols(m.nb, &m.parent[0], &m.voff[0], &m.nvj[0], d.sJ, d.U, d.Dinv,
                          &D[c0], nv, w, d.drec, d.drecb, &d.drec[6 * m.max_pending * w],
                          &d.drec[6 * (m.max_pending + 1) * w])
        c0 += w


cdef int _fd_accelerations(ModelCore m, DataC* d, const double* q, const double* qd,
                           const double* tau, const double* g, const double* fext,
                           int fext_frame, double* Mi) noexcept nogil:
    """M⁻¹ into Mi and v̇ = M⁻¹ (τ − h(q, v)) into d.dqdd; d.sMi, d.sJ hold this q's
    poses and screws afterwards.  Returns the first nonzero code of M⁻¹ or the RNEA."""
    cdef int code, nv = m.nv, i, j
    cdef double s
    cdef double* h = d.dcol                      # scratch: h, then τ − h
    # M⁻¹ first (its first pass leaves this q's poses and screws in d.sMi, d.sJ),
    # then v̇ = M⁻¹ (τ − h(q, v)) with h by the spatial RNEA at v̇ = 0, which with the
    # derivative sweep reuses those poses: one joint step per body instead of three
    code = minverse_kernel(m, d, q, Mi)
    if code:
        return code
    for i in range(nv):
        d.dqdd[i] = 0.0
    code = rnea_spatial_kernel(m, d, q, qd, d.dqdd, g, fext, fext_frame, h, True)
    if code:
        return code
    for i in range(nv):
        h[i] = tau[i] - h[i]
    # v̇ = M⁻¹ h as a sum of rows of the (exactly symmetric) M⁻¹: vectorizes over
    # the entries, each summed in the order j = 0 … nv − 1 as a dot product would
    for i in range(nv):
        d.dqdd[i] = 0.0
    for j in range(nv):
        s = h[j]
        td_axpy(nv, s, &Mi[j * nv], d.dqdd)
    return 0


cdef inline bint _fd_by_recursion(ModelCore m) noexcept nogil:
    """Whether the products M⁻¹ ∂τ/∂x go through the articulated-body recursion."""
    return _fd_products == 2 or (_fd_products == 0 and m.fd_recursive)


cdef void _fd_products_bound(ModelCore m, DataC* d, const double* Mi, double* dq, double* dv,
                             double B, double* bound) noexcept nogil:
    """dq ← −M⁻¹ dq, dv ← −M⁻¹ dv; bound (if not NULL) from the inverse-dynamics
    derivatives' bound B: nv · max diag M⁻¹ · B (|M⁻¹_ij| ≤ max_k M⁻¹_kk, M⁻¹ being
    positive definite), times a margin."""
    cdef int nv = m.nv, i
    cdef double s, dmax = 0.0
    if _fd_by_recursion(m):
        _neg_minv_times_rec(m, d, dq)
        _neg_minv_times_rec(m, d, dv)
    else:
        td_neg_minv_times(Mi, dq, nv, d.dcol, d.dnz)
        td_neg_minv_times(Mi, dv, nv, d.dcol, d.dnz)
    if bound != NULL:
        for i in range(nv):
            s = Mi[i * (nv + 1)]
            if not s > 0.0:                      # NaN, or M⁻¹ not positive definite
                dmax = INFINITY
            elif s > dmax:
                dmax = s
        # (1e10: margin for a computed M⁻¹ that is not exactly positive definite)
        bound[0] = nv * dmax * B * 1e10


cdef int aba_derivatives_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                const double* tau, const double* g, const double* fext,
                                int fext_frame, double* dq, double* dv,
                                double* Mi, double* bound=NULL) noexcept nogil:
    """∂v̇/∂q, ∂v̇/∂v and M⁻¹ (each nv × nv, row-major; q-derivatives along the
    joints' groups).  Returns the first nonzero code of M⁻¹ (non-unit quaternion,
    singular articulated inertia), the RNEA or the inverse-dynamics derivatives.
    ``bound`` (if not NULL): an upper bound of the outputs' magnitudes (+inf if
    unknown or NaN; _fd_products_bound)."""
    cdef double B = INFINITY
    cdef int code = _fd_accelerations(m, d, q, qd, tau, g, fext, fext_frame, Mi)
    if code:
        return code
    code = rnea_derivatives_kernel(m, d, q, qd, d.dqdd, g, fext, fext_frame, dq, dv, NULL,
                                   True, &B if bound != NULL else NULL)
    if code:
        return code
    _fd_products_bound(m, d, Mi, dq, dv, B, bound)
    return 0


cdef void aba_derivatives_lanes(ModelCore m, DataC* d, const double** q, const double** qd,
                                const double** tau, const double* g, const double** fext,
                                int fext_frame, double** dq, double** dv, double** Mi,
                                int* codes, double* bounds) noexcept nogil:
    """aba_derivatives_kernel on TD_VL states at once (as rnea_derivatives_lanes; the
    dense products only, not the recursion, which needs each state's factors): the
    joint-local steps one state at a time; the poses and h (one state at a time with
    external wrenches), M⁻¹, v̇ = M⁻¹ (τ − h) and the inverse-dynamics sweeps side by
    side; the products one state at a time.  bounds[l] (if not NULL): each state's
    bound."""
    cdef int l, i, j, L = TD_VL, nv = m.nv, code
    cdef double B = INFINITY
    cdef double* h = d.dcol
    cdef _Sweep w
    for i in range(nv):                          # v̇ = 0 for h
        d.dqdd[i] = 0.0
    if fext[0] == NULL:
        # joint-local steps one state at a time, then the poses and h = τ(q, v, 0) by the
        # spatial RNEA side by side
        for l in range(L):
            codes[l] = _lane_joint_steps(m, d, l, q[l], qd[l])
            _deriv_gather(m, d, l, qd[l], d.dqdd, g)
        _lanes_spatial_poses(m, d)
        td_rnea_spatial(L, m.nb, &m.parent[0], &m.voff[0], &m.nvj[0], &m.fast[0],
                        &m.inert[0, 0], &m.armature[0], g, d.lC, d.lJ, d.lSdq, d.lqd, d.lqdd,
                        NULL, d.lV, d.lA, d.lF, d.lh)
        for l in range(L):
            for i in range(nv):
                d.lh[i * L + l] = tau[l][i] - d.lh[i * L + l]
    else:
        for l in range(L):
            # the poses (as M⁻¹'s first pass), then h by the spatial RNEA at v̇ = 0 on them
            codes[l] = spatial_poses(m, d, q[l], qd[l], False)
            code = rnea_spatial_kernel(m, d, q[l], qd[l], d.dqdd, g, fext[l], fext_frame, h,
                                       True)
            if codes[l] == 0:
                codes[l] = code
            for i in range(nv):
                d.lh[i * L + l] = tau[l][i] - h[i]
            _lanes_gather_poses(m, d, l)
            _deriv_gather(m, d, l, qd[l], d.dqdd, g)
            _external_wrenches(m, d, L, l, fext[l], fext_frame, d.lFx, d.lE)
    _minverse_on_lanes(m, d, codes)
    # v̇ = M⁻¹ (τ − h), summed as _fd_accelerations sums it (rows of M⁻¹, j ascending)
    for i in range(nv * L):
        d.lqdd[i] = 0.0
    for j in range(nv):
        for i in range(nv):
            for l in range(L):
                d.lqdd[i * L + l] += d.lMi[(j * nv + i) * L + l] * d.lh[j * L + l]
    _lane_sweep(d, &w)
    _deriv_sweeps(m, L, &w, fext[0] != NULL, fext_frame, dq, dv, NULL,
                  &B if bounds != NULL else NULL)
    td_lanes_scatter(nv * nv, d.lMi, Mi)
    for l in range(L):
        if codes[l] == 0:
            _fd_products_bound(m, d, Mi[l], dq[l], dv[l], B,
                               &bounds[l] if bounds != NULL else NULL)


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_aba_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """CHECK_KERNEL (aba_derivatives.pxi's bound)."""
    cdef double B = INFINITY
    cdef int code = aba_derivatives_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe,
                                           c.out, c.out2, c.out3,
                                           &B if _bound_is_cheaper(m, 2) else NULL)
    return _bounded_outputs(code, c, B)


cdef void _g_aba_derivatives(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                             int* errs) noexcept nogil:
    """_k_aba_derivatives on TD_VL samples (aba_derivatives_lanes)."""
    cdef _LaneCalls g
    _lane_calls(c, s0, &g)
    aba_derivatives_lanes(m, d, g.q, g.v, g.a, c.g, g.f, c.fframe, g.o1, g.o2, g.o3, g.codes,
                          g.B if _bound_is_cheaper(m, 2) else NULL)
    _lane_errors(&g, errs)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def forward_dynamics_derivatives(ModelCore self, q, v, tau, f_ext=None, gravity=None,
                                 f_ext_frame="world", data=None, out=None):
    """Partial derivatives of forward dynamics v̇(q, v, τ): ∂v̇/∂q = −M⁻¹ ∂τ/∂q and
    ∂v̇/∂v = −M⁻¹ ∂τ/∂v at v̇, and ∂v̇/∂τ = M⁻¹ (cysrc/aba_derivatives.pxi: ABA,
    the inverse-dynamics derivatives and the O(n²) M⁻¹ recursion in one call).

    q-derivatives are taken along each joint's group as in
    :meth:`inverse_dynamics_derivatives`.

    Parameters
    ----------
    q, v, tau : array_like, shapes (nq,), (nv,), (nv,) or with a leading batch axis
    f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics_derivatives`
    data : Data, optional (single state)
    out : tuple of three ndarrays, optional
        (ddq_dq, ddq_dv, Minv) to write into, each (nv, nv) or (N, nv, nv).

    Returns
    -------
    ddq_dq, ddq_dv, Minv : ndarray, shape (nv, nv) or (N, nv, nv)
        Entry (i, j) is ∂v̇_i/∂x_j; Minv is M⁻¹ with armature, both triangles.

    Raises
    ------
    SingularModelError
        If M is singular (a massless subtree without armature).
    """
    return self._derivatives_call(_k_aba_derivatives,
                                  <group_t>NULL if (_fd_by_recursion(self)
                                                    or self.nv > LANES_MAX_NV)
                                  else _g_aba_derivatives,
                                  q, v, tau, "tau", f_ext, gravity,
                                  f_ext_frame, data, out, ("ddq_dq", "ddq_dv", "Minv"),
                                  "forward_dynamics_derivatives")
