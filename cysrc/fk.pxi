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


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_fk(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return fk_kernel(m, d, c.q, c.out)


cdef int _k_frame_poses(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return frame_poses_kernel(m, d, c.q, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def forward_kinematics(ModelCore self, q, data=None, out=None):
    """Poses of all bodies in the world frame.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
        Joint configuration(s), layout in docs/conventions.md.
    data : Data, optional
        Single state only: the Data to work in (``model.create_data()``);
        its ``oMi`` holds the poses afterwards.
    out : ndarray, optional
        Output array of the result's shape (float64, C-contiguous).

    Returns
    -------
    ndarray, shape (nb, 4, 4) or (N, nb, 4, 4)
        Homogeneous transforms C_i (body frame -> world), in ``body_names`` order.
    """
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.npy_intp dims[3]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    dims[0] = self.nb; dims[1] = 4; dims[2] = 4
    cdef cnp.ndarray res = self._output(out, qa, 3, dims)
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.sq = self.nq
    c.out = <double*>cnp.PyArray_DATA(res)
    c.so = 16 * self.nb
    c.check = CHECK_POSES
    self._dispatch(_k_fk, &c, self._batch(qa), data, -1, "forward_kinematics: the body poses")
    return res


def frame_poses(ModelCore self, q, data=None, out=None):
    """World poses of all named frames, shape (n_frames, 4, 4) (or (N, n_frames, 4, 4)),
    in ``frame_names`` order: the world, every link (moving or merged), extra frames.
    ``data`` / ``out`` as in :meth:`forward_kinematics`."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.npy_intp dims[3]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    dims[0] = self.fbody.shape[0]; dims[1] = 4; dims[2] = 4
    cdef cnp.ndarray res = self._output(out, qa, 3, dims)
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.sq = self.nq
    c.out = <double*>cnp.PyArray_DATA(res)
    c.so = 16 * dims[0]
    c.check = CHECK_POSES
    self._dispatch(_k_frame_poses, &c, self._batch(qa), data, -1, "frame_poses: the frame poses")
    return res
