# Derivatives of inverse dynamics: ∂τ/∂q, ∂τ/∂v and M = ∂τ/∂v̇ in one forward and
# one backward sweep, spatial form (all twists, accelerations, wrenches and inertias
# in world axes about the fixed point s of each subtree, as rnea_spatial.pxi).
#
# A derivative with respect to q is taken along the joints' groups: perturbing
# freedom a (spatial screw T = J_a) by ε moves body a's subtree rigidly by exp(ε T),
# and turns the spatial screws it carries by δJ_b = [T, J_b].  "a carries b" holds
# for every freedom b of the bodies below a's body, and within a's own joint for
#   screw chains  b after a (J = exp(X₁q₁)⋯exp(X_kq_k)),
#   spherical, free SE(3)   every b (the columns are body-fixed),
#   free SO(3)×R³           the rotational b (the translational columns are
#                           world-fixed).
# Let W_a and A^W_a be the twist and acceleration of the body that freedom a moves
# relative to (its parent plus the freedoms of its joint that a does not carry),
# and Vc_a the twist of the body carrying J_a, so that J̇_a = [Vc_a, J_a].  Then for
# every body l in a's subtree (ad, [·,·] as in docs/conventions.md)
#   δV_l = [T, V_l − W_a],   δA_l = [T, A_l − A^W_a] − [Y_a, V_l − W_a],
#   Y_a = [T, W_a],
# and the body wrench f_l = I_l A_l − ad_{V_l}ᵀ I_l V_l changes by a rigid
# transport −ad_Tᵀ f_l plus
#   I_l (P_a − Z_a) + B_l Y_a,  P_a = [A^W_a, T],  Z_a = [W_a, Y_a],
#   B_l = I_l ad_{V_l} + ad_{V_l}ᵀ I_l + (ad_(·)ᵀ I_l V_l),
# with B_l X = (K_l ω_X, 2 p_l × ω_X): only the angular part of X enters, through
#   K_l = I_o ω̂ − ω̂ I_o + ĥ v̂ + v̂ ĥ + σ̂
# (I_o, h the rotational inertia and first moment about s, (σ, p) = I_l V_l the
# momentum, (ω, v) = V_l).  The rigid transport cancels in J_bᵀ F for every b that
# a carries, so with the subtree sums F_j, Ic_j, B_j of the body j of freedom b
#   ∂τ_b/∂q_a = (Ic_j J_b)·(P_a − Z_a) + (B_jᵀ J_b)·Y_a            (a carries b)
#   ∂τ_b/∂q_a = J_b·(−ad_Tᵀ F_k + Ic_k (P_a − Z_a) + B_k Y_a)        (otherwise;
#                                                  k the body of a, an ancestor of j)
# For ∂/∂v_a: δV_l = T, δA_l = [T, V_l − W_a] + [Vc_a, T], so
#   δF_j = −B_j T + Ic_j X_a,  X_a = [Vc_a + W_a, T],   ∂τ_b/∂v_a = J_b·δF_j
# (j the lower of the two bodies).  External wrenches given in the world frame do
# not move with the bodies, and hybrid ones keep their axes: each adds its own
# correction to the rigid transport (world: −ad_Tᵀ Σ f; hybrid: a term in ω_T only).
# The structure follows Carpentier & Mansard, "Analytical derivatives of rigid body
# dynamics algorithms" (2018), written here with the Lie brackets of the joint
# screws (Müller 2018, §6.1) and the reduced coupling matrix B X = (K ω_X, 2p×ω_X).

