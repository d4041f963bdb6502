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
#
# The sweeps' arithmetic is in rnea_derivatives_sweeps.h, written once for one state
# and for TD_VL states side by side (batches; lanes.pxi); this file holds the joint
# steps, the ancestor pairs of one state, the overflow bound and the entry points.

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


cdef struct _Sweep:
    # the arrays of the derivative sweeps: one state (DataC's fields, the inputs), or
    # TD_VL states side by side (DataC's lane fields: element k of state l at k·L + l)
    double* C          # (nb, 12) poses in frame s
    double* J          # (nv, 6)  spatial screws
    double* qd         # (nv,)
    double* qdd        # (nv,)
    double* a0         # (6,)     base acceleration (−gravity)
    double* V          # (nb, 6)  twists
    double* A          # (nb, 6)  accelerations
    double* F          # (nb, 6)  wrenches, then their subtree sums
    double* Fx         # (nb, 6)  external wrenches in frame s
    double* Ic         # (nb, 10) inertias, then subtree sums
    double* B          # (nb, 12) couplings, then subtree sums
    double* E          # (nb, 16) external-wrench terms, then subtree sums
    double* YPX        # (nv, 18)
    double* S          # (21, nv)


cdef void _external_wrenches(ModelCore m, DataC* d, int L, int l, const double* fext,
                             int frame, double* Fx, double* E) noexcept nogil:
    """Lane l (of L) of Fx, the external wrenches fext (nb, 6; frame 0 world, 1 body,
    2 hybrid) in frame s, and (if E is not NULL) of E, the terms of their change under
    the derivatives' motions (world: Fx; hybrid: N = Σ n about the body origin,
    F = Σ f, s = Σ r·f, Q = Σ r fᵀ), from this state's d.sMi, d.liMi."""
    cdef int i, a, b, n
    cdef double t6[6]
    cdef const double* Ci
    cdef const double* f
    for i in range(m.nb):
        Ci = &d.sMi[12 * i]
        f = &fext[6 * i]
        wrench_to_world(frame, Ci, &Ci[9], f, t6)
        if frame == 0:
            world_wrench_to_root(&d.liMi[12 * m.root[i] + 9], t6)
        for n in range(6):
            Fx[(6 * i + n) * L + l] = t6[n]
        if E == NULL:
            continue
        if frame == 0:
            for n in range(6):
                E[(16 * i + n) * L + l] = t6[n]
        elif frame == 2:
            for n in range(3):
                E[(16 * i + n) * L + l] = f[n]
                E[(16 * i + 3 + n) * L + l] = f[3 + n]
            E[(16 * i + 6) * L + l] = dot3(&Ci[9], &f[3])
            for a in range(3):
                for b in range(3):
                    E[(16 * i + 7 + 3 * a + b) * L + l] = Ci[9 + a] * f[3 + b]


