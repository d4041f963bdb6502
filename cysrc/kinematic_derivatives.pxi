# Higher kinematic derivatives (Müller 2018, "Screw and Lie group theory in
# multibody dynamics", §2): the partial derivatives of a frame's Jacobian with
# respect to q (along each joint's group) and the body jerks (second time
# derivatives of the twists).
#
# Jacobian derivatives.  Let x_j = (ω_j, v_j) be column j of the frame's Jacobian
# as a screw in world axes about the frame's current origin r_t (the "hybrid"
# column).  Moving q_k along its group moves every body after freedom k rigidly
# by exp(ε x_k), so the screw x_j changes by [x_k, x_j] (Müller 2018, eq. 15) when
# k "transports" j, and not at all otherwise.  k transports j when
#   * k belongs to a body strictly before j's body on the path, or
#   * both belong to the same joint and
#       screw chains:     k comes before j in the chain (earlier screws carry
#                         later ones; J = exp(X₁q₁)⋯exp(X_nq_n)),
#       spherical, SE(3): always (the columns are body-fixed),
#       SO(3)×R³:         j is rotational (the translational columns are fixed
#                         in the joint's reference frame).
# With T = 1 if k transports j and 0 otherwise, the four representations follow
# from how their frame moves with freedom k (r_t moves with v_k, R_t turns with ω_k):
#   spatial (world origin): T [x_k, x_j] moved to the world origin (eq. 15)
#   body:                   (T − 1) Ad_{R_tᵀ} [x_k, x_j] = (1 − T) [J_j, J_k] (eq. 5)
#   hybrid:                 angular T ω_k × ω_j,  linear T ω_k × v_j + (1 − T) ω_j × v_k
#                           (eq. 25: the frame origin moves but does not turn)
#   mixed:                  angular as body, linear as hybrid.
#
# Acceleration derivatives.  About the fixed point r_t in world axes (columns
# x_j as above; the spatial acceleration shifted there), with
#   W_j = Σ_k T(k,j) v_k x_k,   Z_k = Σ_j T(k,j) v_j x_j,   Zᵃ_k = Σ_j T(k,j) a_j x_j,
# J̇_j = [W_j, x_j] and A = Σ_j (x_j a_j + [W_j, x_j] v_j).  Differentiating with
# ∂x_j/∂q_m = T(m,j) [x_m, x_j] (inside W_j too) gives the nested brackets
# T(k,j) (T(m,k) [[x_m, x_k], x_j] + T(m,j) [x_k, [x_m, x_j]]), which regroup as
#   ∂A/∂q_m = [x_m, Zᵃ_m] + Σ_k T(m,k) v_k [Y_k, [x_k, x_m]],    Y = Z − W,
#   ∂A/∂v_m = ∂V/∂q_m + J̇_m = [x_m, Y_m],                       ∂A/∂a_m = x_m.
# The representations, with the frame's V = (ω, ṙ), A = (α, ·), ∂r_t/∂q_m = v_m
# and R_t turning with ω_m:
#   spatial  both moved to the world origin
#   body     R_tᵀ (∂A/∂q_m + [A, x_m]),  R_tᵀ ∂A/∂v_m   (∂ Ad_C⁻¹ = −Ad_C⁻¹ ad_{x_m})
#   hybrid   r̈ = A_lin + ω × ṙ: the linear rows gain α × v_m + dω × ṙ + ω × dṙ
#            ((dω, dṙ) = ∂V/∂q_m = [x_m, Z_m] + (0, ω × v_m)), resp. ω_m × ṙ + ω × v_m
#   mixed    linear rows as hybrid, angular R_tᵀ (∂α/∂q_m + α × ω_m), R_tᵀ ∂α/∂v_m.
#
# Jerks.  Body-fixed recursion (differentiating eqs. 24, 29 once more): with
# the relative twist u = S q̇ of joint i and its rates u̇ = Ṡq̇ + Sq̈,
# ü = S̈q̇ + 2Ṡq̈ + Sq⃛, and A_p' = Ad_{C_{i,p}} V̇_p,
#   V_i = Ad_{C_{i,p}} V_p + u,   V̇_i = A_p' + [V_i, u] + u̇,
#   V̈_i = Ad_{C_{i,p}} V̈_p + [A_p', u] + [V̇_i, u] + [V_i, u̇] + ü,
# using d/dt Ad_{C_{i,p}} X = Ad_{C_{i,p}} Ẋ − ad_u Ad_{C_{i,p}} X.  The other
# representations are the time derivatives of the relations that link the
# accelerations (kinematics.py, _from_body), with V = (ω, v), V̇ = (α, a):
#   spatial  Ad_C (V̈ + [V, V̇])
#   hybrid   (R (ζ + ω × α),  r⃛),  r⃛ = R (j + α × v + ω × a + ω × (a + ω × v))
#   mixed    (ζ, r⃛)                            for V̈ = (ζ, j).


