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


cdef inline void _minv_row(long j0, long j1, bint keep, double* row, double* F, int nv,
                           const double* u, const double* s) noexcept nogil:
    """row[j] = (row[j] if keep else 0) − uᵀ F[:, j], then F[:, j] += s row[j], for
    j0 ≤ j < j1 (F: 6 × nv, row-major)."""
    td_minv_row(j0, j1, keep, row, F, &F[nv], &F[2 * nv], &F[3 * nv], &F[4 * nv], &F[5 * nv],
                u, s)


cdef inline void _minv_dot(long j0, long j1, double* row, double* F, int nv,
                           const double* u) noexcept nogil:
    """row[j] = −uᵀ F[:, j] for j0 ≤ j < j1 (F: 6 × nv)."""
    td_minv_dot(j0, j1, row, F, &F[nv], &F[2 * nv], &F[3 * nv], &F[4 * nv], &F[5 * nv], u)


cdef inline void _minv_axpy(long j0, long j1, double c, const double* row, double* F, int nv,
                            const double* s) noexcept nogil:
    """F[:, j] += c s row[j] for j0 ≤ j < j1 (F: 6 × nv)."""
    td_minv_axpy(j0, j1, c, row, F, &F[nv], &F[2 * nv], &F[3 * nv], &F[4 * nv], &F[5 * nv], s)


cdef inline void _minv_spd_inverse(int k, const double* L, double* Di) noexcept nogil:
    """Di = (L Lᵀ)⁻¹ (k × k, row-major, both triangles) from the lower Cholesky
    factor L (k ≤ 6): W = L⁻¹ by forward substitution, then Di = Wᵀ W."""
    cdef double W[36]
    cdef double t
    cdef int a, b, c
    for a in range(k):
        W[k * a + a] = 1.0 / L[k * a + a]
        for b in range(a):
            t = 0.0
            for c in range(b, a):
                t += L[k * a + c] * W[k * c + b]
            W[k * a + b] = -t * W[k * a + a]
    for a in range(k):
        for b in range(a + 1):
            t = 0.0
            for c in range(a, k):
                t += W[k * c + a] * W[k * c + b]
            Di[k * a + b] = t
            Di[k * b + a] = t


cdef inline void _minv_times_dinv(int k, const double* X, const double* Di,
                                  double* XD) noexcept nogil:
    """XD (6 × k, row-major) = X D⁻¹ for X given as k columns of 6."""
    cdef int r, a, b
    cdef double t
    for r in range(6):
        for a in range(k):
            t = 0.0
            for b in range(k):
                t += X[6 * b + r] * Di[k * b + a]
            XD[k * r + a] = t


cdef int _minv_backward_1dof(ModelCore m, DataC* d, int i, double* Mi,
                             double scale) noexcept nogil:
    """Pass 2 for a joint with one freedom."""
    cdef int nv = m.nv, o = m.voff[i], e = d.sub_end[i], par = m.parent[i], a, b, n
    cdef const double* s6 = &d.sJ[6 * o]
    cdef double* Ui = &d.U[6 * o]
    cdef double* I = &d.sIA[21 * i]
    cdef double* Ip
    cdef double* F = d.sF
    cdef double sd[6]
    cdef double D, Dinv
    sym6_apply(I, s6, Ui)
    D = dot6(s6, Ui) + m.armature[o]
    if D <= 1e-13 * (scale if scale > 0.0 else 1e-300):
        return 1
    Dinv = 1.0 / D
    d.Dinv[6 * o] = Dinv
    Mi[o * nv + o] = Dinv
    for n in range(6):
        sd[n] = s6[n] * Dinv
    if par < 0:                 # a root's forces are not needed further
        _minv_dot(o + 1, e, &Mi[o * nv], F, nv, sd)
        return 0
    for n in range(6):
        F[n * nv + o] = Ui[n] * Dinv
    _minv_row(o + 1, e, False, &Mi[o * nv], F, nv, sd, Ui)
    # Iᴬ_p += Iᴬ − U D⁻¹ Uᵀ (packed; d.sIA[i] keeps Iᴬ)
    Ip = &d.sIA[21 * par]
    for n in range(6):
        sd[n] = Ui[n] * Dinv
    n = 0
    for a in range(3):
        for b in range(a, 3):
            Ip[n] += I[n] - sd[a] * Ui[b]
            n += 1
    for a in range(3):
        for b in range(3):
            Ip[6 + 3 * a + b] += I[6 + 3 * a + b] - sd[a] * Ui[3 + b]
    n = 15
    for a in range(3):
        for b in range(a, 3):
            Ip[n] += I[n] - sd[3 + a] * Ui[3 + b]
            n += 1
    return 0


