# The inertial-parameter regressor Y(q, v, v̇) with τ = Y π + armature ⊙ v̇
# (Müller 2018, §6: the equations of motion are linear in the dynamic parameters).
#
# π holds 10 parameters per body, in the order of Model.inertial_parameters()
# (Pinocchio's Inertia.toDynamicParameters()):
#   π_i = (m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz),  h = m c,
# I the rotational inertia about the body origin, body axes.  With the body
# twist V = (ω, v) and the acceleration with gravity Ā = (α, a) of the body RNEA,
# the body's own wrench M Ā − ad_Vᵀ M V = K(V, Ā) π_i has the columns
#   m:        (0,                       a + ω × v)
#   h = e_k:  (e_k × (a + ω × v),       α × e_k + ω × (ω × e_k))
#   I:        (L(α) + ω × L(ω),         0)          with I x = L(x) (I_xx, …, I_zz)
# and τ_j = S_jᵀ Σ_{i in subtree(j)} Ad_X⁻ᵀ W_i (X: pose of body i in body j's frame),
# so the block of joint j and body i is (Ad_X⁻¹ S_j)ᵀ K_i.


cdef inline void _inertia_columns(const double* x, double* L) noexcept nogil:
    """L (3 × 6, by column): I x = L (I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)."""
    cdef int n
    for n in range(18):
        L[n] = 0.0
    L[0] = x[0]                                # I_xx
    L[3] = x[1]; L[4] = x[0]                   # I_xy
    L[7] = x[1]                                # I_yy
    L[9] = x[2]; L[11] = x[0]                  # I_xz
    L[13] = x[2]; L[14] = x[1]                 # I_yz
    L[17] = x[2]                               # I_zz


cdef inline void body_regressor(const double* V, const double* A, double* K) noexcept nogil:
    """K (10 wrenches of 6): the body's own wrench M Ā − ad_Vᵀ M V = Σ_c K_c π_c
    (see the header)."""
    cdef double w[3]
    cdef double e[3]
    cdef double t[3]
    cdef double t2[3]
    cdef double La[18]
    cdef double Lw[18]
    cdef int c, n
    cross(V, &V[3], w)
    w[0] += A[3]; w[1] += A[4]; w[2] += A[5]          # a + ω × v
    K[0] = 0.0; K[1] = 0.0; K[2] = 0.0
    K[3] = w[0]; K[4] = w[1]; K[5] = w[2]
    for c in range(3):
        e[0] = 0.0; e[1] = 0.0; e[2] = 0.0
        e[c] = 1.0
        cross(e, w, &K[6 * (1 + c)])
        cross(A, e, &K[6 * (1 + c) + 3])
        cross(V, e, t)
        cross(V, t, t2)
        for n in range(3):
            K[6 * (1 + c) + 3 + n] += t2[n]
    _inertia_columns(A, La)
    _inertia_columns(V, Lw)
    for c in range(6):
        cross(V, &Lw[3 * c], &K[6 * (4 + c)])
        for n in range(3):
            K[6 * (4 + c) + n] += La[3 * c + n]
            K[6 * (4 + c) + 3 + n] = 0.0


cdef enum:
    _REG_ROW_CHECK = 8192       # doubles: a larger Y is checked by the kernel as written