cdef inline bint _transports(int kind, int same_body, int ck, int cj, int oj) noexcept nogil:
    """Whether freedom ck moves column cj of a Jacobian rigidly (see above); oj is
    the first freedom of cj's joint."""
    if not same_body:
        return ck < cj
    if kind == KIND_SCREWS:
        return ck < cj
    if kind == KIND_FREE_SO3R3:
        return cj - oj < 3
    return True


cdef int _frame_columns(ModelCore m, DataC* d, const double* q, int body, int frame,
                        double* Rt, double* rt) noexcept nogil:
    """Path sweep to ``body`` (d.oMi, d.S, d.path), the world pose (Rt, rt) of the
    target (body, or named frame ``frame`` ≥ 0 on it) and in d.hJ its hybrid
    Jacobian columns (world axes about rt) of the path's freedoms.  Returns the
    path length n, or −(i + 1) for a non-unit quaternion of joint i."""
    cdef int n, k, kk, i, o
    cdef double Crel[12]
    cdef const double* C
    n = path_sweep(m, d, q, body)
    if n < 0:
        return n
    C = &d.oMi[12 * body]
    if frame >= 0:
        pose_mul(C, &C[9], &m.foff[frame, 0], &m.foff[frame, 9], Rt, rt)
    else:
        for k in range(9):
            Rt[k] = C[k]
        rt[0] = C[9]; rt[1] = C[10]; rt[2] = C[11]
    for kk in range(n):
        i = d.path[kk]
        o = m.voff[i]
        C = &d.oMi[12 * i]
        for k in range(9):
            Crel[k] = C[k]
        Crel[9] = C[9] - rt[0]; Crel[10] = C[10] - rt[1]; Crel[11] = C[11] - rt[2]
        if m.fast[i] != FAST_NONE:
            if m.nvj[i]:
                spatial_screw_1dof(m.fast[i], &m.X[o, 0], Crel, &d.hJ[6 * o])
        else:
            for k in range(m.nvj[i]):
                twist_Ad(Crel, &Crel[9], &d.S[6 * (o + k)], &d.hJ[6 * (o + k)])
    return n