cdef int _minv_backward_multi(ModelCore m, DataC* d, int i, double* Mi,
                              double scale) noexcept nogil:
    """Pass 2 for a joint with k ≠ 1 freedoms (D k × k; d.Dinv keeps D⁻¹)."""
    cdef int nv = m.nv, o = m.voff[i], k = m.nvj[i], e = d.sub_end[i], par = m.parent[i]
    cdef int a, b, l, n, r, j
    cdef const double* S = &d.sJ[6 * o]
    cdef double* U = &d.U[6 * o]
    cdef double* L = &d.Dinv[6 * o]
    cdef double* F = d.sF
    cdef double Ifull[36]
    cdef double Ip[21]
    cdef double UD[36]          # U D⁻¹, 6 × k
    cdef double SD[36]          # J D⁻¹, 6 × k
    cdef double Di[36]          # D⁻¹
    cdef double x[6]
    cdef double t
    if k == 0:
        if par >= 0:
            for n in range(21):
                d.sIA[21 * par + n] += d.sIA[21 * i + n]
        return 0
    sym6_unpack(&d.sIA[21 * i], Ifull)
    for a in range(k):
        for n in range(6):
            U[6 * a + n] = (Ifull[6 * n] * S[6 * a] + Ifull[6 * n + 1] * S[6 * a + 1]
                            + Ifull[6 * n + 2] * S[6 * a + 2] + Ifull[6 * n + 3] * S[6 * a + 3]
                            + Ifull[6 * n + 4] * S[6 * a + 4] + Ifull[6 * n + 5] * S[6 * a + 5])
    for a in range(k):
        for b in range(k):
            L[k * a + b] = dot6(&S[6 * a], &U[6 * b])
        L[k * a + a] += m.armature[o + a]
    if small_cholesky(k, L, scale if scale > 0.0 else 1e-300):
        return 1
    _minv_spd_inverse(k, L, Di)
    for n in range(k * k):
        L[n] = Di[n]            # d.Dinv keeps D⁻¹
    _minv_times_dinv(k, S, Di, SD)
    for a in range(k):          # M⁻¹[i, i] = D⁻¹
        for b in range(k):
            Mi[(o + a) * nv + o + b] = Di[k * a + b]
    if par < 0:                 # a root: M⁻¹[i, j] = −(J D⁻¹)ᵀ F[:, j], no forces further
        for a in range(k):
            for r in range(6):
                x[r] = SD[k * r + a]
            _minv_dot(o + k, e, &Mi[(o + a) * nv], F, nv, x)
        return 0
    _minv_times_dinv(k, U, Di, UD)
    for b in range(k):
        for r in range(6):
            F[r * nv + o + b] = UD[k * r + b]
    # the descendants' columns: M⁻¹[i, j] = −(J D⁻¹)ᵀ F[:, j], F[:, j] += U M⁻¹[i, j]
    for j in range(o + k, e):
        for a in range(k):
            t = 0.0
            for r in range(6):
                t -= SD[k * r + a] * F[r * nv + j]
            x[a] = t
            Mi[(o + a) * nv + j] = t
        for r in range(6):
            t = 0.0
            for a in range(k):
                t += U[6 * a + r] * x[a]
            F[r * nv + j] += t
    for a in range(6):
        for b in range(6):
            for l in range(k):
                Ifull[6 * a + b] -= UD[k * a + l] * U[6 * l + b]
    sym6_pack(Ifull, Ip)
    for n in range(21):
        d.sIA[21 * par + n] += Ip[n]
    return 0


cdef inline void _minv_forward_multi(ModelCore m, DataC* d, int i, double* Mi,
                                     int te) noexcept nogil:
    """Pass 3 for a joint with k ≠ 1 freedoms and a parent."""
    cdef int nv = m.nv, o = m.voff[i], k = m.nvj[i], e = d.sub_end[i], a, r, j
    cdef const double* S = &d.sJ[6 * o]
    cdef double* F = d.sF
    cdef double UD[36]
    cdef double x[6]
    cdef double t
    if k == 0:
        return
    _minv_times_dinv(k, &d.U[6 * o], &d.Dinv[6 * o], UD)
    for j in range(o, te):
        for a in range(k):
            t = Mi[(o + a) * nv + j] if j < e else 0.0
            for r in range(6):
                t -= UD[k * r + a] * F[r * nv + j]
            x[a] = t
            Mi[(o + a) * nv + j] = t
        for r in range(6):
            t = 0.0
            for a in range(k):
                t += S[6 * a + r] * x[a]
            F[r * nv + j] += t


