# Inverse dynamics, spatial representation (Müller 2018, eqs. 70-71; signs as
# verified in docs/CONVENTIONS.md).  All twists, accelerations and wrenches are
# spatial (world frame, about the world origin):
#   J_i = Ad_{C_i} S_i,  V_i = V_p + J_i q̇_i
#   V̇_i = V̇_p + J_i q̈_i + Ad_{C_i} Ṡ_i q̇_i + ad_{V_i} J_i q̇_i
#   W_i = Σ_c W_c + Mˢ_i V̇_i − ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext,   Q_i = J_iᵀ W_i
# Mˢ_i is applied from the world COM c = r + R d and Θ = R Θ_c Rᵀ − m ĉ².

cdef inline void world_inertia_about_origin(const double* R, const double* r,
                                            const double* inr, double* c,
                                            double* Io) noexcept nogil:
    """COM c (world) and rotational inertia Io about the world origin (world axes)."""
    cdef double tmp[9]
    cdef double m = inr[0], c2
    cdef int a, b
    rot_vec(R, &inr[1], c)
    c[0] += r[0]; c[1] += r[1]; c[2] += r[2]
    rot_mul(R, &inr[4], tmp)
    for a in range(3):          # R Θ_c Rᵀ is symmetric: upper triangle, mirrored
        for b in range(a, 3):
            Io[3 * a + b] = tmp[3 * a] * R[3 * b] + tmp[3 * a + 1] * R[3 * b + 1] \
                + tmp[3 * a + 2] * R[3 * b + 2]
            Io[3 * b + a] = Io[3 * a + b]
    c2 = dot3(c, c)
    for a in range(3):
        for b in range(3):
            Io[3 * a + b] -= m * c[a] * c[b]
        Io[4 * a] += m * c2


cdef int rnea_spatial_kernel(ModelCore m, const double* q, const double* qd,
                             const double* qdd, const double* g, const double* fext,
                             int fext_frame, double* ws, double* tau) noexcept nogil:
    cdef int nb = m.nb, i, k, n, par, o, nvi, bad = 0
    cdef double* T = ws
    cdef double* C = &ws[12 * nb]
    cdef double* V = &ws[24 * nb]
    cdef double* A = &ws[30 * nb]
    cdef double* F = &ws[36 * nb]
    cdef double* S = &ws[42 * nb]
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    cdef double h[6]
    cdef double cw[3]
    cdef double Io[9]
    cdef const double* B
    cdef double* Ti
    cdef double* Ci
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        Ci = &C[12 * i]
        B = &m.Bref[i, 0]
        par = m.parent[i]
        if m.fast[i] != FAST_NONE:
            joint_pose_1dof(m.fast[i], &m.X[o, 0], B, q[m.qoff[i]], Ti)
            world_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
            for n in range(6):
                cJ[n] = 0.0
            if m.fast[i] == FAST_SCREW:
                twist_Ad(Ci, &Ci[9], &m.X[o, 0], &S[6 * o])
            else:
                # ±e_k about the body origin: J = (w, r × w), w = ±R[:, k]
                k = m.fast[i] - FAST_REV_X
                S[6 * o] = m.X[o, k] * Ci[k]
                S[6 * o + 1] = m.X[o, k] * Ci[3 + k]
                S[6 * o + 2] = m.X[o, k] * Ci[6 + k]
                cross(&Ci[9], &S[6 * o], &S[6 * o + 3])
        else:
            if joint_calc(m.kind[i], nvi, &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]], &qd[o],
                          RJ, pJ, &S[6 * o], cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
            world_pose(NULL if par < 0 else &C[12 * par], Ti, Ci)
            # spatial joint screws J_i = Ad_{C_i} S_i (overwrite S)
            for k in range(nvi):
                for n in range(6):
                    t6[n] = S[6 * (o + k) + n]
                twist_Ad(Ci, &Ci[9], t6, &S[6 * (o + k)])
        subspace_times(nvi, &S[6 * o], &qd[o], vr)
        subspace_times(nvi, &S[6 * o], &qdd[o], ar)
        if m.fast[i] == FAST_NONE:          # Ṡq̇ vanishes for one-freedom joints
            twist_Ad(Ci, &Ci[9], cJ, t6)
        else:
            for n in range(6):
                t6[n] = 0.0
        if par < 0:
            for n in range(6):
                V[6 * i + n] = vr[n]
            A[6 * i + 0] = 0.0; A[6 * i + 1] = 0.0; A[6 * i + 2] = 0.0
            A[6 * i + 3] = -g[0]; A[6 * i + 4] = -g[1]; A[6 * i + 5] = -g[2]
        else:
            for n in range(6):
                V[6 * i + n] = V[6 * par + n] + vr[n]
                A[6 * i + n] = A[6 * par + n]
        for n in range(6):
            A[6 * i + n] += ar[n] + t6[n]
        twist_bracket(&V[6 * i], vr, t6)
        twist_add(&A[6 * i], t6)
        world_inertia_about_origin(Ci, &Ci[9], &m.inert[i, 0], cw, Io)
        inertia_apply(m.inert[i, 0], cw, Io, &A[6 * i], &F[6 * i])
        inertia_apply(m.inert[i, 0], cw, Io, &V[6 * i], h)
        add_gyroscopic(&V[6 * i], h, &F[6 * i])
        if fext != NULL:
            wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
            for n in range(6):
                F[6 * i + n] -= t6[n]
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        subspace_T_times(m.nvj[i], &S[6 * o], &F[6 * i], &tau[o])
        for k in range(m.nvj[i]):
            tau[o + k] += m.armature[o + k] * qdd[o + k]
        par = m.parent[i]
        if par >= 0:
            twist_add(&F[6 * par], &F[6 * i])
    return bad
