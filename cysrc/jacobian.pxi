# Geometric Jacobian of one body or named frame, from the joints on its path only
# (path_sweep, sweep.pxi).  Column j (freedom j of body i on the path) is the
# twist of the target when only q̇_j = 1 moves: with the spatial screw of j taken
# about the target's origin r_t (world axes), x_t = (ω, v + (r_i − r_t) × ω) for
# x = Ad_{R_i} S_j = (ω, v), the four representations are (docs/conventions.md,
# "Twists of body i"):
#   hybrid (ω, v_t),   mixed (R_tᵀ ω, v_t),   body (R_tᵀ ω, R_tᵀ v_t),
#   spatial (ω, v_t + r_t × ω)
# Working about r_t keeps lever arms robot-sized wherever the robot is.

cdef int frame_jacobian_kernel(ModelCore m, DataC* d, const double* q, int body, int frame,
                               int rep, double* Jout) noexcept nogil:
    """Jacobian (6 × nv, row-major) of body ``body``, or of named frame ``frame`` ≥ 0
    on it; only the columns of the freedoms on the path world → body are written
    (the caller zeroes Jout).  rep: 0 body, 1 spatial, 2 hybrid, 3 mixed.  Fills
    d.oMi and d.S on the path.  Returns 0 or i + 1 for a non-unit quaternion."""
    cdef int nv = m.nv, n, k, kk, i, o, fast, c
    cdef double Rt[9]
    cdef double rt[3]
    cdef double Crel[12]
    cdef double x[6]
    cdef double u[3]
    cdef double t[3]
    cdef const double* C
    n = path_sweep(m, d, q, body)
    if n < 0:
        return -n
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
        fast = m.fast[i]
        C = &d.oMi[12 * i]
        for k in range(9):
            Crel[k] = C[k]
        Crel[9] = C[9] - rt[0]; Crel[10] = C[10] - rt[1]; Crel[11] = C[11] - rt[2]
        for k in range(m.nvj[i]):
            c = o + k
            if fast != FAST_NONE:
                spatial_screw_1dof(fast, &m.X[o, 0], Crel, x)
            else:
                twist_Ad(Crel, &Crel[9], &d.S[6 * c], x)
            if rep == 2 or rep == 3:            # linear part: ṙ_t
                Jout[3 * nv + c] = x[3]; Jout[4 * nv + c] = x[4]; Jout[5 * nv + c] = x[5]
            if rep == 2:
                Jout[c] = x[0]; Jout[nv + c] = x[1]; Jout[2 * nv + c] = x[2]
            elif rep == 1:
                cross(rt, x, t)
                Jout[c] = x[0]; Jout[nv + c] = x[1]; Jout[2 * nv + c] = x[2]
                Jout[3 * nv + c] = x[3] + t[0]
                Jout[4 * nv + c] = x[4] + t[1]
                Jout[5 * nv + c] = x[5] + t[2]
            else:
                rotT_vec(Rt, x, u)
                Jout[c] = u[0]; Jout[nv + c] = u[1]; Jout[2 * nv + c] = u[2]
                if rep == 0:
                    rotT_vec(Rt, &x[3], u)
                    Jout[3 * nv + c] = u[0]; Jout[4 * nv + c] = u[1]; Jout[5 * nv + c] = u[2]
    return 0


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_jacobian(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return frame_jacobian_kernel(m, d, c.q, c.body, c.frame, c.rep, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def jacobian(ModelCore self, q, frame, representation="body", data=None, out=None):
    """Geometric Jacobian (6, nv) (or (N, 6, nv)) of a body or named frame: its
    twist in ``representation`` is ``J @ v``.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    frame : str or int
        A body name, a named frame (any link, merged links included) or a
        body index.
    representation : {"body", "spatial", "hybrid", "mixed"}
        "body": body frame at its origin (Pinocchio LOCAL); "spatial": world
        frame at the world origin (WORLD); "hybrid": world axes at the frame's
        origin, (ω, ṙ) (LOCAL_WORLD_ALIGNED); "mixed": (ω in the frame's
        axes, ṙ in world axes).
    data, out : as in :meth:`forward_kinematics` (``out`` (6, nv) or (N, 6, nv))

    Only the joints on the path world → frame are visited; the other columns
    are zero.
    """
    return self._frame_call(_k_jacobian, q, frame, representation, data, out, 2,
                            "jacobian: the Jacobian")
