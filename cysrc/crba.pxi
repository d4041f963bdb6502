# Mass matrix by the composite-rigid-body algorithm in spatial form
# (Featherstone's CRBA written with the spatial joint screws of Müller 2018,
# eqs. 70-71: M_ij = J_iᵀ Icˢ_j J_j for i an ancestor-or-self of j, eq. 81 in
# recursive form).  Everything is in world axes about one fixed point, the
# current origin of the subtree's root body (root_relative_pose), so a composite
# inertia reaches its parent by a plain sum and an entry of M is one 6-dot:
# nothing is transformed while walking up the tree.  Composite inertias are kept
# as rigid-body inertias (mass m, first moment h = m c, rotational inertia Io
# about that point, packed symmetric).

cdef extern from *:
    """
    #include "simd.h"
    /* a[n] += b[n], n < 10: a composite inertia onto its parent's (distinct bodies) */
    static inline void td_add10(double* __restrict__ a, const double* __restrict__ b)
    {
        for (int n = 0; n < 10; n++)
            a[n] += b[n];
    }

    /* se3_lanes.h's products for one state with their multiply-adds fused (simd.h
     * td_fma: one rounding in the AVX2 build), named td_crba_*: dot3, dot6,
     * rigid_apply_packed (Iᶜ J), rigid_world_inertia; the terms in se3.pxd's order, so
     * the baseline build's results are those of se3.pxd. */
    #define T_ double
    #define TD_SPLAT(x) (x)
    #define TD_PR(name) td_crba_##name
    #define TD_MADD(a, b, c) td_fma(a, b, c)
    #define TD_MSUB(a, b, c) td_fms(a, b, c)
    #define TD_NMADD(a, b, c) td_fnma(a, b, c)
    #define TD_MUL0(a, b) ((a) * (b))
    #include "se3_lanes.h"
    #undef T_
    #undef TD_SPLAT
    #undef TD_PR
    #undef TD_MADD
    #undef TD_MSUB
    #undef TD_NMADD
    #undef TD_MUL0

    /* td_crba_rigid_world_inertia (m, m c, Θ about s of a body at (R, r) from its
     * inr = (m, c_b, Θ_c)) with the rows k of R Θ, R Θ Rᵀ and c in the lanes (k = 0,
     * 1, 2): each lane is the scalar function's sequence of operations for its row
     * (P = R Θ and R Θ Rᵀ column by column), so the same bits with a third of the
     * instructions. */
    static inline void td_crba_world_inertia(const double* R, const double* r,
                                             const double* inr, double* Ic)
    {
    #if TD_SIMD
        const double m = inr[0];
        const double* Th = &inr[4];
        const td_a4 R0 = {R[0], R[3], R[6], 0.0};      /* the columns of R */
        const td_a4 R1 = {R[1], R[4], R[7], 0.0};
        const td_a4 R2 = {R[2], R[5], R[8], 0.0};
        const td_a4 cv = td_fma4(R2, td_s4(inr[3]), td_fma4(R1, td_s4(inr[2]),
                                                            R0 * td_s4(inr[1])))
                         + (td_a4){r[0], r[1], r[2], 0.0};
        const td_a4 P0 = td_fma4(R2, td_s4(Th[6]), td_fma4(R1, td_s4(Th[3]), R0 * td_s4(Th[0])));
        const td_a4 P1 = td_fma4(R2, td_s4(Th[7]), td_fma4(R1, td_s4(Th[4]), R0 * td_s4(Th[1])));
        const td_a4 P2 = td_fma4(R2, td_s4(Th[8]), td_fma4(R1, td_s4(Th[5]), R0 * td_s4(Th[2])));
        /* column j of P Rᵀ: lane k = dot3(P row k, R row j) */
        const td_a4 I0 = td_fma4(P2, td_s4(R[2]), td_fma4(P1, td_s4(R[1]), P0 * td_s4(R[0])));
        const td_a4 I1 = td_fma4(P2, td_s4(R[5]), td_fma4(P1, td_s4(R[4]), P0 * td_s4(R[3])));
        const td_a4 I2 = td_fma4(P2, td_s4(R[8]), td_fma4(P1, td_s4(R[7]), P0 * td_s4(R[6])));
        const double c0 = cv[0], c1 = cv[1], c2 = cv[2];
        const double cc = td_fma(c2, c2, td_fma(c1, c1, c0 * c0));
        const td_a4 mc = td_s4(m) * cv;
        const td_a4 X1 = td_fnma4(mc, td_s4(c1), I1);
        const td_a4 X2 = td_fnma4(mc, td_s4(c2), I2);
        Ic[0] = m; Ic[1] = mc[0]; Ic[2] = mc[1]; Ic[3] = mc[2];
        Ic[4] = td_fma(m, td_fnma(c0, c0, cc), I0[0]);
        Ic[5] = X1[0];
        Ic[6] = X2[0];
        Ic[7] = td_fma(m, td_fnma(c1, c1, cc), I1[1]);
        Ic[8] = X2[1];
        Ic[9] = td_fma(m, td_fnma(c2, c2, cc), I2[2]);
    #else
        td_crba_rigid_world_inertia(R, r, inr, Ic);
    #endif
    }

    /* F_k = Iᶜ J_k (td_crba_rigid_apply_packed) for the n freedoms of one body, J_k
     * at J + 6 k, into F[k][0..5] (rows of 8: the second half is stored over the
     * first's fourth lane and one past the sixth): the torque rows and the force
     * rows in the lanes, each lane the scalar function's operations for its row. */
    static inline void td_crba_column_forces(const double* Ic, const double* J, int n,
                                             double (*F)[8])
    {
    #if TD_SIMD
        const double* Io = &Ic[4];
        const td_a4 I0 = {Io[0], Io[1], Io[2], 0.0};     /* the columns of Io */
        const td_a4 I1 = {Io[1], Io[3], Io[4], 0.0};
        const td_a4 I2 = {Io[2], Io[4], Io[5], 0.0};
        const td_a4 hA = {Ic[2], Ic[3], Ic[1], 0.0};     /* (h1, h2, h0) */
        const td_a4 hB = {Ic[3], Ic[1], Ic[2], 0.0};     /* (h2, h0, h1) */
        const td_a4 m = td_s4(Ic[0]);
        for (int k = 0; k < n; k++) {
            const double* V = &J[6 * k];
            const td_a4 t = td_fma4(I2, td_s4(V[2]), td_fma4(I1, td_s4(V[1]),
                                                             I0 * td_s4(V[0])));
            const td_a4 VA = {V[5], V[3], V[4], 0.0}, VB = {V[4], V[5], V[3], 0.0};
            const td_a4 VC = {V[2], V[0], V[1], 0.0}, VD = {V[1], V[2], V[0], 0.0};
            const td_a4 Vf = {V[3], V[4], V[5], 0.0};
            const td_a4 lo = td_fnma4(hB, VB, td_fma4(hA, VA, t));
            const td_a4 hi = td_fms4(m, Vf, td_fms4(hA, VC, hB * VD));
            TD_A4(&F[k][0]) = lo;
            TD_A4(&F[k][3]) = hi;
        }
    #else
        for (int k = 0; k < n; k++)
            td_crba_rigid_apply_packed(Ic, &J[6 * k], F[k]);
    #endif
    }

    /* td_crba_anc4 (below) for the four ancestor freedoms l..l+3 of one run:
     * the 4 × 4 block of values transposed in registers, so that row k = g0 + c gets
     * columns l..l+3 in one store and row l + i columns g0.. in one (w = 3: with the
     * entry after them read and written back) */
    static inline td_a4 td_crba_dot4(const double* Jl, const td_a4* Ft)
    {
        td_a4 s = td_s4(Jl[0]) * Ft[0];
        s = td_fma4(td_s4(Jl[1]), Ft[1], s);
        s = td_fma4(td_s4(Jl[2]), Ft[2], s);
        s = td_fma4(td_s4(Jl[3]), Ft[3], s);
        s = td_fma4(td_s4(Jl[4]), Ft[4], s);
        return td_fma4(td_s4(Jl[5]), Ft[5], s);
    }

    static inline void td_crba_anc4x4(const double* J, const td_a4* Ft, int l, int g0,
                                      int w, int nv, double* M, int lower)
    {
        td_a4 s[4], t[4];
        for (int i = 0; i < 4; i++)
            s[i] = td_crba_dot4(&J[6 * (l + i)], Ft);
        {
            const td_a4 a0 = __builtin_shufflevector(s[0], s[1], 0, 4, 2, 6);
            const td_a4 a1 = __builtin_shufflevector(s[0], s[1], 1, 5, 3, 7);
            const td_a4 a2 = __builtin_shufflevector(s[2], s[3], 0, 4, 2, 6);
            const td_a4 a3 = __builtin_shufflevector(s[2], s[3], 1, 5, 3, 7);
            t[0] = __builtin_shufflevector(a0, a2, 0, 1, 4, 5);
            t[1] = __builtin_shufflevector(a1, a3, 0, 1, 4, 5);
            t[2] = __builtin_shufflevector(a0, a2, 2, 3, 6, 7);
            t[3] = __builtin_shufflevector(a1, a3, 2, 3, 6, 7);
        }
        for (int c = 0; c < w; c++)
            TD_A4(&M[(g0 + c) * nv + l]) = t[c];
        if (lower)
            return;
        for (int i = 0; i < 4; i++) {
            double* row = &M[(l + i) * nv + g0];
            if (w == 4)
                TD_A4(row) = s[i];
            else if (w == 3)
                TD_A4(row) = __builtin_shufflevector(s[i], TD_A4(row), 0, 1, 2, 7);
            else if (w == 2)
                TD_A2(row) = __builtin_shufflevector(s[i], s[i], 0, 1);
            else
                row[0] = s[i][0];
        }
    }

    /* M_lk = J_l · F_c for one ancestor freedom l and the columns c0.. of a group
     * (Ft: the column forces transposed, Ft[n][c]), written to row k = g0 + c (the
     * lower triangle) and, unless lower, to row l.  Each lane is td_crba_dot6's
     * sequence of operations (simd.h: td_fma4 is the lanes' td_fma), so its bits. */
    static inline void td_crba_anc4(const double* Jl, const td_a4* Ft, int l, int g0,
                                    int w, int nv, double* M, int lower)
    {
        const td_a4 s = td_crba_dot4(Jl, Ft);
        double* row = &M[l * nv + g0];
        for (int c = 0; c < w; c++)
            M[(g0 + c) * nv + l] = s[c];
        if (lower)
            return;
        if (w == 4)
            TD_A4(row) = s;
        else if (w == 3)        /* row[3] (inside M: g0 + 3 <= nv, l < g0) read and kept */
            TD_A4(row) = __builtin_shufflevector(s, TD_A4(row), 0, 1, 2, 7);
        else if (w == 2)
            TD_A2(row) = __builtin_shufflevector(s, s, 0, 1);
        else
            row[0] = s[0];
    }

    /* CRBA pass 2 for one column group (tables.py crba_groups): the bodies b0..b1-1,
     * each the child of the one before, with w <= 6 freedoms g0.. in all.  Leaves to
     * root within the group: each body's column forces F = Iᶜ J from its composite
     * inertia (complete: its other descendants have higher indices), then Iᶜ onto its
     * parent's; the entries among the group's freedoms; then each ancestor freedom
     * of b0 against all the group's columns at once (4 lanes).  The same operations
     * in the same order as one body at a time, so the same bits. */
    static void td_crba_group(int b0, int b1, const int* parent, const int* voff,
                              const int* nvj, const int* anc_ptr, const int* anc_run,
                              double* Ic, const double* J, int nv, double* M, int lower)
    {
        const int g0 = voff[b0], w = voff[b1 - 1] + nvj[b1 - 1] - g0;
        double F[8][8];
        int first[8];       /* the group column where each column's body starts */
        td_a4 Ft[2][6];
        for (int b = b1 - 1; b >= b0; b--) {
            const int o = voff[b] - g0;
            td_crba_column_forces(&Ic[10 * b], &J[6 * (g0 + o)], nvj[b], &F[o]);
            for (int k = 0; k < nvj[b]; k++)
                first[o + k] = o;
            if (parent[b] >= 0)
                td_add10(&Ic[10 * parent[b]], &Ic[10 * b]);
        }
        if (w == 0)                 /* a body without freedoms: no columns */
            return;
        for (int k = 0; k < w; k++) {
            const int ok = g0 + k;
            /* rows of k's own body from k on, then the rows of the bodies before */
            for (int l = k; l < w && first[l] == first[k]; l++) {
                const double v = td_crba_dot6(&J[6 * (g0 + l)], F[k]);
                M[(g0 + l) * nv + ok] = v;
                if (!lower)
                    M[ok * nv + g0 + l] = v;
            }
            for (int l = 0; l < first[k]; l++) {
                const double v = td_crba_dot6(&J[6 * (g0 + l)], F[k]);
                M[ok * nv + g0 + l] = v;
                if (!lower)
                    M[(g0 + l) * nv + ok] = v;
            }
        }
        for (int h = 0; h < w; h += 4) {
            const int wh = w - h < 4 ? w - h : 4;
            for (int n = 0; n < 6; n++)
                Ft[h / 4][n] = (td_a4){F[h][n], wh > 1 ? F[h + 1][n] : 0.0,
                                       wh > 2 ? F[h + 2][n] : 0.0, wh > 3 ? F[h + 3][n] : 0.0};
        }
        for (int r = anc_ptr[b0]; r < anc_ptr[b0 + 1]; r++) {
            const int hi = anc_run[2 * r + 1];
            int l = anc_run[2 * r];
            for (; l + 4 <= hi; l += 4) {
                td_crba_anc4x4(J, Ft[0], l, g0, w < 4 ? w : 4, nv, M, lower);
                if (w > 4)
                    td_crba_anc4x4(J, Ft[1], l, g0 + 4, w - 4, nv, M, lower);
            }
            for (; l < hi; l++) {
                td_crba_anc4(&J[6 * l], Ft[0], l, g0, w < 4 ? w : 4, nv, M, lower);
                if (w > 4)
                    td_crba_anc4(&J[6 * l], Ft[1], l, g0 + 4, w - 4, nv, M, lower);
            }
        }
    }
    """
    void td_add10(double* a, const double* b) noexcept nogil
    double td_crba_dot6(const double* a, const double* b) noexcept nogil
    void td_crba_rigid_apply_packed(const double* Ic, const double* V, double* out) noexcept nogil
    double td_crba_dot3(const double* a, const double* b) noexcept nogil
    void td_crba_group(int b0, int b1, const int* parent, const int* voff, const int* nvj,
                       const int* anc_ptr, const int* anc_run, double* Ic, const double* J,
                       int nv, double* M, int lower) noexcept nogil
    void td_crba_world_inertia(const double* R, const double* r, const double* inr,
                               double* Ic) noexcept nogil


