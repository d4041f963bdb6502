# Derivatives of the configuration-space maps of lie_groups.pxi (integrate and
# difference), per joint, in the library's tangent coordinates (docs/conventions.md,
# "Derivatives and tangent spaces"): a tangent vector δ at q is the curve
# q ⊕ εδ, so every Jacobian is nv × nv and block diagonal, one block per joint.
#
# With ξ = v dt and q₁ = q ⊕ ξ = q · τ(ξ) on a joint's group G:
#   Jq = Ad_{τ(ξ)⁻¹}                 (q ⊕ εδ ⊕ ξ = q₁ · τ(ξ)⁻¹ exp(εδ) τ(ξ))
#   Jv = dt · dτ_{−ξ}                (the right-trivialized differential of τ)
# and with ψ = log(q₀⁻¹ q₁) (exponential coordinates):
#   J1 = dexp⁻¹_{−ψ},  J0 = −dexp⁻¹_{ψ} = −J1 Ad_{exp(−ψ)}
# ([Müller, abs. coord.] eqs. 26–28, 44–49 for dexp, dexp⁻¹ and dcay on SO(3) and
# SE(3); docs/conventions.md for the closed forms).  On SO(3)×R³ the rotation
# gets the SO(3) blocks and the position (additive in r) the blocks of R³: I and
# dt·I (Jq, Jv), −I and I (J0, J1) — no coupling.  Screw chains: as R^k.


cdef inline void _m3_set(double* M, double c0, double c1, double c2,
                         const double* x) noexcept nogil:
    """M = c0 I + c1 x̂ + c2 x̂² (3×3, row-major), x̂² = x xᵀ − |x|² I."""
    cdef double x0 = x[0], x1 = x[1], x2 = x[2]
    M[0] = c0 - c2 * (x1 * x1 + x2 * x2)
    M[4] = c0 - c2 * (x0 * x0 + x2 * x2)
    M[8] = c0 - c2 * (x0 * x0 + x1 * x1)
    M[1] = -c1 * x2 + c2 * x0 * x1
    M[3] = c1 * x2 + c2 * x0 * x1
    M[2] = c1 * x1 + c2 * x0 * x2
    M[6] = -c1 * x1 + c2 * x0 * x2
    M[5] = -c1 * x0 + c2 * x1 * x2
    M[7] = c1 * x0 + c2 * x1 * x2


cdef inline void _m3_mul(const double* A, const double* B, double* C) noexcept nogil:
    """C = A B (3×3); C must not alias A or B."""
    rot_mul(A, B, C)


cdef inline void _m3_store(const double* A, double s, double* out, int ld) noexcept nogil:
    """The 3×3 block at out (row stride ld) = s A."""
    cdef int r
    for r in range(3):
        out[r * ld] = s * A[3 * r]
        out[r * ld + 1] = s * A[3 * r + 1]
        out[r * ld + 2] = s * A[3 * r + 2]


cdef inline void _se3_Q_mat(const double* x, const double* u, double* Q) noexcept nogil:
    """Q(x, u) (3×3), the lower-left block of the SE(3) dexp at (x, u) (se3_dexp_Q):
    Q = a û + b (x̂û + ûx̂) + (x·u)(a′/φ x̂ + b′/φ x̂²), x̂û + ûx̂ = u xᵀ + x uᵀ − 2(x·u) I."""
    cdef double al, a, b, d, ap, bp
    cdef double phi = sqrt(dot3(x, x))
    cdef double xu = dot3(x, u)
    cdef int r, k
    so3_coeffs(phi, &al, &a, &b, &d)
    so3_dcoeffs(phi, &ap, &bp)
    _m3_set(Q, -2.0 * b * xu, xu * ap, xu * bp, x)
    for r in range(3):
        for k in range(3):
            Q[3 * r + k] += b * (u[r] * x[k] + x[r] * u[k])
    # + a û
    Q[1] -= a * u[2]; Q[2] += a * u[1]
    Q[3] += a * u[2]; Q[5] -= a * u[0]
    Q[6] -= a * u[1]; Q[7] += a * u[0]


