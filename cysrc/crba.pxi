# Mass matrix by the composite-rigid-body algorithm in body-fixed form
# (Featherstone's CRBA written with the body-fixed screws of Müller 2018, §5:
# M_ij = S_iᵀ Ad_{C_{j,i}}ᵀ Ic_j S_j for i an ancestor-or-self of j, eq. 81 in
# recursive form).  Composite inertias are kept as rigid-body inertias
# (mass m, first moment h = m c, rotational inertia Io about the body origin)
# and carried to the parent by a rotation and a shift, never as 6×6 products.

cdef inline Py_ssize_t crba_ws_size(int nb, int nv) noexcept nogil:
    return 25 * <Py_ssize_t>nb + 6 * <Py_ssize_t>(nv if nv > 0 else 1)


cdef inline void inertia_apply_h(double m, const double* h, const double* Io,
                                 const double* V, double* out) noexcept nogil:
    """out = M V for a rigid-body inertia (m, h = m c, Io about the origin):
    (Io ω + h × v, m v − h × ω)."""
    cdef double t[3]
    rot_vec(Io, V, out)
    cross(h, &V[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]
    cross(h, V, t)
    out[3] = m * V[3] - t[0]; out[4] = m * V[4] - t[1]; out[5] = m * V[5] - t[2]


cdef inline void inertia_add_to_parent(const double* R, const double* p, double m,
                                       const double* h, const double* Io, double* hp,
                                       double* Iop) noexcept nogil:
    """Add a rigid-body inertia given in the child frame to one in the parent frame
    ((R, p): child pose in the parent).  hr = R h; Io' = R Io Rᵀ − m p̂² − p̂ ĥr − ĥr p̂."""
    cdef double hr[3]
    cdef double tmp[9]
    cdef double RIo[9]
    cdef double pp, ph
    cdef int a, b
    rot_vec(R, h, hr)
    rot_mul(R, Io, tmp)
    for a in range(3):
        for b in range(3):
            RIo[3 * a + b] = tmp[3 * a] * R[3 * b] + tmp[3 * a + 1] * R[3 * b + 1] \
                + tmp[3 * a + 2] * R[3 * b + 2]
    pp = dot3(p, p)
    ph = dot3(p, hr)
    # −m p̂² = m (|p|² I − p pᵀ);  −(p̂ ĥ + ĥ p̂) = 2 (p·h) I − p hᵀ − h pᵀ
    for a in range(3):
        for b in range(3):
            Iop[3 * a + b] += RIo[3 * a + b] - m * p[a] * p[b] - p[a] * hr[b] - hr[a] * p[b]
        Iop[4 * a] += m * pp + 2.0 * ph
    hp[0] += hr[0] + m * p[0]; hp[1] += hr[1] + m * p[1]; hp[2] += hr[2] + m * p[2]


cdef int crba_kernel(ModelCore m, const double* q, double* ws, double* M) noexcept nogil:
    """Joint-space mass matrix M (nv × nv, row-major, both triangles), armature
    on the diagonal.  Returns 0 or (i + 1) for a non-unit quaternion of joint i."""
    cdef int nb = m.nb, nv = m.nv, i, j, k, l, n, o, oj, bad = 0
    cdef double* T = ws
    cdef double* Ic = &ws[12 * nb]          # per body: m, h (3), Io (9)
    cdef double* S = &ws[25 * nb]
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double F[6]
    cdef double Fp[6]
    cdef const double* B
    cdef const double* inr
    cdef double* Ti
    for i in range(nb):
        o = m.voff[i]
        Ti = &T[12 * i]
        B = &m.Bref[i, 0]
        if m.fast[i] != FAST_NONE:
            joint_pose_1dof(m.fast[i], &m.X[o, 0], B, q[m.qoff[i]], Ti)
            for n in range(6):
                S[6 * o + n] = m.X[o, n]
        else:
            if joint_calc(m.kind[i], m.nvj[i], &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]],
                          NULL, RJ, pJ, &S[6 * o], cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
        inr = &m.inert[i, 0]
        Ic[13 * i] = inr[0]
        for n in range(3):
            Ic[13 * i + 1 + n] = inr[0] * inr[1 + n]
        for n in range(9):
            Ic[13 * i + 4 + n] = inr[13 + n]
    for n in range(nv * nv):
        M[n] = 0.0
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        for k in range(m.nvj[i]):
            inertia_apply_h(Ic[13 * i], &Ic[13 * i + 1], &Ic[13 * i + 4], &S[6 * (o + k)], F)
            # (the column force is carried to the root below: M[ancestor dofs, o + k])
            for l in range(k, m.nvj[i]):
                M[(o + l) * nv + o + k] = (S[6 * (o + l)] * F[0] + S[6 * (o + l) + 1] * F[1]
                    + S[6 * (o + l) + 2] * F[2] + S[6 * (o + l) + 3] * F[3]
                    + S[6 * (o + l) + 4] * F[4] + S[6 * (o + l) + 5] * F[5])
                M[(o + k) * nv + o + l] = M[(o + l) * nv + o + k]
            # carry the column force up the tree: M[ancestor dofs, o + k]
            j = i
            while m.parent[j] >= 0:
                for n in range(6):
                    Fp[n] = 0.0
                wrench_to_parent(&T[12 * j], &T[12 * j + 9], F, Fp)
                for n in range(6):
                    F[n] = Fp[n]
                j = m.parent[j]
                oj = m.voff[j]
                for l in range(m.nvj[j]):
                    M[(oj + l) * nv + o + k] = (S[6 * (oj + l)] * F[0] + S[6 * (oj + l) + 1] * F[1]
                        + S[6 * (oj + l) + 2] * F[2] + S[6 * (oj + l) + 3] * F[3]
                        + S[6 * (oj + l) + 4] * F[4] + S[6 * (oj + l) + 5] * F[5])
                    M[(o + k) * nv + oj + l] = M[(oj + l) * nv + o + k]
        if m.parent[i] >= 0:
            j = m.parent[i]
            inertia_add_to_parent(&T[12 * i], &T[12 * i + 9], Ic[13 * i], &Ic[13 * i + 1],
                                  &Ic[13 * i + 4], &Ic[13 * j + 1], &Ic[13 * j + 4])
            Ic[13 * j] += Ic[13 * i]
    for k in range(nv):
        M[k * nv + k] += m.armature[k]
    return bad