cdef inline void _minv_lower_from_upper(int nv, double* Mi) noexcept nogil:
    """Copy the upper triangle of the nv × nv row-major Mi to the lower, four rows
    at a time (each source row's four entries are adjacent)."""
    cdef int i, k, c, r
    cdef double* p
    for i in range(0, nv - 3, 4):
        for k in range(i):
            p = &Mi[k * nv + i]
            Mi[i * nv + k] = p[0]
            Mi[(i + 1) * nv + k] = p[1]
            Mi[(i + 2) * nv + k] = p[2]
            Mi[(i + 3) * nv + k] = p[3]
        for r in range(1, 4):
            for c in range(r):
                Mi[(i + r) * nv + i + c] = Mi[(i + c) * nv + i + r]
    for i in range(nv - nv % 4, nv):
        for k in range(i):
            Mi[i * nv + k] = Mi[k * nv + i]


cdef int minverse_kernel(ModelCore m, DataC* d, const double* q, double* Mi) noexcept nogil:
    """M(q)⁻¹ (nv × nv, row-major, both triangles); fills d.liMi, d.S, d.sMi, d.sJ,
    d.sIA (Iᴬ before the projection U D⁻¹ Uᵀ), d.U, d.Dinv (D⁻¹ of every joint),
    d.sF and d.sub_end.  The bodies must be in depth-first order (the compiler's).
    Returns 0, i + 1 for a non-unit quaternion of joint i, or −(i + 1) if the
    articulated inertia of joint i is singular (as aba_kernel)."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, o, nvi, par, e, te, b, bad = 0
    cdef int* se = d.sub_end
    cdef double* IA = d.sIA
    cdef double* F = d.sF
    cdef double* Ci
    cdef double cJ[6]
    cdef double Ic[10]
    cdef double ud[6]
    cdef double scale
    cdef const double* S
    # ---- pass 1
    angle_prepass(m, d, q)
    for i in range(nb):
        if spatial_step(m, d, i, q, NULL, cJ) and bad == 0:
            bad = i + 1
        Ci = &d.sMi[12 * i]
        rigid_world_inertia(Ci, &Ci[9], &m.inert[i, 0], Ic)
        sym6_from_rigid(Ic, &IA[21 * i])
        se[i] = m.voff[i] + m.nvj[i]
    if bad:
        return bad
    # ---- pass 2 (depth-first order: the subtree of i holds the freedoms [voff i, se i))
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        scale = (IA[21 * i] + IA[21 * i + 3] + IA[21 * i + 5] + IA[21 * i + 15]
                 + IA[21 * i + 18] + IA[21 * i + 20])
        for k in range(nvi):
            scale += m.armature[o + k]
        if nvi == 1:
            if _minv_backward_1dof(m, d, i, Mi, scale):
                return -(i + 1)
        elif _minv_backward_multi(m, d, i, Mi, scale):
            return -(i + 1)
        par = m.parent[i]
        if par >= 0 and se[par] < se[i]:
            se[par] = se[i]
    # ---- pass 3: F holds the accelerations A of the current path (see above)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        e = se[i]
        te = se[m.root[i]]             # the end of this subtree's freedoms
        for k in range(nvi):            # other subtrees hanging from the world: 0
            for n in range(te, nv):
                Mi[(o + k) * nv + n] = 0.0
        if par < 0:
            # A_i = J M⁻¹[i, :] (pass 2 gave the final rows of a root)
            for n in range(6):
                memset(&F[n * nv + o], 0, (te - o) * sizeof(double))
            for k in range(nvi):
                _minv_axpy(o, te, 1.0, &Mi[(o + k) * nv], F, nv, &d.sJ[6 * (o + k)])
            continue
        # take the bodies after par on the previous body's path off A
        b = i - 1
        while b != par and b >= 0:
            for k in range(m.nvj[b]):
                _minv_axpy(o, te, -1.0, &Mi[(m.voff[b] + k) * nv], F, nv,
                           &d.sJ[6 * (m.voff[b] + k)])
            b = m.parent[b]
        if nvi == 1:
            for n in range(6):
                ud[n] = d.U[6 * o + n] * d.Dinv[6 * o]
            _minv_row(o, e, True, &Mi[o * nv], F, nv, ud, &d.sJ[6 * o])
            _minv_row(e, te, False, &Mi[o * nv], F, nv, ud, &d.sJ[6 * o])
        else:
            _minv_forward_multi(m, d, i, Mi, te)
    _minv_lower_from_upper(nv, Mi)
    return 0


cdef int _k_minverse(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """The dispatcher's adapter (_kernels.pyx): out M⁻¹ (nv × nv) at c.q."""
    return minverse_kernel(m, d, c.q, c.out)