cdef int jacobian_derivatives_kernel(ModelCore m, DataC* d, const double* q, int body,
                                     int frame, int rep, double* H) noexcept nogil:
    """H (6, nv, nv), H[:, j, k] = ∂J[:, j]/∂q_k of body ``body`` (or named frame
    ``frame`` ≥ 0 on it) in representation rep (0 body, 1 spatial, 2 hybrid,
    3 mixed).  Only entries of freedoms on the path world → body are written (the
    caller zeroes H).  Fills d.oMi and d.S on the path and d.hJ with the frame's
    hybrid Jacobian columns (world axes about the frame's origin) of the path's
    freedoms.  Returns 0 or i + 1 for a non-unit quaternion."""
    cdef int nv = m.nv, n, kk, jj, bi, bk, o, oj, ck, cj, a, nvj
    cdef Py_ssize_t nn = <Py_ssize_t>nv * nv, off
    cdef bint T
    cdef double Rt[9]
    cdef double rt[3]
    cdef double br[6]
    cdef double D[6]
    cdef double t[3]
    cdef const double* xj
    cdef const double* xk
    n = _frame_columns(m, d, q, body, frame, Rt, rt)
    if n < 0:
        return -n
    for jj in range(n):
        bi = d.path[jj]
        oj = m.voff[bi]
        nvj = m.nvj[bi]
        for cj in range(oj, oj + nvj):
            xj = &d.hJ[6 * cj]
            for kk in range(n):
                bk = d.path[kk]
                o = m.voff[bk]
                for ck in range(o, o + m.nvj[bk]):
                    xk = &d.hJ[6 * ck]
                    T = _transports(m.kind[bi], bk == bi, ck, cj, oj)
                    if rep == 1:
                        if not T:
                            continue                # H was zeroed
                        twist_bracket(xk, xj, D)
                        cross(rt, D, t)             # about the world origin
                        D[3] += t[0]; D[4] += t[1]; D[5] += t[2]
                    elif rep == 0:
                        if T:
                            continue
                        twist_bracket(xj, xk, br)
                        rotT_vec(Rt, br, D)
                        rotT_vec(Rt, &br[3], &D[3])
                    else:
                        if T:
                            cross(xk, xj, br)
                            cross(xk, &xj[3], &D[3])
                        else:
                            br[0] = 0.0; br[1] = 0.0; br[2] = 0.0
                            cross(xj, &xk[3], &D[3])
                        if rep == 2:
                            D[0] = br[0]; D[1] = br[1]; D[2] = br[2]
                        elif T:
                            D[0] = 0.0; D[1] = 0.0; D[2] = 0.0
                        else:
                            cross(xj, xk, br)
                            rotT_vec(Rt, br, D)
                    off = <Py_ssize_t>cj * nv + ck
                    for a in range(6):
                        H[a * nn + off] = D[a]
    return 0