cdef inline void _crba_from_world(ModelCore m, DataC* d, int i) noexcept nogil:
    """spatial_pose_and_screws with the rotation of sMi[i] copied from d.oMi (the
    same product of the same factors), which leaves only the position
    p = R_p p_T + p_p to form."""
    cdef int o = m.voff[i], par = m.parent[i], k, n
    cdef double* C = &d.sMi[12 * i]
    cdef const double* Cp
    cdef const double* T = &d.liMi[12 * i]
    memcpy(C, &d.oMi[12 * i], 9 * sizeof(double))
    if par < 0:
        C[9] = 0.0; C[10] = 0.0; C[11] = 0.0
    else:
        Cp = &d.sMi[12 * par]
        C[9] = td_crba_dot3(&Cp[0], &T[9]) + Cp[9]
        C[10] = td_crba_dot3(&Cp[3], &T[9]) + Cp[10]
        C[11] = td_crba_dot3(&Cp[6], &T[9]) + Cp[11]
    if m.fast[i] == FAST_SCREW:
        screw_Ad(C, &m.X[o, 0], &d.sJ[6 * o])
    elif m.fast[i] != FAST_NONE:
        spatial_screw_1dof(m.fast[i], &m.X[o, 0], C, &d.sJ[6 * o])
    else:
        for k in range(m.nvj[i]):
            screw_Ad(C, &d.S[6 * (o + k)], &d.sJ[6 * (o + k)])


