# Time derivatives of the inverse-dynamics solution, τ̇ and τ̈ (Müller 2018, §6.3;
# Müller, "Recursive second-order inverse dynamics for serial manipulators",
# ICRA 2017): the body-fixed Newton–Euler recursion (rnea_body.pxi) differentiated
# twice along the motion, O(n).
#
# Kinematics (body frames; u = S q̇ the relative twist of joint i, u̇, ü, u⃛ its
# rates, X' = Ad_{T_i}⁻¹ X_p a parent quantity seen from body i, and
# d/dt X' = (Ẋ_p)' + [X', u]):
#   V_i = V_p' + u
#   V̇_i = V̇_p' + [V_i, u] + u̇
#   V̈_i = V̈_p' + [V̇_p' + V̇_i, u] + [V_i, u̇] + ü                       (body_jerks)
#   V⃛_i = V⃛_p' + [2 V̈_p' + V̈_i, u] + [[V̇_p', u], u] + [V̇_p' + 2 V̇_i, u̇]
#          + [V_i, ü] + u⃛
# Gravity: γ_i = R_iᵀ g (world gravity in body axes), γ̇ = −ω × γ, γ̈ = −ω̇ × γ − ω × γ̇;
# Ā = V̇ − (0, γ) is the acceleration with gravity of the RNEA (d.a_gf).
# Wrenches (M_i the body inertia about its origin, −ad_Vᵀ = add_gyroscopic):
#   W = M Ā − ad_Vᵀ M V − W^ext
#   Ẇ = M Ā̇ − ad_V̇ᵀ M V − ad_Vᵀ M V̇ − Ẇ^ext
#   Ẅ = M Ā̈ − ad_V̈ᵀ M V − 2 ad_V̇ᵀ M V̇ − ad_Vᵀ M V̈ − Ẅ^ext
# A child's wrench moves to its parent by G = Ad_{T_c}⁻ᵀ, whose rates are
# Ġ = −G ad_uᵀ and G̈ = G (ad_uᵀ ad_uᵀ − ad_u̇ᵀ), so the parent gains
#   G W_c,   G (Ẇ_c − ad_uᵀ W_c),   G (Ẅ_c − 2 ad_uᵀ Ẇ_c − ad_u̇ᵀ W_c + ad_uᵀ ad_uᵀ W_c),
# and τ = Sᵀ W,  τ̇ = Sᵀ Ẇ + Ṡᵀ W,  τ̈ = Sᵀ Ẅ + 2 Ṡᵀ Ẇ + S̈ᵀ W (+ armature q⃛, q⁗).
# External wrenches given in the world or hybrid frame are moved to the body frame
# by a map K(t) = Ad_Cᵀ (world) or diag(Rᵀ, Rᵀ) (hybrid) with K̇ = ad_{V'}ᵀ K, where
# V' = Vᵇ (world) or (ω, 0) (hybrid).
#
# This file: the body-fixed kernel, the helpers the three kernels share and the
# entry; the spatial and hybrid kernels: rnea_rates_spatial.pxi, rnea_rates_hybrid.pxi.


cdef extern from "rnea_rates_body.h" nogil:
    void td_rates_ad_inv(const double* T, const double* x, double* y)
    void td_rates_ad_inv3(const double* T, const double* x0, const double* x1,
                          const double* x2, double* y0, double* y1, double* y2)
    void td_rates_ad_inv3g(const double* T, const double* x0, const double* x1,
                           const double* x2, const double* g, double* y0, double* y1,
                           double* y2, double* out)
    void td_rates_wrench(const double* inr, const double* V, const double* A,
                         const double* J, const double* gam, const double* gam1,
                         double* W, double* W1)
    void td_rates_to_parent(const double* T, const double* W, double* out)
    void td_rates_to_parent2(const double* T, const double* W, const double* X,
                             double* outW, double* outX)