cdef int frame_acceleration_derivatives_kernel(ModelCore m, DataC* d, const double* q,
                                               const double* qd, const double* qdd, int body,
                                               int frame, int rep, double* dq, double* dv,
                                               double* da, bint velocity=False) noexcept nogil:
    """(∂A/∂q, ∂A/∂v, ∂A/∂a), each (6, nv) row-major, of the twist derivative A of
    body ``body`` (or named frame ``frame`` ≥ 0 on it) in representation rep
    (0 body, 1 spatial, 2 hybrid, 3 mixed), gravity not included (see the header).
    ``velocity``: instead dv = ∂V/∂q and da = ∂V/∂v = J of the twist V (dq and
    qdd unused): [x_m, Z_m] about r_t, and for the representations the terms of
    the moving frame — spatial: moved to the world origin; body: R_tᵀ([x_m, Z_m] +
    [V, x_m]); hybrid: ṙ gains ω × v_m; mixed: angular as body, linear as hybrid.
    Only the columns of the path's freedoms are written (the caller zeroes the
    outputs).  Fills d.oMi, d.S, d.hJ on the path and uses d.dYPX as scratch:
    per freedom Y = Z − W, Zᵃ, Z.  Returns 0 or i + 1 for a non-unit quaternion."""
    cdef int nv = m.nv, n, jj, kk, bj, bk, oj, ok, cj, ck, a
    cdef double Rt[9]
    cdef double rt[3]
    cdef double V[6]            # hybrid twist (ω, ṙ) of the frame
    cdef double A[6]            # its spatial acceleration about rt: (α, a_s + α × rt)
    cdef double W[6]
    cdef double D[6]
    cdef double E[6]
    cdef double G[6]
    cdef double t6[6]
    cdef double u6[6]
    cdef double t[3]
    cdef double t2[3]
    cdef double* Y
    cdef const double* xj
    cdef const double* xk
    cdef const double* xm
    n = _frame_columns(m, d, q, body, frame, Rt, rt)
    if n < 0:
        return -n
    for a in range(6):
        V[a] = 0.0
        A[a] = 0.0
    for jj in range(n):
        bj = d.path[jj]
        for cj in range(m.voff[bj], m.voff[bj] + m.nvj[bj]):
            for a in range(18):
                d.dYPX[18 * cj + a] = 0.0
    # pass 1: W_j = Σ_k T(k,j) v_k x_k; Z_k = Σ_j T(k,j) v_j x_j, Zᵃ_k likewise with a_j
    for jj in range(n):
        bj = d.path[jj]
        oj = m.voff[bj]
        for cj in range(oj, oj + m.nvj[bj]):
            xj = &d.hJ[6 * cj]
            for a in range(6):
                W[a] = 0.0
            for kk in range(n):
                bk = d.path[kk]
                for ck in range(m.voff[bk], m.voff[bk] + m.nvj[bk]):
                    if not _transports(m.kind[bj], bk == bj, ck, cj, oj):
                        continue
                    xk = &d.hJ[6 * ck]
                    Y = &d.dYPX[18 * ck]
                    for a in range(6):
                        W[a] += qd[ck] * xk[a]
                        Y[6 + a] += qdd[cj] * xj[a]
                        Y[12 + a] += qd[cj] * xj[a]
            twist_bracket(W, xj, t6)                # J̇_j = [W_j, x_j]
            Y = &d.dYPX[18 * cj]
            for a in range(6):
                Y[a] = -W[a]
                V[a] += qd[cj] * xj[a]
                A[a] += qdd[cj] * xj[a] + qd[cj] * t6[a]
    for jj in range(n):
        bj = d.path[jj]
        for cj in range(m.voff[bj], m.voff[bj] + m.nvj[bj]):
            Y = &d.dYPX[18 * cj]
            for a in range(6):
                Y[a] += Y[12 + a]
    # pass 2, per freedom m: D = ∂A_s/∂q_m and E = ∂A_s/∂v_m about rt
    for jj in range(n):
        bj = d.path[jj]
        oj = m.voff[bj]
        for cj in range(oj, oj + m.nvj[bj]):          # cj plays m
            xm = &d.hJ[6 * cj]
            Y = &d.dYPX[18 * cj]
            if velocity:
                _velocity_column(xm, &Y[12], V, Rt, rt, rep, t6, G)
                for a in range(6):
                    dv[a * nv + cj] = t6[a]
                    da[a * nv + cj] = G[a]
                continue
            twist_bracket(xm, &Y[6], D)
            twist_bracket(xm, Y, E)
            for kk in range(n):
                bk = d.path[kk]
                ok = m.voff[bk]
                for ck in range(ok, ok + m.nvj[bk]):
                    if qd[ck] == 0.0 or not _transports(m.kind[bk], bk == bj, cj, ck, ok):
                        continue
                    xk = &d.hJ[6 * ck]
                    twist_bracket(xk, xm, t6)
                    twist_bracket(&d.dYPX[18 * ck], t6, u6)
                    for a in range(6):
                        D[a] += qd[ck] * u6[a]
            if rep == 1:                              # about the world origin
                cross(rt, D, t)
                D[3] += t[0]; D[4] += t[1]; D[5] += t[2]
                cross(rt, E, t)
                E[3] += t[0]; E[4] += t[1]; E[5] += t[2]
                for a in range(6):
                    G[a] = xm[a]
                cross(rt, xm, t)
                G[3] += t[0]; G[4] += t[1]; G[5] += t[2]
            elif rep == 0:                            # Ad_{C_t}⁻¹ (D + [A, x_m]), ...
                twist_bracket(A, xm, t6)
                twist_add(D, t6)
                for a in range(6):
                    t6[a] = D[a]
                rotT_vec(Rt, t6, D)
                rotT_vec(Rt, &t6[3], &D[3])
                for a in range(6):
                    t6[a] = E[a]
                rotT_vec(Rt, t6, E)
                rotT_vec(Rt, &t6[3], &E[3])
                rotT_vec(Rt, xm, G)
                rotT_vec(Rt, &xm[3], &G[3])
            else:
                # r̈ = (A linear) + ω × ṙ; ∂ rt/∂q_m = v_m; (dω, dṙ) = ∂V/∂q_m
                twist_bracket(xm, &Y[12], t6)
                cross(V, &xm[3], t)
                t6[3] += t[0]; t6[4] += t[1]; t6[5] += t[2]
                cross(A, &xm[3], t)                   # α × v_m
                cross(t6, &V[3], t2)                  # dω × ṙ
                D[3] += t[0] + t2[0]; D[4] += t[1] + t2[1]; D[5] += t[2] + t2[2]
                cross(V, &t6[3], t)                   # ω × dṙ
                D[3] += t[0]; D[4] += t[1]; D[5] += t[2]
                cross(xm, &V[3], t)                   # ω_m × ṙ
                cross(V, &xm[3], t2)                  # ω × v_m
                E[3] += t[0] + t2[0]; E[4] += t[1] + t2[1]; E[5] += t[2] + t2[2]
                for a in range(6):
                    G[a] = xm[a]
                if rep == 3:                          # angular rows: Rtᵀ (·), Rtᵀ rotating
                    cross(A, xm, t)                   # α × ω_m
                    D[0] += t[0]; D[1] += t[1]; D[2] += t[2]
                    for a in range(3):
                        t[a] = D[a]
                    rotT_vec(Rt, t, D)
                    for a in range(3):
                        t[a] = E[a]
                    rotT_vec(Rt, t, E)
                    rotT_vec(Rt, xm, G)
            for a in range(6):
                dq[a * nv + cj] = D[a]
                dv[a * nv + cj] = E[a]
                da[a * nv + cj] = G[a]
    return 0


