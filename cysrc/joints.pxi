# Joint kinds and the joint transform J_i(q_i) shared by all kernels.
#
# A body's pose is C_i = C_parent B_i J_i(q_i) (docs/conventions.md, "Tree
# kinematics").  J_i is the motion of body i relative to its reference pose,
# expressed in body i's reference frame:
#   KIND_SCREWS    J = exp(X_1 q_1) ... exp(X_k q_k)   (revolute, prismatic, helical,
#                  cylindrical, universal, planar: k = nv_i unit screws X, body-fixed)
#   KIND_SPHERICAL J = (R(Q), c - R(Q) c), Q = q[0:4], c = joint centre (body frame)
#   KIND_FREE_*    J = (R(Q), r), r = q[0:3], Q = q[3:7]

# Joint kinds (KIND_*): cysrc/_kernels.pxd.

# |Q| must lie within this of 1 for a configuration to be accepted.
cdef double QUAT_NORM_TOL = 1e-6

cdef inline int joint_transform(int kind, int nv, const double* X, const double* c,
                                const double* q, double* R, double* p) noexcept nogil:
    """Write J(q) into (R, p).  Returns 0, or 1 if a quaternion is not unit."""
    cdef double Rk[9]
    cdef double pk[3]
    cdef double Rt[9]
    cdef double pt[3]
    cdef double n2
    cdef double Rc[3]
    cdef int k, n
    if kind == KIND_SCREWS:
        screw_exp(X, q[0], R, p)
        for k in range(1, nv):
            screw_exp(&X[6 * k], q[k], Rk, pk)
            pose_mul(R, p, Rk, pk, Rt, pt)
            for n in range(9):
                R[n] = Rt[n]
            p[0] = pt[0]; p[1] = pt[1]; p[2] = pt[2]
        return 0
    if kind == KIND_SPHERICAL:
        n2 = quat_to_rot(q, R)
        rot_vec(R, c, Rc)
        p[0] = c[0] - Rc[0]; p[1] = c[1] - Rc[1]; p[2] = c[2] - Rc[2]
        return 1 if fabs(sqrt(n2) - 1.0) > QUAT_NORM_TOL else 0
    # free joints (both groups share the configuration layout)
    n2 = quat_to_rot(&q[3], R)
    p[0] = q[0]; p[1] = q[1]; p[2] = q[2]
    return 1 if fabs(sqrt(n2) - 1.0) > QUAT_NORM_TOL else 0


cdef inline void _screw_chain_bias(int nv, const double* S, const double* qd,
                                   double* cJ) noexcept nogil:
    """cJ = Σ_{j<l} ad_{S_j q̇_j} S_l q̇_l for a chain of nv screws."""
    cdef double later[6]
    cdef double sj[6]
    cdef double t[6]
    cdef int j, n
    for n in range(6):
        later[n] = 0.0
        cJ[n] = 0.0
    for j in range(nv - 1, -1, -1):
        for n in range(6):
            sj[n] = S[6 * j + n] * qd[j]
        twist_bracket(sj, later, t)
        for n in range(6):
            cJ[n] += t[n]
            later[n] += sj[n]