cdef inline void inertia_times(const double* inr, const double* x, double* out) noexcept nogil:
    """out = M x for the body inertia inr = (m, c (3), Θ_c (9)) about the body
    origin and a twist x = (ω, v): p = m (v + ω × c), out = (Θ_c ω + c × p, p)."""
    cdef double t[3]
    cross(x, &inr[1], t)
    out[3] = inr[0] * (x[3] + t[0])
    out[4] = inr[0] * (x[4] + t[1])
    out[5] = inr[0] * (x[5] + t[2])
    rot_vec(&inr[4], x, out)
    cross(&inr[1], &out[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]


cdef inline void _subspace_rates3(int kind, int nv, const double* S, const double* qd,
                                  const double* qdd, const double* q3, double* Sd,
                                  double* Sdd, double* S3) noexcept nogil:
    """Ṡ, S̈ and S⃛ of a joint's body-fixed motion subspace (as _subspace_rates2, one
    order more): screw chains S⃛_j = [S̈_j, L_j] + 2 [Ṡ_j, L̇_j] + [S_j, L̈_j] with
    L_j = Σ_{l>j} S_l q̇_l; SO(3)×R³ translational columns s = Rᵀe_k:
    ṡ = −ω × s, s̈ = −ω̇ × s − ω × ṡ, s⃛ = −ω̈ × s − 2 ω̇ × ṡ − ω × s̈; zero otherwise."""
    cdef double L[6]
    cdef double Ld[6]
    cdef double Ldd[6]
    cdef double t6[6]
    cdef double t[3]
    cdef int j, n
    for n in range(6 * nv):
        Sd[n] = 0.0
        Sdd[n] = 0.0
        S3[n] = 0.0
    if kind == KIND_SCREWS and nv > 1:
        for n in range(6):
            L[n] = 0.0
            Ld[n] = 0.0
            Ldd[n] = 0.0
        for j in range(nv - 1, -1, -1):
            twist_bracket(&S[6 * j], L, &Sd[6 * j])
            twist_bracket(&Sd[6 * j], L, &Sdd[6 * j])
            twist_bracket(&S[6 * j], Ld, t6)
            twist_add(&Sdd[6 * j], t6)
            twist_bracket(&Sdd[6 * j], L, &S3[6 * j])
            twist_bracket(&Sd[6 * j], Ld, t6)
            for n in range(6):
                S3[6 * j + n] += 2.0 * t6[n]
            twist_bracket(&S[6 * j], Ldd, t6)
            twist_add(&S3[6 * j], t6)
            for n in range(6):
                L[n] += S[6 * j + n] * qd[j]
                Ld[n] += Sd[6 * j + n] * qd[j] + S[6 * j + n] * qdd[j]
                Ldd[n] += (Sdd[6 * j + n] * qd[j] + 2.0 * Sd[6 * j + n] * qdd[j]
                           + S[6 * j + n] * q3[j])
    elif kind == KIND_FREE_SO3R3:
        for j in range(3):
            cross(qd, &S[6 * (3 + j) + 3], &Sd[6 * (3 + j) + 3])
            for n in range(3):
                Sd[6 * (3 + j) + 3 + n] = -Sd[6 * (3 + j) + 3 + n]
            cross(qdd, &S[6 * (3 + j) + 3], t)
            cross(qd, &Sd[6 * (3 + j) + 3], &Sdd[6 * (3 + j) + 3])
            for n in range(3):
                Sdd[6 * (3 + j) + 3 + n] = -Sdd[6 * (3 + j) + 3 + n] - t[n]
            cross(q3, &S[6 * (3 + j) + 3], t)
            for n in range(3):
                S3[6 * (3 + j) + 3 + n] = -t[n]
            cross(qdd, &Sd[6 * (3 + j) + 3], t)
            for n in range(3):
                S3[6 * (3 + j) + 3 + n] -= 2.0 * t[n]
            cross(qd, &Sdd[6 * (3 + j) + 3], t)
            for n in range(3):
                S3[6 * (3 + j) + 3 + n] -= t[n]


cdef inline void _wrench_coad(const double* y, const double* W, double* out) noexcept nogil:
    """out = ad_yᵀ W."""
    cdef int n
    for n in range(6):
        out[n] = 0.0
    add_gyroscopic(y, W, out)
    for n in range(6):
        out[n] = -out[n]


cdef inline void _relative_twist_rates(ModelCore m, DataC* d, int i, const double* qd,
                                       const double* qdd, const double* q3,
                                       const double* q4, double* u, double* u1, double* u2,
                                       double* u3) noexcept nogil:
    """Body-fixed relative twist u = S q̇ of joint i and its rates u̇ = Ṡ q̇ + S q̈,
    ü = S̈ q̇ + 2 Ṡ q̈ + S q⃛, u⃛ = S⃛ q̇ + 3 S̈ q̈ + 3 Ṡ q⃛ + S q⁗ (u⃛ zero when q4
    is NULL).  d.S must hold joint i's subspace.  Only SO(3)×R³ joints and chains of
    several screws have a moving S (_subspace_rates3); for the others u⁽ᵏ⁾ = S q⁽ᵏ⁺¹⁾."""
    cdef int o = m.voff[i], nvi = m.nvj[i], k, n, fast = m.fast[i], kind = m.kind[i]
    cdef const double* S = &d.S[6 * o]
    cdef double Sd[36]
    cdef double Sdd[36]
    cdef double S3[36]
    cdef double s
    for n in range(6):
        u[n] = 0.0; u1[n] = 0.0; u2[n] = 0.0; u3[n] = 0.0
    if fast != FAST_NONE and fast != FAST_SCREW:
        # revolute about body axis k through the origin: S = ±e_k
        k = fast - FAST_REV_X
        s = 1.0 if m.X[o, k] > 0.0 else -1.0
        u[k] = s * qd[o]; u1[k] = s * qdd[o]; u2[k] = s * q3[o]
        if q4 != NULL:
            u3[k] = s * q4[o]
    elif kind == KIND_FREE_SE3:
        # S = 1 (the body twist)
        for n in range(6):
            u[n] = qd[o + n]; u1[n] = qdd[o + n]; u2[n] = q3[o + n]
            if q4 != NULL:
                u3[n] = q4[o + n]
    elif fast == FAST_NONE and (kind == KIND_FREE_SO3R3 or (kind == KIND_SCREWS and nvi > 1)):
        _subspace_rates3(kind, nvi, S, &qd[o], &qdd[o], &q3[o], Sd, Sdd, S3)
        for k in range(nvi):
            for n in range(6):
                s = S[6 * k + n]
                u[n] += s * qd[o + k]
                u1[n] += Sd[6 * k + n] * qd[o + k] + s * qdd[o + k]
                u2[n] += (Sdd[6 * k + n] * qd[o + k] + 2.0 * Sd[6 * k + n] * qdd[o + k]
                          + s * q3[o + k])
                if q4 != NULL:
                    u3[n] += (S3[6 * k + n] * qd[o + k] + 3.0 * Sdd[6 * k + n] * qdd[o + k]
                              + 3.0 * Sd[6 * k + n] * q3[o + k] + s * q4[o + k])
    else:
        for k in range(nvi):
            for n in range(6):
                s = S[6 * k + n]
                u[n] += s * qd[o + k]
                u1[n] += s * qdd[o + k]
                u2[n] += s * q3[o + k]
                if q4 != NULL:
                    u3[n] += s * q4[o + k]


cdef inline void _bracket_u(int k, double c, const double* X, const double* u,
                            double* out) noexcept nogil:
    """out = [X, u]; for k ≥ 0, u = c (e_k, 0) (a revolute joint about a body axis):
    (ω × c e_k, v × c e_k) without the general bracket."""
    cdef int n
    if k < 0:
        twist_bracket(X, u, out)
        return
    for n in range(6):
        out[n] = 0.0
    cross_add_axis(k, c, X, out)
    cross_add_axis(k, c, &X[3], &out[3])


cdef inline void _coad_u_add(int k, double c, const double* u, const double* W,
                             double s, double* out) noexcept nogil:
    """out += s (−ad_uᵀ W); for k ≥ 0, u = c (e_k, 0): (c e_k × n, c e_k × f)."""
    cdef double t6[6]
    cdef int n
    if k >= 0:
        cross_add_axis(k, -s * c, W, out)
        cross_add_axis(k, -s * c, &W[3], &out[3])
        return
    if s == 1.0:
        add_gyroscopic(u, W, out)
        return
    for n in range(6):
        t6[n] = 0.0
    add_gyroscopic(u, W, t6)
    for n in range(6):
        out[n] += s * t6[n]


cdef inline void _jounce(const double* T, const double* J3p, const double* Jp,
                         const double* J2, const double* Ap, const double* A, const double* V,
                         const double* u, const double* u1, const double* u2,
                         const double* u3, double* J3) noexcept nogil:
    """V⃛ = V⃛_p' + [2 V̈_p' + V̈, u] + [[V̇_p', u], u] + [V̇_p' + 2 V̇, u̇] + [V, ü] + u⃛
    for a general relative twist u (J3p: the parent's V⃛, Jp, Ap: V̈_p', V̇_p')."""
    cdef double x[6]
    cdef double t6[6]
    cdef int n
    td_rates_ad_inv(T, J3p, J3)
    for n in range(6):
        x[n] = 2.0 * Jp[n] + J2[n]
    twist_bracket(x, u, t6)
    twist_add(J3, t6)
    twist_bracket(Ap, u, x)
    twist_bracket(x, u, t6)
    twist_add(J3, t6)
    for n in range(6):
        x[n] = Ap[n] + 2.0 * A[n]
    twist_bracket(x, u1, t6)
    twist_add(J3, t6)
    twist_bracket(V, u2, t6)
    twist_add(J3, t6)
    twist_add(J3, u3)


# The body kernel in four specialisations (Cython makes them at compile time), so
# that each has only its own branches and values (the compiler does not specialise
# one function called with tau2 or fext NULL): τ̇ alone (int), τ̇ and τ̈ (long), each
# also with external wrenches (float, double).
ctypedef fused _rates_order:
    int
    long
    float
    double


cdef int rnea_rates_body_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                const double* acc, const double* g, const double* fext,
                                int fext_frame, double* tau1, double* tau2,
                                _rates_order order) noexcept nogil:
    """τ̇ (tau1, nv) and, for the long and double specialisations (order: its type
    only; tau2 not NULL), τ̈; external wrenches fext for float and double (not NULL).
    acc packs (q̈, q⃛) or (q̈, q⃛, q⁗),
    nv each; fext (if not NULL) packs (W^ext, Ẇ^ext, Ẅ^ext), (nb, 6) each, in frame
    fext_frame.  Fills d.liMi, d.S, d.v, d.a (V̇, no gravity), d.a_gf (Ā), d.f (W),
    d.rjerk (V̈), d.rjounce (V⃛), d.rfd (Ẇ), d.rfdd (Ẅ), d.ru (u, u̇; joints other
    than axis revolutes) and, for
    world/hybrid wrenches, d.oMi.  Returns 0 or i + 1 for a non-unit quaternion of
    joint i."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, par, o, nvi, kax, bad = 0
    cdef bint second, ext, massless
    if _rates_order is long or _rates_order is double:
        second = True
    else:
        second = False
    if _rates_order is float or _rates_order is double:
        ext = True
    else:
        ext = False
    cdef const double* qdd = acc
    cdef const double* q3 = &acc[nv]
    cdef const double* q4 = &acc[2 * nv] if second else NULL
    cdef double cu[3]
    cdef double sg
    cdef double Sd[36]
    cdef double Sdd[36]
    cdef double cJ[6]
    cdef double u[6]
    cdef double u1[6]
    cdef double u2[6]
    cdef double u3[6]
    cdef double Ap[6]
    cdef double Jp[6]
    cdef double x[6]
    cdef double t6[6]
    cdef double y6[6]
    cdef const double* Sx
    cdef double hV[6]
    cdef double hA[6]
    cdef double hJ[6]
    cdef double fb[6]
    cdef double fb1[6]
    cdef double gk[6]
    cdef double Vr[6]
    cdef double Ar[6]
    cdef double gam[3]
    cdef double gam1[3]
    cdef double gam2[3]
    cdef double t[3]
    cdef const double* S
    cdef const double* inr
    cdef double* T
    cdef double* V
    cdef double* A
    cdef double* Ag
    cdef double* J2
    cdef double* J3
    cdef double* F
    cdef double* F1
    cdef double* F2
    cdef double* C
    cdef double gp[3]
    # the model's tables and the Data's arrays as plain pointers: read once here, not
    # after every store (the build does not assume strict aliasing)
    cdef const int* fastp = &m.fast[0]
    cdef const int* parp = &m.parent[0]
    cdef const int* voffp = &m.voff[0]
    cdef const int* nvjp = &m.nvj[0]
    cdef const int* kindp = &m.kind[0]
    cdef const double* Xm = &m.X[0, 0]
    cdef const double* inrm = &m.inert[0, 0]
    cdef const double* armp = &m.armature[0]
    cdef const double* Brefm = &m.Bref[0, 0]
    cdef double* dT = d.liMi
    cdef double* dS = d.S
    cdef double* dv = d.v
    cdef double* da = d.a
    cdef double* dag = d.a_gf
    cdef double* dj2 = d.rjerk
    cdef double* dj3 = d.rjounce
    cdef double* df = d.f
    cdef double* df1 = d.rfd
    cdef double* df2 = d.rfdd
    cdef double* dru = d.ru
    cdef int fast, kind
    # forward pass, root to leaves: joint steps, V, V̇, V̈, V⃛, γ and the bodies' own
    # W, Ẇ, Ẅ (see the header)
    angle_prepass(m, d, q)
    for i in range(nb):
        o = voffp[i]
        nvi = nvjp[i]
        par = parp[i]
        fast = fastp[i]
        T = &dT[12 * i]
        if fast != FAST_NONE and fast != FAST_SCREW:
            joint_pose_rev(fast, &Xm[6 * o], &Brefm[12 * i], d.sc_q[2 * i],
                           d.sc_q[2 * i + 1], T)
        elif joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        V = &dv[6 * i]
        A = &da[6 * i]
        Ag = &dag[6 * i]
        J2 = &dj2[6 * i]
        J3 = &dj3[6 * i]
        if par >= 0:
            # γ_p = (V̇ − Ā)_p linear, turned to body axes with the twists below
            for n in range(3):
                gp[n] = da[6 * par + 3 + n] - dag[6 * par + 3 + n]
        if fast != FAST_NONE and fast != FAST_SCREW:
            # revolute about body axis kax: u, u̇, ü, u⃛ = (cu e_kax, 0), added to the
            # twists' elements directly ([X, u] = (ω × cu e_kax, v × cu e_kax))
            kax = fast - FAST_REV_X
            sg = 1.0 if Xm[6 * o + kax] > 0.0 else -1.0
            cu[0] = sg * qd[o]; cu[1] = sg * qdd[o]; cu[2] = sg * q3[o]
            if par < 0:
                for n in range(6):
                    V[n] = 0.0; A[n] = 0.0; J2[n] = 0.0
                V[kax] = cu[0]; A[kax] = cu[1]; J2[kax] = cu[2]
                if second:
                    for n in range(6):
                        J3[n] = 0.0
                    J3[kax] = sg * q4[o]
                rotT_vec(T, g, gam)
            else:
                td_rates_ad_inv3g(T, &dv[6 * par], &da[6 * par], &dj2[6 * par], gp, V, Ap, Jp,
                                  gam)
                V[kax] += cu[0]
                # V̇ = V̇_p' + [V, u] + u̇
                for n in range(6):
                    A[n] = Ap[n]
                cross_add_axis(kax, cu[0], V, A)
                cross_add_axis(kax, cu[0], &V[3], &A[3])
                A[kax] += cu[1]
                # V̈ = V̈_p' + [V̇_p' + V̇, u] + [V, u̇] + ü
                for n in range(6):
                    x[n] = Ap[n] + A[n]
                    J2[n] = Jp[n]
                cross_add_axis(kax, cu[0], x, J2)
                cross_add_axis(kax, cu[0], &x[3], &J2[3])
                cross_add_axis(kax, cu[1], V, J2)
                cross_add_axis(kax, cu[1], &V[3], &J2[3])
                J2[kax] += cu[2]
                if second:
                    # V⃛ = V⃛_p' + [2 V̈_p' + V̈, u] + [[V̇_p', u], u] + [V̇_p' + 2 V̇, u̇] + [V, ü] + u⃛
                    td_rates_ad_inv(T, &dj3[6 * par], J3)
                    for n in range(6):
                        x[n] = 2.0 * Jp[n] + J2[n]
                    _bracket_u(kax, cu[0], x, V, t6)
                    twist_add(J3, t6)
                    _bracket_u(kax, cu[0], Ap, V, x)
                    _bracket_u(kax, cu[0], x, V, t6)
                    twist_add(J3, t6)
                    for n in range(6):
                        x[n] = Ap[n] + 2.0 * A[n]
                    _bracket_u(kax, cu[1], x, V, t6)
                    twist_add(J3, t6)
                    _bracket_u(kax, cu[2], V, V, t6)
                    twist_add(J3, t6)
                    J3[kax] += sg * q4[o]
        elif fast == FAST_SCREW:
            # one-freedom screw S (constant): u = S q̇, u̇ = S q̈, ü = S q⃛; with
            # b = [V, S]: V̇ = V̇_p' + q̇ b + q̈ S, V̈ = V̈_p' + q̇ [V̇_p' + V̇, S] + q̈ b + q⃛ S
            kax = -1
            Sx = &Xm[6 * o]
            cu[0] = qd[o]; cu[1] = qdd[o]; cu[2] = q3[o]
            for n in range(6):
                dru[12 * i + n] = Sx[n] * cu[0]
                dru[12 * i + 6 + n] = Sx[n] * cu[1]
            if second:
                for n in range(6):
                    u[n] = Sx[n] * cu[0]; u1[n] = Sx[n] * cu[1]; u2[n] = Sx[n] * cu[2]
                    u3[n] = Sx[n] * q4[o]
            if par < 0:
                for n in range(6):
                    V[n] = Sx[n] * cu[0]; A[n] = Sx[n] * cu[1]; J2[n] = Sx[n] * cu[2]
                    if second:
                        J3[n] = u3[n]
                rotT_vec(T, g, gam)
            else:
                td_rates_ad_inv3g(T, &dv[6 * par], &da[6 * par], &dj2[6 * par], gp, V, Ap, Jp,
                                  gam)
                for n in range(6):
                    V[n] += Sx[n] * cu[0]
                twist_bracket(V, Sx, t6)
                for n in range(6):
                    A[n] = Ap[n] + cu[0] * t6[n] + cu[1] * Sx[n]
                    x[n] = Ap[n] + A[n]
                twist_bracket(x, Sx, y6)
                for n in range(6):
                    J2[n] = Jp[n] + cu[0] * y6[n] + cu[1] * t6[n] + cu[2] * Sx[n]
                if second:
                    _jounce(T, &dj3[6 * par], Jp, J2, Ap, A, V, u, u1, u2, u3, J3)
        else:
            kax = -1
            _relative_twist_rates(m, d, i, qd, qdd, q3, q4, u, u1, u2, u3)
            for n in range(6):          # (the backward pass needs u, u̇ of the others)
                dru[12 * i + n] = u[n]
                dru[12 * i + 6 + n] = u1[n]
            if par < 0:
                for n in range(6):
                    V[n] = u[n]; A[n] = u1[n]; J2[n] = u2[n]; J3[n] = u3[n]
                rotT_vec(T, g, gam)
            else:
                td_rates_ad_inv3g(T, &dv[6 * par], &da[6 * par], &dj2[6 * par], gp, V, Ap, Jp,
                                  gam)
                twist_add(V, u)
                # V̇ = V̇_p' + [V, u] + u̇
                twist_bracket(V, u, A)
                for n in range(6):
                    A[n] += Ap[n] + u1[n]
                # V̈ = V̈_p' + [V̇_p' + V̇, u] + [V, u̇] + ü
                for n in range(6):
                    x[n] = Ap[n] + A[n]
                twist_bracket(x, u, J2)
                twist_bracket(V, u1, t6)
                for n in range(6):
                    J2[n] += t6[n] + Jp[n] + u2[n]
                if second:
                    _jounce(T, &dj3[6 * par], Jp, J2, Ap, A, V, u, u1, u2, u3, J3)
        cross(V, gam, gam1)                       # γ̇ = −ω × γ
        gam1[0] = -gam1[0]; gam1[1] = -gam1[1]; gam1[2] = -gam1[2]
        for n in range(6):
            Ag[n] = A[n]
        Ag[3] -= gam[0]; Ag[4] -= gam[1]; Ag[5] -= gam[2]
        inr = &inrm[22 * i]
        F = &df[6 * i]
        F1 = &df1[6 * i]
        F2 = &df2[6 * i]
        # W = M Ā − ad_Vᵀ M V,  Ẇ = M Ā̇ − ad_V̇ᵀ M V − ad_Vᵀ M V̇ (about the COM:
        # rnea_rates_body.h); a massless body has none
        massless = td_massless(inr)
        if massless:
            for n in range(6):
                F[n] = 0.0
                F1[n] = 0.0
                if second:
                    F2[n] = 0.0
        else:
            td_rates_wrench(inr, V, A, J2, gam, gam1, F, F1)
        if second and not massless:
            inertia_times(inr, V, hV)
            inertia_times(inr, A, hA)
            # Ẅ = M Ā̈ − ad_V̈ᵀ M V − 2 ad_V̇ᵀ M V̇ − ad_Vᵀ M V̈,  γ̈ = −ω̇ × γ − ω × γ̇
            cross(A, gam, gam2)
            cross(V, gam1, t)
            for n in range(3):
                gam2[n] = -gam2[n] - t[n]
            for n in range(6):
                x[n] = J3[n]
            x[3] -= gam2[0]; x[4] -= gam2[1]; x[5] -= gam2[2]
            inertia_times(inr, x, F2)
            inertia_times(inr, J2, hJ)
            add_gyroscopic(J2, hV, F2)
            for n in range(6):
                t6[n] = 0.0
            add_gyroscopic(A, hA, t6)
            for n in range(6):
                F2[n] += 2.0 * t6[n]
            add_gyroscopic(V, hJ, F2)
        if ext:
            if fext_frame == 1:
                for n in range(6):
                    F[n] -= fext[6 * i + n]
                    F1[n] -= fext[6 * (nb + i) + n]
                    if second:
                        F2[n] -= fext[6 * (2 * nb + i) + n]
            else:
                C = &d.oMi[12 * i]
                world_pose(NULL if par < 0 else &d.oMi[12 * par], T, C)
                # V' = Vᵇ (world) or (ω, 0) (hybrid), and its rate
                for n in range(6):
                    Vr[n] = V[n]
                    Ar[n] = A[n]
                if fext_frame == 2:
                    for n in range(3, 6):
                        Vr[n] = 0.0
                        Ar[n] = 0.0
                # fb = K W, fb1 = K Ẇ + ad_{V'}ᵀ fb
                wrench_to_world(fext_frame, C, &C[9], &fext[6 * i], t6)
                wrench_from_world(1, C, &C[9], t6, fb)
                wrench_to_world(fext_frame, C, &C[9], &fext[6 * (nb + i)], t6)
                wrench_from_world(1, C, &C[9], t6, gk)
                _wrench_coad(Vr, fb, t6)
                for n in range(6):
                    fb1[n] = gk[n] + t6[n]
                    F[n] -= fb[n]
                    F1[n] -= fb1[n]
                if second:
                    # fb2 = K Ẅ + ad_{V'}ᵀ K Ẇ + ad_{V̇'}ᵀ fb + ad_{V'}ᵀ fb1
                    wrench_to_world(fext_frame, C, &C[9], &fext[6 * (2 * nb + i)], t6)
                    wrench_from_world(1, C, &C[9], t6, x)
                    for n in range(6):
                        F2[n] -= x[n]
                    _wrench_coad(Vr, gk, t6)
                    for n in range(6):
                        F2[n] -= t6[n]
                    _wrench_coad(Ar, fb, t6)
                    for n in range(6):
                        F2[n] -= t6[n]
                    _wrench_coad(Vr, fb1, t6)
                    for n in range(6):
                        F2[n] -= t6[n]
    # backward pass, leaves to root: τ̇ = Sᵀ Ẇ + Ṡᵀ W, τ̈ = Sᵀ Ẅ + 2 Ṡᵀ Ẇ + S̈ᵀ W,
    # and the subtree sums moved to the parent with the rates of Ad_{T}⁻ᵀ
    for i in range(nb - 1, -1, -1):
        o = voffp[i]
        nvi = nvjp[i]
        fast = fastp[i]
        kind = kindp[i]
        S = &dS[6 * o]
        F = &df[6 * i]
        F1 = &df1[6 * i]
        F2 = &df2[6 * i]
        if fast != FAST_NONE and fast != FAST_SCREW:
            # S = ±e_k
            kax = fast - FAST_REV_X
            if Xm[6 * o + kax] > 0.0:
                tau1[o] = F1[kax] + armp[o] * q3[o]
                if second:
                    tau2[o] = F2[kax] + armp[o] * q4[o]
            else:
                tau1[o] = -F1[kax] + armp[o] * q3[o]
                if second:
                    tau2[o] = -F2[kax] + armp[o] * q4[o]
        else:
            if fast == FAST_NONE and kind == KIND_FREE_SE3:
                # S = 1 (the body twist): τ̇ = Ẇ, τ̈ = Ẅ
                for k in range(6):
                    tau1[o + k] = F1[k]
                    if second:
                        tau2[o + k] = F2[k]
            else:
                subspace_T_times(nvi, S, F1, &tau1[o])
                if second:
                    subspace_T_times(nvi, S, F2, &tau2[o])
            if fast == FAST_NONE and (kind == KIND_FREE_SO3R3
                                      or (kind == KIND_SCREWS and nvi > 1)):
                _subspace_rates2(kind, nvi, S, &qd[o], &qdd[o], Sd, Sdd)
                for k in range(nvi):
                    tau1[o + k] += dot6(&Sd[6 * k], F)
                    if second:
                        tau2[o + k] += 2.0 * dot6(&Sd[6 * k], F1) + dot6(&Sdd[6 * k], F)
            for k in range(nvi):
                tau1[o + k] += armp[o + k] * q3[o + k]
                if second:
                    tau2[o + k] += armp[o + k] * q4[o + k]
        par = parp[i]
        if par < 0:
            continue
        T = &dT[12 * i]
        kax = -1
        if fast != FAST_NONE and fast != FAST_SCREW:
            kax = fast - FAST_REV_X
            sg = 1.0 if Xm[6 * o + kax] > 0.0 else -1.0
            cu[0] = sg * qd[o]; cu[1] = sg * qdd[o]
        # W and Ẇ − ad_uᵀ W
        for n in range(6):
            x[n] = F1[n]
        _coad_u_add(kax, cu[0], &dru[12 * i], F, 1.0, x)
        td_rates_to_parent2(T, F, x, &df[6 * par], &df1[6 * par])
        if second:
            # Ẅ − 2 ad_uᵀ Ẇ − ad_u̇ᵀ W + ad_uᵀ ad_uᵀ W
            for n in range(6):
                x[n] = F2[n]
                t6[n] = 0.0
            _coad_u_add(kax, cu[0], &dru[12 * i], F1, 2.0, x)
            _coad_u_add(kax, cu[1], &dru[12 * i + 6], F, 1.0, x)
            _coad_u_add(kax, cu[0], &dru[12 * i], F, 1.0, t6)
            _coad_u_add(kax, cu[0], &dru[12 * i], t6, 1.0, x)
            td_rates_to_parent(T, x, &df2[6 * par])
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_rates_body(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out = τ̇, out2 = τ̈ (or NULL).  c.a packs (q̈, q⃛[, q⁗]) per sample (stride
    c.sa), c.fext packs (W, Ẇ[, Ẅ]) per sample (stride c.sf)."""
    if c.fext == NULL:
        if c.out2 == NULL:
            return rnea_rates_body_kernel(m, d, c.q, c.v, c.a, c.g, NULL, c.fframe, c.out,
                                          NULL, <int>0)
        return rnea_rates_body_kernel(m, d, c.q, c.v, c.a, c.g, NULL, c.fframe, c.out,
                                      c.out2, <long>0)
    if c.out2 == NULL:
        return rnea_rates_body_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                      NULL, <float>0)
    return rnea_rates_body_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                  c.out2, <double>0)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
