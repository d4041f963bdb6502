# Forward kinematics: C_i = C_parent(i) B_i J_i(q_i)  (Müller 2018, eq. 13 in
# body-fixed recursive form), one pass in topological order (parent[i] < i):
# forward_sweep (sweep.pxi) fills d.oMi; these kernels write the outputs.


cdef inline void pose_to_matrix(const double* P, double* out) noexcept nogil:
    """12-double pose (R row-major, p) -> row-major 4 × 4."""
    out[0] = P[0]; out[1] = P[1]; out[2] = P[2]; out[3] = P[9]
    out[4] = P[3]; out[5] = P[4]; out[6] = P[5]; out[7] = P[10]
    out[8] = P[6]; out[9] = P[7]; out[10] = P[8]; out[11] = P[11]
    out[12] = 0.0; out[13] = 0.0; out[14] = 0.0; out[15] = 1.0


cdef int fk_kernel(ModelCore m, DataC* d, const double* q, double* out) noexcept nogil:
    """World poses of all bodies (d.oMi), also written as nb row-major 4 × 4
    matrices into out.  Returns 0, or i + 1 if the quaternion of joint i is not unit."""
    cdef int i
    cdef int bad = forward_sweep(m, d, q)
    for i in range(m.nb):
        pose_to_matrix(&d.oMi[12 * i], &out[16 * i])
    return bad


cdef int frame_poses_kernel(ModelCore m, DataC* d, const double* q, double* out) noexcept nogil:
    """World poses of all named frames (n_frames × 4 × 4): oMi[body] · offset."""
    cdef int f, b, bad = forward_sweep(m, d, q)
    cdef double P[12]
    for f in range(m.fbody.shape[0]):
        b = m.fbody[f]
        if b < 0:
            pose_to_matrix(&m.foff[f, 0], &out[16 * f])
        else:
            pose_mul(&d.oMi[12 * b], &d.oMi[12 * b + 9], &m.foff[f, 0], &m.foff[f, 9],
                     P, &P[9])
            pose_to_matrix(P, &out[16 * f])
    return bad
