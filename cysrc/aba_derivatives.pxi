# Derivatives of forward dynamics v̇ = M⁻¹ (τ − h(q, v)):
#   ∂v̇/∂q = −M⁻¹ ∂τ/∂q,   ∂v̇/∂v = −M⁻¹ ∂τ/∂v,   ∂v̇/∂τ = M⁻¹,
# the inverse-dynamics derivatives taken at (q, v, v̇) ([Carpentier & Mansard 2018]).
# M⁻¹ from the O(n²) recursion of minverse.pxi, v̇ = M⁻¹(τ − h) with h from the
# spatial RNEA, ∂τ/∂(q, v) from rnea_derivatives.pxi (both reusing the poses of
# M⁻¹'s first pass); the products use only the nonzero entries of ∂τ/∂x
# (freedoms on different branches do not couple) and contiguous rows of the
# symmetric M⁻¹.

cdef extern from *:
    """
    /* y_k[n] -= x_k row[n] for k = 0..3, 0 <= n < nv: four restrict-qualified
       accumulators so that the compiler vectorizes over n and loads each entry of
       the M⁻¹ row once for the four columns. */
    static inline void td_axpy4(long nv, const double* __restrict__ row, double x0,
                                double x1, double x2, double x3, double* __restrict__ y0,
                                double* __restrict__ y1, double* __restrict__ y2,
                                double* __restrict__ y3)
    {
        for (long n = 0; n < nv; n++) {
            const double r = row[n];
            y0[n] -= x0 * r; y1[n] -= x1 * r; y2[n] -= x2 * r; y3[n] -= x3 * r;
        }
    }
    """
    void td_axpy4(long nv, const double* row, double x0, double x1, double x2, double x3,
                  double* y0, double* y1, double* y2, double* y3) noexcept nogil


cdef void _neg_minv_times(const double* Mi, double* D, int nv, double* T,
                          int* nz) noexcept nogil:
    """D ← −M⁻¹ D in place (nv × nv, row-major), four columns at a time: column
    a + k of the product is −Σ_r D[r, a + k] M⁻¹[r, :] (M⁻¹ symmetric), accumulated
    in T (4 rows of nv) from contiguous rows of M⁻¹, each row loaded once for the
    four columns and skipped where the four entries of D are zero (freedoms on
    other branches do not couple).  T: 4 nv doubles of scratch (nz unused)."""
    cdef int a, r, k, n, w
    cdef double x0, x1, x2, x3
    cdef double* y0 = T
    cdef double* y1 = &T[nv]
    cdef double* y2 = &T[2 * nv]
    cdef double* y3 = &T[3 * nv]
    for a in range(0, nv, 4):
        w = nv - a if nv - a < 4 else 4
        for n in range(4 * nv):
            T[n] = 0.0
        for r in range(nv):
            x0 = D[r * nv + a]
            x1 = D[r * nv + a + 1] if w > 1 else 0.0
            x2 = D[r * nv + a + 2] if w > 2 else 0.0
            x3 = D[r * nv + a + 3] if w > 3 else 0.0
            if x0 == 0.0 and x1 == 0.0 and x2 == 0.0 and x3 == 0.0:
                continue
            td_axpy4(nv, &Mi[r * nv], x0, x1, x2, x3, y0, y1, y2, y3)
        for n in range(nv):
            D[n * nv + a] = y0[n]
        for k in range(1, w):
            for n in range(nv):
                D[n * nv + a + k] = T[k * nv + n]


cdef int aba_derivatives_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                const double* tau, const double* g, const double* fext,
                                int fext_frame, double* dq, double* dv,
                                double* Mi, double* bound=NULL) noexcept nogil:
    """∂v̇/∂q, ∂v̇/∂v and M⁻¹ (each nv × nv, row-major; q-derivatives along the
    joints' groups).  Returns the first nonzero code of M⁻¹ (non-unit quaternion,
    singular articulated inertia), the RNEA or the inverse-dynamics derivatives.
    ``bound`` (if not NULL): an upper bound of the outputs' magnitudes (+inf if
    unknown or NaN): nv · max diag M⁻¹ · the inverse-dynamics derivatives' bound
    (|M⁻¹_ij| ≤ max_k M⁻¹_kk, M⁻¹ being positive definite), times a margin."""
    cdef int code, nv = m.nv, i, j
    cdef double s, B = INFINITY, dmax = 0.0
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
    for i in range(nv):
        s = 0.0
        for j in range(nv):
            s += Mi[i * nv + j] * h[j]
        d.dqdd[i] = s
    code = rnea_derivatives_kernel(m, d, q, qd, d.dqdd, g, fext, fext_frame, dq, dv, NULL,
                                   True, &B if bound != NULL else NULL)
    if code:
        return code
    _neg_minv_times(Mi, dq, m.nv, d.dcol, d.dnz)
    _neg_minv_times(Mi, dv, m.nv, d.dcol, d.dnz)
    if bound != NULL:
        for i in range(nv):
            s = Mi[i * (nv + 1)]
            if not s > 0.0:                      # NaN, or M⁻¹ not positive definite
                dmax = INFINITY
            elif s > dmax:
                dmax = s
        # (1e10: margin for a computed M⁻¹ that is not exactly positive definite)
        bound[0] = nv * dmax * B * 1e10
    return 0
