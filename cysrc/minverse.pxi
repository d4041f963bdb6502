# Inverse of the joint-space mass matrix in O(n²) without forming M: the
# articulated-body algorithm run on all unit-torque columns at once (Carpentier &
# Mansard, "Analytical Derivatives of Rigid Body Dynamics Algorithms", RSS 2018;
# Featherstone, "Rigid Body Dynamics Algorithms", 2008).  Column j of
# M⁻¹ is q̈ for τ = e_j, v = 0, g = 0.  As in aba.pxi everything is in frame s
# (world axes about the current origin of the subtree's root body), so articulated
# inertias and forces reach the parent by a plain sum:
#   pass 1: J_i = Ad_{C_i} S_i, Iᴬ_i = Mˢ_i
#   pass 2 (leaves to roots), for the columns j of i's subtree, whose forces F[:, j]
#           the children left in one shared 6 × nv array:
#           U = Iᴬ J, D = Jᵀ U + armature,
#           M⁻¹[i, i] = D⁻¹,  M⁻¹[i, j] = −D⁻¹ Jᵀ F[:, j]  (j a descendant's),
#           F[:, j] += U M⁻¹[i, j],  Iᴬ_p += Iᴬ − U D⁻¹ Uᵀ
#   pass 3 (roots to leaves), for the columns j ≥ i (upper triangle):
#           M⁻¹[i, j] −= (U D⁻¹)ᵀ A_p[:, j],  A_i[:, j] = A_p[:, j] + J M⁻¹[i, j]
#           (A: the accelerations of the unit-torque columns; zero above a root).
# Pass 3 keeps one 6 × nv array A for the current path instead of one per body: the
# bodies are in depth-first order (the compiler's), so the next body's parent is on
# the path of the previous one, and the bodies left behind are taken off A by
# subtracting their J M⁻¹[b, j] on the columns still to come (each body once).  The
# lower triangle is copied from the upper at the end.

cdef extern from *:
    """
    /* The column loops of passes 2 and 3 over the six rows F0..F5 of a 6 × nv
       array and one row of M⁻¹.  Separate restrict-qualified rows let the
       compiler vectorize over the columns.  In the baseline build (SSE2 pairs) the
       vector part always starts at an even column: a parent then loads the same
       column pairs its child just stored, which the CPU forwards from its store
       buffer (a load straddling two stores would wait for both to reach the
       cache).  With AVX the plain loop is faster (panda M⁻¹ −8 %: the peel and
       the pair split kept the compiler's 4-wide loop from covering the short
       rows); each column's sums are the same either way. */
    #define TD_MINV_ROWS double* __restrict__ F0, double* __restrict__ F1, \
        double* __restrict__ F2, double* __restrict__ F3, double* __restrict__ F4, \
        double* __restrict__ F5
    #if defined(__AVX__)
    #define TD_MINV_COLUMNS(STEP) { \
            for (long j = j0; j < j1; j++) { STEP; } \
        }
    #else
    #define TD_MINV_COLUMNS(STEP) { \
            long j = j0, jm; \
            if ((j & 1) && j < j1) { STEP; j++; } \
            jm = j + ((j1 - j) & ~1L); \
            for (; j < jm; j++) { STEP; } \
            if (j < j1) { STEP; } \
        }
    #endif

    /* row[j] = row[j] − u·F[:, j] (keep) or −u·F[:, j], then F[:, j] += s row[j]
       for j0 ≤ j < j1 */
    #define TD_MINV_ROW_STEP(X) { \
            double x = X - (u0 * F0[j] + u1 * F1[j] + u2 * F2[j] \
                            + u3 * F3[j] + u4 * F4[j] + u5 * F5[j]); \
            row[j] = x; \
            F0[j] += s0 * x; F1[j] += s1 * x; F2[j] += s2 * x; \
            F3[j] += s3 * x; F4[j] += s4 * x; F5[j] += s5 * x; \
        }
    static inline void td_minv_row(long j0, long j1, int keep, double* __restrict__ row,
                                   TD_MINV_ROWS, const double* u, const double* s)
    {
        const double u0 = u[0], u1 = u[1], u2 = u[2], u3 = u[3], u4 = u[4], u5 = u[5];
        const double s0 = s[0], s1 = s[1], s2 = s[2], s3 = s[3], s4 = s[4], s5 = s[5];
        if (keep)
            TD_MINV_COLUMNS(TD_MINV_ROW_STEP(row[j]))
        else
            TD_MINV_COLUMNS(TD_MINV_ROW_STEP(0.0))
    }

    /* row[j] = −u·F[:, j]  (j0 ≤ j < j1) */
    static inline void td_minv_dot(long j0, long j1, double* __restrict__ row,
                                   TD_MINV_ROWS, const double* u)
    {
        const double u0 = u[0], u1 = u[1], u2 = u[2], u3 = u[3], u4 = u[4], u5 = u[5];
        TD_MINV_COLUMNS(row[j] = -(u0 * F0[j] + u1 * F1[j] + u2 * F2[j]
                                   + u3 * F3[j] + u4 * F4[j] + u5 * F5[j]))
    }

    /* F[:, j] += c s row[j]  (j0 ≤ j < j1) */
    static inline void td_minv_axpy(long j0, long j1, double c, const double* __restrict__ row,
                                    TD_MINV_ROWS, const double* s)
    {
        const double s0 = c * s[0], s1 = c * s[1], s2 = c * s[2], s3 = c * s[3],
                     s4 = c * s[4], s5 = c * s[5];
        TD_MINV_COLUMNS(
            F0[j] += s0 * row[j]; F1[j] += s1 * row[j]; F2[j] += s2 * row[j];
            F3[j] += s3 * row[j]; F4[j] += s4 * row[j]; F5[j] += s5 * row[j])
    }
    """
    void td_minv_row(long j0, long j1, int keep, double* row, double* F0, double* F1,
                     double* F2, double* F3, double* F4, double* F5,
                     const double* u, const double* s) noexcept nogil
    void td_minv_dot(long j0, long j1, double* row, double* F0, double* F1, double* F2,
                     double* F3, double* F4, double* F5, const double* u) noexcept nogil
    void td_minv_axpy(long j0, long j1, double c, const double* row, double* F0, double* F1,
                      double* F2, double* F3, double* F4, double* F5,
                      const double* s) noexcept nogil