cdef enum:
    _RATES_STACK = 768          # doubles: single states with 3 nv ≤ this pack on the stack


cdef cnp.ndarray _pack_rows(cnp.ndarray qa, cnp.ndarray x0, cnp.ndarray x1, cnp.ndarray x2,
                           int K, int width):
    """x0, x1 and (K = 3) x2 (None: zeros), each of q's batch shape + ``width``
    doubles per sample, packed per sample: (…, K, width)."""
    cdef Py_ssize_t N = 1 if cnp.PyArray_NDIM(qa) == 1 else cnp.PyArray_DIMS(qa)[0], s
    cdef cnp.npy_intp dims[3]
    cdef int nd = 2, k
    cdef cnp.ndarray arr
    cdef double* dst
    cdef double* src
    if cnp.PyArray_NDIM(qa) == 2:
        dims[0] = N; dims[1] = K; dims[2] = width
        nd = 3
    else:
        dims[0] = K; dims[1] = width
    cdef cnp.ndarray res = cnp.PyArray_EMPTY(nd, dims, cnp.NPY_DOUBLE, 0)
    dst = <double*>cnp.PyArray_DATA(res)
    for k in range(K):
        arr = x0 if k == 0 else (x1 if k == 1 else x2)
        if arr is None:
            for s in range(N):
                memset(&dst[(s * K + k) * width], 0, width * sizeof(double))
            continue
        src = <double*>cnp.PyArray_DATA(arr)
        if N == 1:
            memcpy(&dst[k * width], src, width * sizeof(double))
        else:
            for s in range(N):
                memcpy(&dst[(s * K + k) * width], &src[s * width], width * sizeof(double))
    return res


