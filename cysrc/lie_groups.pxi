# Per-joint group operations for time stepping ([Müller, abs. coord.] §5–6;
# [Müller & Terze 2013] eqs. 36–37; keys in docs/references.md).
#
# Every joint's configuration lives on its own group: R^k for screw chains,
# SO(3) (unit quaternion) for spherical joints, SE(3) or SO(3)×R³ for free
# joints.  Local coordinates ψ (one per velocity coordinate) act on the right:
# q ⊕ ψ = q · τ(ψ) with τ = exp or the Cayley map τ(ψ) = cay(ψ/2) (so that
# τ(ψ) = I + ψ̂ + O(ψ²) for both).  Velocities v are left-trivialized (body
# twists), hence the rates of local coordinates are ψ̇ = dτ⁻¹_{−ψ} v.
# SO(3)×R³ free joints carry (ω body, ṙ): the rotation part is as above, the
# position part is additive.

cdef enum:
    LOCAL_EXP = 0
    LOCAL_CAYLEY = 1


cdef inline void _rot_step_quat(const double* x, int local, double* Q) noexcept nogil:
    """Quaternion of τ(x) on SO(3)."""
    cdef double c2
    if local == LOCAL_EXP:
        quat_of_rotvec(x, Q)
    else:
        # Rodrigues parameters c = x/2: Q = (1, c) / sqrt(1 + |c|²)
        c2 = 1.0 / sqrt(1.0 + 0.25 * dot3(x, x))
        Q[0] = c2
        Q[1] = 0.5 * x[0] * c2; Q[2] = 0.5 * x[1] * c2; Q[3] = 0.5 * x[2] * c2


cdef inline void _quat_right_step(const double* Q, const double* x, int local,
                                  double* out) noexcept nogil:
    cdef double D[4]
    _rot_step_quat(x, local, D)
    quat_mul_c(Q, D, out)


cdef inline void _cayley_rot(const double* x, double* R) noexcept nogil:
    """R = cay(x/2) = I + 4/(4 + |x|²) (x̂ + x̂²/2)."""
    cdef double s = 4.0 / (4.0 + dot3(x, x))
    cdef double h = 0.5 * s
    R[0] = 1.0 - h * (x[1] * x[1] + x[2] * x[2])
    R[4] = 1.0 - h * (x[0] * x[0] + x[2] * x[2])
    R[8] = 1.0 - h * (x[0] * x[0] + x[1] * x[1])
    R[1] = -s * x[2] + h * x[0] * x[1]
    R[3] = s * x[2] + h * x[0] * x[1]
    R[2] = s * x[1] + h * x[0] * x[2]
    R[6] = -s * x[1] + h * x[0] * x[2]
    R[5] = -s * x[0] + h * x[1] * x[2]
    R[7] = s * x[0] + h * x[1] * x[2]


cdef void config_retract(ModelCore m, const double* q, const double* psi, int local,
                         double* out) noexcept nogil:
    """out = q ⊕ ψ for all joints (out may not alias q): the screw chains' runs
    (m.screw_runs) element by element, then the other joints."""
    cdef int i, k, qo, vo, r, n
    cdef double R[9]
    cdef double D[9]
    cdef double t[3]
    cdef double Rt[3]
    for r in range(m.screw_runs.shape[0]):
        qo = m.screw_runs[r, 0]
        vo = m.screw_runs[r, 1]
        n = m.screw_runs[r, 2]
        for k in range(n):
            out[qo + k] = q[qo + k] + psi[vo + k]
    for r in range(m.n_group):
        i = m.group_body[r]
        qo = m.qoff[i]
        vo = m.voff[i]
        if m.kind[i] == KIND_SPHERICAL:
            _quat_right_step(&q[qo], &psi[vo], local, &out[qo])
        elif m.kind[i] == KIND_FREE_SO3R3:
            for k in range(3):
                out[qo + k] = q[qo + k] + psi[vo + 3 + k]
            _quat_right_step(&q[qo + 3], &psi[vo], local, &out[qo + 3])
        else:
            # SE(3): (R, r) τ(ψ) = (R R_τ, r + R t_τ)
            if local == LOCAL_EXP:
                so3_left_jac(&psi[vo], &psi[vo + 3], 0, t)        # t = dexp_x u
            else:
                _cayley_rot(&psi[vo], D)
                rot_vec(D, &psi[vo + 3], t)                        # t = (I + R_τ) u / 2
                for k in range(3):
                    t[k] = 0.5 * (t[k] + psi[vo + 3 + k])
            quat_to_rot(&q[qo + 3], R)
            rot_vec(R, t, Rt)
            for k in range(3):
                out[qo + k] = q[qo + k] + Rt[k]
            _quat_right_step(&q[qo + 3], &psi[vo], local, &out[qo + 3])