cdef int _crba_poses_and_inertias(ModelCore m, DataC* d, const double* q,
                                  bint joints_ready, bint world_ready) noexcept nogil:
    """CRBA pass 1, root to leaves: each body's pose C_i in frame s (d.sMi), its
    spatial screws J_i (d.sJ) and its rigid inertia in frame s, Iᶜ_i = Ad*_{C_i⁻¹} M_i
    Ad_{C_i⁻¹} (d.sIc: m, m c, Θ about s).  Returns 0 or i + 1 for a non-unit
    quaternion of joint i."""
    cdef int nb = m.nb, i, bad = 0
    cdef double* Ic = d.sIc
    cdef double* Ci
    cdef double cJ[6]
    if not joints_ready:
        angle_prepass(m, d, q)
    for i in range(nb):
        if world_ready:
            _crba_from_world(m, d, i)
        elif joints_ready:
            spatial_pose_and_screws(m, d, i)
        elif spatial_step(m, d, i, q, NULL, cJ) and bad == 0:
            bad = i + 1
        Ci = &d.sMi[12 * i]
        if td_massless(&m.inert[i, 0]):
            memset(&Ic[10 * i], 0, 10 * sizeof(double))     # its children's sum follows
        else:
            td_crba_world_inertia(Ci, &Ci[9], &m.inert[i, 0], &Ic[10 * i])
    return bad


