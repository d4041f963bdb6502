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
    /* D <- -M⁻¹ D in place (nv × nv, row-major, M⁻¹ symmetric), four columns of D
       at a time.  The rows of the four columns with a nonzero entry (freedoms on
       other branches do not couple) are packed first, into rows and P (4 per row).
       Then each block of 2·TD_VL output rows (two vectors) is summed in eight
       vector registers over those rows, reading M⁻¹[r, n .. n + 2·TD_VL) (the
       column entries, by symmetry), with no loads or stores of the sums.  Every
       sum runs over r in increasing order, so the result is bitwise that of the
       plain loop −Σ_r M⁻¹[n, r] D[r, a + k]. */
    #if defined(__GNUC__) && defined(__AVX__)
    typedef double td_vec __attribute__((vector_size(32)));
    typedef double td_uvec __attribute__((vector_size(32), aligned(8)));
    #define TD_VL 4
    #elif defined(__GNUC__)
    typedef double td_vec __attribute__((vector_size(16)));
    typedef double td_uvec __attribute__((vector_size(16), aligned(8)));
    #define TD_VL 2
    #else
    #define TD_VL 0
    #endif
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
    # v̇ = M⁻¹ h as a sum of rows of the (exactly symmetric) M⁻¹: vectorizes over
    # the entries, each summed in the order j = 0 … nv − 1 as a dot product would
    for i in range(nv):
        d.dqdd[i] = 0.0
    for j in range(nv):
        s = h[j]
        td_axpy(nv, s, &Mi[j * nv], d.dqdd)
    code = rnea_derivatives_kernel(m, d, q, qd, d.dqdd, g, fext, fext_frame, dq, dv, NULL,
                                   True, &B if bound != NULL else NULL)
    if code:
        return code
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
    return 0
