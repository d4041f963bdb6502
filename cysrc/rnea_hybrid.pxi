# Inverse dynamics, hybrid representation (Müller 2018, eqs. 75-76; signs as
# verified in docs/conventions.md).  Twists V_i = (ω_i, ṙ_i) in world axes at the
# body origin r_i; wrenches about r_i in world axes.  With ⁰X_i = Ad_{R_i} S_i,
# r_{i,p} = r_p − r_i, Vʷ_i = (ω_i, 0):
#   V_i = Ad_{r_{i,p}} V_p + ⁰X_i q̇_i
#   V̇_i = Ad_{r_{i,p}} V̇_p + ad_{(0, ṙ_p − ṙ_i)} V_p + ad_{Vʷ_i} ⁰X_i q̇_i + ⁰X_i q̈_i
#         + Ad_{R_i} Ṡ_i q̇_i
#   W_i = Σ_c Ad_{r_{c,i}}ᵀ W_c + Mʰ_i V̇_i + ad_{Vʷ_i} Mʰ_i Vʷ_i − W_i^ext,  Q_i = ⁰X_iᵀ W_i

cdef int _rnea_hybrid_forward(ModelCore m, DataC* d, const double* q, const double* qd,
                              const double* qdd, const double* g, const double* fext,
                              int fext_frame) noexcept nogil:
    """Hybrid RNEA forward pass, root to leaves (eq. 75 above): the joint steps,
    V_i, V̇_i and each body's own wrench Mʰ_i V̇_i + ad_{Vʷ_i} Mʰ_i Vʷ_i − W_i^ext
    (d.hv, d.ha_gf, d.hf; world axes at the body origins).  Returns 0 or i + 1 for
    a non-unit quaternion of joint i."""
    cdef int nb = m.nb, i, k, n, par, o, nvi, fast, bad = 0
    cdef double sg, qdi, qddi
    cdef double* T = d.liMi
    cdef double* C = d.sMi
    cdef double* V = d.hv
    cdef double* A = d.ha_gf
    cdef double* F = d.hf
    cdef double* S = d.hJ
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    cdef double h[6]
    cdef double d3[3]
    cdef double u[3]
    cdef double ch[3]
    cdef double acc[3]
    cdef const double* inr
    cdef double* Ci
    cdef double* Vi
    cdef double* Ai
    cdef double* Xi
    angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ci = &C[12 * i]
        Vi = &V[6 * i]
        Ai = &A[6 * i]
        par = m.parent[i]
        Xi = &S[6 * o]
        fast = m.fast[i]
        if joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        root_relative_pose(NULL if par < 0 else &C[12 * par], &T[12 * i], Ci)
        if fast != FAST_NONE:
            if fast == FAST_SCREW:
                rotate_twist(Ci, &m.X[o, 0], Xi)
            else:
                # ±e_k about the body origin: ⁰X = (±R[:, k], 0)
                k = fast - FAST_REV_X
                sg = 1.0 if m.X[o, k] > 0.0 else -1.0
                Xi[0] = sg * Ci[k]
                Xi[1] = sg * Ci[3 + k]
                Xi[2] = sg * Ci[6 + k]
                Xi[3] = 0.0; Xi[4] = 0.0; Xi[5] = 0.0
            # one freedom: Ṡq̇ = 0
            qdi = qd[o]
            qddi = qdd[o]
            for n in range(6):
                vr[n] = Xi[n] * qdi
                ar[n] = Xi[n] * qddi
        else:
            # hybrid joint screws ⁰X = Ad_{R_i} S
            for k in range(nvi):
                rotate_twist(Ci, &d.S[6 * (o + k)], &Xi[6 * k])
            subspace_times(nvi, Xi, &qd[o], vr)
            subspace_times(nvi, Xi, &qdd[o], ar)
            rotate_twist(Ci, cJ, t6)
            for n in range(6):
                ar[n] += t6[n]
        if par < 0:
            for n in range(6):
                Vi[n] = vr[n]
            Ai[0] = 0.0; Ai[1] = 0.0; Ai[2] = 0.0
            Ai[3] = -g[0]; Ai[4] = -g[1]; Ai[5] = -g[2]
        else:
            # d = r_p − r_i
            for n in range(3):
                d3[n] = C[12 * par + 9 + n] - Ci[9 + n]
            # V_i = Ad_{r_{i,p}} V_p + vr: (ω_p, ṙ_p + d × ω_p) + vr
            cross(d3, &V[6 * par], u)
            for n in range(3):
                Vi[n] = V[6 * par + n] + vr[n]
                Vi[3 + n] = V[6 * par + 3 + n] + u[n] + vr[3 + n]
            # Ad_{r_{i,p}} V̇_p
            cross(d3, &A[6 * par], u)
            for n in range(3):
                Ai[n] = A[6 * par + n]
                Ai[3 + n] = A[6 * par + 3 + n] + u[n]
            # ad_{(0, ṙ_p − ṙ_i)} V_p = (0, (ṙ_p − ṙ_i) × ω_p)
            for n in range(3):
                d3[n] = V[6 * par + 3 + n] - Vi[3 + n]
            cross(d3, &V[6 * par], u)
            Ai[3] += u[0]; Ai[4] += u[1]; Ai[5] += u[2]
        # ad_{Vʷ_i} vr = (ω_i × vr_ω, ω_i × vr_v); vr_v = 0 for a revolute axis
        cross(Vi, vr, u)
        Ai[0] += u[0] + ar[0]; Ai[1] += u[1] + ar[1]; Ai[2] += u[2] + ar[2]
        if fast == FAST_NONE or fast == FAST_SCREW:
            cross(Vi, &vr[3], u)
            Ai[3] += u[0] + ar[3]; Ai[4] += u[1] + ar[4]; Ai[5] += u[2] + ar[5]
        # Mʰ V̇ + ad_{Vʷ} Mʰ Vʷ as Newton–Euler about the COM, ρ = R d from r_i:
        # c̈ = r̈ + ω̇ × ρ + ω × (ω × ρ)
        inr = &m.inert[i, 0]
        if td_massless(inr):
            for n in range(6):
                F[6 * i + n] = 0.0
        else:
            rot_vec(Ci, &inr[1], ch)
            cross(Vi, ch, d3)
            cross(Vi, d3, acc)
            cross(Ai, ch, u)
            for n in range(3):
                acc[n] += u[n] + Ai[3 + n]
            com_wrench(inr[0], Ci, &inr[4], ch, Vi, Ai, acc, &F[6 * i])
        if fext != NULL:
            if fext_frame == 2:
                for n in range(6):
                    F[6 * i + n] -= fext[6 * i + n]
            else:
                wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
                if fext_frame == 0:
                    world_wrench_to_root(&T[12 * m.root[i] + 9], t6)
                wrench_from_world(2, Ci, &Ci[9], t6, h)
                for n in range(6):
                    F[6 * i + n] -= h[n]
    return bad


