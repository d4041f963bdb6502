# Inverse dynamics, spatial representation (Müller 2018, eqs. 70-71; signs as
# verified in docs/conventions.md).  All twists, accelerations and wrenches are
# spatial: world axes, about one fixed point (the current origin of the subtree's
# root body rather than the world origin, see root_relative_pose; τ is the same):
#   J_i = Ad_{C_i} S_i,  V_i = V_p + J_i q̇_i
#   V̇_i = V̇_p + J_i q̈_i + Ad_{C_i} Ṡ_i q̇_i + ad_{V_i} J_i q̇_i
#   W_i = Σ_c W_c + Mˢ_i V̇_i − ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext,   Q_i = J_iᵀ W_i
# The body term Mˢ_i V̇_i − ad_{V_i}ᵀ Mˢ_i V_i is evaluated as Newton–Euler about the
# COM c = r + R d (se3.pxd com_wrench), never forming Mˢ_i.

cdef int rnea_spatial_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                             const double* qdd, const double* g, const double* fext,
                             int fext_frame, double* tau, bint poses_ready=False) noexcept nogil:
    """τ (nv); fills d.liMi, d.S, d.sMi, d.sJ, d.sv, d.sa_gf, d.sf (frame s).
    Returns 0 or i + 1 for a non-unit quaternion of joint i.  ``poses_ready``:
    d.sMi and d.sJ already hold this q's poses and screws (a kernel just ran on q),
    so one-freedom joints skip their joint step."""
    cdef int nb = m.nb, i, k, n, par, o, nvi, fast, bad = 0
    cdef double qdi, qddi
    cdef double* T = d.liMi
    cdef double* C = d.sMi
    cdef double* V = d.sv
    cdef double* A = d.sa_gf
    cdef double* F = d.sf
    cdef double* S = d.sJ
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    cdef double cw[3]
    cdef double u[3]
    cdef double acc[3]
    cdef const double* inr
    cdef double* Ci
    cdef double* Vi
    cdef double* Ai
    cdef double* Ji
    if not poses_ready:
        angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ci = &C[12 * i]
        Vi = &V[6 * i]
        Ai = &A[6 * i]
        Ji = &S[6 * o]
        par = m.parent[i]
        fast = m.fast[i]
        if poses_ready and fast != FAST_NONE:
            pass
        elif spatial_step(m, d, i, q, qd, cJ) and bad == 0:
            bad = i + 1
        if fast != FAST_NONE:
            # one freedom: Ṡq̇ = 0 and ad_{V_i} J q̇ = ad_{V_p} J q̇
            qdi = qd[o]
            qddi = qdd[o]
            for n in range(6):
                vr[n] = Ji[n] * qdi
            if par < 0:
                for n in range(6):
                    Vi[n] = vr[n]
                    Ai[n] = Ji[n] * qddi
                Ai[3] -= g[0]; Ai[4] -= g[1]; Ai[5] -= g[2]
            else:
                twist_bracket(&V[6 * par], vr, t6)
                for n in range(6):
                    Vi[n] = V[6 * par + n] + vr[n]
                    Ai[n] = A[6 * par + n] + Ji[n] * qddi + t6[n]
        else:
            subspace_times(nvi, Ji, &qd[o], vr)
            subspace_times(nvi, Ji, &qdd[o], ar)
            twist_Ad(Ci, &Ci[9], cJ, t6)
            for n in range(6):
                ar[n] += t6[n]
            if par < 0:
                for n in range(6):
                    Vi[n] = vr[n]
                    Ai[n] = ar[n]
                Ai[3] -= g[0]; Ai[4] -= g[1]; Ai[5] -= g[2]
            else:
                for n in range(6):
                    Vi[n] = V[6 * par + n] + vr[n]
                    Ai[n] = A[6 * par + n] + ar[n]
            twist_bracket(Vi, vr, t6)
            twist_add(Ai, t6)
        # Mˢ V̇ − ad_Vᵀ Mˢ V as Newton–Euler about the world COM c = r + R d:
        # ċ = v + ω × c, c̈ = v̇ + ω̇ × c + ω × ċ
        inr = &m.inert[i, 0]
        rot_vec(Ci, &inr[1], cw)
        cw[0] += Ci[9]; cw[1] += Ci[10]; cw[2] += Ci[11]
        cross(Vi, cw, u)
        u[0] += Vi[3]; u[1] += Vi[4]; u[2] += Vi[5]
        cross(Vi, u, acc)
        cross(Ai, cw, u)
        for n in range(3):
            acc[n] += u[n] + Ai[3 + n]
        com_wrench(inr[0], Ci, &inr[4], cw, Vi, Ai, acc, &F[6 * i])
        if fext != NULL:
            wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
            if fext_frame == 0:
                world_wrench_to_root(&T[12 * m.root[i] + 9], t6)
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