def inverse_dynamics_rates(ModelCore self, q, v, a, jerk, snap=None, representation="body",
                           f_ext=None, f_ext_dot=None, f_ext_ddot=None, gravity=None,
                           f_ext_frame="world", data=None, out=None):
    """Time derivatives of the inverse-dynamics solution along a motion: τ̇, and
    (τ̇, τ̈) when ``snap`` is given.

    ``τ(t) = inverse_dynamics(q(t), v(t), v̇(t))`` along a motion with
    velocities ``v``, accelerations ``a = v̇``, jerks ``jerk = v̈`` and snaps
    ``snap = v⃛`` (the derivatives of the velocity coordinates; for quaternion
    joints the body-fixed angular velocity, as everywhere).  Recursive and O(n):
    the Newton–Euler recursion differentiated twice (Müller 2018, §6.3; docs/
    algorithms.md, "Inverse-dynamics rates"; cysrc/rnea_rates.pxi).

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a, jerk : array_like, shape (nv,) or (N, nv)
        v, v̇, v̈.
    snap : array_like, shape (nv,) or (N, nv), optional
        v⃛; when given, τ̈ is returned too.
    representation : {"body", "spatial", "hybrid"}
        Which recursion computes the rates (as in :meth:`inverse_dynamics`; all
        three give the same τ̇, τ̈): body-fixed (Data v, a, a_gf, f), spatial
        (frame s held fixed: sv, sa_gf, sf) or hybrid (world axes at the body
        origins: hv, ha_gf, hf).
    f_ext, f_ext_dot, f_ext_ddot : array_like, shape (nb, 6) or (N, nb, 6), optional
        External wrenches and their first and second time derivatives (as
        numbers in ``f_ext_frame``; None: zero).
    gravity : array_like, shape (3,), optional
        World-frame gravity (default: ``model.gravity``), constant in time.
    f_ext_frame : {"world", "body", "hybrid"}
        As in :meth:`inverse_dynamics`.  The rates are those of the numbers in
        that frame (a wrench fixed in the world has zero rates in "world").
    data : Data, optional
    out : ndarray or tuple of two ndarrays, optional
        (nv,) or (N, nv) each: τ̇, or (τ̇, τ̈) with ``snap``.

    Returns
    -------
    ndarray τ̇, or tuple (τ̇, τ̈); shape (nv,) or (N, nv) each
        N/s and N/s² (N·m/s, N·m/s² for revolute joints).
    """
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef cnp.ndarray aa = self._like(qa, a, self.nv, "a")
    cdef cnp.ndarray ja = self._like(qa, jerk, self.nv, "jerk")
    cdef cnp.ndarray sa = None if snap is None else self._like(qa, snap, self.nv, "snap")
    cdef bint second = snap is not None
    cdef int K = 3 if second else 2
    cdef double gbuf[3]
    cdef double stack[_RATES_STACK]
    cdef cnp.npy_intp dims[1]
    cdef Call c
    cdef kernel_t fn
    cdef cnp.ndarray r1, r2 = None, packed = None, fk = None
    memset(&c, 0, sizeof(Call))
    if representation == "body":
        fn = _k_rnea_rates_body
    elif representation == "spatial":
        fn = _k_rnea_rates_spatial
    elif representation == "hybrid":
        fn = _k_rnea_rates_hybrid
    else:
        raise InputError(f"representation must be 'body', 'spatial' or 'hybrid', got "
                         f"{representation!r}")
    c.g = self._gravity_ptr(gravity, gbuf)
    c.fframe = 0 if f_ext_frame is "world" else self._wrench_frame(f_ext_frame)
    if cnp.PyArray_NDIM(qa) == 1 and K * self.nv <= _RATES_STACK:
        # one state: (q̈, q⃛[, q⁗]) side by side on the stack, no array allocated
        memcpy(stack, cnp.PyArray_DATA(aa), self.nv * sizeof(double))
        memcpy(&stack[self.nv], cnp.PyArray_DATA(ja), self.nv * sizeof(double))
        if second:
            memcpy(&stack[2 * self.nv], cnp.PyArray_DATA(sa), self.nv * sizeof(double))
        c.a = stack
    else:
        packed = _pack_rows(qa, aa, ja, sa, K, self.nv)
        c.a = <double*>cnp.PyArray_DATA(packed)
    if f_ext is not None or f_ext_dot is not None or f_ext_ddot is not None:
        fk = _pack_rows(qa, None if f_ext is None else self._wrenches(qa, f_ext),
                        None if f_ext_dot is None else self._wrenches(qa, f_ext_dot),
                        None if (f_ext_ddot is None or not second)
                        else self._wrenches(qa, f_ext_ddot), K, 6 * self.nb)
        c.fext = <double*>cnp.PyArray_DATA(fk)
        c.sf = K * 6 * self.nb
    dims[0] = self.nv
    if not second:
        r1 = self._output(out, qa, 1, dims)
    elif out is None:
        r1 = self._output(None, qa, 1, dims)
        r2 = self._output(None, qa, 1, dims)
    else:
        r1, r2 = self._outputs(out, qa, 1, dims, ("tau_dot", "tau_ddot"))
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = K * self.nv
    c.out = <double*>cnp.PyArray_DATA(r1)
    c.out2 = <double*>cnp.PyArray_DATA(r2) if second else NULL
    c.so = self.nv
    c.so2 = self.nv
    self._dispatch(fn, &c, self._batch(qa), data, -1, "inverse_dynamics_rates: τ̇, τ̈")
    return (r1, r2) if second else r1