cdef void _crba_composite_columns(ModelCore m, DataC* d, double* M, bint lower) noexcept nogil:
    """CRBA pass 2, leaves to root: with the composite inertia Iᶜ_i of body i's
    subtree (complete once its children were added), each freedom k of joint i
    gives the column force F = Iᶜ_i J_k and the entries
        M_lk = J_lᵀ F   for the freedoms l of joint i and of every ancestor,
    then Iᶜ_p += Iᶜ_i; the armature is added to the diagonal last.  The bodies go by
    column groups (ModelCore.crba_grp: unbranched runs of consecutive bodies, e.g.
    an MJCF body's several joints, up to 4 freedoms), whose columns meet each
    ancestor freedom of the group together (td_crba_group); the ancestors' freedoms
    are walked as runs of consecutive indices (ModelCore.anc_run), not body by
    body."""
    cdef int nv = m.nv, g, k
    cdef const int* grp = &m.crba_grp[0]
    if not lower:
        memset(M, 0, nv * nv * sizeof(double))  # freedoms on different branches: 0
    for g in range(m.crba_grp.shape[0] - 2, -1, -1):
        td_crba_group(grp[g], grp[g + 1], &m.parent[0], &m.voff[0], &m.nvj[0],
                      &m.anc_ptr[0], &m.anc_run[0], d.sIc, d.sJ, nv, M, lower)
    for k in range(nv):
        M[k * nv + k] += m.armature[k]


