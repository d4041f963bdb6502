# Inverse dynamics, body-fixed representation (Müller 2018, eqs. 66-67; signs as
# verified in docs/conventions.md):
#   V_i = Ad_{C_{i,p}} V_p + S_i q̇_i
#   V̇_i = Ad_{C_{i,p}} V̇_p + ad_{V_i} S_i q̇_i + S_i q̈_i + Ṡ_i q̇_i
#   W_i = Σ_c Ad_{C_{c,i}}ᵀ W_c + M_i V̇_i − ad_{V_i}ᵀ M_i V_i − W_i^ext,  Q_i = S_iᵀ W_i
# Gravity enters as the base acceleration (0, −g).  Everything in body frames.
# M_i V̇_i − ad_{V_i}ᵀ M_i V_i is evaluated as Newton–Euler about the COM
# (com_wrench_body), which needs no inertia about the body origin.


cdef inline void com_wrench_body(double m, const double* d, const double* Thc,
                                 const double* V, const double* A,
                                 double* out) noexcept nogil:
    """out = M V̇ − ad_Vᵀ M V for body-frame V = (ω, v), V̇ = (ω̇, v̇), COM d and
    rotational inertia Θ_c about the COM (body axes):
    c̈ = v̇ + ω̇ × d + ω × (v + ω × d),  out = (Θ_c ω̇ + ω × Θ_c ω + d × m c̈, m c̈)."""
    cdef double u[3]
    cdef double acc[3]
    cdef double t[3]
    cdef double hb[3]
    cross(V, d, u)
    u[0] += V[3]; u[1] += V[4]; u[2] += V[5]
    cross(V, u, acc)
    cross(A, d, t)
    acc[0] += t[0] + A[3]; acc[1] += t[1] + A[4]; acc[2] += t[2] + A[5]
    rot_vec(Thc, V, hb)
    cross(V, hb, out)
    rot_vec(Thc, A, hb)
    out[3] = m * acc[0]; out[4] = m * acc[1]; out[5] = m * acc[2]
    cross(d, &out[3], t)
    out[0] += hb[0] + t[0]; out[1] += hb[1] + t[1]; out[2] += hb[2] + t[2]

