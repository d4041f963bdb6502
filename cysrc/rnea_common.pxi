# Pieces shared by the kernels: joint-space sums, pose composition about the
# world or the subtree root, twist rotation, spatial screws of 1-dof joints.


cdef extern from "compat.h" nogil:
    int td_massless(const double* inr)      # zero mass and rotational inertia


cdef inline void subspace_times(int nv, const double* S, const double* x,
                                double* out) noexcept nogil:
    """out = S x  (S: nv columns of 6)."""
    cdef int k, n
    for n in range(6):
        out[n] = 0.0
    for k in range(nv):
        for n in range(6):
            out[n] += S[6 * k + n] * x[k]


cdef inline void subspace_T_times(int nv, const double* S, const double* W,
                                  double* out) noexcept nogil:
    """out = Sᵀ W."""
    cdef int k
    for k in range(nv):
        out[k] = (S[6 * k] * W[0] + S[6 * k + 1] * W[1] + S[6 * k + 2] * W[2]
                  + S[6 * k + 3] * W[3] + S[6 * k + 4] * W[4] + S[6 * k + 5] * W[5])


cdef extern from "simd.h" nogil:
    void td_pose_mul12(const double* A, const double* B, double* C)   # pose_mul, same bits


cdef inline void world_pose(const double* Cp, const double* T, double* C) noexcept nogil:
    """C = Cp T, or C = T when Cp is NULL (child of the world); poses as 12 doubles."""
    cdef int n
    if Cp == NULL:
        for n in range(12):
            C[n] = T[n]
    else:
        td_pose_mul12(Cp, T, C)


cdef inline void root_relative_pose(const double* Cp, const double* T, double* C) noexcept nogil:
    """Pose in world axes with the position measured from the origin of the subtree's
    root body (the body hanging from the world): C = Cp T, or (R_T, 0) for a root.

    The spatial kernels (spatial RNEA, ABA, CRBA) work about one fixed point per
    subtree.  Taking it at the root's current origin instead of the world origin
    changes none of their outputs (torques, accelerations, M are invariant) but
    keeps every lever arm robot-sized: far from the world origin (a mobile base
    at 10 km) nothing cancels, and results do not depend on where the robot is."""
    cdef int n
    if Cp == NULL:
        for n in range(9):
            C[n] = T[n]
        C[9] = 0.0; C[10] = 0.0; C[11] = 0.0
    else:
        td_pose_mul12(Cp, T, C)


cdef inline void world_wrench_to_root(const double* r0, double* W) noexcept nogil:
    """A world wrench about the world origin re-expressed about the point r0 (world):
    n ← n − r0 × f."""
    cdef double t[3]
    cross(r0, &W[3], t)
    W[0] -= t[0]; W[1] -= t[1]; W[2] -= t[2]


cdef inline void rotate_twist(const double* R, const double* x, double* out) noexcept nogil:
    """out = Ad_R x = (R ω, R v)."""
    rot_vec(R, x, out)
    rot_vec(R, &x[3], &out[3])


cdef inline void spatial_screw_1dof(int fast, const double* X, const double* C,
                                    double* J) noexcept nogil:
    """Spatial screw J = Ad_C X of a one-freedom joint with body-fixed screw X
    (C: the body's pose).  Revolute about body axis k through the origin:
    J = (w, r × w) with w = ±R[:, k]; prismatic X = (0, u): J = (0, R u)."""
    cdef int k
    cdef double sg
    if fast == FAST_SCREW:
        if X[0] == 0.0 and X[1] == 0.0 and X[2] == 0.0:
            J[0] = 0.0; J[1] = 0.0; J[2] = 0.0
            rot_vec(C, &X[3], &J[3])
        else:
            twist_Ad(C, &C[9], X, J)
    else:
        k = fast - FAST_REV_X
        sg = 1.0 if X[k] > 0.0 else -1.0
        J[0] = sg * C[k]
        J[1] = sg * C[3 + k]
        J[2] = sg * C[6 + k]
        cross(&C[9], J, &J[3])


