# Forward dynamics by the O(n) articulated-body algorithm in hybrid form
# (Featherstone's ABA written with the hybrid twists of Müller 2018, eqs. 75-76:
# twists (ω, ṙ) and wrenches at each body origin, in world axes).  All
# quantities share the world axes, so carrying an articulated inertia to the
# parent is a shift of reference point only, never a rotation:
#   pass 1: V_i = Ad_{r_{i,p}} V_p + ⁰X_i q̇_i,
#           c_i = ad_{(0, ṙ_p − ṙ_i)} V_p + ad_{Vʷ_i} ⁰X_i q̇_i + Ad_{R_i} Ṡ_i q̇_i,
#           Iᴬ_i = Mʰ_i,  pᴬ_i = ad_{Vʷ_i} Mʰ_i Vʷ_i − W_i^ext
#   pass 2: U = Iᴬ ⁰X, D = ⁰Xᵀ U + armature, u = τ − ⁰Xᵀ pᴬ,
#           Iᵃ = Iᴬ − U D⁻¹ Uᵀ,  pᵃ = pᴬ + Iᵃ c + U D⁻¹ u,
#           Iᴬ_p += Ad_{r_{i,p}}ᵀ Iᵃ Ad_{r_{i,p}},  pᴬ_p += Ad_{r_{i,p}}ᵀ pᵃ
#   pass 3: a'_i = Ad_{r_{i,p}} a_p + c_i,  q̈_i = D⁻¹ (u − Uᵀ a'_i),  a_i = a'_i + ⁰X q̈_i
# with r_{i,p} = r_p − r_i and gravity as the base acceleration (0, −g).

cdef inline Py_ssize_t aba_ws_size(int nb, int nv) noexcept nogil:
    return 63 * <Py_ssize_t>nb + 19 * <Py_ssize_t>(nv if nv > 0 else 1) + 36


# Articulated inertias are symmetric 6×6 matrices I = [[A, B], [Bᵀ, C]] stored
# packed in 21 doubles: A upper triangle (a00 a01 a02 a11 a12 a22), B row-major
# (9), C upper triangle (6).
cdef inline void sym6_apply(const double* P, const double* x, double* y) noexcept nogil:
    """y = I x for a packed symmetric 6×6 I."""
    cdef const double* A = P
    cdef const double* B = &P[6]
    cdef const double* C = &P[15]
    y[0] = (A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
            + B[0] * x[3] + B[1] * x[4] + B[2] * x[5])
    y[1] = (A[1] * x[0] + A[3] * x[1] + A[4] * x[2]
            + B[3] * x[3] + B[4] * x[4] + B[5] * x[5])
    y[2] = (A[2] * x[0] + A[4] * x[1] + A[5] * x[2]
            + B[6] * x[3] + B[7] * x[4] + B[8] * x[5])
    y[3] = (B[0] * x[0] + B[3] * x[1] + B[6] * x[2]
            + C[0] * x[3] + C[1] * x[4] + C[2] * x[5])
    y[4] = (B[1] * x[0] + B[4] * x[1] + B[7] * x[2]
            + C[1] * x[3] + C[3] * x[4] + C[4] * x[5])
    y[5] = (B[2] * x[0] + B[5] * x[1] + B[8] * x[2]
            + C[2] * x[3] + C[4] * x[4] + C[5] * x[5])