cdef int minverse_kernel(ModelCore m, DataC* d, const double* q, double* Mi) noexcept nogil:
    """M(q)⁻¹ (nv × nv, row-major, both triangles); fills d.liMi, d.S, d.sMi, d.sJ,
    d.sIA (Iᴬ before the projection U D⁻¹ Uᵀ), d.U, d.Dinv (D⁻¹ of every joint),
    d.sF and d.sub_end.  The bodies must be in depth-first order (the compiler's).
    Returns 0, i + 1 for a non-unit quaternion of joint i, or −(i + 1) if the
    articulated inertia of joint i is singular (as aba_kernel).  Pass 1's joint
    steps here, the rest in minverse_sweeps.h."""
    cdef int code = spatial_poses(m, d, q, NULL, False)
    if code:
        return code
    td_minverse(1, m.nb, m.nv, &m.parent[0], &m.voff[0], &m.nvj[0], &m.root[0],
                &m.inert[0, 0], &m.armature[0], d.sMi, d.sJ, d.sIA, d.sF, d.U, d.Dinv,
                d.sub_end, Mi, &code)
    return code


cdef void minverse_lanes(ModelCore m, DataC* d, const double** q, double** Mi,
                         int* codes) noexcept nogil:
    """minverse_kernel on TD_VL states at once (state l: q[l], output Mi[l], code
    codes[l]): the joint-local steps one state at a time, the poses and passes 1–3 side
    by side in d's lane arrays (bitwise the one-state results)."""
    cdef int l
    for l in range(TD_VL):
        codes[l] = _lane_joint_steps(m, d, l, q[l])
    _lanes_spatial_poses(m, d)
    _minverse_on_lanes(m, d, codes)
    td_lanes_scatter(m.nv * m.nv, d.lMi, Mi)


cdef inline void _minverse_on_lanes(ModelCore m, DataC* d, int* codes) noexcept nogil:
    """Passes 1–3 of M⁻¹ on the poses and screws in d's lane arrays, into d.lMi; the
    lanes whose codes[l] is 0 (no earlier error) get M⁻¹'s code."""
    cdef int l
    cdef int mcodes[8]
    td_minverse(TD_VL, m.nb, m.nv, &m.parent[0], &m.voff[0], &m.nvj[0], &m.root[0],
                &m.inert[0, 0], &m.armature[0], d.lC, d.lJ, d.lIA, d.lsF, d.lU, d.lDinv,
                d.sub_end, d.lMi, mcodes)
    for l in range(TD_VL):
        if codes[l] == 0:
            codes[l] = mcodes[l]


cdef int _k_minverse(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """The dispatcher's adapter (_kernels.pyx): out M⁻¹ (nv × nv) at c.q."""
    return minverse_kernel(m, d, c.q, c.out)


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef void _g_minverse(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                      int* errs) noexcept nogil:
    """_k_minverse on TD_VL samples (minverse_lanes)."""
    cdef _LaneCalls g
    _lane_calls(c, s0, &g)
    minverse_lanes(m, d, g.q, g.o1, g.codes)
    _lane_errors(&g, errs)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def inverse_mass_matrix(ModelCore self, q, data=None, out=None):
    """Inverse of the joint-space mass matrix, M(q)⁻¹, in O(n²) without forming M:
    the articulated-body recursion run on all unit-torque columns at once
    (Carpentier & Mansard 2018; ``cysrc/minverse.pxi``).

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    data : Data, optional
        Single state: the Data to work in; holds the articulated inertias
        (``sIA``, frame s) and the joint screws afterwards.
    out : ndarray, optional
        Output array, shape (nv, nv) or (N, nv, nv), float64, C-contiguous.

    Returns
    -------
    ndarray, shape (nv, nv) or (N, nv, nv)
        Symmetric positive definite, both triangles filled; the armature is
        part of M.  Units: the inverses of those of :meth:`mass_matrix`.

    Raises
    ------
    SingularModelError
        If M is singular (a massless subtree without armature); the message
        names the joint, as :meth:`forward_dynamics` does.
    """
    return self._spd_matrix_call(_k_minverse, q, data, out, "inverse_mass_matrix: M⁻¹",
                                 _g_minverse if self.nv <= LANES_MAX_NV else <group_t>NULL)