cdef int crba_kernel(ModelCore m, DataC* d, const double* q, double* M,
                     bint joints_ready=False, bint world_ready=False,
                     bint lower=False) noexcept nogil:
    """Joint-space mass matrix M (nv × nv, row-major, both triangles), armature
    on the diagonal, by the composite-rigid-body algorithm in two passes; fills
    d.liMi, d.S, d.sMi, d.sJ, d.sIc.  Returns 0 or (i + 1) for a non-unit
    quaternion of joint i (M is computed all the same).  ``joints_ready``: d.liMi
    and d.S already hold this q's joint steps (another kernel just ran on q), only
    the poses in frame s and the screws are formed.  ``world_ready``: d.oMi also
    holds this q's world poses (the constraint rows' sweep), whose rotations are
    those of frame s: only the positions are formed.  ``lower``: only the entries
    the tree factorization reads (_ltl: M_kj for j = k or an ancestor freedom of k)
    are written, nothing else."""
    cdef int bad
    if joints_ready and world_ready and lower:
        # the constrained dynamics' call (a stage, the projection), with constant
        # flags as the plain call below
        bad = _crba_poses_and_inertias(m, d, q, True, True)
        _crba_composite_columns(m, d, M, True)
        return bad
    if not (joints_ready or world_ready or lower):
        # the plain call with constant flags: the compiler inlines both passes here
        # with the flags folded (measured: 3 % of a 7-body mass_matrix call)
        bad = _crba_poses_and_inertias(m, d, q, False, False)
        _crba_composite_columns(m, d, M, False)
        return bad
    bad = _crba_poses_and_inertias(m, d, q, joints_ready, world_ready)
    _crba_composite_columns(m, d, M, lower)
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_crba(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return crba_kernel(m, d, c.q, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def mass_matrix(ModelCore self, q, data=None, out=None):
    """Joint-space mass matrix M(q) by the composite-rigid-body algorithm.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    data, out : as in :meth:`inverse_dynamics` (``out`` (nv, nv) or (N, nv, nv))

    Returns
    -------
    ndarray, shape (nv, nv) or (N, nv, nv)
        Symmetric, both triangles filled; armature on the diagonal.
        Units: kg, kg·m, kg·m² by the coordinates involved.
    """
    cdef int code
    cdef double* M
    cdef const double* qp
    if data is not None and out is not None and _crba_direct(self, q, data, out):
        # the common single call with this model's Data and a matching out: the
        # kernel on them directly (no Call record, no dispatch); the same checks,
        # GIL release and errors as the general path below
        qp = <const double*>cnp.PyArray_DATA(<cnp.ndarray>q)
        M = <double*>cnp.PyArray_DATA(<cnp.ndarray>out)
        if _release_gil(self.nv):
            with nogil:
                code = crba_kernel(self, &(<Data>data).c, qp, M)
        else:
            code = crba_kernel(self, &(<Data>data).c, qp, M)
        if code == 0 and not _finite_diagonal(M, self.nv * self.nv):
            code = CODE_OVERFLOW
        if code:
            self._raise_code(code, -1, "mass_matrix: M")
        return out
    return self._spd_matrix_call(_k_crba, q, data, out, "mass_matrix: M")


cdef inline bint _crba_direct(ModelCore m, object q, object data, object out):
    """q, data and out are those of mass_matrix's direct call: q a state _as_states
    takes as it is, of shape (nq,); data a Data of this model; out an array _output
    takes as it is, of shape (nv, nv) (anything else: False, and the general path
    checks it and names what is wrong)."""
    cdef cnp.npy_intp dims[2]
    dims[0] = m.nv; dims[1] = m.nv
    return (type(data) is Data and (<Data>data).model_serial == m.serial
            and _states_ok(q, m.nq) == 1 and _output_ok(out, 2, dims))