cdef inline void sym6_apply_ang(const double* P, const double* x, double* y) noexcept nogil:
    """y = I (x, 0): the product with a purely angular 6-vector."""
    cdef const double* A = P
    cdef const double* B = &P[6]
    y[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    y[1] = A[1] * x[0] + A[3] * x[1] + A[4] * x[2]
    y[2] = A[2] * x[0] + A[4] * x[1] + A[5] * x[2]
    y[3] = B[0] * x[0] + B[3] * x[1] + B[6] * x[2]
    y[4] = B[1] * x[0] + B[4] * x[1] + B[7] * x[2]
    y[5] = B[2] * x[0] + B[5] * x[1] + B[8] * x[2]


cdef inline void sym6_unpack(const double* P, double* I) noexcept nogil:
    """Full row-major 6×6 from packed."""
    cdef int a, b
    I[0] = P[0]; I[1] = P[1]; I[2] = P[2]
    I[6] = P[1]; I[7] = P[3]; I[8] = P[4]
    I[12] = P[2]; I[13] = P[4]; I[14] = P[5]
    I[21] = P[15]; I[22] = P[16]; I[23] = P[17]
    I[27] = P[16]; I[28] = P[18]; I[29] = P[19]
    I[33] = P[17]; I[34] = P[19]; I[35] = P[20]
    for a in range(3):
        for b in range(3):
            I[6 * a + 3 + b] = P[6 + 3 * a + b]
            I[6 * (3 + b) + a] = P[6 + 3 * a + b]


cdef inline void sym6_pack(const double* I, double* P) noexcept nogil:
    """Packed from a full row-major symmetric 6×6 (upper triangle read)."""
    cdef int a, b
    P[0] = I[0]; P[1] = I[1]; P[2] = I[2]; P[3] = I[7]; P[4] = I[8]; P[5] = I[14]
    for a in range(3):
        for b in range(3):
            P[6 + 3 * a + b] = I[6 * a + 3 + b]
    P[15] = I[21]; P[16] = I[22]; P[17] = I[23]; P[18] = I[28]; P[19] = I[29]; P[20] = I[35]


cdef inline void sym6_shift_to_parent(const double* d, const double* P,
                                      double* out) noexcept nogil:
    """out += Ad_dᵀ I Ad_d with Ad_d = [[1, 0], [d̂, 1]], d = r_p − r_i: a packed
    symmetric inertia about the child origin moved to the parent origin (same axes).
    A' = A + B d̂ − d̂ Bᵀ − d̂ C d̂,  B' = B − d̂ C,  C' = C."""
    cdef const double* A = P
    cdef const double* B = &P[6]
    cdef const double* C = &P[15]
    cdef double E[9]      # d̂ C
    cdef double G[9]      # B d̂
    cdef double dx = d[0], dy = d[1], dz = d[2]
    cdef double c00 = C[0], c01 = C[1], c02 = C[2], c11 = C[3], c12 = C[4], c22 = C[5]
    cdef int a
    # rows of d̂ C: (dy C[2,:] − dz C[1,:], dz C[0,:] − dx C[2,:], dx C[1,:] − dy C[0,:])
    E[0] = dy * c02 - dz * c01; E[1] = dy * c12 - dz * c11; E[2] = dy * c22 - dz * c12
    E[3] = dz * c00 - dx * c02; E[4] = dz * c01 - dx * c12; E[5] = dz * c02 - dx * c22
    E[6] = dx * c01 - dy * c00; E[7] = dx * c11 - dy * c01; E[8] = dx * c12 - dy * c02
    for a in range(3):    # row a of B d̂ is B[a, :] × d
        G[3 * a] = B[3 * a + 1] * dz - B[3 * a + 2] * dy
        G[3 * a + 1] = B[3 * a + 2] * dx - B[3 * a] * dz
        G[3 * a + 2] = B[3 * a] * dy - B[3 * a + 1] * dx
    # −d̂ Bᵀ = (B d̂)ᵀ; d̂ C d̂ = E d̂ (symmetric: upper triangle only)
    out[0] += A[0] + 2.0 * G[0] - (E[1] * dz - E[2] * dy)
    out[1] += A[1] + G[1] + G[3] - (E[2] * dx - E[0] * dz)
    out[2] += A[2] + G[2] + G[6] - (E[0] * dy - E[1] * dx)
    out[3] += A[3] + 2.0 * G[4] - (E[5] * dx - E[3] * dz)
    out[4] += A[4] + G[5] + G[7] - (E[3] * dy - E[4] * dx)
    out[5] += A[5] + 2.0 * G[8] - (E[6] * dy - E[7] * dx)
    for a in range(9):
        out[6 + a] += B[a] - E[a]
    for a in range(6):
        out[15 + a] += C[a]


cdef inline void sym6_rigid(double mass, const double* c, const double* Io,
                            double* P) noexcept nogil:
    """Packed body inertia [[Io, m ĉ], [m ĉᵀ, m 1]] (Io symmetric, full 3×3 read)."""
    P[0] = Io[0]; P[1] = Io[1]; P[2] = Io[2]; P[3] = Io[4]; P[4] = Io[5]; P[5] = Io[8]
    P[6] = 0.0;             P[7] = -mass * c[2];   P[8] = mass * c[1]
    P[9] = mass * c[2];     P[10] = 0.0;           P[11] = -mass * c[0]
    P[12] = -mass * c[1];   P[13] = mass * c[0];   P[14] = 0.0
    P[15] = mass; P[16] = 0.0; P[17] = 0.0; P[18] = mass; P[19] = 0.0; P[20] = mass


cdef inline int small_cholesky(int k, double* D, double scale) noexcept nogil:
    """In-place lower Cholesky factor of the k × k SPD matrix D (row-major).
    Returns 1 if a pivot is ≤ 1e-13 · scale (singular articulated inertia)."""
    cdef int a, b, c
    cdef double s
    for a in range(k):
        for b in range(a + 1):
            s = D[k * a + b]
            for c in range(b):
                s -= D[k * a + c] * D[k * b + c]
            if a == b:
                if s <= 1e-13 * scale:
                    return 1
                D[k * a + a] = sqrt(s)
            else:
                D[k * a + b] = s / D[k * b + b]
    return 0


cdef inline void small_cho_solve(int k, const double* L, double* x) noexcept nogil:
    """x <- (L Lᵀ)⁻¹ x."""
    cdef int a, c
    for a in range(k):
        for c in range(a):
            x[a] -= L[k * a + c] * x[c]
        x[a] /= L[k * a + a]
    for a in range(k - 1, -1, -1):
        for c in range(a + 1, k):
            x[a] -= L[k * c + a] * x[c]
        x[a] /= L[k * a + a]


cdef inline int _aba_backward_1dof(ModelCore m, int i, int o, const double* tau,
                                   const double* Cw, const double* S, double* U,
                                   double* Dl, double* u, double* IA, double* pA,
                                   const double* cb, double scale) noexcept nogil:
    """Pass 2 for a joint with one freedom (D scalar; Dl[6 o] = 1/D)."""
    cdef const double* s6 = &S[6 * o]
    cdef double* Ui = &U[6 * o]
    cdef double* I = &IA[21 * i]
    cdef double Ia[21]
    cdef double h[6]
    cdef double D, Dinv, ud
    cdef int a, b, n, par
    cdef bint ang = s6[3] == 0.0 and s6[4] == 0.0 and s6[5] == 0.0
    if ang:
        # a rotation about an axis through the body origin (most robot joints)
        sym6_apply_ang(I, s6, Ui)
        D = s6[0] * Ui[0] + s6[1] * Ui[1] + s6[2] * Ui[2] + m.armature[o]
        u[o] = tau[o] - (s6[0] * pA[6 * i] + s6[1] * pA[6 * i + 1] + s6[2] * pA[6 * i + 2])
    else:
        sym6_apply(I, s6, Ui)
        D = (s6[0] * Ui[0] + s6[1] * Ui[1] + s6[2] * Ui[2] + s6[3] * Ui[3] + s6[4] * Ui[4]
             + s6[5] * Ui[5]) + m.armature[o]
        u[o] = tau[o] - (s6[0] * pA[6 * i] + s6[1] * pA[6 * i + 1] + s6[2] * pA[6 * i + 2]
                         + s6[3] * pA[6 * i + 3] + s6[4] * pA[6 * i + 4] + s6[5] * pA[6 * i + 5])
    if D <= 1e-13 * (scale if scale > 0.0 else 1e-300):
        return 1
    Dinv = 1.0 / D
    Dl[6 * o] = Dinv
    par = m.parent[i]
    if par < 0:
        return 0
    # Iᵃ = Iᴬ − U D⁻¹ Uᵀ (packed)
    n = 0
    for a in range(3):
        for b in range(a, 3):
            Ia[n] = I[n] - Ui[a] * Ui[b] * Dinv
            n += 1
    for a in range(3):
        for b in range(3):
            Ia[6 + 3 * a + b] = I[6 + 3 * a + b] - Ui[a] * Ui[3 + b] * Dinv
    n = 15
    for a in range(3):
        for b in range(a, 3):
            Ia[n] = I[n] - Ui[3 + a] * Ui[3 + b] * Dinv
            n += 1
    ud = u[o] * Dinv
    sym6_apply(Ia, &cb[6 * i], h)
    for a in range(6):
        h[a] += pA[6 * i + a] + Ui[a] * ud
    _carry_to_parent(&Cw[12 * i + 9], &Cw[12 * par + 9], Ia, h, &IA[21 * par], &pA[6 * par])
    return 0


cdef inline void _carry_to_parent(const double* ri, const double* rp, const double* Ia,
                                  const double* h, double* IAp, double* pAp) noexcept nogil:
    """Iᴬ_p += Ad_dᵀ Iᵃ Ad_d and pᴬ_p += Ad_dᵀ pᵃ with d = r_p − r_i (Iᵃ packed)."""
    cdef double d[3]
    cdef double t[3]
    d[0] = rp[0] - ri[0]; d[1] = rp[1] - ri[1]; d[2] = rp[2] - ri[2]
    sym6_shift_to_parent(d, Ia, IAp)
    cross(d, &h[3], t)               # moment about r_p: t − d × f
    pAp[0] += h[0] - t[0]; pAp[1] += h[1] - t[1]; pAp[2] += h[2] - t[2]
    pAp[3] += h[3]; pAp[4] += h[4]; pAp[5] += h[5]


cdef int aba_kernel(ModelCore m, const double* q, const double* qd, const double* tau,
                    const double* g, const double* fext, int fext_frame, double* ws,
                    double* qdd) noexcept nogil:
    """Joint accelerations q̈ (nv).  Returns 0, i + 1 for a non-unit quaternion of
    joint i, or −(i + 1) if the articulated inertia of joint i is singular."""
    cdef int nb = m.nb, nv = m.nv, i, k, l, n, par, o, nvi, a, b, fast
    cdef double sg, qdi
    cdef int bad = 0
    cdef double* T = ws
    cdef double* Cw = &ws[12 * nb]
    cdef double* V = &ws[24 * nb]
    cdef double* cb = &ws[30 * nb]
    cdef double* IA = &ws[36 * nb]        # 21 per body (packed symmetric)
    cdef double* pA = &ws[57 * nb]        # 6 per body
    cdef double* S = &ws[63 * nb]         # 6 per freedom: hybrid screws ⁰X
    cdef double* U = &ws[63 * nb + 6 * nv]
    cdef double* Dl = &ws[63 * nb + 12 * nv]   # k × k factor per body (≤ 6 per freedom)
    cdef double* u = &ws[63 * nb + 18 * nv]
    cdef double RJ[9]
    cdef double pJ[3]
    cdef double cJ[6]
    cdef double vr[6]
    cdef double t6[6]
    cdef double h[6]
    cdef double Ia[36]
    cdef double Ifull[36]
    cdef double Ip[21]
    cdef double x[6]
    cdef double ap[6]
    cdef double d[3]
    cdef double w3[3]
    cdef double ch[3]
    cdef double tmp[9]
    cdef double Io[9]
    cdef double scale
    cdef const double* B
    cdef const double* inr
    cdef double* Ti
    cdef double* Ci
    cdef double* Vi
    cdef double* ci
    cdef double* Xi
    # ---- pass 1
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        Ti = &T[12 * i]
        Ci = &Cw[12 * i]
        Vi = &V[6 * i]
        ci = &cb[6 * i]
        B = &m.Bref[i, 0]
        Xi = &S[6 * o]
        par = m.parent[i]
        fast = m.fast[i]
        if fast != FAST_NONE:
            joint_pose_1dof(fast, &m.X[o, 0], B, q[m.qoff[i]], Ti)
            world_pose(NULL if par < 0 else &Cw[12 * par], Ti, Ci)
            qdi = qd[o]
            if fast == FAST_SCREW:
                rotate_twist(Ci, &m.X[o, 0], Xi)
                for n in range(6):
                    vr[n] = Xi[n] * qdi
            else:
                # ±e_k about the body origin: ⁰X = (±R[:, k], 0)
                k = fast - FAST_REV_X
                sg = m.X[o, k]
                Xi[0] = sg * Ci[k]
                Xi[1] = sg * Ci[3 + k]
                Xi[2] = sg * Ci[6 + k]
                Xi[3] = 0.0; Xi[4] = 0.0; Xi[5] = 0.0
                vr[0] = Xi[0] * qdi; vr[1] = Xi[1] * qdi; vr[2] = Xi[2] * qdi
                vr[3] = 0.0; vr[4] = 0.0; vr[5] = 0.0
            for n in range(6):                          # Ṡq̇ = 0 for one freedom
                ci[n] = 0.0
        else:
            if joint_calc(m.kind[i], nvi, &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]], &qd[o],
                          RJ, pJ, Xi, cJ) and bad == 0:
                bad = i + 1
            pose_mul(B, &B[9], RJ, pJ, Ti, &Ti[9])
            world_pose(NULL if par < 0 else &Cw[12 * par], Ti, Ci)
            for k in range(nvi):
                for n in range(6):
                    t6[n] = Xi[6 * k + n]
                rotate_twist(Ci, t6, &Xi[6 * k])
            subspace_times(nvi, Xi, &qd[o], vr)
            rotate_twist(Ci, cJ, ci)                    # Ad_R Ṡ q̇
        if par < 0:
            for n in range(6):
                Vi[n] = vr[n]
        else:
            for n in range(3):
                d[n] = Cw[12 * par + 9 + n] - Ci[9 + n]
            cross(d, &V[6 * par], w3)
            for n in range(3):
                Vi[n] = V[6 * par + n] + vr[n]
                Vi[3 + n] = V[6 * par + 3 + n] + w3[n] + vr[3 + n]
            # ad_{(0, ṙ_p − ṙ_i)} V_p = (0, (ṙ_p − ṙ_i) × ω_p)
            for n in range(3):
                d[n] = V[6 * par + 3 + n] - Vi[3 + n]
            cross(d, &V[6 * par], w3)
            ci[3] += w3[0]; ci[4] += w3[1]; ci[5] += w3[2]
        # ad_{Vʷ_i} ⁰X q̇ = (ω × vr_ω, ω × vr_v); vr_v = 0 for a revolute axis
        cross(Vi, vr, w3)
        ci[0] += w3[0]; ci[1] += w3[1]; ci[2] += w3[2]
        if fast == FAST_NONE or fast == FAST_SCREW:
            cross(Vi, &vr[3], w3)
            ci[3] += w3[0]; ci[4] += w3[1]; ci[5] += w3[2]
        # Iᴬ = Mʰ: COM offset ρ = R c and inertia Io = R Θ_o Rᵀ about the body origin
        inr = &m.inert[i, 0]
        rot_vec(Ci, &inr[1], ch)
        rot_mul(Ci, &inr[13], tmp)
        for a in range(3):
            for b in range(a, 3):
                Io[3 * a + b] = tmp[3 * a] * Ci[3 * b] + tmp[3 * a + 1] * Ci[3 * b + 1] \
                    + tmp[3 * a + 2] * Ci[3 * b + 2]
                Io[3 * b + a] = Io[3 * a + b]
        sym6_rigid(inr[0], ch, Io, &IA[21 * i])
        # pᴬ = ad_{Vʷ} Mʰ Vʷ − W^ext = (ω × Io ω, m ω × (ω × ρ)), Vʷ = (ω, 0)
        rot_vec(Io, Vi, w3)
        cross(Vi, w3, &pA[6 * i])
        cross(Vi, ch, w3)
        cross(Vi, w3, &pA[6 * i + 3])
        for n in range(3):
            pA[6 * i + 3 + n] *= inr[0]
        if fext != NULL:
            if fext_frame == 2:
                for n in range(6):
                    pA[6 * i + n] -= fext[6 * i + n]
            else:
                wrench_to_world(fext_frame, Ci, &Ci[9], &fext[6 * i], t6)
                wrench_from_world(2, Ci, &Ci[9], t6, h)
                for n in range(6):
                    pA[6 * i + n] -= h[n]
    if bad:
        return bad
    # ---- pass 2
    for i in range(nb - 1, -1, -1):
        o = m.voff[i]
        nvi = m.nvj[i]
        # scale for the singularity test: the trace of the (PSD) articulated inertia
        scale = (IA[21 * i] + IA[21 * i + 3] + IA[21 * i + 5] + IA[21 * i + 15]
                 + IA[21 * i + 18] + IA[21 * i + 20])
        for k in range(nvi):
            scale += m.armature[o + k]
        if nvi == 1:
            if _aba_backward_1dof(m, i, o, tau, Cw, S, U, Dl, u, IA, pA, cb, scale):
                return -(i + 1)
            continue
        sym6_unpack(&IA[21 * i], Ifull)
        for k in range(nvi):
            for n in range(6):
                U[6 * (o + k) + n] = (Ifull[6 * n] * S[6 * (o + k)]
                    + Ifull[6 * n + 1] * S[6 * (o + k) + 1]
                    + Ifull[6 * n + 2] * S[6 * (o + k) + 2]
                    + Ifull[6 * n + 3] * S[6 * (o + k) + 3]
                    + Ifull[6 * n + 4] * S[6 * (o + k) + 4]
                    + Ifull[6 * n + 5] * S[6 * (o + k) + 5])
            u[o + k] = tau[o + k]
            for n in range(6):
                u[o + k] -= S[6 * (o + k) + n] * pA[6 * i + n]
        for k in range(nvi):
            for l in range(nvi):
                Dl[6 * o + nvi * k + l] = (S[6 * (o + k)] * U[6 * (o + l)]
                    + S[6 * (o + k) + 1] * U[6 * (o + l) + 1] + S[6 * (o + k) + 2] * U[6 * (o + l) + 2]
                    + S[6 * (o + k) + 3] * U[6 * (o + l) + 3] + S[6 * (o + k) + 4] * U[6 * (o + l) + 4]
                    + S[6 * (o + k) + 5] * U[6 * (o + l) + 5])
            Dl[6 * o + nvi * k + k] += m.armature[o + k]
        if small_cholesky(nvi, &Dl[6 * o], scale if scale > 0.0 else 1e-300):
            return -(i + 1)
        par = m.parent[i]
        if par < 0:
            continue
        for n in range(36):
            Ia[n] = Ifull[n]
        for a in range(6):
            for k in range(nvi):
                x[k] = U[6 * (o + k) + a]
            small_cho_solve(nvi, &Dl[6 * o], x)      # x = D⁻¹ U[a, :]ᵀ
            for b in range(6):
                for k in range(nvi):
                    Ia[6 * a + b] -= U[6 * (o + k) + b] * x[k]
        for k in range(nvi):
            x[k] = u[o + k]
        small_cho_solve(nvi, &Dl[6 * o], x)
        for a in range(6):
            h[a] = pA[6 * i + a]
            for b in range(6):
                h[a] += Ia[6 * a + b] * cb[6 * i + b]
            for k in range(nvi):
                h[a] += U[6 * (o + k) + a] * x[k]
        sym6_pack(Ia, Ip)
        _carry_to_parent(&Cw[12 * i + 9], &Cw[12 * par + 9], Ip, h, &IA[21 * par], &pA[6 * par])
    # ---- pass 3 (accelerations stored in cb)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        par = m.parent[i]
        if par < 0:
            ap[0] = 0.0; ap[1] = 0.0; ap[2] = 0.0
            ap[3] = -g[0]; ap[4] = -g[1]; ap[5] = -g[2]
        else:
            for n in range(3):
                d[n] = Cw[12 * par + 9 + n] - Cw[12 * i + 9 + n]
            cross(d, &cb[6 * par], w3)
            for n in range(3):
                ap[n] = cb[6 * par + n]
                ap[3 + n] = cb[6 * par + 3 + n] + w3[n]
        twist_add(ap, &cb[6 * i])
        for k in range(nvi):
            x[k] = u[o + k]
            for n in range(6):
                x[k] -= U[6 * (o + k) + n] * ap[n]
        if nvi == 1:
            x[0] *= Dl[6 * o]
        else:
            small_cho_solve(nvi, &Dl[6 * o], x)
        for k in range(nvi):
            qdd[o + k] = x[k]
            for n in range(6):
                ap[n] += S[6 * (o + k) + n] * x[k]
        for n in range(6):
            cb[6 * i + n] = ap[n]
    return 0