cdef inline void _lower_left(const double* Ainv, const double* B, const double* Cinv,
                             double* L) noexcept nogil:
    """L = −C⁻¹ B A⁻¹: the lower-left block of the inverse of [[A, 0], [B, C]]."""
    cdef double T[9]
    cdef int k
    _m3_mul(B, Ainv, T)
    _m3_mul(Cinv, T, L)
    for k in range(9):
        L[k] = -L[k]


cdef inline void _rot_blocks_integrate(const double* xi, double dt, int local,
                                       double* Rt, double* Jr) noexcept nogil:
    """Rotation blocks of integrate_jacobians for ξ on SO(3): Rt = τ(ξ)ᵀ and
    Jr = dt dτ_{−ξ} (3×3 each)."""
    cdef double al, a, b, d, s
    if local == LOCAL_EXP:
        so3_coeffs(sqrt(dot3(xi, xi)), &al, &a, &b, &d)
        _m3_set(Rt, 1.0, -al, a, xi)                   # exp(−ξ̂)
        _m3_set(Jr, dt, -dt * a, dt * b, xi)           # dt dexp_{−ξ}
    else:
        # τ(ξ) = cay(ξ/2) = I + s ξ̂ + (s/2) ξ̂², dτ_x = s (I + ½ x̂), s = 4/(4 + |ξ|²)
        s = 4.0 / (4.0 + dot3(xi, xi))
        _m3_set(Rt, 1.0, -s, 0.5 * s, xi)
        _m3_set(Jr, dt * s, -0.5 * dt * s, 0.0, xi)


