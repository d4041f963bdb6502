# τ̇ and τ̈ by the hybrid recursion (Müller 2018, §6.3; docs/algorithms.md,
# "Inverse-dynamics rates"): (ω, ṙ) at each body origin in world axes and their
# rates, Newton–Euler about the moving body origin, moments moved to the parent
# by n + d × f.  Entry and shared helpers: rnea_rates.pxi.


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
cdef int _k_rnea_rates_hybrid(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_rates_hybrid_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                    c.out2)
