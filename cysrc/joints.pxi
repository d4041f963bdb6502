# Joint kinds and the joint transform J_i(q_i) shared by all kernels.
#
# A body's pose is C_i = C_parent B_i J_i(q_i) (docs/CONVENTIONS.md, "Tree
# kinematics").  J_i is the motion of body i relative to its reference pose,
# expressed in body i's reference frame:
#   KIND_SCREWS    J = exp(X_1 q_1) ... exp(X_k q_k)   (revolute, prismatic, helical,
#                  cylindrical, universal, planar: k = nv_i unit screws X, body-fixed)
#   KIND_SPHERICAL J = (R(Q), c - R(Q) c), Q = q[0:4], c = joint centre (body frame)
#   KIND_FREE_*    J = (R(Q), r), r = q[0:3], Q = q[3:7]

cdef enum:
    KIND_SCREWS = 0
    KIND_SPHERICAL = 1
    KIND_FREE_SE3 = 2
    KIND_FREE_SO3R3 = 3

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