cdef int rnea_body_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                          const double* qdd, const double* g, const double* fext,
                          int fext_frame, double* tau, bint joints_ready=False) noexcept nogil:
    """τ (nv); fills d.liMi, d.S, d.v, d.a_gf, d.f (and d.oMi for world/hybrid
    external wrenches).  Returns 0 or i + 1 for a non-unit quaternion of joint i.
    ``joints_ready``: d.liMi and d.S already hold this q's joint steps (another
    kernel just stepped every joint on q, with S): the one-freedom (fast-path) joints
    and the screw chains are not stepped again, the chains' Ṡ q̇ (which depends on
    q̇) is formed from d.S as their joint step forms it; spherical and free joints are
    stepped as usual.  qdd = d.zero_v (the constrained dynamics' bias forces): its
    terms are left out (the same bits, up to the sign of a zero)."""
    cdef int nb = m.nb, i, k, n, par, o, nvi, fast, bad = 0
    cdef bint a0 = qdd == d.zero_v
    cdef double sg
    cdef double* T = d.liMi
    cdef double* C = d.oMi
    cdef double* V = d.v
    cdef double* A = d.a_gf
    cdef double* F = d.f
    cdef double* S = d.S
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    cdef double gb[6]
    cdef double h[6]
    cdef const double* Si
    cdef const double* inr
    cdef double* Ti
    # forward pass, root to leaves (eq. 66): T_i = B_i exp(S_i q_i) (d.liMi),
    #   V_i = Ad_{T_i}⁻¹ V_p + S_i q̇_i,
    #   V̇_i = Ad_{T_i}⁻¹ V̇_p + ad_{V_i} S_i q̇_i + S_i q̈_i + Ṡ_i q̇_i   (V̇ of the world: −g),
    #   W_i = M_i V̇_i − ad_{V_i}ᵀ M_i V_i − W_i^ext
    # (one function with the backward pass: split in two, the compiler stopped
    # inlining them, +3 % per call on a 7-body arm)
    if not joints_ready:
        angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        par = m.parent[i]
        fast = m.fast[i]
        if not joints_ready or (fast == FAST_NONE and m.kind[i] != KIND_SCREWS):
            if joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
                bad = i + 1
        elif fast == FAST_NONE:
            if m.univ[i]:
                universal_bias(&m.X[o, 0], &m.univ_pt[i, 0], &S[6 * o], &qd[o], cJ)
            else:
                _screw_chain_bias(nvi, &S[6 * o], &qd[o], cJ)
        if fast != FAST_NONE and fast != FAST_SCREW:
            # revolute about body axis k through the origin: S = ±e_k (angular)
            k = fast - FAST_REV_X
            sg = 1.0 if m.X[o, k] > 0.0 else -1.0
            if par < 0:
                for n in range(6):
                    V[6 * i + n] = 0.0
                gb[0] = 0.0; gb[1] = 0.0; gb[2] = 0.0
                gb[3] = -g[0]; gb[4] = -g[1]; gb[5] = -g[2]
                twist_Ad_inv(Ti, &Ti[9], gb, &A[6 * i])
            else:
                twist_Ad_inv(Ti, &Ti[9], &V[6 * par], &V[6 * i])
                twist_Ad_inv(Ti, &Ti[9], &A[6 * par], &A[6 * i])
            # V̇ += ad_{V} (e_k sg q̇) + e_k sg q̈, using the parent-transformed V
            cross_add_axis(k, sg * qd[o], &V[6 * i], &A[6 * i])
            cross_add_axis(k, sg * qd[o], &V[6 * i + 3], &A[6 * i + 3])
            V[6 * i + k] += sg * qd[o]
            if not a0:
                A[6 * i + k] += sg * qdd[o]
        else:
            if fast == FAST_SCREW:
                Si = &m.X[o, 0]
                for n in range(6):
                    vr[n] = Si[n] * qd[o]
                    cJ[n] = 0.0
            else:
                Si = &S[6 * o]
                subspace_times(nvi, Si, &qd[o], vr)
            if par < 0:
                for n in range(6):
                    V[6 * i + n] = vr[n]
                gb[0] = 0.0; gb[1] = 0.0; gb[2] = 0.0
                gb[3] = -g[0]; gb[4] = -g[1]; gb[5] = -g[2]
                twist_Ad_inv(Ti, &Ti[9], gb, &A[6 * i])
            else:
                twist_Ad_inv(Ti, &Ti[9], &V[6 * par], &V[6 * i])
                twist_add(&V[6 * i], vr)
                twist_Ad_inv(Ti, &Ti[9], &A[6 * par], &A[6 * i])
                twist_bracket(&V[6 * i], vr, t6)
                twist_add(&A[6 * i], t6)
            if a0:
                for n in range(6):
                    A[6 * i + n] += cJ[n]
            else:
                if fast == FAST_SCREW:
                    for n in range(6):
                        ar[n] = Si[n] * qdd[o]
                else:
                    subspace_times(nvi, Si, &qdd[o], ar)
                for n in range(6):
                    A[6 * i + n] += ar[n] + cJ[n]
        inr = &m.inert[i, 0]
        if td_massless(inr):
            for n in range(6):
                F[6 * i + n] = 0.0
        else:
            com_wrench_body(inr[0], &inr[1], &inr[4], &V[6 * i], &A[6 * i], &F[6 * i])
        if fext != NULL:
            if fext_frame == 1:
                for n in range(6):
                    F[6 * i + n] -= fext[6 * i + n]
            else:
                world_pose(NULL if par < 0 else &C[12 * par], Ti, &C[12 * i])
                wrench_to_world(fext_frame, &C[12 * i], &C[12 * i + 9], &fext[6 * i], t6)
                wrench_from_world(1, &C[12 * i], &C[12 * i + 9], t6, h)
                for n in range(6):
                    F[6 * i + n] -= h[n]
    # backward pass, leaves to root (eq. 67): τ_i = S_iᵀ W_i + armature q̈_i,
    #   W_p += Ad_{T_i}⁻ᵀ W_i
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        subspace_T_times(m.nvj[i], &S[6 * o], &F[6 * i], &tau[o])
        if not a0:
            for k in range(m.nvj[i]):
                tau[o + k] += m.armature[o + k] * qdd[o + k]
        par = m.parent[i]
        if par >= 0:
            wrench_to_parent(&T[12 * i], &T[12 * i + 9], &F[6 * i], &F[6 * par])
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_body(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_body_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)
