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
    is NULL).  d.S must hold joint i's subspace."""
    cdef int o = m.voff[i], nvi = m.nvj[i], k, n, fast = m.fast[i]
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
    elif fast == FAST_NONE:
        _subspace_rates3(m.kind[i], nvi, S, &qd[o], &qdd[o], &q3[o], Sd, Sdd, S3)
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


cdef int rnea_rates_body_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                const double* acc, const double* g, const double* fext,
                                int fext_frame, double* tau1, double* tau2) noexcept nogil:
    """τ̇ (tau1, nv) and, if tau2 is not NULL, τ̈.  acc packs (q̈, q⃛) or (q̈, q⃛, q⁗),
    nv each; fext (if not NULL) packs (W^ext, Ẇ^ext, Ẅ^ext), (nb, 6) each, in frame
    fext_frame.  Fills d.liMi, d.S, d.v, d.a (V̇, no gravity), d.a_gf (Ā), d.f (W),
    d.rjerk (V̈), d.rjounce (V⃛), d.rfd (Ẇ), d.rfdd (Ẅ), d.ru (u, u̇; joints other
    than axis revolutes) and, for
    world/hybrid wrenches, d.oMi.  Returns 0 or i + 1 for a non-unit quaternion of
    joint i."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, par, o, nvi, kax, bad = 0
    cdef bint second = tau2 != NULL
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
    # forward pass, root to leaves: joint steps, V, V̇, V̈, V⃛, γ and the bodies' own
    # W, Ẇ, Ẅ (see the header)
    angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        T = &d.liMi[12 * i]
        if joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        _relative_twist_rates(m, d, i, qd, qdd, q3, q4, u, u1, u2, u3)
        kax = -1
        if m.fast[i] != FAST_NONE and m.fast[i] != FAST_SCREW:
            kax = m.fast[i] - FAST_REV_X
            sg = 1.0 if m.X[o, kax] > 0.0 else -1.0
            cu[0] = sg * qd[o]; cu[1] = sg * qdd[o]; cu[2] = sg * q3[o]
        if kax < 0:                     # (the backward pass needs u, u̇ of the others)
            for n in range(6):
                d.ru[12 * i + n] = u[n]
                d.ru[12 * i + 6 + n] = u1[n]
        V = &d.v[6 * i]
        A = &d.a[6 * i]
        Ag = &d.a_gf[6 * i]
        J2 = &d.rjerk[6 * i]
        J3 = &d.rjounce[6 * i]
        if par < 0:
            for n in range(6):
                V[n] = u[n]; A[n] = u1[n]; J2[n] = u2[n]; J3[n] = u3[n]
            rotT_vec(T, g, gam)
        else:
            twist_Ad_inv(T, &T[9], &d.v[6 * par], V)
            twist_add(V, u)
            twist_Ad_inv(T, &T[9], &d.a[6 * par], Ap)
            twist_Ad_inv(T, &T[9], &d.rjerk[6 * par], Jp)
            # V̇ = V̇_p' + [V, u] + u̇
            _bracket_u(kax, cu[0], V, u, A)
            for n in range(6):
                A[n] += Ap[n] + u1[n]
            # V̈ = V̈_p' + [V̇_p' + V̇, u] + [V, u̇] + ü
            for n in range(6):
                x[n] = Ap[n] + A[n]
            _bracket_u(kax, cu[0], x, u, J2)
            _bracket_u(kax, cu[1], V, u1, t6)
            for n in range(6):
                J2[n] += t6[n] + Jp[n] + u2[n]
            if second:
                # V⃛ = V⃛_p' + [2 V̈_p' + V̈, u] + [[V̇_p', u], u] + [V̇_p' + 2 V̇, u̇] + [V, ü] + u⃛
                twist_Ad_inv(T, &T[9], &d.rjounce[6 * par], J3)
                for n in range(6):
                    x[n] = 2.0 * Jp[n] + J2[n]
                _bracket_u(kax, cu[0], x, u, t6)
                twist_add(J3, t6)
                _bracket_u(kax, cu[0], Ap, u, x)
                _bracket_u(kax, cu[0], x, u, t6)
                twist_add(J3, t6)
                for n in range(6):
                    x[n] = Ap[n] + 2.0 * A[n]
                _bracket_u(kax, cu[1], x, u1, t6)
                twist_add(J3, t6)
                _bracket_u(kax, cu[2], V, u2, t6)
                twist_add(J3, t6)
                twist_add(J3, u3)
            # γ_i = R_relᵀ γ_p, γ_p = (V̇ − Ā)_p linear
            for n in range(3):
                t[n] = d.a[6 * par + 3 + n] - d.a_gf[6 * par + 3 + n]
            rotT_vec(T, t, gam)
        cross(V, gam, gam1)                       # γ̇ = −ω × γ
        gam1[0] = -gam1[0]; gam1[1] = -gam1[1]; gam1[2] = -gam1[2]
        for n in range(6):
            Ag[n] = A[n]
        Ag[3] -= gam[0]; Ag[4] -= gam[1]; Ag[5] -= gam[2]
        inr = &m.inert[i, 0]
        F = &d.f[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        # W = M Ā − ad_Vᵀ M V (as the RNEA), Ẇ = M Ā̇ − ad_V̇ᵀ M V − ad_Vᵀ M V̇
        com_wrench_body(inr[0], &inr[1], &inr[4], V, Ag, F)
        inertia_times(inr, V, hV)
        inertia_times(inr, A, hA)
        for n in range(6):
            x[n] = J2[n]
        x[3] -= gam1[0]; x[4] -= gam1[1]; x[5] -= gam1[2]
        inertia_times(inr, x, F1)
        add_gyroscopic(A, hV, F1)
        add_gyroscopic(V, hA, F1)
        if second:
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
        if fext != NULL:
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
        o = m.voff[i]
        nvi = m.nvj[i]
        S = &d.S[6 * o]
        F = &d.f[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        subspace_T_times(nvi, S, F1, &tau1[o])
        if second:
            subspace_T_times(nvi, S, F2, &tau2[o])
        if m.fast[i] == FAST_NONE and (m.kind[i] == KIND_FREE_SO3R3
                                       or (m.kind[i] == KIND_SCREWS and nvi > 1)):
            _subspace_rates2(m.kind[i], nvi, S, &qd[o], &qdd[o], Sd, Sdd)
            for k in range(nvi):
                tau1[o + k] += dot6(&Sd[6 * k], F)
                if second:
                    tau2[o + k] += 2.0 * dot6(&Sd[6 * k], F1) + dot6(&Sdd[6 * k], F)
        for k in range(nvi):
            tau1[o + k] += m.armature[o + k] * q3[o + k]
            if second:
                tau2[o + k] += m.armature[o + k] * q4[o + k]
        par = m.parent[i]
        if par < 0:
            continue
        T = &d.liMi[12 * i]
        kax = -1
        if m.fast[i] != FAST_NONE and m.fast[i] != FAST_SCREW:
            kax = m.fast[i] - FAST_REV_X
            sg = 1.0 if m.X[o, kax] > 0.0 else -1.0
            cu[0] = sg * qd[o]; cu[1] = sg * qdd[o]
        wrench_to_parent(T, &T[9], F, &d.f[6 * par])
        # Ẇ − ad_uᵀ W
        for n in range(6):
            x[n] = F1[n]
        _coad_u_add(kax, cu[0], &d.ru[12 * i], F, 1.0, x)
        wrench_to_parent(T, &T[9], x, &d.rfd[6 * par])
        if second:
            # Ẅ − 2 ad_uᵀ Ẇ − ad_u̇ᵀ W + ad_uᵀ ad_uᵀ W
            for n in range(6):
                x[n] = F2[n]
                t6[n] = 0.0
            _coad_u_add(kax, cu[0], &d.ru[12 * i], F1, 2.0, x)
            _coad_u_add(kax, cu[1], &d.ru[12 * i + 6], F, 1.0, x)
            _coad_u_add(kax, cu[0], &d.ru[12 * i], F, 1.0, t6)
            _coad_u_add(kax, cu[0], &d.ru[12 * i], t6, 1.0, x)
            wrench_to_parent(T, &T[9], x, &d.rfdd[6 * par])
    return bad


cdef inline void _inertia_rate(const double* Ic, const double* V, const double* X,
                               const double* Xd, const double* MX, double* out) noexcept nogil:
    """out = d/dt (Mˢ X) = Mˢ (Ẋ − [V, X]) − ad_Vᵀ Mˢ X for a spatial inertia moving with
    twist V (Ṁˢ = −ad_Vᵀ Mˢ − Mˢ ad_V); MX = Mˢ X."""
    cdef double y[6]
    cdef int n
    twist_bracket(V, X, y)
    for n in range(6):
        y[n] = Xd[n] - y[n]
    rigid_apply_packed(Ic, y, out)
    add_gyroscopic(V, MX, out)


cdef int rnea_rates_spatial_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                   const double* acc, const double* g, const double* fext,
                                   int fext_frame, double* tau1, double* tau2) noexcept nogil:
    """τ̇ (tau1) and, if tau2 is not NULL, τ̈ by the spatial recursion (frame s: world
    axes about the subtree root's current origin, held fixed in time).  Inputs as
    rnea_rates_body_kernel.  Fills d.liMi, d.S, d.sMi, d.sJ, d.sv (V), d.sa_gf
    (V̇ − G), d.sf (W, subtree sums), d.rjerk (V̈), d.rjounce (V⃛), d.rfd (Ẇ),
    d.rfdd (Ẅ) in frame s, and d.oMi for world wrenches.  Returns 0 or i + 1 for a
    non-unit quaternion of joint i."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, par, o, nvi, bad = 0
    cdef bint second = tau2 != NULL
    cdef const double* qdd = acc
    cdef const double* q3 = &acc[nv]
    cdef const double* q4 = &acc[2 * nv] if second else NULL
    cdef double Sd[36]
    cdef double Sdd[36]
    cdef double cJ[6]
    cdef double u[6]
    cdef double u1[6]
    cdef double u2[6]
    cdef double u3[6]
    cdef double w[6]
    cdef double wd[6]
    cdef double wdd[6]
    cdef double p1[6]
    cdef double p2[6]
    cdef double p3[6]
    cdef double Vd[6]
    cdef double x[6]
    cdef double y[6]
    cdef double t6[6]
    cdef double G[6]
    cdef double Ic[10]
    cdef double P0[6]
    cdef double P1[6]
    cdef double Q0[6]
    cdef double Q1[6]
    cdef double X1[6]
    cdef double X1d[6]
    cdef double MX[6]
    cdef double G0[6]
    cdef double G1[6]
    cdef double Xg[6]
    cdef double Xgd[6]
    cdef double fs[6]
    cdef double fs1[6]
    cdef double gk[6]
    cdef double Vr[6]
    cdef double Ar[6]
    cdef double r0[3]
    cdef double t[3]
    cdef const double* S
    cdef double* C
    cdef double* V
    cdef double* A
    cdef double* J2
    cdef double* J3
    cdef double* F
    cdef double* F1
    cdef double* F2
    for n in range(6):
        G[n] = 0.0
    G[3] = g[0]; G[4] = g[1]; G[5] = g[2]
    # forward pass, root to leaves: with w = Ad_C u (d/dt Ad_C x = [V, Ad_C x] + Ad_C ẋ)
    #   V = V_p + w,  V̇ = V̇_p + ẇ,  V̈ = V̈_p + ẅ,  V⃛ = V⃛_p + w⃛;
    # the body's momentum Π = Mˢ V and W = Π̇ − Mˢ G − W^ext with its two rates
    angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if spatial_step(m, d, i, q, qd, cJ) and bad == 0:
            bad = i + 1
        C = &d.sMi[12 * i]
        _relative_twist_rates(m, d, i, qd, qdd, q3, q4, u, u1, u2, u3)
        twist_Ad(C, &C[9], u, w)
        twist_Ad(C, &C[9], u1, p1)
        twist_Ad(C, &C[9], u2, p2)
        V = &d.sv[6 * i]
        A = &d.sa_gf[6 * i]
        J2 = &d.rjerk[6 * i]
        J3 = &d.rjounce[6 * i]
        for n in range(6):
            if par < 0:
                V[n] = w[n]
                Vd[n] = 0.0
                J2[n] = 0.0
                J3[n] = 0.0
            else:
                V[n] = d.sv[6 * par + n] + w[n]
                Vd[n] = d.sa_gf[6 * par + n] + G[n]
                J2[n] = d.rjerk[6 * par + n]
                J3[n] = d.rjounce[6 * par + n]
        # ẇ = [V, w] + Ad u̇
        twist_bracket(V, w, wd)
        twist_add(wd, p1)
        twist_add(Vd, wd)
        for n in range(6):
            A[n] = Vd[n] - G[n]
        # ẅ = [V̇, w] + [V, ẇ] + [V, Ad u̇] + Ad ü
        twist_bracket(Vd, w, wdd)
        twist_bracket(V, wd, t6)
        twist_add(wdd, t6)
        twist_bracket(V, p1, t6)
        twist_add(wdd, t6)
        twist_add(wdd, p2)
        twist_add(J2, wdd)
        if second:
            # w⃛ = [V̈, w] + 2 [V̇, ẇ] + [V, ẅ] + [V̇, Ad u̇] + [V, [V, Ad u̇]] + 2 [V, Ad ü] + Ad u⃛
            twist_Ad(C, &C[9], u3, p3)
            twist_bracket(J2, w, t6)
            twist_add(J3, t6)
            twist_bracket(Vd, wd, t6)
            for n in range(6):
                J3[n] += 2.0 * t6[n]
            twist_bracket(V, wdd, t6)
            twist_add(J3, t6)
            twist_bracket(Vd, p1, t6)
            twist_add(J3, t6)
            twist_bracket(V, p1, x)
            twist_bracket(V, x, t6)
            twist_add(J3, t6)
            twist_bracket(V, p2, t6)
            for n in range(6):
                J3[n] += 2.0 * t6[n] + p3[n]
        rigid_world_inertia(C, &C[9], &m.inert[i, 0], Ic)
        F = &d.sf[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        # Π = M V, Π̇ = M V̇ − ad_Vᵀ Π, Π̈ = d/dt(M V̇) − ad_V̇ᵀ Π − ad_Vᵀ Π̇, …;
        # gravity: M G, d/dt(M G) = M (−[V, G]) − ad_Vᵀ M G, …
        rigid_apply_packed(Ic, V, P0)
        rigid_apply_packed(Ic, Vd, Q0)
        for n in range(6):
            P1[n] = Q0[n]
        add_gyroscopic(V, P0, P1)
        rigid_apply_packed(Ic, G, G0)
        twist_bracket(V, G, Xg)
        for n in range(6):
            Xg[n] = -Xg[n]
            x[n] = 0.0
        _inertia_rate(Ic, V, G, x, G0, G1)
        for n in range(6):
            F[n] = P1[n] - G0[n]
        # Q1 = d/dt (M V̇): X = V̇, Ẋ = V̈
        _inertia_rate(Ic, V, Vd, J2, Q0, Q1)
        for n in range(6):
            F1[n] = Q1[n] - G1[n]
        add_gyroscopic(Vd, P0, F1)
        add_gyroscopic(V, P1, F1)
        if second:
            # Π⃛ = d/dt Q1 − ad_V̈ᵀ Π − 2 ad_V̇ᵀ Π̇ − ad_Vᵀ Π̈ with
            # Q1 = M X1 − ad_Vᵀ Q0, X1 = V̈ − [V, V̇], Ẋ1 = V⃛ − [V, V̈]
            twist_bracket(V, Vd, X1)
            twist_bracket(V, J2, X1d)
            for n in range(6):
                X1[n] = J2[n] - X1[n]
                X1d[n] = J3[n] - X1d[n]
            rigid_apply_packed(Ic, X1, MX)
            _inertia_rate(Ic, V, X1, X1d, MX, F2)
            add_gyroscopic(Vd, Q0, F2)
            add_gyroscopic(V, Q1, F2)
            # Π̈ = F1 + G1 (kept in y)
            for n in range(6):
                y[n] = F1[n] + G1[n]
            add_gyroscopic(J2, P0, F2)
            for n in range(6):
                t6[n] = 0.0
            add_gyroscopic(Vd, P1, t6)
            for n in range(6):
                F2[n] += 2.0 * t6[n]
            add_gyroscopic(V, y, F2)
            # gravity: d/dt (M Xg − ad_Vᵀ M G), Xg = −[V, G], Ẋg = −[V̇, G]
            twist_bracket(Vd, G, Xgd)
            for n in range(6):
                Xgd[n] = -Xgd[n]
            rigid_apply_packed(Ic, Xg, MX)
            _inertia_rate(Ic, V, Xg, Xgd, MX, t6)
            add_gyroscopic(Vd, G0, t6)
            add_gyroscopic(V, G1, t6)
            for n in range(6):
                F2[n] -= t6[n]
        if fext != NULL:
            # W_s = K W^ext with K̇ = −ad_{V'}ᵀ K: V' = 0 (world), V (body), (0, ṙ) (hybrid)
            for n in range(6):
                Vr[n] = 0.0
                Ar[n] = 0.0
            if fext_frame == 0:
                world_pose(NULL if par < 0 else &d.oMi[12 * par], &d.liMi[12 * i],
                           &d.oMi[12 * i])
                for n in range(3):
                    r0[n] = d.oMi[12 * i + 9 + n] - C[9 + n]
                for k in range(2 + second):
                    for n in range(6):
                        x[n] = fext[6 * (k * nb + i) + n]
                    world_wrench_to_root(r0, x)
                    for n in range(6):
                        if k == 0:
                            F[n] -= x[n]
                        elif k == 1:
                            F1[n] -= x[n]
                        else:
                            F2[n] -= x[n]
            else:
                if fext_frame == 1:
                    for n in range(6):
                        Vr[n] = V[n]
                        Ar[n] = Vd[n]
                else:
                    # ṙ = v + ω × ρ,  r̈ = v̇ + ω̇ × ρ + ω × ṙ  (ρ: the body origin in frame s)
                    cross(V, &C[9], t)
                    for n in range(3):
                        Vr[3 + n] = V[3 + n] + t[n]
                    cross(Vd, &C[9], t)
                    for n in range(3):
                        Ar[3 + n] = Vd[3 + n] + t[n]
                    cross(V, &Vr[3], t)
                    for n in range(3):
                        Ar[3 + n] += t[n]
                wrench_to_world(fext_frame, C, &C[9], &fext[6 * i], fs)
                wrench_to_world(fext_frame, C, &C[9], &fext[6 * (nb + i)], gk)
                for n in range(6):
                    fs1[n] = gk[n]
                add_gyroscopic(Vr, fs, fs1)
                for n in range(6):
                    F[n] -= fs[n]
                    F1[n] -= fs1[n]
                if second:
                    wrench_to_world(fext_frame, C, &C[9], &fext[6 * (2 * nb + i)], x)
                    add_gyroscopic(Vr, gk, x)
                    add_gyroscopic(Ar, fs, x)
                    add_gyroscopic(Vr, fs1, x)
                    for n in range(6):
                        F2[n] -= x[n]
    # backward pass, leaves to root: subtree sums add without transformation;
    #   τ̇ = Yᵀ (Ẇ + ad_Vᵀ W) + Ṡᵀ Ad_Cᵀ W,
    #   τ̈ = Yᵀ (Ẅ + 2 ad_Vᵀ Ẇ + ad_V̇ᵀ W + ad_Vᵀ ad_Vᵀ W) + 2 Ṡᵀ Ad_Cᵀ (Ẇ + ad_Vᵀ W)
    #       + S̈ᵀ Ad_Cᵀ W   (Y = Ad_C S, Ẏ = [V, Y] + Ad_C Ṡ)
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        V = &d.sv[6 * i]
        F = &d.sf[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        _wrench_coad(V, F, t6)                  # ad_Vᵀ W
        for n in range(6):
            x[n] = F1[n] + t6[n]                # Ẇ + ad_Vᵀ W
        subspace_T_times(nvi, &d.sJ[6 * o], x, &tau1[o])
        if second:
            for n in range(6):
                Vd[n] = d.sa_gf[6 * i + n] + G[n]
                y[n] = F2[n]
            _wrench_coad(V, F1, w)
            for n in range(6):
                y[n] += 2.0 * w[n]
            _wrench_coad(Vd, F, w)
            twist_add(y, w)
            _wrench_coad(V, t6, w)
            twist_add(y, w)
            subspace_T_times(nvi, &d.sJ[6 * o], y, &tau2[o])
        if m.fast[i] == FAST_NONE and (m.kind[i] == KIND_FREE_SO3R3
                                       or (m.kind[i] == KIND_SCREWS and nvi > 1)):
            S = &d.S[6 * o]
            C = &d.sMi[12 * i]
            _subspace_rates2(m.kind[i], nvi, S, &qd[o], &qdd[o], Sd, Sdd)
            wrench_from_world(1, C, &C[9], F, p1)       # Ad_Cᵀ W
            wrench_from_world(1, C, &C[9], x, p2)       # Ad_Cᵀ (Ẇ + ad_Vᵀ W)
            for k in range(nvi):
                tau1[o + k] += dot6(&Sd[6 * k], p1)
                if second:
                    tau2[o + k] += 2.0 * dot6(&Sd[6 * k], p2) + dot6(&Sdd[6 * k], p1)
        for k in range(nvi):
            tau1[o + k] += m.armature[o + k] * q3[o + k]
            if second:
                tau2[o + k] += m.armature[o + k] * q4[o + k]
        par = m.parent[i]
        if par >= 0:
            twist_add(&d.sf[6 * par], F)
            twist_add(&d.rfd[6 * par], F1)
            if second:
                twist_add(&d.rfdd[6 * par], F2)
    return bad


cdef inline void _rates_cross_add(const double* a, const double* b, double s, double* out) noexcept nogil:
    """out += s (a × b)."""
    out[0] += s * (a[1] * b[2] - a[2] * b[1])
    out[1] += s * (a[2] * b[0] - a[0] * b[2])
    out[2] += s * (a[0] * b[1] - a[1] * b[0])


cdef inline void _omega6(const double* w, const double* x, double s, double* out) noexcept nogil:
    """out += s Ω x, Ω = ω × on both halves of a 6-vector."""
    _rates_cross_add(w, x, s, out)
    _rates_cross_add(w, &x[3], s, &out[3])


cdef inline void _rotT_twist(const double* R, const double* x, double* out) noexcept nogil:
    """out = Rotᵀ x = (Rᵀ x_a, Rᵀ x_l)."""
    rotT_vec(R, x, out)
    rotT_vec(R, &x[3], &out[3])


cdef inline void _world_inertia_times(const double* R, const double* Thc, const double* x,
                                      double* out) noexcept nogil:
    """out = Θ x with Θ = R Θ_c Rᵀ (world axes)."""
    cdef double t[3]
    cdef double t2[3]
    rotT_vec(R, x, t)
    rot_vec(Thc, t, t2)
    rot_vec(R, t2, out)


cdef int rnea_rates_hybrid_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                                  const double* acc, const double* g, const double* fext,
                                  int fext_frame, double* tau1, double* tau2) noexcept nogil:
    """τ̇ (tau1) and, if tau2 is not NULL, τ̈ by the hybrid recursion (world axes at
    each body origin).  Inputs as rnea_rates_body_kernel.  Fills d.liMi, d.S,
    d.oMi, d.hv (ω, ṙ), d.ha_gf (ω̇, r̈ − g), d.rjerk (ω̈, r⃛), d.rjounce (ω⃛, r⁗),
    d.hf (W about the body origin), d.rfd (Ẇ), d.rfdd (Ẅ).  Returns 0 or i + 1 for
    a non-unit quaternion of joint i."""
    cdef int nb = m.nb, nv = m.nv, i, k, n, par, o, nvi, bad = 0
    cdef bint second = tau2 != NULL
    cdef const double* qdd = acc
    cdef const double* q3 = &acc[nv]
    cdef const double* q4 = &acc[2 * nv] if second else NULL
    cdef double Sd[36]
    cdef double Sdd[36]
    cdef double cJ[6]
    cdef double u[6]
    cdef double u1[6]
    cdef double u2[6]
    cdef double u3[6]
    cdef double z0[6]
    cdef double z1[6]
    cdef double z2[6]
    cdef double z3[6]
    cdef double y[6]
    cdef double x[6]
    cdef double t6[6]
    cdef double X0[6]
    cdef double X1[6]
    cdef double X2[6]
    cdef double zero6[6]
    cdef double gbase[6]
    cdef double dd[3]
    cdef double dd1[3]
    cdef double dd2[3]
    cdef double dd3[3]
    cdef double c0[3]
    cdef double c1[3]
    cdef double c2[3]
    cdef double c3[3]
    cdef double c4[3]
    cdef double p0[3]
    cdef double p1[3]
    cdef double p2[3]
    cdef double p3[3]
    cdef double L0[3]
    cdef double L1[3]
    cdef double L2[3]
    cdef double L3[3]
    cdef double T1[3]
    cdef double T1d[3]
    cdef double e[3]
    cdef double t[3]
    cdef double t2[3]
    cdef double mg[3]
    cdef double ms
    cdef const double* S
    cdef const double* inr
    cdef const double* Vp
    cdef const double* Ap
    cdef const double* Jp
    cdef const double* Kp
    cdef double* C
    cdef double* V
    cdef double* A
    cdef double* J2
    cdef double* J3
    cdef double* F
    cdef double* F1
    cdef double* F2
    for n in range(6):
        zero6[n] = 0.0
        gbase[n] = 0.0
    gbase[3] = -g[0]; gbase[4] = -g[1]; gbase[5] = -g[2]     # the world's (0, −g)
    angle_prepass(m, d, q)
    # forward pass, root to leaves: V = (ω, ṙ) and three rates; the relative twist
    # ū = Rot_i u has rates ū⁽ᵏ⁾ = Σ_j C(k, j) E_{k−j} Rot u⁽ʲ⁾ with E_1 = Ω,
    # E_2 = Ω̇ + Ω², E_3 = Ω̈ + 2Ω̇Ω + ΩΩ̇ + Ω³ (Ω = ω_i ×); the parent's twist seen
    # at body i's origin (ω_p, ṙ_p + ω_p × d), d = r_i − r_p, by Leibniz
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        C = &d.oMi[12 * i]
        world_pose(NULL if par < 0 else &d.oMi[12 * par], &d.liMi[12 * i], C)
        _relative_twist_rates(m, d, i, qd, qdd, q3, q4, u, u1, u2, u3)
        rotate_twist(C, u, z0)
        rotate_twist(C, u1, z1)
        rotate_twist(C, u2, z2)
        rotate_twist(C, u3, z3)
        V = &d.hv[6 * i]
        A = &d.ha_gf[6 * i]
        J2 = &d.rjerk[6 * i]
        J3 = &d.rjounce[6 * i]
        if par < 0:
            Vp = zero6; Ap = gbase; Jp = zero6; Kp = zero6
            for n in range(3):
                dd[n] = C[9 + n]
        else:
            Vp = &d.hv[6 * par]; Ap = &d.ha_gf[6 * par]
            Jp = &d.rjerk[6 * par]; Kp = &d.rjounce[6 * par]
            for n in range(3):
                dd[n] = C[9 + n] - d.oMi[12 * par + 9 + n]
        # V = (ω_p, ṙ_p + ω_p × d) + ū
        for n in range(6):
            V[n] = Vp[n] + z0[n]
        _rates_cross_add(Vp, dd, 1.0, &V[3])
        for n in range(3):
            dd1[n] = V[3 + n] - Vp[3 + n]
        # V̇: ū̇ = z1 + Ω z0;  r̈ = r̈_p + ω̇_p × d + ω_p × ḋ + ū̇_v  (A: r̈ − g)
        for n in range(6):
            y[n] = z1[n]
        _omega6(V, z0, 1.0, y)
        for n in range(6):
            A[n] = Ap[n] + y[n]
        _rates_cross_add(Ap, dd, 1.0, &A[3])
        _rates_cross_add(Vp, dd1, 1.0, &A[3])
        for n in range(3):
            dd2[n] = A[3 + n] - Ap[3 + n]
        # V̈: ṻ = z2 + 2Ω z1 + Ω̇ z0 + ΩΩ z0
        for n in range(6):
            y[n] = z2[n]
            x[n] = 0.0
        _omega6(V, z1, 2.0, y)
        _omega6(A, z0, 1.0, y)
        _omega6(V, z0, 1.0, x)
        _omega6(V, x, 1.0, y)
        for n in range(6):
            J2[n] = Jp[n] + y[n]
        _rates_cross_add(Jp, dd, 1.0, &J2[3])
        _rates_cross_add(Ap, dd1, 2.0, &J2[3])
        _rates_cross_add(Vp, dd2, 1.0, &J2[3])
        if second:
            for n in range(3):
                dd3[n] = J2[3 + n] - Jp[3 + n]
            # ū⃛ = z3 + 3Ω z2 + 3(Ω̇ + ΩΩ) z1 + (Ω̈ + 2Ω̇Ω + ΩΩ̇ + ΩΩΩ) z0
            for n in range(6):
                y[n] = z3[n]
            _omega6(V, z2, 3.0, y)
            _omega6(A, z1, 3.0, y)
            for n in range(6):
                x[n] = 0.0
            _omega6(V, z1, 1.0, x)
            _omega6(V, x, 3.0, y)
            _omega6(J2, z0, 1.0, y)
            for n in range(6):
                x[n] = 0.0
            _omega6(V, z0, 1.0, x)                 # Ω z0
            _omega6(A, x, 2.0, y)                  # 2 Ω̇ Ω z0
            for n in range(6):
                t6[n] = 0.0
            _omega6(V, x, 1.0, t6)                 # ΩΩ z0
            _omega6(V, t6, 1.0, y)                 # ΩΩΩ z0
            for n in range(6):
                t6[n] = 0.0
            _omega6(A, z0, 1.0, t6)                # Ω̇ z0
            _omega6(V, t6, 1.0, y)                 # ΩΩ̇ z0
            for n in range(6):
                J3[n] = Kp[n] + y[n]
            _rates_cross_add(Kp, dd, 1.0, &J3[3])
            _rates_cross_add(Jp, dd1, 3.0, &J3[3])
            _rates_cross_add(Ap, dd2, 3.0, &J3[3])
            _rates_cross_add(Vp, dd3, 1.0, &J3[3])
        # Newton–Euler about the moving origin r with the COM offset c = R d_c
        # (ċ = ω × c): p = m (ṙ + ċ), f = ṗ − m g;  h = Θ ω + c × p,
        # n = ḣ + ṙ × p − c × m g;  and their rates (true r̈ = A_lin + g)
        inr = &m.inert[i, 0]
        ms = inr[0]
        rot_vec(C, &inr[1], c0)
        cross(V, c0, c1)
        cross(A, c0, c2)
        _rates_cross_add(V, c1, 1.0, c2)
        cross(J2, c0, c3)
        _rates_cross_add(A, c1, 2.0, c3)
        _rates_cross_add(V, c2, 1.0, c3)
        for n in range(3):
            mg[n] = ms * g[n]
            p0[n] = ms * (V[3 + n] + c1[n])
            p1[n] = ms * (A[3 + n] + g[n] + c2[n])
            p2[n] = ms * (J2[3 + n] + c3[n])
        # L = Θ ω, L1 = Θ ω̇ + ω × L, L2 = d/dt(Θ ω̇) + ω̇ × L + ω × L1,
        # d/dt (Θ x) = Θ ẋ + ω × Θ x − Θ (ω × x)
        _world_inertia_times(C, &inr[4], V, L0)
        _world_inertia_times(C, &inr[4], A, T1)
        for n in range(3):
            L1[n] = T1[n]
        _rates_cross_add(V, L0, 1.0, L1)
        _world_inertia_times(C, &inr[4], J2, T1d)
        cross(V, A, e)                                  # ω × ω̇
        _world_inertia_times(C, &inr[4], e, t)
        _rates_cross_add(V, T1, 1.0, T1d)
        for n in range(3):
            T1d[n] -= t[n]
        for n in range(3):
            L2[n] = T1d[n]
        _rates_cross_add(A, L0, 1.0, L2)
        _rates_cross_add(V, L1, 1.0, L2)
        F = &d.hf[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        # f, ḟ = p̈;  n = L1 + c1 × p + c × ṗ + ṙ × p − c × m g
        for n in range(3):
            F[3 + n] = p1[n] - mg[n]
            F1[3 + n] = p2[n]
            F[n] = L1[n]
            F1[n] = L2[n]
        _rates_cross_add(c1, p0, 1.0, F)
        _rates_cross_add(c0, p1, 1.0, F)
        _rates_cross_add(&V[3], p0, 1.0, F)
        _rates_cross_add(c0, mg, -1.0, F)
        # ṅ = ḧ + r̈ × p + ṙ × ṗ − ċ × m g,  ḧ = L2 + c2 × p + 2 c1 × ṗ + c × p̈
        for n in range(3):
            t[n] = A[3 + n] + g[n]                      # r̈
        _rates_cross_add(c2, p0, 1.0, F1)
        _rates_cross_add(c1, p1, 2.0, F1)
        _rates_cross_add(c0, p2, 1.0, F1)
        _rates_cross_add(t, p0, 1.0, F1)
        _rates_cross_add(&V[3], p1, 1.0, F1)
        _rates_cross_add(c1, mg, -1.0, F1)
        if second:
            # c⁗, p⃛ = m (r⁗ + c⁗), L3 = d²/dt²(Θ ω̇) + ω̈ × L + 2 ω̇ × L1 + ω × L2
            cross(J3, c0, c4)
            _rates_cross_add(J2, c1, 3.0, c4)
            _rates_cross_add(A, c2, 3.0, c4)
            _rates_cross_add(V, c3, 1.0, c4)
            for n in range(3):
                p3[n] = ms * (J3[3 + n] + c4[n])
            # d²/dt²(Θ ω̇) = Θ ω⃛ + ω × Θ ω̈ − Θ (ω × ω̈) + ω̇ × Θ ω̇ + ω × d/dt(Θ ω̇)
            #               − [Θ (ω × ω̈) + ω × Θ e − Θ (ω × e)],  e = ω × ω̇
            _world_inertia_times(C, &inr[4], J3, L3)
            _world_inertia_times(C, &inr[4], J2, t)
            _rates_cross_add(V, t, 1.0, L3)
            cross(V, J2, t2)
            _world_inertia_times(C, &inr[4], t2, t)
            for n in range(3):
                L3[n] -= 2.0 * t[n]
            _rates_cross_add(A, T1, 1.0, L3)
            _rates_cross_add(V, T1d, 1.0, L3)
            _world_inertia_times(C, &inr[4], e, t)
            _rates_cross_add(V, t, -1.0, L3)
            cross(V, e, t2)
            _world_inertia_times(C, &inr[4], t2, t)
            for n in range(3):
                L3[n] += t[n]
            _rates_cross_add(J2, L0, 1.0, L3)
            _rates_cross_add(A, L1, 2.0, L3)
            _rates_cross_add(V, L2, 1.0, L3)
            # n̈ = h⃛ + r⃛ × p + 2 r̈ × ṗ + ṙ × p̈ − c̈ × m g,
            # h⃛ = L3 + c3 × p + 3 c2 × ṗ + 3 c1 × p̈ + c × p⃛;  f̈ = p⃛
            for n in range(3):
                F2[n] = L3[n]
                F2[3 + n] = p3[n]
                t[n] = A[3 + n] + g[n]
            _rates_cross_add(c3, p0, 1.0, F2)
            _rates_cross_add(c2, p1, 3.0, F2)
            _rates_cross_add(c1, p2, 3.0, F2)
            _rates_cross_add(c0, p3, 1.0, F2)
            _rates_cross_add(&J2[3], p0, 1.0, F2)
            _rates_cross_add(t, p1, 2.0, F2)
            _rates_cross_add(&V[3], p2, 1.0, F2)
            _rates_cross_add(c2, mg, -1.0, F2)
        if fext != NULL:
            # to the hybrid frame: world  (n − r × f, f), rates by Leibniz with ṙ, r̈;
            # body  Rot f, rates Rot ḟ + Ω W, Rot f̈ + 2Ω Rot ḟ + (Ω̇ + ΩΩ) W
            for k in range(2 + second):
                if fext_frame == 1:
                    rotate_twist(C, &fext[6 * (k * nb + i)], x)
                else:
                    for n in range(6):
                        x[n] = fext[6 * (k * nb + i) + n]
                if k == 0:
                    for n in range(6):
                        X0[n] = x[n]
                elif k == 1:
                    for n in range(6):
                        X1[n] = x[n]
                else:
                    for n in range(6):
                        X2[n] = x[n]
            if fext_frame == 0:
                for n in range(3):
                    t[n] = A[3 + n] + g[n]
                if second:
                    _rates_cross_add(&C[9], &X2[3], -1.0, X2)
                    _rates_cross_add(&V[3], &X1[3], -2.0, X2)
                    _rates_cross_add(t, &X0[3], -1.0, X2)
                _rates_cross_add(&C[9], &X1[3], -1.0, X1)
                _rates_cross_add(&V[3], &X0[3], -1.0, X1)
                _rates_cross_add(&C[9], &X0[3], -1.0, X0)
            elif fext_frame == 1:
                if second:
                    _omega6(V, X1, 2.0, X2)
                    for n in range(6):
                        x[n] = 0.0
                    _omega6(V, X0, 1.0, x)
                    _omega6(V, x, 1.0, X2)
                    _omega6(A, X0, 1.0, X2)
                _omega6(V, X0, 1.0, X1)
            for n in range(6):
                F[n] -= X0[n]
                F1[n] -= X1[n]
                if second:
                    F2[n] -= X2[n]
    # backward pass, leaves to root: n_p += n + d × f and its rates, f_p += f;
    # τ = Sᵀ Rotᵀ W, so with X0 = Rotᵀ W, X1 = Rotᵀ (Ẇ − Ω W),
    # X2 = Rotᵀ (Ẅ − 2Ω Ẇ − Ω̇ W + ΩΩ W) (the rates of Rotᵀ W):
    # τ̇ = Sᵀ X1 + Ṡᵀ X0,  τ̈ = Sᵀ X2 + 2 Ṡᵀ X1 + S̈ᵀ X0
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        S = &d.S[6 * o]
        C = &d.oMi[12 * i]
        V = &d.hv[6 * i]
        A = &d.ha_gf[6 * i]
        F = &d.hf[6 * i]
        F1 = &d.rfd[6 * i]
        F2 = &d.rfdd[6 * i]
        for n in range(6):
            y[n] = F1[n]
        _omega6(V, F, -1.0, y)
        _rotT_twist(C, y, X1)
        subspace_T_times(nvi, S, X1, &tau1[o])
        if second:
            for n in range(6):
                y[n] = F2[n]
                x[n] = 0.0
            _omega6(V, F1, -2.0, y)
            _omega6(A, F, -1.0, y)
            _omega6(V, F, 1.0, x)
            _omega6(V, x, 1.0, y)
            _rotT_twist(C, y, X2)
            subspace_T_times(nvi, S, X2, &tau2[o])
        if m.fast[i] == FAST_NONE and (m.kind[i] == KIND_FREE_SO3R3
                                       or (m.kind[i] == KIND_SCREWS and nvi > 1)):
            _subspace_rates2(m.kind[i], nvi, S, &qd[o], &qdd[o], Sd, Sdd)
            _rotT_twist(C, F, X0)
            for k in range(nvi):
                tau1[o + k] += dot6(&Sd[6 * k], X0)
                if second:
                    tau2[o + k] += 2.0 * dot6(&Sd[6 * k], X1) + dot6(&Sdd[6 * k], X0)
        for k in range(nvi):
            tau1[o + k] += m.armature[o + k] * q3[o + k]
            if second:
                tau2[o + k] += m.armature[o + k] * q4[o + k]
        par = m.parent[i]
        if par < 0:
            continue
        for n in range(3):
            dd[n] = C[9 + n] - d.oMi[12 * par + 9 + n]
            dd1[n] = V[3 + n] - d.hv[6 * par + 3 + n]
            dd2[n] = A[3 + n] - d.ha_gf[6 * par + 3 + n]
        twist_add(&d.hf[6 * par], F)
        _rates_cross_add(dd, &F[3], 1.0, &d.hf[6 * par])
        twist_add(&d.rfd[6 * par], F1)
        _rates_cross_add(dd1, &F[3], 1.0, &d.rfd[6 * par])
        _rates_cross_add(dd, &F1[3], 1.0, &d.rfd[6 * par])
        if second:
            twist_add(&d.rfdd[6 * par], F2)
            _rates_cross_add(dd2, &F[3], 1.0, &d.rfdd[6 * par])
            _rates_cross_add(dd1, &F1[3], 2.0, &d.rfdd[6 * par])
            _rates_cross_add(dd, &F2[3], 1.0, &d.rfdd[6 * par])
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_rates_body(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out = τ̇, out2 = τ̈ (or NULL).  c.a packs (q̈, q⃛[, q⁗]) per sample (stride
    c.sa), c.fext packs (W, Ẇ[, Ẅ]) per sample (stride c.sf)."""
    return rnea_rates_body_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out, c.out2)


cdef int _k_rnea_rates_spatial(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_rates_spatial_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                     c.out2)


cdef int _k_rnea_rates_hybrid(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_rates_hybrid_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                    c.out2)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
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
    cdef cnp.npy_intp dims[1]
    cdef Call c
    cdef kernel_t fn
    cdef cnp.ndarray r1, r2 = None, packed, fk = None
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
    packed = _pack_rows(qa, aa, ja, sa, K, self.nv)
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
    c.a = <double*>cnp.PyArray_DATA(packed)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = K * self.nv
    c.out = <double*>cnp.PyArray_DATA(r1)
    c.out2 = <double*>cnp.PyArray_DATA(r2) if second else NULL
    c.so = self.nv
    c.so2 = self.nv
    self._dispatch(fn, &c, self._batch(qa), data, -1, "inverse_dynamics_rates: τ̇, τ̈")
    return (r1, r2) if second else r1
