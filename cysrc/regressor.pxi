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


cdef extern from "regressor.h" nogil:
    int TD_REG_KT
    ctypedef struct td_chk:
        pass
    td_chk td_chk_zero()
    bint td_chk_ok(td_chk c)
    td_chk td_reg_row(const double* s, const double* Kt, double* row, td_chk chk)
    ctypedef struct td_out:
        double* p               # the next value's address
    void td_out_begin(td_out* o, double* p, int stream)
    void td_out_zeros(td_out* o, long n)
    void td_out_copy(td_out* o, const double* s, long n)
    void td_out_end(td_out* o)


cdef enum:
    _REG_STREAM_MIN = 262144    # doubles: a batch's Y this large (2 MiB) is written
    _REG_STREAM_STATE = 4096    # streaming if a state's Y has this many (32 KiB; below,
                                # panda's 810, the spans are too short to pay)
    _REG_COMPACT_MAX = 65536    # doubles of blocks per thread at most for that (larger
                                # blocks, beyond the caches, go straight into Y)


cdef inline void _axis_Ad_inv(const double* R, const double* p, int k, double sg,
                              double* out) noexcept nogil:
    """out = Ad_{(R,p)⁻¹} (sg e_k, 0) for sg = ±1 (an axis revolute's S, joints.pxi):
    twist_Ad_inv without its products by the zeros of S, each remaining sum in its
    order (the same values; only the sign of an exact zero may differ).  The linear
    part is Rᵀ t, t = −p × ω = sg e_k × p, of which t_k = 0: t_lo, t_hi the others."""
    cdef int n, lo, hi
    cdef double tlo, thi
    if k == 0:
        lo = 1; hi = 2; tlo = -(p[2] * sg); thi = p[1] * sg
    elif k == 1:
        lo = 0; hi = 2; tlo = p[2] * sg; thi = -(p[0] * sg)
    else:
        lo = 0; hi = 1; tlo = -(p[1] * sg); thi = p[0] * sg
    for n in range(3):
        out[n] = R[3 * k + n] * sg                     # Rᵀ ω
        out[3 + n] = R[3 * lo + n] * tlo + R[3 * hi + n] * thi


cdef inline Py_ssize_t regressor_nnz(ModelCore m) noexcept nogil:
    """Doubles of Y's blocks that are not structural zeros: 10 per body and freedom
    on its path (the compact layout of regressor_kernel)."""
    cdef Py_ssize_t n = 0
    cdef int i
    for i in range(m.nb):
        n += m.path_nv[i]
    return 10 * n


cdef int regressor_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                          const double* qdd, const double* g, double* Y, double* B,
                          bint stream) noexcept nogil:
    """Y (nv, 10 nb), row-major.  The body RNEA fills d.liMi, d.S, d.v, d.a_gf (its τ
    goes to B or Y as scratch); then for each body i and each ancestor j (i itself
    included) the block of j's rows and i's columns is (Ad_X⁻¹ S_j)ᵀ K_i with X the
    pose of body i in body j's frame, accumulated up the path: one twist transform
    per column of S_j instead of moving K's ten wrenches.

    Y is mostly structural zeros (row r of joint j is zero outside the columns of
    j's subtree).  With scratch B (regressor_nnz(m) doubles) the blocks go to B
    first, body after body (body i's ten columns for each freedom on its path,
    nearest first), and Y is then written once, in address order, zeros and
    blocks (_regressor_write; non-temporal stores if ``stream``).  With B NULL they
    go straight into Y after a memset (the same arithmetic: the same bits).
    Returns 0, i + 1 for a non-unit quaternion of joint i, or CODE_OVERFLOW if an
    entry is not finite (the blocks are checked here: the call's check is
    CHECK_KERNEL)."""
    cdef int nb = m.nb, ncol = 10 * m.nb, i, j, k, c, o, par, n, t
    cdef Py_ssize_t boff = 0
    cdef td_chk chk = td_chk_zero()
    cdef double K[60]
    cdef double Kt[72]
    cdef double X[12]
    cdef double X2[12]
    cdef double s6[6]
    cdef double* T
    cdef double* row
    cdef int bad = rnea_body_kernel(m, d, q, qd, qdd, g, NULL, 0, B if B != NULL else Y)
    if B == NULL:
        memset(Y, 0, m.nv * ncol * sizeof(double))
    for i in range(nb):
        body_regressor(&d.v[6 * i], &d.a_gf[6 * i], K)
        for n in range(6):
            for c in range(10):
                Kt[TD_REG_KT * n + c] = K[6 * c + n]
            Kt[TD_REG_KT * n + 10] = 0.0
            Kt[TD_REG_KT * n + 11] = 0.0
        j = i
        t = 0
        while True:
            o = m.voff[j]
            for k in range(m.nvj[j]):
                if j == i:
                    for n in range(6):
                        s6[n] = d.S[6 * (o + k) + n]
                elif FAST_REV_X <= m.fast[j] <= FAST_REV_X + 2:
                    _axis_Ad_inv(X, &X[9], m.fast[j] - FAST_REV_X,
                                 d.S[6 * o + m.fast[j] - FAST_REV_X], s6)
                else:
                    twist_Ad_inv(X, &X[9], &d.S[6 * (o + k)], s6)
                if B != NULL:
                    row = &B[boff + 10 * t]
                else:
                    row = &Y[(o + k) * ncol + 10 * i]
                t += 1
                chk = td_reg_row(s6, Kt, row, chk)
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
        boff += 10 * t
    if B != NULL:
        _regressor_write(m, B, Y, stream)
    if bad == 0 and not td_chk_ok(chk):
        return CODE_OVERFLOW
    return bad