cdef void local_rates(ModelCore m, const double* psi, const double* v, int local,
                      double* out) noexcept nogil:
    """out = dτ⁻¹_{−ψ} v joint by joint (rates of the local coordinates ψ): the
    screw chains' runs (m.screw_runs) copied, then the other joints."""
    cdef int i, k, vo, r
    cdef double x[3]
    cdef double u[3]
    cdef double t1[3]
    cdef double t2[3]
    cdef double xw
    for r in range(m.screw_runs.shape[0]):
        vo = m.screw_runs[r, 1]
        for k in range(m.screw_runs[r, 2]):
            out[vo + k] = v[vo + k]
    for r in range(m.n_group):
        i = m.group_body[r]
        vo = m.voff[i]
        for k in range(3):
            x[k] = -psi[vo + k]
        # rotation part (spherical, both free groups)
        if local == LOCAL_EXP:
            so3_left_jac(x, &v[vo], 1, &out[vo])
        else:
            # dτ⁻¹_x w = w − ½ x×w + ¼ (x·w) x
            cross(x, &v[vo], t1)
            xw = 0.25 * dot3(x, &v[vo])
            for k in range(3):
                out[vo + k] = v[vo + k] - 0.5 * t1[k] + xw * x[k]
        if m.kind[i] == KIND_SPHERICAL:
            continue
        if m.kind[i] == KIND_FREE_SO3R3:
            for k in range(3):
                out[vo + 3 + k] = v[vo + 3 + k]
            continue
        for k in range(3):
            u[k] = -psi[vo + 3 + k]
        if local == LOCAL_EXP:
            # dexp⁻¹ = [[D⁻¹, 0], [−D⁻¹ Q D⁻¹, D⁻¹]]: k_v = D⁻¹ (v − Q k_ω)
            se3_dexp_Q(x, u, &out[vo], t1)
            for k in range(3):
                t1[k] = v[vo + 3 + k] - t1[k]
            so3_left_jac(x, t1, 1, &out[vo + 3])
        else:
            # k_v = v − ½ (x×v + u×w) − ¼ x×(w×u)
            cross(x, &v[vo + 3], t1)
            cross(u, &v[vo], t2)
            for k in range(3):
                out[vo + 3 + k] = v[vo + 3 + k] - 0.5 * (t1[k] + t2[k])
            cross(&v[vo], u, t1)
            cross(x, t1, t2)
            for k in range(3):
                out[vo + 3 + k] -= 0.25 * t2[k]


cdef inline void joint_log(int kind, const double* q0, const double* q1,
                            double* psi) noexcept nogil:
    """ψ with q1 = q0 ⊕ ψ for one spherical or free joint (q0, q1 at the joint's q
    offset): ψ_ω = log(Q₀* Q₁); SE(3): ψ_v = dexp⁻¹ R₀ᵀ (r₁ − r₀), SO(3)×R³:
    ψ_v = r₁ − r₀."""
    cdef double Qc[4]
    cdef double Qd[4]
    cdef double R[9]
    cdef double t[3]
    cdef int k = 0 if kind == KIND_SPHERICAL else 3
    Qc[0] = q0[k]
    Qc[1] = -q0[k + 1]; Qc[2] = -q0[k + 2]; Qc[3] = -q0[k + 3]
    quat_mul_c(Qc, &q1[k], Qd)
    quat_to_rotvec(Qd, psi)
    if kind == KIND_SPHERICAL:
        return
    for k in range(3):
        t[k] = q1[k] - q0[k]
    if kind == KIND_FREE_SO3R3:
        psi[3] = t[0]; psi[4] = t[1]; psi[5] = t[2]
        return
    quat_to_rot(&q0[3], R)
    rotT_vec(R, t, Qd)
    so3_left_jac(psi, Qd, 1, &psi[3])


cdef void config_difference(ModelCore m, const double* q0, const double* q1,
                            double* out) noexcept nogil:
    """out = ψ with q1 = q0 ⊕ ψ (exponential coordinates)."""
    cdef int i, k, qo, vo
    for i in range(m.nb):
        qo = m.qoff[i]
        vo = m.voff[i]
        if m.kind[i] == KIND_SCREWS:
            for k in range(m.nvj[i]):
                out[vo + k] = q1[qo + k] - q0[qo + k]
        else:
            joint_log(m.kind[i], &q0[qo], &q1[qo], &out[vo])


