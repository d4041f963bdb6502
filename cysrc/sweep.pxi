# The joint step every kernel starts from, and the forward sweeps built on it.
#
# joint_step     liMi[i] = B_i J_i(q_i), the body-fixed subspace S_i and Ṡ_i q̇_i
#                (joints.pxi), with the one-freedom fast paths
# spatial_step   joint_step + sMi[i] (frame s, root_relative_pose) + spatial
#                screws sJ = Ad_{sMi} S
# world_step     joint_step + oMi[i] (world pose)
# Each kernel calls one of them per body inside its own forward loop, so that the
# joint quantities stay in registers/L1 for its recursion; kernels that need
# nothing else (forward kinematics, Jacobians) run the sweep alone.


cdef extern from "simd.h" nogil:
    void td_sincos4(const double* x, double* s, double* c)     # four td_sincos, same bits
    void td_sincos_joints(int n, const int* slot, const int* qi, const double* q,
                          double* sc)     # td_sincos of q[qi[k]] into slot[k], four at a time


cdef inline bint _screw_turns(ModelCore m, int i) noexcept nogil:
    """Body i's joint is a FAST_SCREW with a rotation part (not prismatic)."""
    return m.fast[i] == FAST_SCREW and m.turns[i] != 0


cdef inline void angle_prepass(ModelCore m, DataC* d, const double* q) noexcept nogil:
    """sin and cos of the angle of every one-freedom joint that turns into d.sc_q: the
    revolute fast-path ones and the other screws with a rotation part (FAST_SCREW with
    e ≠ 0: hinges about an offset body axis (screw_rev) or an oblique axis, helical
    joints), and of both angles of every universal joint (second angle: slot nb + i),
    read by their joint steps (joint_step, joint_step_screw, joint_step_general,
    spatial_step).  The model lists them (m.ang_slot, m.ang_q, compiled once:
    treedyn.tables.angle_slots).  Every kernel runs this before its forward loop: the
    evaluations are independent, eight at a time in two vectors of lanes
    (td_sincos_joints, td_sincos's bits), and the serial recursion that follows has
    only products left."""
    cdef int k = 0, n = m.n_ang
    while k < n:
        td_sincos_joints(min(8, n - k), &m.ang_slot[k], &m.ang_q[k], q, d.sc_q)
        k += 8


cdef inline void body_angles(ModelCore m, DataC* d, int i, const double* q) noexcept nogil:
    """angle_prepass's slots of body i alone (for the paths that step some joints
    without the prepass): its turning joint's angle, or its universal joint's two."""
    cdef int j = m.qoff[i]
    if m.turns[i]:
        sincos(q[j], &d.sc_q[2 * i], &d.sc_q[2 * i + 1])
    elif m.univ[i]:
        sincos(q[j], &d.sc_q[2 * i], &d.sc_q[2 * i + 1])
        sincos(q[j + 1], &d.sc_q[2 * (m.nb + i)], &d.sc_q[2 * (m.nb + i) + 1])


cdef inline int joint_step(ModelCore m, DataC* d, int i, const double* q,
                           const double* qd, double* cJ, bint need_S) noexcept nogil:
    """liMi[i] and, for a joint without fast path, S (if need_S) and cJ = Ṡ q̇ (body
    frame; zero when qd is NULL).  One-freedom joints: S is the constant model.X
    row (set in Data at creation) and Ṡ q̇ = 0 (cJ not written); revolute ones use
    the sines of angle_prepass, which must have run for this q (as do the other
    turning one-freedom screws, joint_step_screw).
    Returns 1 if the joint's quaternion is not unit, else 0."""
    cdef int fast = m.fast[i]
    if fast == FAST_SCREW:
        joint_step_screw(m, d, i, q)
        return 0
    if fast != FAST_NONE:
        joint_pose_rev(fast, &m.X[m.voff[i], 0], &m.Bref[i, 0], d.sc_q[2 * i],
                       d.sc_q[2 * i + 1], &d.liMi[12 * i])
        return 0
    return joint_step_general(m, d, i, q, qd, cJ, need_S)