cdef extern from *:
    """
    /* The entries of freedom b (row and column index b) with the ancestor freedoms
       a in the runs [runs[2r], runs[2r + 1]), from the per-freedom vectors by component, S (21 × ld: T, P − Z,
       X, angular part of Y), and freedom b's rows ub, wb, eb (NULL: no external
       wrench), G, H (rnea_derivatives.pxi):
         M[b, a] = M[a, b] = ub·T_a   (M may be NULL)
         ∂τ_b/∂q_a = ub·(P − Z)_a + wb·Y_a (+ eb·T_a),  ∂τ_b/∂v_a = ub·X_a − wb·T_a
         ∂τ_a/∂q_b = T_a·G,  ∂τ_a/∂v_b = T_a·H
       TD_VL freedoms a at a time in vector lanes (GCC/Clang vector extensions),
       each lane summing in the order of the scalar dot products, so the entries
       are bitwise those of dot6/dot3; the rows b are stored as vectors, the
       columns b lane by lane. */
    #define TD_PAIR(TYPE, LD)                                                          \
        const TYPE t0 = LD(0), t1 = LD(1), t2 = LD(2), t3 = LD(3), t4 = LD(4), t5 = LD(5); \
        const TYPE m_ = ub[0] * t0 + ub[1] * t1 + ub[2] * t2 + ub[3] * t3 + ub[4] * t4   \
                        + ub[5] * t5;                                                  \
        TYPE q_ = (ub[0] * LD(6) + ub[1] * LD(7) + ub[2] * LD(8) + ub[3] * LD(9)        \
                   + ub[4] * LD(10) + ub[5] * LD(11))                                  \
                  + (wb[0] * LD(18) + wb[1] * LD(19) + wb[2] * LD(20));                \
        if (eb)                                                                        \
            q_ += eb[0] * t0 + eb[1] * t1 + eb[2] * t2 + eb[3] * t3 + eb[4] * t4         \
                  + eb[5] * t5;                                                        \
        const TYPE v_ = (ub[0] * LD(12) + ub[1] * LD(13) + ub[2] * LD(14) + ub[3] * LD(15) \
                         + ub[4] * LD(16) + ub[5] * LD(17))                            \
                        - (wb[0] * t0 + wb[1] * t1 + wb[2] * t2);                      \
        const TYPE g_ = t0 * G[0] + t1 * G[1] + t2 * G[2] + t3 * G[3] + t4 * G[4]        \
                        + t5 * G[5];                                                   \
        const TYPE h_ = t0 * H[0] + t1 * H[1] + t2 * H[2] + t3 * H[3] + t4 * H[4]        \
                        + t5 * H[5];
    static void td_ancestor_pairs(long nv, long b, const int* runs, int nruns,
                                  const double* __restrict__ S, long ld,
                                  const double* ub, const double* wb,
                                  const double* eb, const double* G,
                                  const double* H, double* __restrict__ dq,
                                  double* __restrict__ dv, double* __restrict__ M)
    {
      for (int r = 0; r < nruns; r++) {
        const long a1 = runs[2 * r + 1];
        long a = runs[2 * r];
    #if TD_VL
        #define TD_LDV(r) (*(const td_uvec*)(S + (r) * ld + a))
        for (; a + TD_VL <= a1; a += TD_VL) {
            TD_PAIR(td_vec, TD_LDV)
            *(td_uvec*)(dq + b * nv + a) = q_;
            *(td_uvec*)(dv + b * nv + a) = v_;
            if (M)
                *(td_uvec*)(M + b * nv + a) = m_;
            for (int l = 0; l < TD_VL; l++) {
                dq[(a + l) * nv + b] = g_[l];
                dv[(a + l) * nv + b] = h_[l];
                if (M)
                    M[(a + l) * nv + b] = m_[l];
            }
        }
        #undef TD_LDV
    #endif
        #define TD_LDS(r) (S[(r) * ld + a])
        for (; a < a1; a++) {
            TD_PAIR(double, TD_LDS)
            dq[b * nv + a] = q_;
            dv[b * nv + a] = v_;
            dq[a * nv + b] = g_;
            dv[a * nv + b] = h_;
            if (M) {
                M[b * nv + a] = m_;
                M[a * nv + b] = m_;
            }
        }
        #undef TD_LDS
      }
    }
    """
    void td_ancestor_pairs(long nv, long b, const int* runs, int nruns, const double* S, long ld,
                           const double* ub, const double* wb, const double* eb,
                           const double* G, const double* H, double* dq, double* dv,
                           double* M) noexcept nogil


# Overflow without checking the nv × nv outputs: suppose every per-freedom vector
# T, Y, P − Z, X and every per-body term F, Ic, B, E of the forward sweep is at most
# 1e90 in magnitude.  The subtree sums are then at most nb·1e90; each entry of the
# rows ub, wb, eb, G, H is a sum of at most 26 products of a subtree sum and one of
# T, Y, P − Z, X, so at most 26·nb·1e180; and each output entry is a sum of at most
# 15 products of such a row entry and one of T, Y, P − Z, X, plus an armature: at
# most DERIV_ESTIMATE = 390·nb·1e270 + max armature, far below overflow.
cdef inline double DERIV_ESTIMATE(int nb, double arm) noexcept nogil:
    return 390.0 * nb * 1e270 + arm