cdef void _deriv_sweeps(ModelCore m, int L, _Sweep* w, bint with_fext, int fext_frame,
                        double** dq, double** dv, double** M, double* bound) noexcept nogil:
    """The forward and backward sweeps (rnea_derivatives_sweeps.h) on L states whose
    poses, screws, rates, base acceleration and external-wrench terms are in w; the
    entries into dq[l], dv[l], M[l] (nv × nv each; M may be NULL).  ``bound``: as in
    rnea_derivatives_kernel, one for all L states."""
    cdef int nb = m.nb, nv = m.nv, l
    cdef uint64_t big
    cdef bint with_e = with_fext and fext_frame != 1
    td_deriv_forward(L, nb, &m.parent[0], &m.voff[0], &m.nvj[0], &m.kind[0], &m.fast[0],
                     &m.inert[0, 0], w.C, w.J, w.qd, w.qdd, w.a0, w.Fx if with_fext else NULL,
                     w.V, w.A, w.F, w.Ic, w.B, w.YPX)
    if bound != NULL:
        big = td_bits_above(w.J, 6 * nv * L, TD_BITS_1E90, 0)
        big = td_bits_above(w.YPX, 18 * nv * L, TD_BITS_1E90, big)
        big = td_bits_above(w.F, 6 * nb * L, TD_BITS_1E90, big)
        big = td_bits_above(w.Ic, 10 * nb * L, TD_BITS_1E90, big)
        big = td_bits_above(w.B, 12 * nb * L, TD_BITS_1E90, big)
        if with_e:
            big = td_bits_above(w.E, 16 * nb * L, TD_BITS_1E90, big)
        bound[0] = INFINITY if big >> 63 else DERIV_ESTIMATE(nb, m.max_armature)
    td_deriv_components(L, nv, w.J, w.YPX, w.S)
    for l in range(L):
        memset(dq[l], 0, <size_t>nv * nv * sizeof(double))
        memset(dv[l], 0, <size_t>nv * nv * sizeof(double))
        if M != NULL:
            memset(M[l], 0, <size_t>nv * nv * sizeof(double))
    td_deriv_backward(L, nb, nv, &m.parent[0], &m.voff[0], &m.nvj[0], &m.kind[0],
                      &m.anc_ptr[0], &m.anc_run[0], &m.armature[0], w.J, w.YPX, w.S, w.F,
                      w.Ic, w.B, w.E if with_e else NULL, fext_frame, dq, dv, M)


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
    cdef int bad = spatial_poses(m, d, q, qd, poses_ready)
    cdef double a0[6]
    cdef _Sweep w
    a0[0] = 0.0; a0[1] = 0.0; a0[2] = 0.0
    a0[3] = -g[0]; a0[4] = -g[1]; a0[5] = -g[2]
    w.C = d.sMi; w.J = d.sJ; w.qd = <double*>qd; w.qdd = <double*>qdd; w.a0 = a0
    w.V = d.sv; w.A = d.sa_gf; w.F = d.sf; w.Fx = d.dFx; w.Ic = d.sIc; w.B = d.dB
    w.E = d.dE; w.YPX = d.dYPX; w.S = d.dS
    if fext != NULL:
        _external_wrenches(m, d, 1, 0, fext, fext_frame, d.dFx, d.dE)
    _deriv_sweeps(m, 1, &w, fext != NULL, fext_frame, &dq, &dv, &M if M != NULL else NULL,
                  bound)
    return bad


cdef void _lane_sweep(DataC* d, _Sweep* w) noexcept nogil:
    """w: the lane arrays of d."""
    w.C = d.lC; w.J = d.lJ; w.qd = d.lqd; w.qdd = d.lqdd; w.a0 = d.la0
    w.V = d.lV; w.A = d.lA; w.F = d.lF; w.Fx = d.lFx; w.Ic = d.lIc; w.B = d.lB
    w.E = d.lE; w.YPX = d.lYPX; w.S = d.lS


cdef void _deriv_gather(ModelCore m, DataC* d, int l, const double* qd, const double* qdd,
                        const double* g) noexcept nogil:
    """Lane l of d's lane arrays: this state's rates and base acceleration."""
    cdef int L = TD_VL, n
    for n in range(m.nv):
        d.lqd[n * L + l] = qd[n]
        d.lqdd[n * L + l] = qdd[n]
    for n in range(3):
        d.la0[n * L + l] = 0.0
        d.la0[(3 + n) * L + l] = -g[n]


