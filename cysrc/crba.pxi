# Mass matrix by the composite-rigid-body algorithm in spatial form
# (Featherstone's CRBA written with the spatial joint screws of Müller 2018,
# eqs. 70-71: M_ij = J_iᵀ Icˢ_j J_j for i an ancestor-or-self of j, eq. 81 in
# recursive form).  Everything is in world axes about one fixed point, the
# current origin of the subtree's root body (root_relative_pose), so a composite
# inertia reaches its parent by a plain sum and an entry of M is one 6-dot:
# nothing is transformed while walking up the tree.  Composite inertias are kept
# as rigid-body inertias (mass m, first moment h = m c, rotational inertia Io
# about that point, packed symmetric).

cdef int crba_kernel(ModelCore m, DataC* d, const double* q, double* M,
                     bint joints_ready=False) noexcept nogil:
    """Joint-space mass matrix M (nv × nv, row-major, both triangles), armature
    on the diagonal; fills d.liMi, d.S, d.sMi, d.sJ, d.sIc.  Returns 0 or (i + 1)
    for a non-unit quaternion of joint i.  ``joints_ready``: d.liMi and d.S already
    hold this q's joint steps (another kernel just ran on q), only the poses in
    frame s and the screws are formed."""
    cdef int nb = m.nb, nv = m.nv, i, j, k, l, n, o, oj, par, bad = 0
    cdef double* Ic = d.sIc                 # per body: m, h (3), Io packed (6)
    cdef double* J = d.sJ                   # spatial joint screws, 6 per freedom
    cdef double* Ci
    cdef double cJ[6]
    cdef double F[6]
    cdef double Mlk
    if not joints_ready:
        angle_prepass(m, d, q)
    for i in range(nb):
        if joints_ready:
            spatial_pose_and_screws(m, d, i)
        elif spatial_step(m, d, i, q, NULL, cJ) and bad == 0:
            bad = i + 1
        Ci = &d.sMi[12 * i]
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