cdef inline void _deriv_column(const double* T, const double* W, const double* Aw,
                               const double* Vc, double* YPX) noexcept nogil:
    """Y = [T, W], PZ = [Aw, T] − [W, Y], X = [Vc + W, T] into YPX (18 doubles)."""
    cdef double t6[6]
    cdef double s6[6]
    cdef int n
    twist_bracket(T, W, YPX)
    twist_bracket(Aw, T, &YPX[6])
    twist_bracket(W, YPX, t6)
    for n in range(6):
        YPX[6 + n] -= t6[n]
        s6[n] = Vc[n] + W[n]
    twist_bracket(s6, T, &YPX[12])


cdef inline void _coupling(const double* Ic, const double* V, double* Bk) noexcept nogil:
    """K (3 × 3, row-major) and p (3) of one body's coupling B X = (K ω_X, 2 p × ω_X)
    (header): Ic = (m, h, I_o packed) about s, V = (ω, v) its spatial twist.
    With P = I_o ω̂:  I_o ω̂ − ω̂ I_o = P + Pᵀ, and ĥ v̂ + v̂ ĥ = v hᵀ + h vᵀ − 2 (h·v) 1."""
    cdef const double* h = &Ic[1]
    cdef const double* w = V
    cdef const double* v = &V[3]
    cdef double Io[9]
    cdef double P[9]
    cdef double mom[6]
    cdef double hv
    cdef int r, c
    Io[0] = Ic[4]; Io[1] = Ic[5]; Io[2] = Ic[6]
    Io[3] = Ic[5]; Io[4] = Ic[7]; Io[5] = Ic[8]
    Io[6] = Ic[6]; Io[7] = Ic[8]; Io[8] = Ic[9]
    rigid_apply_packed(Ic, V, mom)
    for r in range(3):
        # row r of P = I_o ω̂ is (row r of I_o) × ω  (ω̂ e_0 = (0, ω2, −ω1), …)
        P[3 * r + 0] = Io[3 * r + 1] * w[2] - Io[3 * r + 2] * w[1]
        P[3 * r + 1] = Io[3 * r + 2] * w[0] - Io[3 * r + 0] * w[2]
        P[3 * r + 2] = Io[3 * r + 0] * w[1] - Io[3 * r + 1] * w[0]
    hv = 2.0 * (h[0] * v[0] + h[1] * v[1] + h[2] * v[2])
    for r in range(3):
        for c in range(3):
            Bk[3 * r + c] = P[3 * r + c] + P[3 * c + r] + v[r] * h[c] + h[r] * v[c]
        Bk[4 * r] -= hv
    # + σ̂, σ = mom[0:3]
    Bk[1] -= mom[2]; Bk[2] += mom[1]
    Bk[3] += mom[2]; Bk[5] -= mom[0]
    Bk[6] -= mom[1]; Bk[7] += mom[0]
    Bk[9] = mom[3]; Bk[10] = mom[4]; Bk[11] = mom[5]


cdef inline void _coupling_apply(const double* Bk, const double* X, double* out) noexcept nogil:
    """out = B X = (K ω_X, 2 p × ω_X)."""
    rot_vec(Bk, X, out)
    cross(&Bk[9], X, &out[3])
    out[3] *= 2.0; out[4] *= 2.0; out[5] *= 2.0


cdef inline void _coupling_T_apply(const double* Bk, const double* J, double* w) noexcept nogil:
    """w = angular part of Bᵀ J = Kᵀ ω_J + 2 v_J × p (its linear part is zero)."""
    cdef double t[3]
    rotT_vec(Bk, J, w)
    cross(&J[3], &Bk[9], t)
    w[0] += 2.0 * t[0]; w[1] += 2.0 * t[1]; w[2] += 2.0 * t[2]


cdef inline void _fext_correction(int frame, const double* E, const double* T,
                                  double* out) noexcept nogil:
    """out += the change of the subtree's external wrench sum beyond a rigid transport
    under the motion T: world frame (E = Σ f about s): −ad_Tᵀ E; hybrid (E = N, F, s,
    Q = Σ r fᵀ): (ω × N + s ω − Qᵀ ω, ω × F); body frame: none."""
    cdef double t[3]
    if frame == 0:
        add_gyroscopic(T, E, out)
    elif frame == 2:
        cross(T, E, t)
        out[0] += t[0] + E[6] * T[0] - (E[7] * T[0] + E[10] * T[1] + E[13] * T[2])
        out[1] += t[1] + E[6] * T[1] - (E[8] * T[0] + E[11] * T[1] + E[14] * T[2])
        out[2] += t[2] + E[6] * T[2] - (E[9] * T[0] + E[12] * T[1] + E[15] * T[2])
        cross(T, &E[3], t)
        out[3] += t[0]; out[4] += t[1]; out[5] += t[2]


