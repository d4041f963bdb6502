# Mass matrix by the composite-rigid-body algorithm in spatial form
# (Featherstone's CRBA written with the spatial joint screws of Müller 2018,
# eqs. 70-71: M_ij = J_iᵀ Icˢ_j J_j for i an ancestor-or-self of j, eq. 81 in
# recursive form).  Everything is in world axes about the world origin, so a
# composite inertia reaches its parent by a plain sum and an entry of M is one
# 6-dot: nothing is transformed while walking up the tree.  Composite inertias
# are kept as rigid-body inertias (mass m, first moment h = m c, rotational
# inertia Io about the world origin, packed symmetric).

cdef inline Py_ssize_t crba_ws_size(int nb, int nv) noexcept nogil:
    return 34 * <Py_ssize_t>nb + 6 * <Py_ssize_t>(nv if nv > 0 else 1)


cdef inline void rigid_apply_packed(const double* Ic, const double* V,
                                    double* out) noexcept nogil:
    """out = M V for a rigid-body inertia Ic = (m, h (3), Io packed (6): xx xy xz
    yy yz zz) about the frame origin: (Io ω + h × v, m v − h × ω)."""
    cdef const double* h = &Ic[1]
    cdef const double* I = &Ic[4]
    cdef double m = Ic[0]
    out[0] = I[0] * V[0] + I[1] * V[1] + I[2] * V[2] + h[1] * V[5] - h[2] * V[4]
    out[1] = I[1] * V[0] + I[3] * V[1] + I[4] * V[2] + h[2] * V[3] - h[0] * V[5]
    out[2] = I[2] * V[0] + I[4] * V[1] + I[5] * V[2] + h[0] * V[4] - h[1] * V[3]
    out[3] = m * V[3] - (h[1] * V[2] - h[2] * V[1])
    out[4] = m * V[4] - (h[2] * V[0] - h[0] * V[2])
    out[5] = m * V[5] - (h[0] * V[1] - h[1] * V[0])


cdef inline void rigid_world_inertia(const double* R, const double* r, const double* inr,
                                     double* Ic) noexcept nogil:
    """Ic = (m, m c, Io) about the world origin, world axes, of a body at (R, r) with
    inr = (m, COM (body), Θ_COM (body), ...):  c = r + R d,
    Io = R Θ_c Rᵀ + m (|c|² 1 − c cᵀ)."""
    cdef double m = inr[0]
    cdef double c[3]
    cdef double P[9]
    cdef double cc
    cdef int a
    rot_vec(R, &inr[1], c)
    c[0] += r[0]; c[1] += r[1]; c[2] += r[2]
    rot_mul(R, &inr[4], P)            # P = R Θ_c; Io = P Rᵀ (upper triangle)
    cc = dot3(c, c)
    Ic[0] = m
    Ic[1] = m * c[0]; Ic[2] = m * c[1]; Ic[3] = m * c[2]
    Ic[4] = P[0] * R[0] + P[1] * R[1] + P[2] * R[2] + m * (cc - c[0] * c[0])
    Ic[5] = P[0] * R[3] + P[1] * R[4] + P[2] * R[5] - m * c[0] * c[1]
    Ic[6] = P[0] * R[6] + P[1] * R[7] + P[2] * R[8] - m * c[0] * c[2]
    Ic[7] = P[3] * R[3] + P[4] * R[4] + P[5] * R[5] + m * (cc - c[1] * c[1])
    Ic[8] = P[3] * R[6] + P[4] * R[7] + P[5] * R[8] - m * c[1] * c[2]
    Ic[9] = P[6] * R[6] + P[7] * R[7] + P[8] * R[8] + m * (cc - c[2] * c[2])


cdef inline double dot6(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


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
    cdef double sg, Mlk
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
            world_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
            if fast == FAST_SCREW:
                twist_Ad(Ci, &Ci[9], &m.X[o, 0], Ji)
            else:
                # ±e_k about the body origin: J = (w, r × w), w = ±R[:, k]
                k = fast - FAST_REV_X
                sg = m.X[o, k]
                Ji[0] = sg * Ci[k]
                Ji[1] = sg * Ci[3 + k]
                Ji[2] = sg * Ci[6 + k]
                cross(&Ci[9], Ji, &Ji[3])
        else:
            if joint_calc(m.kind[i], m.nvj[i], &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]],
                          NULL, RJ, pJ, Ji, cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
            world_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
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