cdef inline int joint_calc(int kind, int nv, const double* X, const double* c,
                           const double* q, const double* qd, double* R, double* p,
                           double* S, double* cJ) noexcept nogil:
    """Joint transform J(q) -> (R, p), body-fixed motion subspace S (nv columns of 6,
    stored one after the other) with J⁻¹J̇ = S q̇, and cJ = Ṡ q̇.

    Screw chains J = exp(X₁q₁)⋯exp(X_kq_k): S_j = Ad_{E_j⁻¹} X_j with
    E_j = exp(X_{j+1}q_{j+1})⋯exp(X_kq_k), and Ṡq̇ = Σ_{j<l} ad_{S_j q̇_j} S_l q̇_l.
    SO(3)×R³ free joint: S = diag(I, Rᵀ), Ṡq̇ = (0, −ω × Rᵀṙ).
    Returns 1 if a quaternion is not unit, else 0.
    """
    cdef double Re[3][9]
    cdef double pe[3][3]
    cdef double ER[9]
    cdef double Ep[3]
    cdef double tR[9]
    cdef double tp[3]
    cdef double u[3]
    cdef int j, n, bad
    for n in range(6):
        cJ[n] = 0.0
    if kind == KIND_SCREWS:
        if nv == 1:
            screw_exp(X, q[0], R, p)
            for n in range(6):
                S[n] = X[n]
            return 0
        for j in range(nv):
            screw_exp(&X[6 * j], q[j], Re[j], pe[j])
        for n in range(6):
            S[6 * (nv - 1) + n] = X[6 * (nv - 1) + n]
        rot_identity(ER)
        Ep[0] = 0.0; Ep[1] = 0.0; Ep[2] = 0.0
        for j in range(nv - 2, -1, -1):
            pose_mul(Re[j + 1], pe[j + 1], ER, Ep, tR, tp)
            for n in range(9):
                ER[n] = tR[n]
            Ep[0] = tp[0]; Ep[1] = tp[1]; Ep[2] = tp[2]
            twist_Ad_inv(ER, Ep, &X[6 * j], &S[6 * j])
        pose_mul(Re[0], pe[0], ER, Ep, R, p)
        if qd != NULL:
            _screw_chain_bias(nv, S, qd, cJ)
        return 0
    if kind == KIND_SPHERICAL:
        bad = joint_transform(kind, nv, X, c, q, R, p)
        for n in range(18):
            S[n] = X[n]
        return bad
    bad = joint_transform(kind, nv, X, c, q, R, p)
    for n in range(36):
        S[n] = 0.0
    for j in range(3):
        S[6 * j + j] = 1.0
    if kind == KIND_FREE_SE3:
        for j in range(3):
            S[6 * (3 + j) + 3 + j] = 1.0
        return bad
    # SO(3) x R^3: translational columns are Rᵀ e_k (row k of R)
    for j in range(3):
        S[6 * (3 + j) + 3] = R[3 * j + 0]
        S[6 * (3 + j) + 4] = R[3 * j + 1]
        S[6 * (3 + j) + 5] = R[3 * j + 2]
    if qd != NULL:
        rotT_vec(R, &qd[3], u)
        cross(qd, u, &cJ[3])
        cJ[3] = -cJ[3]; cJ[4] = -cJ[4]; cJ[5] = -cJ[5]
    return bad


cdef inline void universal_calc(const double* X, const double* c, double s1, double c1,
                                double s2, double c2, const double* qd, double* R,
                                double* p, double* S, double* cJ) noexcept nogil:
    """joint_calc of a universal joint (ModelCore.univ) given the sines and cosines of
    its two angles (angle_prepass): unit revolute screws X_k = (ω_k, c × ω_k) whose
    axes meet at c (body frame).  J = exp(X₁q₁) exp(X₂q₂) is the rotation
    R = Rot(ω₁, q₁) Rot(ω₂, q₂) about c, p = c − R c;
    S₂ = X₂, S₁ = Ad_{exp(X₂q₂)⁻¹} X₁ = (b, c × b) with b = R₂ᵀ ω₁; and Ṡq̇
    (universal_bias).  S NULL: the transform only; qd NULL: cJ = 0."""
    cdef double R1[9]
    cdef double R2[9]
    cdef double b[3]
    cdef int k
    rot_axis_sc(X, s1, c1, R1)
    rot_axis_sc(&X[6], s2, c2, R2)
    rot_mul(R1, R2, R)
    rot_vec(R, c, b)
    for k in range(3):
        p[k] = c[k] - b[k]
    if S == NULL:
        return
    for k in range(6):
        S[6 + k] = X[6 + k]
    rotT_vec(R2, X, S)
    cross(c, S, &S[3])
    universal_bias(X, c, S, qd, cJ)


cdef inline void universal_bias(const double* X, const double* c, const double* S,
                                const double* qd, double* cJ) noexcept nogil:
    """Ṡq̇ of a universal joint from its subspace S (universal_calc):
    ad_{S₁q̇₁} S₂q̇₂ = q̇₁q̇₂ (n, c × n), n = b × ω₂ (both screws pass through c);
    qd NULL: 0."""
    cdef double n3[3]
    cdef double w
    cdef int k
    for k in range(6):
        cJ[k] = 0.0
    if qd != NULL:
        w = qd[0] * qd[1]
        cross(S, &X[6], n3)
        for k in range(3):
            cJ[k] = w * n3[k]
        cross(c, cJ, &cJ[3])


