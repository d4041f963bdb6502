# Forward kinematics: C_i = C_parent(i) B_i J_i(q_i)  (Müller 2018, eq. 13 in
# body-fixed recursive form).  One pass in topological order (parent[i] < i).

cdef int fk_kernel(ModelCore m, const double* q, double* out) noexcept nogil:
    """Poses of all bodies, written as nb row-major 4x4 matrices into out.

    Returns 0, or i + 1 if the quaternion of joint i is not unit.
    """
    cdef int i, par, n, bad = 0
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double RT[9]
    cdef double pT[3]
    cdef double Rc[9]
    cdef double pc[3]
    cdef const double* Bi
    cdef const double* Rp
    cdef double* o
    cdef double T[12]
    for i in range(m.nb):
        Bi = &m.Bref[i, 0]
        if m.fast[i] != FAST_NONE:
            joint_pose_1dof(m.fast[i], &m.X[m.voff[i], 0], Bi, q[m.qoff[i]], T)
            for n in range(9):
                RT[n] = T[n]
            pT[0] = T[9]; pT[1] = T[10]; pT[2] = T[11]
        else:
            if joint_transform(m.kind[i], m.nvj[i], &m.X[m.voff[i], 0], &m.center[i, 0],
                               &q[m.qoff[i]], RJ, pJ) and bad == 0:
                bad = i + 1
            pose_mul(Bi, &Bi[9], RJ, pJ, RT, pT)
        o = &out[16 * i]
        par = m.parent[i]
        if par < 0:
            for n in range(3):
                o[4 * n + 0] = RT[3 * n + 0]
                o[4 * n + 1] = RT[3 * n + 1]
                o[4 * n + 2] = RT[3 * n + 2]
                o[4 * n + 3] = pT[n]
        else:
            # parent pose lives in out (4x4); unpack into raw rotation/position
            Rp = &out[16 * par]
            for n in range(3):
                Rc[3 * n + 0] = Rp[4 * n + 0]
                Rc[3 * n + 1] = Rp[4 * n + 1]
                Rc[3 * n + 2] = Rp[4 * n + 2]
                pc[n] = Rp[4 * n + 3]
            pose_mul(Rc, pc, RT, pT, RJ, pJ)
            for n in range(3):
                o[4 * n + 0] = RJ[3 * n + 0]
                o[4 * n + 1] = RJ[3 * n + 1]
                o[4 * n + 2] = RJ[3 * n + 2]
                o[4 * n + 3] = pJ[n]
        o[12] = 0.0; o[13] = 0.0; o[14] = 0.0; o[15] = 1.0
    return bad