cdef int integrate_jacobians_kernel(ModelCore m, const double* v, double dt, int local,
                                    double* Jq, double* Jv) noexcept nogil:
    """Jq, Jv (nv × nv, row-major, zero off the joint blocks) of q ⊕ v dt.  They do
    not depend on q."""
    cdef int i, k, vo, nv = m.nv
    cdef double xi[6]
    cdef double Rt[9]
    cdef double Jr[9]
    cdef double Dm[9]
    cdef double B[9]
    cdef double L[9]
    cdef double t[3]
    cdef double s, xu
    memset(Jq, 0, nv * nv * sizeof(double))
    memset(Jv, 0, nv * nv * sizeof(double))
    for i in range(m.nb):
        vo = m.voff[i]
        if m.kind[i] == KIND_SCREWS:
            for k in range(vo, vo + m.nvj[i]):
                Jq[k * nv + k] = 1.0
                Jv[k * nv + k] = dt
            continue
        for k in range(6 if m.kind[i] != KIND_SPHERICAL else 3):
            xi[k] = v[vo + k] * dt
        _rot_blocks_integrate(xi, dt, local, Rt, Jr)
        _m3_store(Rt, 1.0, &Jq[vo * nv + vo], nv)
        _m3_store(Jr, 1.0, &Jv[vo * nv + vo], nv)
        if m.kind[i] == KIND_SPHERICAL:
            continue
        # the translational diagonal blocks
        vo += 3
        if m.kind[i] == KIND_FREE_SO3R3:
            for k in range(vo, vo + 3):
                Jq[k * nv + k] = 1.0
                Jv[k * nv + k] = dt
            continue
        _m3_store(Rt, 1.0, &Jq[vo * nv + vo], nv)
        _m3_store(Jr, 1.0, &Jv[vo * nv + vo], nv)
        # SE(3): Jq = Ad_{τ⁻¹} = [[Rᵀ, 0], [−Rᵀ t̂, Rᵀ]], t the translation of τ(ξ)
        if local == LOCAL_EXP:
            so3_left_jac(xi, &xi[3], 0, t)                  # t = dexp_x u
        else:
            # t = (I + R) u / 2 with R = Rtᵀ
            rotT_vec(Rt, &xi[3], t)
            for k in range(3):
                t[k] = 0.5 * (t[k] + xi[3 + k])
        _m3_set(B, 0.0, -1.0, 0.0, t)                       # −t̂
        _m3_mul(Rt, B, L)
        _m3_store(L, 1.0, &Jq[vo * nv + vo - 3], nv)
        # Jv lower-left: dt times that of dτ_{−ξ}
        if local == LOCAL_EXP:
            for k in range(6):
                xi[k] = -xi[k]
            _se3_Q_mat(xi, &xi[3], L)                      # Q(−x, −u)
            _m3_store(L, dt, &Jv[vo * nv + vo - 3], nv)
        else:
            # dτ_{−ξ} = [[A⁻¹, 0], [−C⁻¹ B A⁻¹, C⁻¹]] from dτ⁻¹_X = [[A, 0], [B, C]] at
            # X = (x, u) = −ξ (lie_groups.pxi, local_rates): A = I − ½ x̂ + ¼ x xᵀ,
            # C = I − ½ x̂, B w = −½ u×w − ¼ x×(w×u); with s = 4/(4 + |ξ_x|²):
            # A⁻¹ = s (I − ½ ξ̂_x), C⁻¹ = I − (s/2) ξ̂_x + (s/4) ξ̂_x²,
            # B = ½ ξ̂_u − ¼ ((ξ_x·ξ_u) I − ξ_u ξ_xᵀ)
            s = 4.0 / (4.0 + dot3(xi, xi))
            _m3_set(Dm, s, -0.5 * s, 0.0, xi)
            _m3_set(Rt, 1.0, -0.5 * s, 0.25 * s, xi)           # C⁻¹ (Rt is free now)
            _m3_store(Rt, dt, &Jv[vo * nv + vo], nv)
            xu = dot3(xi, &xi[3])
            _m3_set(B, -0.25 * xu, 0.5, 0.0, &xi[3])
            for k in range(3):
                B[3 * k] += 0.25 * xi[3 + k] * xi[0]
                B[3 * k + 1] += 0.25 * xi[3 + k] * xi[1]
                B[3 * k + 2] += 0.25 * xi[3 + k] * xi[2]
            _lower_left(Dm, B, Rt, L)
            _m3_store(L, dt, &Jv[vo * nv + vo - 3], nv)
    return 0


cdef int difference_jacobians_kernel(ModelCore m, const double* q0, const double* q1,
                                     double* J0, double* J1) noexcept nogil:
    """J0, J1 (nv × nv, row-major, zero off the joint blocks) of ψ = difference(q₀, q₁)
    (exponential coordinates)."""
    cdef int i, k, vo, nv = m.nv
    cdef double psi[6]
    cdef double x[3]
    cdef double u[3]
    cdef double al, a, b, d
    cdef double Dp[9]
    cdef double Dm[9]
    cdef double Q[9]
    cdef double L[9]
    memset(J0, 0, nv * nv * sizeof(double))
    memset(J1, 0, nv * nv * sizeof(double))
    for i in range(m.nb):
        vo = m.voff[i]
        if m.kind[i] == KIND_SCREWS:
            for k in range(vo, vo + m.nvj[i]):
                J0[k * nv + k] = -1.0
                J1[k * nv + k] = 1.0
            continue
        joint_log(m.kind[i], &q0[m.qoff[i]], &q1[m.qoff[i]], psi)
        so3_coeffs(sqrt(dot3(psi, psi)), &al, &a, &b, &d)
        _m3_set(Dp, 1.0, -0.5, d, psi)                      # dexp⁻¹_ψ
        _m3_set(Dm, 1.0, 0.5, d, psi)                       # dexp⁻¹_{−ψ}
        _m3_store(Dp, -1.0, &J0[vo * nv + vo], nv)
        _m3_store(Dm, 1.0, &J1[vo * nv + vo], nv)
        if m.kind[i] == KIND_SPHERICAL:
            continue
        vo += 3
        if m.kind[i] == KIND_FREE_SO3R3:
            for k in range(vo, vo + 3):
                J0[k * nv + k] = -1.0
                J1[k * nv + k] = 1.0
            continue
        # SE(3): dexp⁻¹_X = [[D⁻¹, 0], [−D⁻¹ Q D⁻¹, D⁻¹]] ([Müller, abs. coord.] eqs. 44–47)
        _m3_store(Dp, -1.0, &J0[vo * nv + vo], nv)
        _m3_store(Dm, 1.0, &J1[vo * nv + vo], nv)
        _se3_Q_mat(psi, &psi[3], Q)
        _lower_left(Dp, Q, Dp, L)
        _m3_store(L, -1.0, &J0[vo * nv + vo - 3], nv)
        for k in range(3):
            x[k] = -psi[k]
            u[k] = -psi[3 + k]
        _se3_Q_mat(x, u, Q)
        _lower_left(Dm, Q, Dm, L)
        _m3_store(L, 1.0, &J1[vo * nv + vo - 3], nv)
    return 0