cdef inline void _velocity_column(const double* xm, const double* Zm, const double* V,
                                  const double* Rt, const double* rt, int rep, double* P,
                                  double* G) noexcept nogil:
    """Column m of ∂V/∂q (P) and of J (G) in representation rep, from the column x_m
    and Z_m about r_t (world axes) and the frame's hybrid twist V = (ω, ṙ)."""
    cdef double t6[6]
    cdef double t[3]
    cdef int a
    twist_bracket(xm, Zm, P)                          # ∂/∂q_m about the fixed point r_t
    for a in range(6):
        G[a] = xm[a]
    if rep == 1:                                      # about the world origin
        cross(rt, P, t)
        P[3] += t[0]; P[4] += t[1]; P[5] += t[2]
        cross(rt, xm, t)
        G[3] += t[0]; G[4] += t[1]; G[5] += t[2]
    elif rep == 0:                                    # R_tᵀ (P + [V, x_m])
        twist_bracket(V, xm, t6)
        twist_add(t6, P)
        rotT_vec(Rt, t6, P)
        rotT_vec(Rt, &t6[3], &P[3])
        rotT_vec(Rt, xm, G)
        rotT_vec(Rt, &xm[3], &G[3])
    else:                                             # ṙ of the moving origin: + ω × v_m
        cross(V, &xm[3], t)
        P[3] += t[0]; P[4] += t[1]; P[5] += t[2]
        if rep == 3:                                  # angular rows: R_tᵀ (dω + ω × ω_m)
            cross(V, xm, t)
            for a in range(3):
                t[a] += P[a]
            rotT_vec(Rt, t, P)
            rotT_vec(Rt, xm, G)


