# Mass matrix by the composite-rigid-body algorithm in spatial form
# (Featherstone's CRBA written with the spatial joint screws of Müller 2018,
# eqs. 70-71: M_ij = J_iᵀ Icˢ_j J_j for i an ancestor-or-self of j, eq. 81 in
# recursive form).  Everything is in world axes about one fixed point, the
# current origin of the subtree's root body (root_relative_pose), so a composite
# inertia reaches its parent by a plain sum and an entry of M is one 6-dot:
# nothing is transformed while walking up the tree.  Composite inertias are kept
# as rigid-body inertias (mass m, first moment h = m c, rotational inertia Io
# about that point, packed symmetric).

cdef inline Py_ssize_t crba_ws_size(int nb, int nv) noexcept nogil:
    return 34 * <Py_ssize_t>nb + 6 * <Py_ssize_t>(nv if nv > 0 else 1)


cdef int crba_kernel(ModelCore m, const double* q, double* ws, double* M) noexcept nogil:
    """Joint-space mass matrix M (nv × nv, row-major, both triangles), armature
    on the diagonal.  Returns 0 or (i + 1) for a non-unit quaternion of joint i."""
    cdef int nb = m.nb, nv = m.nv, i, j, k, l, n, o, oj, par, fast, bad = 0
    cdef double* T = ws
    cdef double* C = &ws[12 * nb]
    cdef double* Ic = &ws[24 * nb]          # per body: m, h (3), Io packed (6)
    cdef double* J = &ws[34 * nb]           # spatial joint screws, 6 per freedom
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double t6[6]
    cdef double F[6]
    cdef double Mlk
    cdef const double* B
    cdef double* Ti
    cdef double* Ci
    cdef double* Ji
    for i in range(nb):
        o = m.voff[i]
        Ti = &T[12 * i]
        Ci = &C[12 * i]
        Ji = &J[6 * o]
        B = &m.Bref[i, 0]
        par = m.parent[i]
        fast = m.fast[i]
        if fast != FAST_NONE:
            joint_pose_1dof(fast, &m.X[o, 0], B, q[m.qoff[i]], Ti)
            root_relative_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
            spatial_screw_1dof(fast, &m.X[o, 0], Ci, Ji)
        else:
            if joint_calc(m.kind[i], m.nvj[i], &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]],
                          NULL, RJ, pJ, Ji, cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
            root_relative_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
            for k in range(m.nvj[i]):
                for n in range(6):
                    t6[n] = Ji[6 * k + n]
                twist_Ad(Ci, &Ci[9], t6, &Ji[6 * k])
        rigid_world_inertia(Ci, &Ci[9], &m.inert[i, 0], &Ic[10 * i])
    for n in range(nv * nv):            # entries of freedoms on different branches stay 0
        M[n] = 0.0
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        for k in range(m.nvj[i]):
            rigid_apply_packed(&Ic[10 * i], &J[6 * (o + k)], F)
            for l in range(k, m.nvj[i]):
                Mlk = dot6(&J[6 * (o + l)], F)
                M[(o + l) * nv + o + k] = Mlk
                M[(o + k) * nv + o + l] = Mlk
            # the same column force projected on every ancestor's screws
            j = m.parent[i]
            while j >= 0:
                oj = m.voff[j]
                for l in range(m.nvj[j]):
                    Mlk = dot6(&J[6 * (oj + l)], F)
                    M[(oj + l) * nv + o + k] = Mlk
                    M[(o + k) * nv + oj + l] = Mlk
                j = m.parent[j]
        par = m.parent[i]
        if par >= 0:
            for n in range(10):
                Ic[10 * par + n] += Ic[10 * i + n]
    for k in range(nv):
        M[k * nv + k] += m.armature[k]
    return bad
