# Kinematics beyond poses: body-fixed twists and accelerations of every body
# (Müller 2018, eqs. 24, 29 in recursive body-fixed form), and the spatial screw
# of every joint freedom at the current configuration, J_j = Ad_{C_i} S_j (the
# columns of all spatial Jacobians) and its rate.  Other representations follow
# in Python by one rotation/translation per body (kinematics.py).

cdef int body_motion_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                            const double* qdd) noexcept nogil:
    """World poses d.oMi, body-fixed twists d.v and twist derivatives d.a (no
    gravity); qd / qdd may be NULL (then v / a are not computed)."""
    cdef int nb = m.nb, i, n, par, o, nvi, bad = 0
    cdef double* T
    cdef double* V = d.v
    cdef double* A = d.a
    cdef double cJ[6]
    cdef double vr[6]
    cdef double ar[6]
    cdef double t6[6]
    angle_prepass(m, d, q)
    for i in range(nb):
        o = m.voff[i]
        nvi = m.nvj[i]
        T = &d.liMi[12 * i]
        if world_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        if m.fast[i] != FAST_NONE:
            for n in range(6):
                cJ[n] = 0.0
        if qd == NULL:
            continue
        par = m.parent[i]
        subspace_times(nvi, &d.S[6 * o], &qd[o], vr)
        if par < 0:
            for n in range(6):
                V[6 * i + n] = vr[n]
        else:
            twist_Ad_inv(T, &T[9], &V[6 * par], &V[6 * i])
            twist_add(&V[6 * i], vr)
        if qdd == NULL:
            continue
        subspace_times(nvi, &d.S[6 * o], &qdd[o], ar)
        if par < 0:
            for n in range(6):
                A[6 * i + n] = 0.0
        else:
            twist_Ad_inv(T, &T[9], &A[6 * par], &A[6 * i])
        twist_bracket(&V[6 * i], vr, t6)
        for n in range(6):
            A[6 * i + n] += t6[n] + ar[n] + cJ[n]
    return bad


cdef void world_screws(ModelCore m, DataC* d, double* J) noexcept nogil:
    """Spatial screws about the world origin J_j = Ad_{oMi} S_j (nv × 6) of every
    freedom, from d.oMi and d.S (screw_Ad: no products with the screws' zeros)."""
    cdef int i, k, o
    for i in range(m.nb):
        o = m.voff[i]
        for k in range(m.nvj[i]):
            screw_Ad(&d.oMi[12 * i], &d.S[6 * (o + k)], &J[6 * (o + k)])


cdef inline void subspace_rate(int kind, int nv, const double* S, const double* qd,
                               double* Sd) noexcept nogil:
    """Ṡ (nv columns of 6) of the body-fixed motion subspace (joints.pxi):
    screw chains Ṡ_j = [S_j, Σ_{l>j} S_l q̇_l]; SO(3)×R³ free joint
    Ṡ_{3+k} = (0, −ω × Rᵀe_k); constant otherwise."""
    cdef double later[6]
    cdef double t[3]
    cdef int j, n
    for n in range(6 * nv):
        Sd[n] = 0.0
    if kind == KIND_SCREWS and nv > 1:
        for n in range(6):
            later[n] = 0.0
        for j in range(nv - 1, -1, -1):
            twist_bracket(&S[6 * j], later, &Sd[6 * j])
            for n in range(6):
                later[n] += S[6 * j + n] * qd[j]
    elif kind == KIND_FREE_SO3R3:
        for j in range(3):
            cross(qd, &S[6 * (3 + j) + 3], t)
            Sd[6 * (3 + j) + 3] = -t[0]
            Sd[6 * (3 + j) + 4] = -t[1]
            Sd[6 * (3 + j) + 5] = -t[2]