cdef inline void _fext_row(int frame, const double* E, const double* J, double* e) noexcept nogil:
    """e with J·(_fext_correction of T) = e·T for every T."""
    cdef double t[3]
    cdef int n
    for n in range(6):
        e[n] = 0.0
    if frame == 0:
        # J·(ω × n + v × f, ω × f) = ω·(n × ω_J + f × v_J) + v·(f × ω_J)
        cross(E, J, e)
        cross(&E[3], &J[3], t)
        e[0] += t[0]; e[1] += t[1]; e[2] += t[2]
        cross(&E[3], J, &e[3])
    elif frame == 2:
        cross(E, J, e)
        cross(&E[3], &J[3], t)
        e[0] += t[0] + E[6] * J[0] - (E[7] * J[0] + E[8] * J[1] + E[9] * J[2])
        e[1] += t[1] + E[6] * J[1] - (E[10] * J[0] + E[11] * J[1] + E[12] * J[2])
        e[2] += t[2] + E[6] * J[2] - (E[13] * J[0] + E[14] * J[1] + E[15] * J[2])


cdef inline bint _carries(int kind, int a, int b) noexcept nogil:
    """Whether freedom a of a joint turns the spatial screw of its freedom b (header)."""
    if kind == KIND_SCREWS:
        return b > a
    if kind == KIND_FREE_SO3R3:
        return b < 3
    return True