# 1-dof fast paths (ModelCore.fast): the joint pose T = B exp(X q) without the
# general machinery.  FAST_NONE: use joint_calc.
cdef enum:
    FAST_NONE = 0
    FAST_REV_X = 1        # revolute about the body's x/y/z axis through its origin
    FAST_REV_Y = 2
    FAST_REV_Z = 3
    FAST_SCREW = 4        # any other 1-dof screw (revolute elsewhere, prismatic, helical)


cdef inline void joint_pose_1dof(int fast, const double* X, const double* B, double q,
                                 double* T) noexcept nogil:
    """T = B exp(X q) as 12 doubles (rotation row-major, position) for a 1-dof joint."""
    cdef double c, s
    cdef double RJ[9]
    cdef double pJ[3]
    cdef int n
    if fast == FAST_SCREW:
        if X[0] == 0.0 and X[1] == 0.0 and X[2] == 0.0:
            # prismatic: exp(X q) = (I, v q), T = (B.R, B.R v q + B.p) (pose_mul's sums)
            pJ[0] = X[3] * q; pJ[1] = X[4] * q; pJ[2] = X[5] * q
            for n in range(9):
                T[n] = B[n]
            rot_vec(B, pJ, &T[9])
            T[9] += B[9]; T[10] += B[10]; T[11] += B[11]
            return
        screw_exp(X, q, RJ, pJ)
        pose_mul(B, &B[9], RJ, pJ, T, &T[9])
        return
    sincos(q, &s, &c)
    joint_pose_rev(fast, X, B, s, c, T)


cdef inline void joint_pose_offset(int k, const double* X, const double* r,
                                   const double* B, double s, double c,
                                   double* T) noexcept nogil:
    """T = B exp(X q) for a revolute screw X = (±e_k, r × X_ω) about the body's k axis
    direction through the point r (screw_rev, screw_pt), given s = sin q, c = cos q
    (angle_prepass): exp(X q) = (R, (I − R) r) with R the rotation about e_k, so
    T = (B.R R, B.p + B.R (I − R) r) — the rotation part as for FAST_REV_*, without
    the general screw exponential."""
    cdef double t
    cdef double dl[3]
    joint_pose_rev(FAST_REV_X + k, X, B, s, c, T)
    if X[k] < 0.0:
        s = -s
    t = 1.0 - c
    if k == 2:
        dl[0] = t * r[0] + s * r[1]; dl[1] = t * r[1] - s * r[0]; dl[2] = 0.0
    elif k == 0:
        dl[0] = 0.0; dl[1] = t * r[1] + s * r[2]; dl[2] = t * r[2] - s * r[1]
    else:
        dl[0] = t * r[0] - s * r[2]; dl[1] = 0.0; dl[2] = t * r[2] + s * r[0]
    T[9] = B[9] + B[0] * dl[0] + B[1] * dl[1] + B[2] * dl[2]
    T[10] = B[10] + B[3] * dl[0] + B[4] * dl[1] + B[5] * dl[2]
    T[11] = B[11] + B[6] * dl[0] + B[7] * dl[1] + B[8] * dl[2]


cdef inline void joint_pose_rev(int fast, const double* X, const double* B, double s,
                                double c, double* T) noexcept nogil:
    """T = B Rot_k(q) for a revolute joint about body axis k (FAST_REV_*), given
    s = sin q, c = cos q."""
    cdef int r
    if X[fast - 1] < 0.0:       # X[k] = ±1: the axis direction
        s = -s
    # T.R = B.R Rot_k(q): only the two columns other than k mix
    for r in range(3):
        if fast == FAST_REV_Z:
            T[3 * r + 0] = c * B[3 * r + 0] + s * B[3 * r + 1]
            T[3 * r + 1] = c * B[3 * r + 1] - s * B[3 * r + 0]
            T[3 * r + 2] = B[3 * r + 2]
        elif fast == FAST_REV_X:
            T[3 * r + 0] = B[3 * r + 0]
            T[3 * r + 1] = c * B[3 * r + 1] + s * B[3 * r + 2]
            T[3 * r + 2] = c * B[3 * r + 2] - s * B[3 * r + 1]
        else:
            T[3 * r + 0] = c * B[3 * r + 0] - s * B[3 * r + 2]
            T[3 * r + 1] = B[3 * r + 1]
            T[3 * r + 2] = c * B[3 * r + 2] + s * B[3 * r + 0]
    T[9] = B[9]; T[10] = B[10]; T[11] = B[11]