cdef void config_rate(ModelCore m, const double* q, const double* v,
                      double* qdot) noexcept nogil:
    """q̇ as a vector in R^nq (for vector-space integrators): Q̇ = ½ Q ⊗ (0, ω),
    ṙ = R v (SE(3)) or ṙ = v (SO(3)×R³), q̇ = v for screw chains."""
    cdef int i, k, qo, vo, j
    cdef double W[4]
    cdef double R[9]
    for i in range(m.nb):
        qo = m.qoff[i]
        vo = m.voff[i]
        if m.kind[i] == KIND_SCREWS:
            for k in range(m.nvj[i]):
                qdot[qo + k] = v[vo + k]
            continue
        j = qo if m.kind[i] == KIND_SPHERICAL else qo + 3
        W[0] = 0.0; W[1] = 0.5 * v[vo]; W[2] = 0.5 * v[vo + 1]; W[3] = 0.5 * v[vo + 2]
        quat_mul_c(&q[j], W, &qdot[j])
        if m.kind[i] == KIND_FREE_SO3R3:
            for k in range(3):
                qdot[qo + k] = v[vo + 3 + k]
        elif m.kind[i] == KIND_FREE_SE3:
            quat_to_rot(&q[j], R)
            rot_vec(R, &v[vo + 3], &qdot[qo])


cdef void normalize_quaternions(ModelCore m, double* q) noexcept nogil:
    cdef int i, j
    cdef double n
    for i in range(m.nb):
        if m.kind[i] == KIND_SCREWS:
            continue
        j = m.qoff[i] if m.kind[i] == KIND_SPHERICAL else m.qoff[i] + 3
        n = sqrt(q[j] * q[j] + q[j + 1] * q[j + 1] + q[j + 2] * q[j + 2] + q[j + 3] * q[j + 3])
        q[j] /= n; q[j + 1] /= n; q[j + 2] /= n; q[j + 3] /= n


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def _retract(ModelCore self, q, psi, int local=LOCAL_EXP):
    """q ⊕ ψ for one state (see treedyn.integrators)."""
    cdef cnp.ndarray qa = self._states(q, self.nq, "q")
    self._check_unit_quaternions(qa, "q")
    cdef cnp.ndarray pa = self._like(qa, psi, self.nv, "dq")
    cdef Py_ssize_t N, s
    out = np.empty_like(qa)
    cdef double[::1] of = out.reshape(-1)
    cdef double* qp = <double*>cnp.PyArray_DATA(qa)
    cdef double* pp = <double*>cnp.PyArray_DATA(pa)
    N = 1 if cnp.PyArray_NDIM(qa) == 1 else cnp.PyArray_DIMS(qa)[0]
    for s in range(N):
        config_retract(self, &qp[s * self.nq], &pp[s * self.nv], local, &of[s * self.nq])
    return out


def _difference(ModelCore self, q0, q1):
    """ψ with q1 = q0 ⊕ ψ (exponential coordinates)."""
    cdef cnp.ndarray a0 = self._states(q0, self.nq, "q0")
    cdef cnp.ndarray a1 = self._like(a0, q1, self.nq, "q1")
    self._check_unit_quaternions(a0, "q0")
    self._check_unit_quaternions(a1, "q1")
    cdef Py_ssize_t N, s
    lead = () if cnp.PyArray_NDIM(a0) == 1 else (int(cnp.PyArray_DIMS(a0)[0]),)
    out = np.empty(lead + (self.nv,))
    cdef double[::1] of = out.reshape(-1)
    cdef double* p0 = <double*>cnp.PyArray_DATA(a0)
    cdef double* p1 = <double*>cnp.PyArray_DATA(a1)
    N = lead[0] if lead else 1
    for s in range(N):
        config_difference(self, &p0[s * self.nq], &p1[s * self.nq], &of[s * self.nv])
    return out


def _local_rates(ModelCore self, psi, v, int local=LOCAL_EXP):
    """dτ⁻¹_{−ψ} v per joint (one state)."""
    cdef cnp.ndarray pa = self._states(psi, self.nv, "psi")
    cdef cnp.ndarray va = self._like(pa, v, self.nv, "v")
    if cnp.PyArray_NDIM(pa) != 1:
        raise InputError("one state expected")
    out = np.empty(self.nv)
    cdef double[::1] of = out
    if self.nv:
        local_rates(self, <double*>cnp.PyArray_DATA(pa), <double*>cnp.PyArray_DATA(va),
                    local, &of[0])
    return out


def _config_rate(ModelCore self, q, v):
    """q̇ ∈ R^nq of the vector-space form (one state)."""
    cdef cnp.ndarray qa = self._states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    if cnp.PyArray_NDIM(qa) != 1:
        raise InputError("one state expected")
    out = np.empty(self.nq)
    cdef double[::1] of = out
    if self.nq:
        config_rate(self, <double*>cnp.PyArray_DATA(qa), <double*>cnp.PyArray_DATA(va), &of[0])
    return out