cdef void joint_step_screw(ModelCore m, DataC* d, int i, const double* q) noexcept nogil:
    """liMi[i] of a one-freedom screw joint without the axis fast path: closed form
    for a revolute joint about an offset body-axis direction (screw_rev), the screw
    exponential otherwise; a joint that turns takes its sines from angle_prepass, which
    must have run for this q.  Out of line, so that joint_step stays small enough to
    be inlined in every kernel's loop."""
    cdef int o = m.voff[i]
    cdef double RJ[9]
    cdef double pJ[3]
    if m.screw_rev[i]:
        joint_pose_offset(m.screw_rev[i] - 1, &m.X[o, 0], &m.screw_pt[i, 0],
                          &m.Bref[i, 0], d.sc_q[2 * i], d.sc_q[2 * i + 1],
                          &d.liMi[12 * i])
    elif _screw_turns(m, i):
        screw_exp_sc(&m.X[o, 0], q[m.qoff[i]], d.sc_q[2 * i], d.sc_q[2 * i + 1], RJ, pJ)
        pose_mul(&m.Bref[i, 0], &m.Bref[i, 9], RJ, pJ, &d.liMi[12 * i],
                 &d.liMi[12 * i + 9])
    else:
        joint_pose_1dof(FAST_SCREW, &m.X[o, 0], &m.Bref[i, 0], q[m.qoff[i]],
                        &d.liMi[12 * i])


cdef int joint_step_general(ModelCore m, DataC* d, int i, const double* q,
                            const double* qd, double* cJ, bint need_S) noexcept nogil:
    """joint_step for joints without a fast path (several freedoms, spherical, free);
    a universal joint takes its sines from angle_prepass, which must have run for
    this q."""
    cdef int o = m.voff[i], bad
    cdef double* T = &d.liMi[12 * i]
    cdef const double* B = &m.Bref[i, 0]
    cdef double RJ[9]
    cdef double pJ[3]
    if m.univ[i]:
        universal_calc(&m.X[o, 0], &m.univ_pt[i, 0], d.sc_q[2 * i], d.sc_q[2 * i + 1],
                       d.sc_q[2 * (m.nb + i)], d.sc_q[2 * (m.nb + i) + 1],
                       NULL if qd == NULL else &qd[o], RJ, pJ,
                       &d.S[6 * o] if need_S else NULL, cJ)
        pose_mul(B, &B[9], RJ, pJ, T, &T[9])
        return 0
    if need_S:
        bad = joint_calc(m.kind[i], m.nvj[i], &m.X[o, 0], &m.center[i, 0], &q[m.qoff[i]],
                         NULL if qd == NULL else &qd[o], RJ, pJ, &d.S[6 * o], cJ)
    else:
        bad = joint_transform(m.kind[i], m.nvj[i], &m.X[o, 0], &m.center[i, 0],
                              &q[m.qoff[i]], RJ, pJ)
    pose_mul(B, &B[9], RJ, pJ, T, &T[9])
    return bad


cdef extern from *:
    # spatial_step is inlined in the kernels' loops, the rest of the joint step is not
    # (GCC would inline the one call of _spatial_step_other and then not spatial_step):
    # function attributes through the return type (Cython has no syntax for them; the
    # compiler notes that they do not apply where Cython also uses the type for
    # variables, hence -Wattributes off)
    """
    #if defined(__GNUC__)
    #pragma GCC diagnostic ignored "-Wattributes"
    #define TD_INT_ALWAYS_INLINE __attribute__((always_inline)) int
    #define TD_INT_NOINLINE __attribute__((noinline)) int
    #else
    #define TD_INT_ALWAYS_INLINE int
    #define TD_INT_NOINLINE int
    #endif
    """
    ctypedef int td_int_always_inline "TD_INT_ALWAYS_INLINE"
    ctypedef int td_int_noinline "TD_INT_NOINLINE"


cdef extern from "simd.h" nogil:
    void td_rev_step(int k, int neg, const double* B, double s, double c, const double* A,
                     double* T, double* C, double* J)
    # joint_pose_rev + root_relative_pose + spatial_screw_1dof
    void td_prism_step(const double* u, const double* B, double q, const double* A,
                       double* T, double* C, double* J)
    # the same for a prismatic joint (joint_pose_1dof)


cdef inline td_int_always_inline spatial_step(ModelCore m, DataC* d, int i, const double* q,
                                              const double* qd, double* cJ) noexcept nogil:
    """joint_step, then sMi[i] = sMi[parent] liMi[i] (frame s) and the spatial screws
    sJ = Ad_{sMi} S of body i's freedoms (revolute joints about a body axis: all
    three in one step, td_rev_step, the same bits; prismatic joints likewise,
    td_prism_step; small, so that it is inlined in the kernels' loops: the other
    joints in _spatial_step_other)."""
    cdef int fast = m.fast[i], par = m.parent[i], o = m.voff[i]
    cdef const double* X
    if fast != FAST_NONE and fast != FAST_SCREW:
        td_rev_step(fast - FAST_REV_X, m.X[o, fast - FAST_REV_X] < 0.0, &m.Bref[i, 0],
                    d.sc_q[2 * i], d.sc_q[2 * i + 1], NULL if par < 0 else &d.sMi[12 * par],
                    &d.liMi[12 * i], &d.sMi[12 * i], &d.sJ[6 * o])
        return 0
    if fast == FAST_SCREW:
        X = &m.X[o, 0]
        if X[0] == 0.0 and X[1] == 0.0 and X[2] == 0.0:
            td_prism_step(&X[3], &m.Bref[i, 0], q[m.qoff[i]],
                          NULL if par < 0 else &d.sMi[12 * par], &d.liMi[12 * i],
                          &d.sMi[12 * i], &d.sJ[6 * o])
            return 0
    return _spatial_step_other(m, d, i, q, qd, cJ)