cdef int regressor_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                          const double* qdd, const double* g, double* Y) noexcept nogil:
    """Y (nv, 10 nb), row-major.  The body RNEA fills d.liMi, d.S, d.v, d.a_gf (its
    τ goes to Y's first row as scratch); then for each body i and each ancestor j
    (i itself included) Y[j's rows, i's columns] = (Ad_X⁻¹ S_j)ᵀ K_i with X the pose
    of body i in body j's frame, accumulated up the path: one twist transform per
    column of S_j instead of moving K's ten wrenches.  Returns 0 or i + 1 for a
    non-unit quaternion of joint i, or, for a large Y (_REG_ROW_CHECK), CODE_OVERFLOW
    if an entry is not finite: such a Y, most of it zeros, is checked row by row as it
    is written (its call's check is CHECK_KERNEL), since the dispatcher's second pass
    over all of it would cost as much as writing it; a small one, in cache, is left
    to that pass."""
    cdef int nb = m.nb, ncol = 10 * m.nb, i, j, k, c, o, par, n
    cdef unsigned long long bits = 0
    cdef bint by_rows = <Py_ssize_t>m.nv * ncol > _REG_ROW_CHECK
    cdef double K[60]
    cdef double X[12]
    cdef double X2[12]
    cdef double s6[6]
    cdef double* T
    cdef double* row
    cdef int bad = rnea_body_kernel(m, d, q, qd, qdd, g, NULL, 0, Y)
    memset(Y, 0, m.nv * ncol * sizeof(double))
    for i in range(nb):
        body_regressor(&d.v[6 * i], &d.a_gf[6 * i], K)
        j = i
        while True:
            o = m.voff[j]
            for k in range(m.nvj[j]):
                if j == i:
                    for n in range(6):
                        s6[n] = d.S[6 * (o + k) + n]
                else:
                    twist_Ad_inv(X, &X[9], &d.S[6 * (o + k)], s6)
                row = &Y[(o + k) * ncol + 10 * i]
                for c in range(10):
                    row[c] = dot6(s6, &K[6 * c])
                if by_rows:
                    bits = td_bits_above(row, 10, TD_BITS_DBL_MAX, bits)
            par = m.parent[j]
            if par < 0:
                break
            T = &d.liMi[12 * j]
            if j == i:
                memcpy(X, T, 12 * sizeof(double))
            else:
                pose_mul(T, &T[9], X, &X[9], X2, &X2[9])
                memcpy(X, X2, 12 * sizeof(double))
            j = par
    if bad == 0 and (bits >> 63) != 0:
        return CODE_OVERFLOW
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_regressor(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return regressor_kernel(m, d, c.q, c.v, c.a, c.g, c.out)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def inverse_dynamics_regressor(ModelCore self, q, v, a, gravity=None, data=None, out=None):
    """The inertial-parameter regressor Y(q, v, a): ``inverse_dynamics(q, v, a)
    = Y @ π + armature * a`` with ``π = model.inertial_parameters().ravel()``.

    Columns: 10 per body in the order of :meth:`inertial_parameters` (m, m c,
    I about the body origin in body axes as I_xx, I_xy, I_yy, I_xz, I_yz, I_zz:
    Pinocchio's ``toDynamicParameters``, so Y equals Pinocchio's
    ``computeJointTorqueRegressor`` up to the bodies' order and the velocity
    layout).  Closed form per body from the body RNEA's twists and accelerations
    (cysrc/regressor.pxi; docs/algorithms.md, "Inertial-parameter regressor").
    The armature (rotor inertia) is not an inertial parameter of a body: it
    stays outside Y.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a : array_like, shape (nv,) or (N, nv)
    gravity : array_like, shape (3,), optional
        World-frame gravity (default: ``model.gravity``).
    data : Data, optional
    out : ndarray, shape (nv, 10 n_bodies) or (N, nv, 10 n_bodies), optional

    Returns
    -------
    ndarray, shape (nv, 10 n_bodies) or (N, nv, 10 n_bodies)
    """
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef cnp.ndarray aa = self._like(qa, a, self.nv, "a")
    cdef double gbuf[3]
    cdef cnp.npy_intp dims[2]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    c.g = self._gravity_ptr(gravity, gbuf)
    dims[0] = self.nv; dims[1] = 10 * self.nb
    cdef cnp.ndarray res = self._output(out, qa, 2, dims)
    if self.nv == 0:
        if data is not None:
            self._data(data)
        return res
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.a = <double*>cnp.PyArray_DATA(aa)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.out = <double*>cnp.PyArray_DATA(res)
    c.so = 10 * self.nv * self.nb
    c.check = (CHECK_KERNEL if <Py_ssize_t>self.nv * 10 * self.nb > _REG_ROW_CHECK
               else CHECK_ALL)
    self._dispatch(_k_regressor, &c, self._batch(qa), data, -1,
                   "inverse_dynamics_regressor: Y")
    return res
