# Forward kinematics: C_i = C_parent(i) B_i J_i(q_i)  (Müller 2018, eq. 13 in
# body-fixed recursive form), one pass in topological order (parent[i] < i):
# forward_sweep (sweep.pxi) fills d.oMi; these kernels write the outputs.


cdef int fk_kernel(ModelCore m, DataC* d, const double* q, double* out) noexcept nogil:
    """World poses of all bodies (d.oMi), also written as nb row-major 4 × 4
    matrices into out.  Returns 0, or i + 1 if the quaternion of joint i is not unit."""
    return forward_sweep(m, d, q, out)


cdef int frame_poses_kernel(ModelCore m, DataC* d, const double* q, double* out) noexcept nogil:
    """World poses of all named frames (n_frames × 4 × 4): oMi[body] · offset."""
    cdef int f, b, bad = forward_sweep(m, d, q, NULL)
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