# dispatcher adapters (Call in _kernels.pyx): integrate_jacobians reads v (c.v) and
# dt = c.k1, local map = c.rep; difference_jacobians reads q₀ = c.q, q₁ = c.a
# (stride c.sa = nq).  Outputs out, out2.
cdef int _k_integrate_jacobians(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return integrate_jacobians_kernel(m, c.v, c.k1, c.rep, c.out, c.out2)

cdef int _k_difference_jacobians(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return difference_jacobians_kernel(m, c.q, c.a, c.out, c.out2)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
cdef tuple _jacobian_pair(ModelCore self, cnp.ndarray qa, object out, Call* c, tuple names):
    """Two (nv, nv) outputs (or (N, nv, nv)) from out = None or a pair of arrays."""
    cdef cnp.npy_intp dims[2]
    dims[0] = self.nv; dims[1] = self.nv
    r1, r2 = self._outputs(out, qa, 2, dims, names)
    c.out = <double*>cnp.PyArray_DATA(r1)
    c.out2 = <double*>cnp.PyArray_DATA(r2)
    c.so = c.so2 = <Py_ssize_t>self.nv * self.nv
    return r1, r2


def _integrate_jacobians(ModelCore self, q, v, double dt=1.0, int local=LOCAL_EXP, data=None,
                         out=None):
    """(Jq, Jv) of q ⊕ v dt (lie_jacobians.pxi); see Model.integrate_jacobians."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef Call c
    memset(&c, 0, sizeof(Call))
    self._check_unit_quaternions(qa, "q")
    res = _jacobian_pair(self, qa, out, &c, ("Jq", "Jv"))
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.sq = self.nq
    c.sv = self.nv
    c.k1 = dt
    c.rep = local
    self._dispatch(_k_integrate_jacobians, &c, self._batch(qa), data, -1,
                   "integrate_jacobians: Jq or Jv")
    return res


def _difference_jacobians(ModelCore self, q0, q1, data=None, out=None):
    """(J0, J1) of difference(q0, q1) (lie_jacobians.pxi); see
    Model.difference_jacobians."""
    cdef cnp.ndarray a0 = _as_states(q0, self.nq, "q0")
    cdef cnp.ndarray a1 = self._like(a0, q1, self.nq, "q1")
    cdef Call c
    memset(&c, 0, sizeof(Call))
    self._check_quaternions_named(a0, "q0")
    self._check_quaternions_named(a1, "q1")
    res = _jacobian_pair(self, a0, out, &c, ("J0", "J1"))
    c.q = <double*>cnp.PyArray_DATA(a0)
    c.a = <double*>cnp.PyArray_DATA(a1)
    c.sq = self.nq
    c.sa = self.nq
    self._dispatch(_k_difference_jacobians, &c, self._batch(a0), data, -1,
                   "difference_jacobians: J0 or J1")
    return res