cdef inline void _subspace_rates2(int kind, int nv, const double* S, const double* qd,
                                  const double* qdd, double* Sd, double* Sdd) noexcept nogil:
    """Ṡ and S̈ (nv columns of 6 each) of a joint's body-fixed motion subspace:
    screw chains Ṡ_j = [S_j, L_j], S̈_j = [Ṡ_j, L_j] + [S_j, L̇_j] with
    L_j = Σ_{l>j} S_l q̇_l; SO(3)×R³ translational columns u_k = Rᵀe_k:
    u̇_k = −ω × u_k, ü_k = −ω̇ × u_k + ω × (ω × u_k); zero otherwise."""
    cdef double L[6]
    cdef double Ld[6]
    cdef double t6[6]
    cdef double t[3]
    cdef double t2[3]
    cdef int j, n
    for n in range(6 * nv):
        Sd[n] = 0.0
        Sdd[n] = 0.0
    if kind == KIND_SCREWS and nv > 1:
        for n in range(6):
            L[n] = 0.0
            Ld[n] = 0.0
        for j in range(nv - 1, -1, -1):
            twist_bracket(&S[6 * j], L, &Sd[6 * j])
            twist_bracket(&Sd[6 * j], L, &Sdd[6 * j])
            twist_bracket(&S[6 * j], Ld, t6)
            twist_add(&Sdd[6 * j], t6)
            for n in range(6):
                L[n] += S[6 * j + n] * qd[j]
                Ld[n] += Sd[6 * j + n] * qd[j] + S[6 * j + n] * qdd[j]
    elif kind == KIND_FREE_SO3R3:
        for j in range(3):
            cross(qd, &S[6 * (3 + j) + 3], t)          # ω × u
            cross(qd, t, t2)                             # ω × (ω × u)
            Sd[6 * (3 + j) + 3] = -t[0]
            Sd[6 * (3 + j) + 4] = -t[1]
            Sd[6 * (3 + j) + 5] = -t[2]
            cross(qdd, &S[6 * (3 + j) + 3], t)         # ω̇ × u
            Sdd[6 * (3 + j) + 3] = t2[0] - t[0]
            Sdd[6 * (3 + j) + 4] = t2[1] - t[1]
            Sdd[6 * (3 + j) + 5] = t2[2] - t[2]


cdef int body_jerks_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                           const double* qdd, const double* qddd, int rep,
                           double* out) noexcept nogil:
    """Second time derivatives of the twists of all bodies (nb, 6) in representation
    rep (0 body, 1 spatial, 2 hybrid, 3 mixed), gravity not included.  Fills d.oMi,
    d.S, d.v and d.a (body_motion_kernel).  Returns 0 or i + 1 for a non-unit
    quaternion."""
    cdef int nb = m.nb, i, n, k, par, o, nvi, kind
    cdef double Sd[36]
    cdef double Sdd[36]
    cdef double u[6]
    cdef double ud[6]
    cdef double udd[6]
    cdef double Ap[6]
    cdef double t6[6]
    cdef double w[6]
    cdef double s
    cdef double t[3]
    cdef double* Jk
    cdef const double* V
    cdef const double* A
    cdef const double* C
    cdef const double* S
    cdef int bad = body_motion_kernel(m, d, q, qd, qdd)
    # the recursion, root to leaves (the acceleration recursion differentiated once
    # more): u = S q̇, u̇ = Ṡ q̇ + S q̈, ü = S̈ q̇ + 2 Ṡ q̈ + S q⃛ of joint i,
    #   V̈_i = Ad_{T_i}⁻¹ V̈_p + [Ad_{T_i}⁻¹ V̇_p + V̇_i, u] + [V_i, u̇] + ü
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        kind = m.kind[i]
        S = &d.S[6 * o]
        for n in range(6):
            u[n] = 0.0
            ud[n] = 0.0
            udd[n] = 0.0
        if m.fast[i] == FAST_NONE:
            _subspace_rates2(kind, nvi, S, &qd[o], &qdd[o], Sd, Sdd)
            for k in range(nvi):
                for n in range(6):
                    s = S[6 * k + n]
                    u[n] += s * qd[o + k]
                    ud[n] += Sd[6 * k + n] * qd[o + k] + s * qdd[o + k]
                    udd[n] += (Sdd[6 * k + n] * qd[o + k] + 2.0 * Sd[6 * k + n] * qdd[o + k]
                               + s * qddd[o + k])
        else:
            for k in range(nvi):
                for n in range(6):
                    s = S[6 * k + n]
                    u[n] += s * qd[o + k]
                    ud[n] += s * qdd[o + k]
                    udd[n] += s * qddd[o + k]
        V = &d.v[6 * i]
        A = &d.a[6 * i]
        Jk = &out[6 * i]
        par = m.parent[i]
        if par < 0:
            for n in range(6):
                Jk[n] = udd[n]
            continue
        C = &d.liMi[12 * i]
        twist_Ad_inv(C, &C[9], &out[6 * par], Jk)
        twist_Ad_inv(C, &C[9], &d.a[6 * par], Ap)
        for n in range(6):
            Ap[n] += A[n]                       # [A_p', u] + [V̇_i, u] = [A_p' + V̇_i, u]
        twist_bracket(Ap, u, t6)
        twist_add(Jk, t6)
        twist_bracket(V, ud, t6)
        twist_add(Jk, t6)
        twist_add(Jk, udd)
    if rep == 0:
        return bad
    # the representation: spatial Ad_C (V̈ᵇ + [Vᵇ, V̇ᵇ]); hybrid / mixed (ω̈, r⃛)
    for i in range(nb):
        V = &d.v[6 * i]
        A = &d.a[6 * i]
        C = &d.oMi[12 * i]
        Jk = &out[6 * i]
        if rep == 1:
            twist_bracket(V, A, t6)
            twist_add(t6, Jk)
            twist_Ad(C, &C[9], t6, Jk)
            continue
        # w = ζ + ω × α (angular), j + α × v + ω × a + ω × (a + ω × v) (linear)
        cross(V, A, w)
        for n in range(3):
            w[n] += Jk[n]
        cross(V, &V[3], t)
        for n in range(3):
            t[n] += A[3 + n]
        cross(V, t, &w[3])                      # ω × (a + ω × v)
        cross(A, &V[3], t)
        for n in range(3):
            w[3 + n] += Jk[3 + n] + t[n]
        cross(V, &A[3], t)
        for n in range(3):
            w[3 + n] += t[n]
        rot_vec(C, &w[3], &Jk[3])
        if rep == 2:
            rot_vec(C, w, t)
            Jk[0] = t[0]; Jk[1] = t[1]; Jk[2] = t[2]
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_jacobian_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (6, nv, nv): ∂J/∂q of target c.body / c.frame in representation c.rep."""
    return jacobian_derivatives_kernel(m, d, c.q, c.body, c.frame, c.rep, c.out)


cdef int _k_frame_acceleration_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out / out2 / out3 (6, nv): ∂A/∂q, ∂A/∂v, ∂A/∂a of target c.body / c.frame."""
    return frame_acceleration_derivatives_kernel(m, d, c.q, c.v, c.a, c.body, c.frame, c.rep,
                                                 c.out, c.out2, c.out3)


