# Derivatives of forward dynamics v̇ = M⁻¹ (τ − h(q, v)):
#   ∂v̇/∂q = −M⁻¹ ∂τ/∂q,   ∂v̇/∂v = −M⁻¹ ∂τ/∂v,   ∂v̇/∂τ = M⁻¹,
# the inverse-dynamics derivatives taken at (q, v, v̇) ([Carpentier & Mansard 2018]).
# v̇ from the ABA kernel, ∂τ/∂(q, v) from rnea_derivatives.pxi, M⁻¹ from the O(n²)
# recursion of minverse.pxi; the products use only the nonzero entries of ∂τ/∂x
# (freedoms on different branches do not couple) and contiguous rows of the
# symmetric M⁻¹.

cdef void _neg_minv_times(const double* Mi, double* D, int nv, double* y) noexcept nogil:
    """D ← −M⁻¹ D in place (nv × nv, row-major), one column at a time: column a of the
    product is −Σ_r D[r, a] M⁻¹[r, :] (M⁻¹ symmetric), an axpy of contiguous rows."""
    cdef int a, r, n
    cdef double x
    cdef const double* row
    for a in range(nv):
        for n in range(nv):
            y[n] = 0.0
        for r in range(nv):
            x = D[r * nv + a]
            if x != 0.0:
                row = &Mi[r * nv]
                for n in range(nv):
                    y[n] -= x * row[n]
        for n in range(nv):
            D[n * nv + a] = y[n]


cdef int aba_derivatives_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                const double* tau, const double* g, const double* fext,
                                int fext_frame, double* dq, double* dv,
                                double* Mi) noexcept nogil:
    """∂v̇/∂q, ∂v̇/∂v and M⁻¹ (each nv × nv, row-major; q-derivatives along the
    joints' groups).  Returns the first nonzero code of ABA, inverse-dynamics
    derivatives or M⁻¹ (non-unit quaternion, singular articulated inertia)."""
    cdef int code
    code = aba_kernel(m, d, q, qd, tau, g, fext, fext_frame, d.dqdd)
    if code:
        return code
    code = rnea_derivatives_kernel(m, d, q, qd, d.dqdd, g, fext, fext_frame, dq, dv, NULL)
    if code:
        return code
    code = minverse_kernel(m, d, q, Mi)
    if code:
        return code
    _neg_minv_times(Mi, dq, m.nv, d.dcol)
    _neg_minv_times(Mi, dv, m.nv, d.dcol)
    return 0