cdef int spatial_screw_rates_kernel(ModelCore m, DataC* d, const double* q,
                                    const double* qd, double* J, double* Jd) noexcept nogil:
    """Spatial screws J and their time derivatives Jd (nv × 6, world origin):
    J̇_j = ad_{Vˢ_b} J_j + Ad_{C_b} Ṡ_j for freedom j of body b; fills d.oMi, d.v."""
    cdef int nb = m.nb, i, k, o, bad
    cdef double Sd[36]
    cdef double Vs[6]
    cdef double t6[6]
    cdef double* C
    bad = body_motion_kernel(m, d, q, qd, NULL)
    for i in range(nb):
        o = m.voff[i]
        C = &d.oMi[12 * i]
        twist_Ad(C, &C[9], &d.v[6 * i], Vs)
        subspace_rate(m.kind[i], m.nvj[i], &d.S[6 * o], &qd[o], Sd)
        for k in range(m.nvj[i]):
            twist_Ad(C, &C[9], &d.S[6 * (o + k)], &J[6 * (o + k)])
            twist_bracket(Vs, &J[6 * (o + k)], &Jd[6 * (o + k)])
            twist_Ad(C, &C[9], &Sd[6 * k], t6)
            twist_add(&Jd[6 * (o + k)], t6)
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_body_motion(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (nb, 12) world poses, out2 / out3 (nb, 6) body twists / derivatives."""
    cdef int bad = body_motion_kernel(m, d, c.q, c.v, c.a)
    memcpy(c.out, d.oMi, 12 * m.nb * sizeof(double))
    if c.out2 != NULL:
        memcpy(c.out2, d.v, 6 * m.nb * sizeof(double))
    if c.out3 != NULL:
        memcpy(c.out3, d.a, 6 * m.nb * sizeof(double))
    return bad


cdef int _k_spatial_screws(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (nb, 12) world poses, out2 (nv, 6) spatial screws about the world origin."""
    cdef int bad = body_motion_kernel(m, d, c.q, NULL, NULL)
    memcpy(c.out, d.oMi, 12 * m.nb * sizeof(double))
    world_screws(m, d, c.out2)
    return bad


cdef int _k_screw_rates(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (nb, 12) world poses, out2 / out3 (nv, 6) spatial screws and their rates."""
    cdef int bad = spatial_screw_rates_kernel(m, d, c.q, c.v, c.out2, c.out3)
    memcpy(c.out, d.oMi, 12 * m.nb * sizeof(double))
    return bad


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def _body_motion(ModelCore self, q, v=None, a=None, data=None):
    """World poses (…, nb, 12) and body-fixed twists and twist derivatives
    (…, nb, 6) of all bodies (gravity not included); None where not asked."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = None, aa = None
    cdef Call c
    memset(&c, 0, sizeof(Call))
    c.v = NULL
    c.a = NULL
    c.out2 = NULL
    c.out3 = NULL
    if v is not None:
        va = self._like(qa, v, self.nv, "v")
        c.v = <double*>cnp.PyArray_DATA(va)
    if a is not None:
        if v is None:
            raise InputError("a: accelerations need velocities v")
        aa = self._like(qa, a, self.nv, "a")
        c.a = <double*>cnp.PyArray_DATA(aa)
    lead = () if cnp.PyArray_NDIM(qa) == 1 else (int(cnp.PyArray_DIMS(qa)[0]),)
    C = np.empty(lead + (self.nb, 12))
    V = np.empty(lead + (self.nb, 6)) if v is not None else None
    A = np.empty(lead + (self.nb, 6)) if a is not None else None
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.out = <double*>cnp.PyArray_DATA(C)
    if V is not None:
        c.out2 = <double*>cnp.PyArray_DATA(V)
    if A is not None:
        c.out3 = <double*>cnp.PyArray_DATA(A)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.so = 12 * self.nb
    c.so2 = 6 * self.nb
    c.so3 = 6 * self.nb
    self._dispatch(_k_body_motion, &c, self._batch(qa), data, -1,
                   "the body poses, twists or accelerations")
    return C, V, A


def _spatial_screws(ModelCore self, q):
    """World poses (…, nb, 12) and spatial screws of every freedom (…, nv, 6)."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef Call c
    memset(&c, 0, sizeof(Call))
    lead = () if cnp.PyArray_NDIM(qa) == 1 else (int(cnp.PyArray_DIMS(qa)[0]),)
    C = np.empty(lead + (self.nb, 12))
    J = np.empty(lead + (self.nv if self.nv else 1, 6))
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.out = <double*>cnp.PyArray_DATA(C)
    c.out2 = <double*>cnp.PyArray_DATA(J)
    c.sq = self.nq
    c.so = 12 * self.nb
    c.so2 = 6 * self.nv
    self._dispatch(_k_spatial_screws, &c, self._batch(qa), None, -1,
                   "the body poses or joint screws")
    return C, (J if self.nv else J[..., :0, :])


def _spatial_screw_rates(ModelCore self, q, v):
    """World poses (nb, 12), spatial screws J (nv, 6) and their rates J̇ (nv, 6)
    for one state (used by the closed-form Coriolis matrix)."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef Call c
    memset(&c, 0, sizeof(Call))
    if cnp.PyArray_NDIM(qa) != 1:
        raise InputError("q: one state expected here, shape (nq,)")
    C = np.empty((self.nb, 12))
    J = np.empty((self.nv if self.nv else 1, 6))
    Jd = np.empty((self.nv if self.nv else 1, 6))
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.out = <double*>cnp.PyArray_DATA(C)
    c.out2 = <double*>cnp.PyArray_DATA(J)
    c.out3 = <double*>cnp.PyArray_DATA(Jd)
    c.so = 12 * self.nb
    c.so2 = 6 * self.nv
    c.so3 = 6 * self.nv
    self._dispatch(_k_screw_rates, &c, -1, None, -1, "the joint screws or their rates")
    return C, J[:self.nv], Jd[:self.nv]