cdef void rnea_derivatives_lanes(ModelCore m, DataC* d, const double** q, const double** qd,
                                 const double** qdd, const double* g, const double** fext,
                                 int fext_frame, double** dq, double** dv, double** M,
                                 int* codes, double* bound) noexcept nogil:
    """rnea_derivatives_kernel on TD_VL states at once (state l: q[l], …, fext[l] (all
    NULL or none), outputs dq[l], dv[l], M[l] (M may be NULL), code codes[l]); the
    results are bitwise those of one state at a time.  ``bound``: one for all."""
    cdef int l
    cdef _Sweep w
    for l in range(TD_VL):
        if fext[0] != NULL:
            # (the external wrenches' terms need each state's poses)
            codes[l] = spatial_poses(m, d, q[l], qd[l], False)
            _lanes_gather_poses(m, d, l)
            _external_wrenches(m, d, TD_VL, l, fext[l], fext_frame, d.lFx, d.lE)
        else:
            codes[l] = _lane_joint_steps(m, d, l, q[l])
        _deriv_gather(m, d, l, qd[l], qdd[l], g)
    if fext[0] == NULL:
        _lanes_spatial_poses(m, d)
    _lane_sweep(d, &w)
    _deriv_sweeps(m, TD_VL, &w, fext[0] != NULL, fext_frame, dq, dv, M, bound)


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef inline bint _bound_is_cheaper(ModelCore m, int outputs) noexcept nogil:
    """Whether the derivative kernels' overflow bound (rnea_derivatives.pxi) reads
    fewer values than checking ``outputs`` nv × nv matrices."""
    return outputs * m.nv * m.nv > 24 * m.nv + 44 * m.nb


cdef inline int _bounded_outputs(int code, const Call* c, double B) noexcept nogil:
    """For CHECK_KERNEL calls: code, or the check of all outputs unless their bound B
    (the derivative kernels' overflow bound, +inf: none) proves them finite."""
    if code or B <= 1e300:
        return code
    return _checked_outputs(0, c, CHECK_ALL)


cdef int _k_rnea_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """CHECK_KERNEL (rnea_derivatives.pxi's bound)."""
    cdef double B = INFINITY
    cdef int code = rnea_derivatives_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe,
                                            c.out, c.out2, c.out3, False,
                                            &B if _bound_is_cheaper(m, 3) else NULL)
    return _bounded_outputs(code, c, B)


cdef void _g_rnea_derivatives(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                              int* errs) noexcept nogil:
    """_k_rnea_derivatives on TD_VL samples (rnea_derivatives_lanes)."""
    cdef _LaneCalls g
    cdef int l
    _lane_calls(c, s0, &g)
    rnea_derivatives_lanes(m, d, g.q, g.v, g.a, c.g, g.f, c.fframe, g.o1, g.o2, g.o3, g.codes,
                           g.B if _bound_is_cheaper(m, 3) else NULL)
    for l in range(1, TD_VL):
        g.B[l] = g.B[0]                 # one bound for the group
    _lane_errors(&g, errs)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def inverse_dynamics_derivatives(ModelCore self, q, v, a, f_ext=None, gravity=None,
                                 f_ext_frame="world", data=None, out=None):
    """Partial derivatives of inverse dynamics τ(q, v, a) by one forward and one
    backward recursion (cysrc/rnea_derivatives.pxi), with M = ∂τ/∂a.

    Derivatives with respect to q are taken along each joint's group:
    ``dtau_dq @ δ = d/dε τ(integrate(q, ε δ), v, a)`` at ε = 0, so every
    matrix is nv × nv, also for spherical and free joints (docs/conventions.md,
    "Derivatives and tangent spaces").  τ, hence its derivatives, do not depend on
    the representation of :meth:`inverse_dynamics`.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a : array_like, shape (nv,) or (N, nv)
    f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics`.  A wrench
        given in the world frame stays fixed in space while q varies; in the
        body frame it moves with its body; in the hybrid frame it follows the
        body's origin and keeps world axes.
    data : Data, optional (single state)
    out : tuple of three ndarrays, optional
        (dtau_dq, dtau_dv, M) to write into, each (nv, nv) or (N, nv, nv).

    Returns
    -------
    dtau_dq, dtau_dv, M : ndarray, shape (nv, nv) or (N, nv, nv)
        Entry (i, j) is ∂τ_i/∂x_j (N·m/rad, N/m, N·m·s/rad, ... by the
        coordinates involved); M is the mass matrix with armature.
    """
    return self._derivatives_call(_k_rnea_derivatives, _g_rnea_derivatives, q, v, a, "a",
                                  f_ext, gravity,
                                  f_ext_frame, data, out, ("dtau_dq", "dtau_dv", "M"),
                                  "inverse_dynamics_derivatives")
