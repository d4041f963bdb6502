# τ̇ and τ̈ by the spatial recursion (Müller 2018, §6.3; docs/algorithms.md,
# "Inverse-dynamics rates"): twists, their rates and wrenches in frame s (world
# axes about the subtree root's current origin, held fixed in time); the body's
# momentum Π = Mˢ V with Ṁˢ = −ad_Vᵀ Mˢ − Mˢ ad_V; subtree sums add without
# transformation.  Entry and shared helpers: rnea_rates.pxi.


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


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_rates_spatial(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_rates_spatial_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out,
                                     c.out2)