cdef void _rnea_hybrid_backward(ModelCore m, DataC* d, const double* qdd,
                                double* tau) noexcept nogil:
    """Hybrid RNEA backward pass, leaves to root (eq. 76 above): Q_i = ⁰X_iᵀ W_i +
    armature q̈_i, then W_p += Ad_{r_{i,p}}ᵀ W_i."""
    cdef int nb = m.nb, i, k, n, o, par
    cdef double* C = d.sMi
    cdef double* F = d.hf
    cdef double* S = d.hJ
    cdef double d3[3]
    cdef double u[3]
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        subspace_T_times(m.nvj[i], &S[6 * o], &F[6 * i], &tau[o])
        for k in range(m.nvj[i]):
            tau[o + k] += m.armature[o + k] * qdd[o + k]
        par = m.parent[i]
        if par >= 0:
            # W_p += Ad_{r_{i,p}}ᵀ W_i: moment shifted from r_i to r_p
            for n in range(3):
                d3[n] = C[12 * i + 9 + n] - C[12 * par + 9 + n]
            cross(d3, &F[6 * i + 3], u)
            for n in range(3):
                F[6 * par + n] += F[6 * i + n] + u[n]
                F[6 * par + 3 + n] += F[6 * i + 3 + n]


cdef int rnea_hybrid_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                            const double* qdd, const double* g, const double* fext,
                            int fext_frame, double* tau) noexcept nogil:
    """τ (nv) by the hybrid recursive Newton–Euler algorithm: a forward and a
    backward pass; fills d.liMi, d.S, d.sMi, d.hJ, d.hv, d.ha_gf, d.hf.
    Returns 0 or i + 1 for a non-unit quaternion of joint i."""
    cdef int bad = _rnea_hybrid_forward(m, d, q, qd, qdd, g, fext, fext_frame)
    _rnea_hybrid_backward(m, d, qdd, tau)
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_hybrid(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_hybrid_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)