cdef void _regressor_write(ModelCore m, const double* B, double* Y, bint stream) noexcept nogil:
    """Y from the compact blocks B of regressor_kernel, row after row.  The bodies
    are in depth-first order (the compiler's), so the subtree of body j is the
    bodies j … e − 1 (e: the first after j whose parent precedes j) and row
    voff[j] + k is 10 j zeros, the k-th row of the blocks of those bodies, then
    zeros.  Body i's block starts at 10 Σ_{i' < i} path_nv[i'] in B; in it the
    freedoms of its ancestor j start at row path_nv[i] − path_nv[j]."""
    cdef int nb = m.nb, ncol = 10 * m.nb, j, k, i, pj
    cdef Py_ssize_t bj = 0, b
    cdef double* dst
    cdef td_out w
    td_out_begin(&w, Y, stream)
    for j in range(nb):
        pj = m.path_nv[j]
        for k in range(m.nvj[j]):
            dst = &Y[<Py_ssize_t>(m.voff[j] + k) * ncol]
            if w.p != dst:          # (rows out of body order: restart there)
                td_out_end(&w)
                td_out_begin(&w, dst, stream)
            td_out_zeros(&w, 10 * j)
            b = bj
            i = j
            while True:
                td_out_copy(&w, &B[b + 10 * (m.path_nv[i] - pj + k)], 10)
                b += 10 * m.path_nv[i]
                i += 1
                if i == nb or m.parent[i] < j:
                    break
            td_out_zeros(&w, 10 * (nb - i))
        bj += 10 * pj
    td_out_end(&w)


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_regressor(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    cdef double* B = NULL
    cdef int tid
    if c.work != NULL:
        tid = openmp.omp_get_thread_num()
        if tid < c.nwork:
            B = c.work + tid * c.swork
    return regressor_kernel(m, d, c.q, c.v, c.a, c.g, c.out, B, c.stream)


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
    c.check = CHECK_KERNEL
    # a large batch: Y streamed from the compact blocks (regressor_kernel), one
    # scratch slice per thread
    cdef Py_ssize_t N = self._batch(qa), nnz = regressor_nnz(self)
    cdef cnp.npy_intp wdims[1]
    cdef cnp.ndarray work
    c.stream = N > 0 and c.so >= _REG_STREAM_STATE and N * c.so >= _REG_STREAM_MIN
    if c.stream and nnz <= _REG_COMPACT_MAX:
        c.swork = nnz
        c.nwork = _batch_threads()
        wdims[0] = c.nwork * nnz
        work = _new_output(1, wdims)
        c.work = <double*>cnp.PyArray_DATA(work)
    self._dispatch(_k_regressor, &c, N, data, -1, "inverse_dynamics_regressor: Y")
    return res