cdef int rnea_derivatives_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                 const double* qdd, const double* g, const double* fext,
                                 int fext_frame, double* dq, double* dv,
                                 double* M, bint poses_ready=False,
                                 double* bound=NULL) noexcept nogil:
    """∂τ/∂q, ∂τ/∂v and M (each nv × nv, row-major: entry (b, a) = ∂τ_b/∂x_a; M may
    be NULL);
    derivatives in q along the joints' groups (docs/conventions.md).  Fills
    d.liMi, d.S, d.sMi, d.sJ, d.sv, d.sa_gf, d.sf, d.sIc and the derivative scratch.
    Returns 0 or i + 1 for a non-unit quaternion of joint i.  ``poses_ready``: as in
    rnea_spatial_kernel (d.sMi, d.sJ already hold this q's).  ``bound`` (if not NULL):
    an upper bound of the outputs' magnitudes (DERIV_ESTIMATE, or +inf when a forward
    term exceeds 1e90 or is NaN)."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, b, a, c0, c1, par, o, nvi, kind, fast, bad = 0
    cdef double* C = d.sMi
    cdef double* V = d.sv
    cdef double* A = d.sa_gf
    cdef double* F = d.sf
    cdef double* J = d.sJ
    cdef double* Ic = d.sIc
    cdef double* YPX = d.dYPX
    cdef double* S = d.dS
    cdef double* Bc = d.dB
    cdef double* E = d.dE
    cdef bint with_e = fext != NULL and fext_frame != 1
    cdef bint with_M = M != NULL
    # raw pointers: the compiler cannot keep memoryview bases in registers across the
    # stores into the outputs
    cdef const int* parent = &m.parent[0]
    cdef const int* voff = &m.voff[0]
    cdef const int* nvj = &m.nvj[0]
    cdef double cJ[6]
    cdef double z6[6]
    cdef double a0[6]
    cdef double vr[6]
    cdef double vt[6]
    cdef double W[6]
    cdef double Aw[6]
    cdef double t6[6]
    cdef double cw[3]
    cdef double u[3]
    cdef double acc[3]
    cdef double ub[6][6]
    cdef double wb[6][3]
    cdef double eb[6][6]
    cdef double Ga[6][6]
    cdef double Ha[6][6]
    cdef double x, y
    cdef uint64_t big
    cdef const double* Vp
    cdef const double* Ap
    cdef const double* Tb
    cdef const double* Ta
    cdef double* Yb
    cdef const double* inr
    cdef double* Ci
    cdef double* Vi
    cdef double* Ai
    cdef double* Ji
    for n in range(6):
        z6[n] = 0.0
        a0[n] = 0.0
    a0[3] = -g[0]; a0[4] = -g[1]; a0[5] = -g[2]
    if not poses_ready:
        angle_prepass(m, d, q)
    # ---- forward: motion, the per-freedom vectors Y, P − Z, X and the body terms
    for i in range(nb):
        o = voff[i]
        nvi = nvj[i]
        kind = m.kind[i]
        fast = m.fast[i]
        Ci = &C[12 * i]
        Vi = &V[6 * i]
        Ai = &A[6 * i]
        Ji = &J[6 * o]
        par = parent[i]
        if par < 0:
            Vp = &z6[0]
            Ap = &a0[0]
        else:
            Vp = &V[6 * par]
            Ap = &A[6 * par]
        if poses_ready and fast != FAST_NONE:
            pass
        elif spatial_step(m, d, i, q, qd, cJ) and bad == 0:
            bad = i + 1
        if fast != FAST_NONE or kind == KIND_SCREWS:
            # a chain of screws (one or more): each moves relative to the ones before
            for n in range(6):
                Vi[n] = Vp[n]
                Ai[n] = Ap[n]
            # (with Vc the twist before column b and W = Vc + J_b q̇_b after it:
            # Y = [J_b, W] = [J_b, Vc], the bias [Vc, J_b q̇_b] = −q̇_b Y and
            # X = [Vc + W, J_b] = −2 Y)
            for b in range(nvi):
                Ta = &Ji[6 * b]
                Yb = &YPX[18 * (o + b)]
                twist_bracket(Ta, Vi, Yb)
                x = qd[o + b]
                y = qdd[o + b]
                for n in range(6):
                    Vi[n] += Ta[n] * x
                    Ai[n] += Ta[n] * y - x * Yb[n]
                    Yb[12 + n] = -2.0 * Yb[n]
                twist_bracket(Ai, Ta, &Yb[6])
                twist_bracket(Vi, Yb, t6)
                for n in range(6):
                    Yb[6 + n] -= t6[n]
        else:
            # body-fixed columns (spherical, free SE(3), rotations of SO(3)×R³) move
            # with body i; SO(3)×R³ translations are carried by the parent
            for n in range(6):
                W[n] = Vp[n]
                Aw[n] = Ap[n]
            if kind == KIND_FREE_SO3R3:
                subspace_times(3, &Ji[18], &qd[o + 3], vt)
                twist_bracket(Vp, vt, t6)
                for n in range(6):
                    W[n] += vt[n]
                    Aw[n] += t6[n] + Ji[18 + n] * qdd[o + 3] + Ji[24 + n] * qdd[o + 4] \
                        + Ji[30 + n] * qdd[o + 5]
                subspace_times(3, Ji, &qd[o], vr)
                k = 3
            else:
                subspace_times(nvi, Ji, &qd[o], vr)
                k = nvi
            for n in range(6):
                Vi[n] = W[n] + vr[n]
            twist_bracket(Vi, vr, t6)
            for n in range(6):
                Ai[n] = Aw[n] + t6[n]
            for b in range(k):
                for n in range(6):
                    Ai[n] += Ji[6 * b + n] * qdd[o + b]
            for b in range(nvi):
                _deriv_column(&Ji[6 * b], W, Aw, Vi if b < k else Vp, &YPX[18 * (o + b)])
        # body wrench about s (as rnea_spatial.pxi), inertia and coupling terms
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
        rigid_world_inertia(Ci, &Ci[9], inr, &Ic[10 * i])
        _coupling(&Ic[10 * i], Vi, &Bc[12 * i])
        if fext != NULL:
            wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
            if fext_frame == 0:
                world_wrench_to_root(&d.liMi[12 * m.root[i] + 9], t6)
            for n in range(6):
                F[6 * i + n] -= t6[n]
            if fext_frame == 0:
                for n in range(6):
                    E[16 * i + n] = t6[n]
            elif fext_frame == 2:
                # N = Σ n (about the body origin), F = Σ f, s = Σ r·f, Q = Σ r fᵀ
                for n in range(3):
                    E[16 * i + n] = fext[6 * i + n]
                    E[16 * i + 3 + n] = fext[6 * i + 3 + n]
                E[16 * i + 6] = dot3(&Ci[9], &fext[6 * i + 3])
                for a in range(3):
                    for b in range(3):
                        E[16 * i + 7 + 3 * a + b] = Ci[9 + a] * fext[6 * i + 3 + b]
    if bound != NULL:
        big = td_bits_above(J, 6 * nv, TD_BITS_1E90, 0)
        big = td_bits_above(YPX, 18 * nv, TD_BITS_1E90, big)
        big = td_bits_above(F, 6 * nb, TD_BITS_1E90, big)
        big = td_bits_above(Ic, 10 * nb, TD_BITS_1E90, big)
        big = td_bits_above(Bc, 12 * nb, TD_BITS_1E90, big)
        if with_e:
            big = td_bits_above(E, 16 * nb, TD_BITS_1E90, big)
        bound[0] = INFINITY if big >> 63 else DERIV_ESTIMATE(nb, m.max_armature)
    for a in range(nv):
        for n in range(6):
            S[n * nv + a] = J[6 * a + n]
        for n in range(12):
            S[(6 + n) * nv + a] = YPX[18 * a + 6 + n]
        for n in range(3):
            S[(18 + n) * nv + a] = YPX[18 * a + n]
    for n in range(nv * nv):
        dq[n] = 0.0
        dv[n] = 0.0
    if with_M:
        for n in range(nv * nv):
            M[n] = 0.0
    # ---- backward: subtree sums, then the entries of body i with its ancestors
    for i in range(nb - 1, -1, -1):
        o = voff[i]
        nvi = nvj[i]
        kind = m.kind[i]
        for a in range(nvi):
            Ta = &J[6 * (o + a)]
            # G_a = −ad_Tᵀ F + Ic (P − Z) + B Y (+ external wrench correction)
            rigid_apply_packed(&Ic[10 * i], &YPX[18 * (o + a) + 6], Ga[a])
            _coupling_apply(&Bc[12 * i], &YPX[18 * (o + a)], t6)
            for n in range(6):
                Ga[a][n] += t6[n]
            add_gyroscopic(Ta, &F[6 * i], Ga[a])
            if with_e:
                _fext_correction(fext_frame, &E[16 * i], Ta, Ga[a])
            # H_a = −B T + Ic X
            rigid_apply_packed(&Ic[10 * i], &YPX[18 * (o + a) + 12], Ha[a])
            _coupling_apply(&Bc[12 * i], Ta, t6)
            for n in range(6):
                Ha[a][n] -= t6[n]
        for b in range(nvi):
            Tb = &J[6 * (o + b)]
            rigid_apply_packed(&Ic[10 * i], Tb, ub[b])
            _coupling_T_apply(&Bc[12 * i], Tb, wb[b])
            if with_e:
                _fext_row(fext_frame, &E[16 * i], Tb, eb[b])
        # freedoms of body i with each other
        for b in range(nvi):
            Tb = &J[6 * (o + b)]
            for a in range(nvi):
                Ta = &J[6 * (o + a)]
                if with_M and a >= b:
                    x = dot6(ub[b], Ta)
                    M[(o + b) * nv + o + a] = x
                    M[(o + a) * nv + o + b] = x
                dv[(o + b) * nv + o + a] = dot6(Tb, Ha[a])
                if _carries(kind, a, b):
                    x = dot6(ub[b], &YPX[18 * (o + a) + 6]) + dot3(wb[b], &YPX[18 * (o + a)])
                    if with_e:
                        x += dot6(eb[b], Ta)
                else:
                    x = dot6(Tb, Ga[a])
                dq[(o + b) * nv + o + a] = x
            if with_M:
                M[(o + b) * nv + o + b] += m.armature[o + b]
        # with every freedom a of an ancestor k: τ_b (b in i) moves with q_a, v_a;
        # τ_a moves with q_b, v_b through the subtree wrench.  The ancestors' freedoms
        # come in runs of consecutive indices (ModelCore.anc_run)
        c0 = m.anc_ptr[i]
        c1 = m.anc_ptr[i + 1]
        if c1 > c0:
            for b in range(nvi):
                td_ancestor_pairs(nv, o + b, &m.anc_run[2 * c0], c1 - c0, S, nv, ub[b], wb[b],
                                  eb[b] if with_e else NULL, Ga[b], Ha[b], dq, dv, M)
        par = parent[i]
        if par >= 0:
            for n in range(6):
                F[6 * par + n] += F[6 * i + n]
            for n in range(10):
                Ic[10 * par + n] += Ic[10 * i + n]
            for n in range(12):
                Bc[12 * par + n] += Bc[12 * i + n]
            if with_e:
                for n in range(16):
                    E[16 * par + n] += E[16 * i + n]
    return bad