cdef int _k_frame_velocity_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out / out2 (6, nv): ∂V/∂q, ∂V/∂v = J of target c.body / c.frame."""
    return frame_acceleration_derivatives_kernel(m, d, c.q, c.v, c.v, c.body, c.frame, c.rep,
                                                 NULL, c.out, c.out2, True)


cdef int _k_body_jerks(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (nb, 6) body jerks at (q, v, v̇ = c.a, v̈ = c.fext: the call's fourth input
    rides in the wrench slot, stride c.sf)."""
    return body_jerks_kernel(m, d, c.q, c.v, c.a, c.fext, c.rep, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def jacobian_derivatives(ModelCore self, q, frame, representation="body", data=None, out=None):
    """Partial derivatives of a body's or frame's Jacobian with respect to q.

    ``H[:, j, k] = ∂J[:, j]/∂q_k`` with ``J = jacobian(q, frame,
    representation)``, the derivative taken along joint k's group:
    ``H @ δ = d/dε J(integrate(q, ε δ))`` at ε = 0 (so the last axis is nv wide
    also for quaternion joints).  Closed form from Lie brackets of the columns
    (Müller 2018, eqs. 5, 15, 25; cysrc/kinematic_derivatives.pxi); the same
    layout as Pinocchio's ``getJointKinematicHessian``.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    frame : str or int
        A body name, a named frame or a body index (as in :meth:`jacobian`).
    representation : {"body", "spatial", "hybrid", "mixed"}
        As in :meth:`jacobian` (Pinocchio LOCAL, WORLD, LOCAL_WORLD_ALIGNED).
    data, out : as in :meth:`forward_kinematics` (``out`` (6, nv, nv) or
        (N, 6, nv, nv))

    Returns
    -------
    ndarray, shape (6, nv, nv) or (N, 6, nv, nv)
        Units of J per rad or per m of the coordinate k.  Entries of freedoms
        off the path world → frame are zero.
    """
    return self._frame_call(_k_jacobian_derivatives, q, frame, representation, data, out,
                            3, "jacobian_derivatives: ∂J/∂q")


def _frame_acceleration_derivatives(ModelCore self, q, v, a, frame, representation, data, out,
                                    bint velocity=False):
    """Binding of Model.frame_acceleration_derivatives (see there); with
    ``velocity``, of Model.frame_velocity_derivatives (a unused, two outputs)."""
    cdef bint vel = velocity
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef cnp.ndarray aa = va if vel else self._like(qa, a, self.nv, "a")
    cdef tuple tgt = self._target(frame)
    cdef cnp.npy_intp dims[2]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    rep = self._rep_code(representation)
    dims[0] = 6; dims[1] = self.nv
    res = self._outputs(out, qa, 2, dims, ("dV_dq", "dV_dv") if vel else
                        ("dA_dq", "dA_dv", "dA_da"))
    for r in res:
        memset(cnp.PyArray_DATA(r), 0, cnp.PyArray_NBYTES(r))
    if tgt[0] < 0 or self.nv == 0:              # attached to the world
        if data is not None:
            self._data(data)
        return res
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.a = <double*>cnp.PyArray_DATA(aa)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.body = tgt[0]
    c.frame = tgt[1]
    c.rep = rep
    c.out = <double*>cnp.PyArray_DATA(res[0])
    c.out2 = <double*>cnp.PyArray_DATA(res[1])
    c.out3 = NULL if vel else <double*>cnp.PyArray_DATA(res[2])
    c.so = 6 * self.nv
    c.so2 = c.so
    c.so3 = c.so
    if vel:
        self._dispatch(_k_frame_velocity_derivatives, &c, self._batch(qa), data,
                       self.path_nv[c.body], "frame_velocity_derivatives")
    else:
        self._dispatch(_k_frame_acceleration_derivatives, &c, self._batch(qa), data,
                       self.path_nv[c.body], "frame_acceleration_derivatives")
    return res


def body_jerks(ModelCore self, q, v, a, j, representation="body", data=None, out=None):
    """Time derivatives of :meth:`body_accelerations`: the second time
    derivatives of the twists of all bodies, gravity not included.

    Recursive (Müller 2018, §2: the acceleration recursion differentiated once
    more), body-fixed, then converted per body (cysrc/kinematic_derivatives.pxi).

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a, j : array_like, shape (nv,) or (N, nv)
        Velocities, their first (v̇ = a) and second (v̈ = j) time derivatives.
    representation : {"body", "spatial", "hybrid", "mixed"}
        As in ``body_accelerations``: "body" V̈ᵇ; "spatial" d²/dt² (Ad_C Vᵇ);
        "hybrid" (d²ω/dt² in world axes, r⃛); "mixed" (d²ωᵇ/dt², r⃛).
    data, out : as in :meth:`forward_kinematics` (``out`` (nb, 6) or (N, nb, 6))

    Returns
    -------
    ndarray, shape (nb, 6) or (N, nb, 6)
        Angular first: rad/s³ and m/s³.
    """
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef cnp.ndarray aa = self._like(qa, a, self.nv, "a")
    cdef cnp.ndarray ja = self._like(qa, j, self.nv, "j")
    cdef cnp.npy_intp dims[2]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    rep = self._rep_code(representation)
    dims[0] = self.nb; dims[1] = 6
    cdef cnp.ndarray res = self._output(out, qa, 2, dims)
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.a = <double*>cnp.PyArray_DATA(aa)
    c.fext = <double*>cnp.PyArray_DATA(ja)      # the jerks v̈ (see _k_body_jerks)
    c.rep = rep
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.sf = self.nv
    c.out = <double*>cnp.PyArray_DATA(res)
    c.so = 6 * self.nb
    self._dispatch(_k_body_jerks, &c, self._batch(qa), data, -1, "body_jerks: the jerks")
    return res