cdef inline void screw_Ad(const double* C, const double* S, double* J) noexcept nogil:
    """J = Ad_C S = (R ω, r × R ω + R v) for S = (ω, v) (twist_Ad, C a 12-double pose)
    without the products with S's exact zeros: a slider (ω = 0), a hinge along a
    body axis (one nonzero component of ω: R ω is a column of R times it), a screw
    through the body origin (v = 0).  twist_Ad's values up to the sign of a zero."""
    cdef double t[3]
    cdef int k = -1
    if S[0] == 0.0 and S[1] == 0.0 and S[2] == 0.0:
        J[0] = 0.0; J[1] = 0.0; J[2] = 0.0
        rot_vec(C, &S[3], &J[3])
        return
    if S[1] == 0.0 and S[2] == 0.0:
        k = 0
    elif S[0] == 0.0 and S[2] == 0.0:
        k = 1
    elif S[0] == 0.0 and S[1] == 0.0:
        k = 2
    if k >= 0:
        J[0] = C[k] * S[k]
        J[1] = C[3 + k] * S[k]
        J[2] = C[6 + k] * S[k]
    elif S[3] == 0.0 and S[4] == 0.0 and S[5] == 0.0:
        rot_vec(C, S, J)
    else:
        twist_Ad(C, &C[9], S, J)
        return
    if S[3] == 0.0 and S[4] == 0.0 and S[5] == 0.0:
        cross(&C[9], J, &J[3])
        return
    rot_vec(C, &S[3], &J[3])
    cross(&C[9], J, t)
    J[3] += t[0]; J[4] += t[1]; J[5] += t[2]


cdef inline void pose_to_matrix(const double* P, double* out) noexcept nogil:
    """12-double pose (R row-major, p) -> row-major 4 × 4."""
    out[0] = P[0]; out[1] = P[1]; out[2] = P[2]; out[3] = P[9]
    out[4] = P[3]; out[5] = P[4]; out[6] = P[5]; out[7] = P[10]
    out[8] = P[6]; out[9] = P[7]; out[10] = P[8]; out[11] = P[11]
    out[12] = 0.0; out[13] = 0.0; out[14] = 0.0; out[15] = 1.0


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def inverse_dynamics(ModelCore self, q, v, a, representation="body", f_ext=None, gravity=None,
                     f_ext_frame="world", data=None, out=None):
    """Joint forces τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext by the O(n) recursive
    Newton–Euler algorithm.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a : array_like, shape (nv,) or (N, nv)
        Velocities and accelerations (layout in docs/conventions.md).
    representation : {"body", "spatial", "hybrid"}
        Which recursion computes τ (Müller 2018, eqs. 66-67, 70-71, 75-76).
        All three give the same τ; they differ in the frames of the
        intermediate twists and wrenches (Data fields v/a_gf/f, sv/sa_gf/sf,
        hv/ha_gf/hf).
    f_ext : array_like, shape (nb, 6) or (N, nb, 6), optional
        External wrench (torque, force) acting on each body, in ``f_ext_frame``.
    gravity : array_like, shape (3,), optional
        World-frame gravity in m/s² (default: ``model.gravity``).
    f_ext_frame : {"world", "body", "hybrid"}
        "world": about the world origin, world axes; "body": about the body
        origin, body axes; "hybrid": about the body origin, world axes.
    data : Data, optional
        Single state: the Data to work in; holds the recursion's per-body
        quantities afterwards.
    out : ndarray, optional
        Output array, shape (nv,) or (N, nv), float64, C-contiguous.

    Returns
    -------
    ndarray, shape (nv,) or (N, nv)
        Joint forces/torques (N, N·m; free joints: the wrench in the
        joint's velocity coordinates).
    """
    cdef kernel_t fn
    if representation == "body":
        fn = _k_rnea_body
    elif representation == "spatial":
        fn = _k_rnea_spatial
    elif representation == "hybrid":
        fn = _k_rnea_hybrid
    else:
        raise InputError(f"representation must be 'body', 'spatial' or 'hybrid', "
                         f"got {representation!r}")
    return self._joint_space_call(fn, q, v, a, "a", f_ext, gravity, f_ext_frame, data, out)
