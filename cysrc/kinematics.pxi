# Kinematics beyond poses: body-fixed twists and accelerations of every body
# (Müller 2018, eqs. 24, 29 in recursive body-fixed form), and the spatial screw
# of every joint freedom at the current configuration, J_j = Ad_{C_i} S_j (the
# columns of all spatial Jacobians).  Other representations follow in Python by
# one rotation/translation per body (kinematics.py).

cdef int body_motion_kernel(ModelCore m, const double* q, const double* qd,
                            const double* qdd, double* ws, double* C, double* V,
                            double* A) noexcept nogil:
    """World poses C (nb × 12), body-fixed twists V and twist derivatives A (nb × 6;
    no gravity).  qd / qdd may be NULL (then V / A are not computed)."""
    cdef int nb = m.nb, i, n, par, o, nvi, bad = 0
    cdef double* T = ws
    cdef double* S = &ws[12 * nb]
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    cdef double* Ti
    cdef const double* B
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        if joint_calc(m.kind[i], nvi, &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]],
                      NULL if qd == NULL else &qd[o], RJ, pJ, &S[6 * o], cJ) and bad == 0:
            bad = i + 1
        B = &m.Bref[i, 0]
        pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
        par = m.parent[i]
        world_pose(NULL if par < 0 else &C[12 * par], Ti, &C[12 * i])
        if qd == NULL:
            continue
        subspace_times(nvi, &S[6 * o], &qd[o], vr)
        if par < 0:
            for n in range(6):
                V[6 * i + n] = vr[n]
        else:
            twist_Ad_inv(Ti, &Ti[9], &V[6 * par], &V[6 * i])
            twist_add(&V[6 * i], vr)
        if qdd == NULL:
            continue
        subspace_times(nvi, &S[6 * o], &qdd[o], ar)
        if par < 0:
            for n in range(6):
                A[6 * i + n] = 0.0
        else:
            twist_Ad_inv(Ti, &Ti[9], &A[6 * par], &A[6 * i])
        twist_bracket(&V[6 * i], vr, t6)
        for n in range(6):
            A[6 * i + n] += t6[n] + ar[n] + cJ[n]
    return bad


cdef int spatial_screws_kernel(ModelCore m, const double* q, double* ws, double* C,
                               double* J) noexcept nogil:
    """World poses C (nb × 12) and spatial screws J (nv × 6) of every freedom."""
    cdef int nb = m.nb, i, k, o, bad
    bad = body_motion_kernel(m, q, NULL, NULL, ws, C, NULL, NULL)
    cdef double* S = &ws[12 * nb]
    for i in range(nb):
        o = m.voff[i]
        for k in range(m.nvj[i]):
            twist_Ad(&C[12 * i], &C[12 * i + 9], &S[6 * (o + k)], &J[6 * (o + k)])
    return bad


cdef inline void subspace_rate(int kind, int nv, const double* S, const double* qd,
                               double* Sd) noexcept nogil:
    """Ṡ (nv columns of 6) of the body-fixed motion subspace (joints.pxi):
    screw chains Ṡ_j = [S_j, Σ_{l>j} S_l q̇_l]; SO(3)×R³ free joint
    Ṡ_{3+k} = (0, −ω × Rᵀe_k); constant otherwise."""
    cdef double later[6]
    cdef double t[3]
    cdef int j, n
    for n in range(6 * nv):
        Sd[n] = 0.0
    if kind == KIND_SCREWS and nv > 1:
        for n in range(6):
            later[n] = 0.0
        for j in range(nv - 1, -1, -1):
            twist_bracket(&S[6 * j], later, &Sd[6 * j])
            for n in range(6):
                later[n] += S[6 * j + n] * qd[j]
    elif kind == KIND_FREE_SO3R3:
        for j in range(3):
            cross(qd, &S[6 * (3 + j) + 3], t)
            Sd[6 * (3 + j) + 3] = -t[0]
            Sd[6 * (3 + j) + 4] = -t[1]
            Sd[6 * (3 + j) + 5] = -t[2]


cdef int spatial_screw_rates_kernel(ModelCore m, const double* q, const double* qd,
                                    double* ws, double* C, double* J,
                                    double* Jd) noexcept nogil:
    """World poses C (nb × 12), spatial screws J and their time derivatives Jd
    (nv × 6): J̇_j = ad_{Vˢ_b} J_j + Ad_{C_b} Ṡ_j for freedom j of body b."""
    cdef int nb = m.nb, nv = m.nv, i, k, o, bad
    cdef double* S = &ws[12 * nb]
    cdef double* V = &ws[12 * nb + 6 * nv]
    cdef double* Sd = &ws[18 * nb + 6 * nv]
    cdef double Vs[6]
    cdef double t6[6]
    bad = body_motion_kernel(m, q, qd, NULL, ws, C, V, NULL)
    for i in range(nb):
        o = m.voff[i]
        twist_Ad(&C[12 * i], &C[12 * i + 9], &V[6 * i], Vs)
        subspace_rate(m.kind[i], m.nvj[i], &S[6 * o], &qd[o], Sd)
        for k in range(m.nvj[i]):
            twist_Ad(&C[12 * i], &C[12 * i + 9], &S[6 * (o + k)], &J[6 * (o + k)])
            twist_bracket(Vs, &J[6 * (o + k)], &Jd[6 * (o + k)])
            twist_Ad(&C[12 * i], &C[12 * i + 9], &Sd[6 * k], t6)
            twist_add(&Jd[6 * (o + k)], t6)
    return bad