cdef td_int_noinline _spatial_step_other(ModelCore m, DataC* d, int i, const double* q,
                                         const double* qd, double* cJ) noexcept nogil:
    """spatial_step of a joint without the revolute axis fast path."""
    cdef int bad = 0
    if m.fast[i] == FAST_SCREW:
        joint_step_screw(m, d, i, q)
    else:
        bad = joint_step_general(m, d, i, q, qd, cJ, True)
    spatial_pose_and_screws(m, d, i)
    return bad


cdef inline void spatial_pose_and_screws(ModelCore m, DataC* d, int i) noexcept nogil:
    """sMi[i] and sJ of body i from liMi[i] and S (spatial_step without the joint step:
    for a kernel that runs after another one filled them for the same q)."""
    cdef int o = m.voff[i], par = m.parent[i], k, fast = m.fast[i]
    cdef double* C = &d.sMi[12 * i]
    root_relative_pose(NULL if par < 0 else &d.sMi[12 * par], &d.liMi[12 * i], C)
    if fast != FAST_NONE:
        spatial_screw_1dof(fast, &m.X[o, 0], C, &d.sJ[6 * o])
    else:
        for k in range(m.nvj[i]):
            twist_Ad(C, &C[9], &d.S[6 * (o + k)], &d.sJ[6 * (o + k)])


cdef int spatial_poses(ModelCore m, DataC* d, const double* q, const double* qd,
                       bint poses_ready, double* Sdq=NULL) noexcept nogil:
    """spatial_step of every body: d.liMi, d.S, d.sMi, d.sJ of this q (qd: for the
    joint steps' rates Ṡ q̇, into Sdq (nb, 6) for the joints without a fast path if
    not NULL; qd may be NULL).  ``poses_ready``: d.sMi, d.sJ already hold this q's for
    the one-freedom fast-path joints (another kernel's first pass), whose steps are
    skipped.  Returns 0 or i + 1 for a non-unit quaternion of joint i."""
    cdef int i, bad = 0
    cdef double cJ[6]
    cdef double* out
    if not poses_ready:
        angle_prepass(m, d, q)
    for i in range(m.nb):
        if poses_ready and m.fast[i] != FAST_NONE:
            continue
        if Sdq == NULL:
            out = &cJ[0]
        else:
            out = &Sdq[6 * i]
        if spatial_step(m, d, i, q, qd, out) and bad == 0:
            bad = i + 1
    return bad


cdef inline int world_step(ModelCore m, DataC* d, int i, const double* q,
                           const double* qd, double* cJ, bint need_S) noexcept nogil:
    """joint_step, then the world pose oMi[i] = oMi[parent] liMi[i]."""
    cdef int par = m.parent[i]
    cdef int bad = joint_step(m, d, i, q, qd, cJ, need_S)
    world_pose(NULL if par < 0 else &d.oMi[12 * par], &d.liMi[12 * i], &d.oMi[12 * i])
    return bad


cdef int forward_sweep(ModelCore m, DataC* d, const double* q, double* out4) noexcept nogil:
    """World poses oMi of all bodies, also written as row-major 4 × 4 matrices into
    out4 unless it is NULL.  Returns 0, or i + 1 for the first joint i whose
    quaternion is not unit."""
    cdef int i, bad = 0
    cdef double cJ[6]
    angle_prepass(m, d, q)
    for i in range(m.nb):
        if world_step(m, d, i, q, NULL, cJ, False) and bad == 0:
            bad = i + 1
        if out4 != NULL:
            pose_to_matrix(&d.oMi[12 * i], &out4[16 * i])
    return bad


cdef int path_sweep(ModelCore m, DataC* d, const double* q, int body) noexcept nogil:
    """World poses oMi and subspaces S of the bodies on the path world → body only
    (d.path[0..n) lists them from body up to its root).  Returns the path length n,
    or −(i + 1) for a joint i on it whose quaternion is not unit."""
    cdef int n = 0, k, i, bad = 0
    cdef double cJ[6]
    i = body
    while i >= 0:
        d.path[n] = i
        n += 1
        body_angles(m, d, i, q)
        i = m.parent[i]
    for k in range(n - 1, -1, -1):
        i = d.path[k]
        if world_step(m, d, i, q, NULL, cJ, True) and bad == 0:
            bad = i + 1
    return -bad if bad else n
