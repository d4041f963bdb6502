# Geometric sensitivity (Müller 2018, §6.2): derivatives of the joint forces τ and
# of frame poses with respect to the geometric parameters of the joints' reference
# poses — the calibration Jacobian.
#
# Joint i's reference pose B_i (its frame in the parent body at q_i = 0) is
# perturbed as B_i exp(π̂_i), π_i = (δφ, δr) ∈ R⁶ a twist in the joint's reference
# frame (to first order the six one-parameter screws exp(U_1 π_1)⋯exp(U_6 π_6)
# along the frame's axes).  The joint's screws are body-fixed after B_i, so the
# perturbation moves i's subtree rigidly by exp(ε Y) with Y = Ad_{C_p B_i} e_k (the
# world screw of the reference frame's k-th axis, C_p the parent's world pose)
# while the parent keeps its motion; Y turns with the parent, Ẏ = [V_p, Y].  In
# frame o (world axes and origin), for every body c of the subtree (Vr = V_c − V_p,
# Ā = V̇ − G with G = (0, g), P = [V_p, Y], Q = [Ā_p, Y] (Ā_p = −G at the root)):
#
#   δJ = [Y, J],   δV_c = [Y, Vr],   δV̇_c = [Y, V̇_c − V̇_p] + [P, Vr],
#   δM_c x = −ad_Yᵀ M_c x − M_c [Y, x],
#   δw_c = δM Ā + M δV̇ − ad_{δV}ᵀ M V − ad_Vᵀ (δM V + M δV)
#        = −ad_Yᵀ M Ā + M (Q + [P, Vr]) − ad_{[Y, Vr]}ᵀ M V − ad_Vᵀ (−ad_Yᵀ M V + M P)
#
# (δV̇ − [Y, Ā] = Q + [P, Vr] and δV − [Y, V] = P), with w_c = M_c Ā_c − ad_{V_c}ᵀ M_c V_c
# the body's own wrench.  With F and δF the subtree sums of w and δw:
# δτ_b = [Y, J_b]ᵀ F_b + J_bᵀ δF_b for the freedoms of the subtree (joint i's
# included) and δτ_a = J_aᵀ δF_i for the freedoms above it.  A frame f on a body of
# the subtree moves by δC_f = Ŷ C_f: its spatial column is Y, its body column
# Ad_{C_f}⁻¹ Y, its hybrid column (ω, v + ω × r_f).  Cost per state: O(n) for the
# motion, O(Σ_i |subtree(i)|) for the selected joints i.


cdef inline void _gs_reference_screws(const double* F, double* Y) noexcept nogil:
    """The six columns of Ad_F (F = (R, r), 12 doubles) as six twists Y[6 k …]:
    k < 3: (R e_k, r × R e_k); k ≥ 3: (0, R e_{k−3})."""
    cdef int k, n
    cdef double w[3]
    for k in range(3):
        w[0] = F[k]; w[1] = F[3 + k]; w[2] = F[6 + k]
        Y[6 * k] = w[0]; Y[6 * k + 1] = w[1]; Y[6 * k + 2] = w[2]
        cross(&F[9], w, &Y[6 * k + 3])
        for n in range(3):
            Y[6 * (3 + k) + n] = 0.0
        Y[6 * (3 + k) + 3] = w[0]; Y[6 * (3 + k) + 4] = w[1]; Y[6 * (3 + k) + 5] = w[2]


cdef inline void _gs_reference_pose(ModelCore m, DataC* d, int i, double* F) noexcept nogil:
    """F = C_p B_i: the world pose of joint i's reference frame (B_i at a root)."""
    cdef int p = m.parent[i]
    if p < 0:
        memcpy(F, &m.Bref[i, 0], 12 * sizeof(double))
    else:
        pose_mul(&d.oMi[12 * p], &d.oMi[12 * p + 9], &m.Bref[i, 0], &m.Bref[i, 9], F, &F[9])


cdef void _gs_frame_columns(ModelCore m, DataC* d, int body, const double* off,
                         const double* col, int k, int rep, double* D) noexcept nogil:
    """D (6 × 6k, row-major): the pose derivative of the frame at ``off`` (12, or
    NULL: the body's own frame) on ``body`` with respect to the selected joints
    (col[b]: the column block of body b's joint, −1 if not selected) in
    representation rep (0 body, 1 spatial, 2 hybrid).  Needs d.oMi."""
    cdef int a = body, mm, kk, n, r, w = 6 * k
    cdef double Rf[9]
    cdef double rf[3]
    cdef double Fr[12]
    cdef double Y[36]
    cdef double x[6]
    cdef double* C
    for n in range(6 * w):
        D[n] = 0.0
    if body < 0:
        return
    C = &d.oMi[12 * body]
    if off != NULL:
        pose_mul(C, &C[9], off, &off[9], Rf, rf)
    else:
        memcpy(Rf, C, 9 * sizeof(double))
        memcpy(rf, &C[9], 3 * sizeof(double))
    while a >= 0:
        mm = <int>col[a]
        if mm >= 0:
            _gs_reference_pose(m, d, a, Fr)
            _gs_reference_screws(Fr, Y)
            for kk in range(6):
                if rep == 0:
                    twist_Ad_inv(Rf, rf, &Y[6 * kk], x)
                else:
                    for n in range(6):
                        x[n] = Y[6 * kk + n]
                    if rep == 2:
                        cross(&Y[6 * kk], rf, &x[3])       # v + ω × r_f
                        for n in range(3):
                            x[3 + n] += Y[6 * kk + 3 + n]
                for r in range(6):
                    D[r * w + 6 * mm + kk] = x[r]
        a = m.parent[a]


cdef int geometric_sensitivity_kernel(ModelCore m, DataC* d, const double* q,
                                      const double* qd, const double* qdd, const double* g,
                                      const double* plan, int rep, double* dframes,
                                      double* dtau) noexcept nogil:
    """Frame-pose derivatives (dframes: nf × 6 × 6k) and, if dtau is not NULL (then
    qd, qdd given), ∂τ/∂π (dtau: nv × 6k, row-major; column 6 m + kk: direction kk
    of the m-th selected joint).  ``plan`` (doubles holding integers): k, the k
    selected joints, nf, nf pairs (body, named frame or −1), then per body its
    column block or −1.  Fills d.oMi, d.v, d.a and the g* fields.  Returns 0 or
    i + 1 for a non-unit quaternion of joint i."""
    cdef int nb = m.nb, nv = m.nv, k = <int>plan[0], nf, w, f, fi, mm, kk, i, c, p, b
    cdef int j, n, bad
    cdef const double* js = &plan[1]
    cdef const double* fr
    cdef const double* col
    cdef double Fr[12]
    cdef double Y[36]
    cdef double P[36]
    cdef double Q[36]
    cdef double Vp[6]
    cdef double Vr[6]
    cdef double x[6]
    cdef double y[6]
    cdef double t6[6]
    cdef double J[6]
    cdef double YJ[6]
    cdef double* C
    cdef double* dw
    cdef const double* AGp
    cdef double mG[6]
    nf = <int>plan[1 + k]
    fr = &plan[2 + k]
    col = &plan[2 + k + 2 * nf]
    w = 6 * k
    bad = body_motion_kernel(m, d, q, qd, qdd)
    for f in range(nf):
        fi = <int>fr[2 * f + 1]
        _gs_frame_columns(m, d, <int>fr[2 * f], &m.foff[fi, 0] if fi >= 0 else NULL, col, k,
                       rep, &dframes[36 * k * f])
    if dtau == NULL:
        return bad
    for n in range(6):
        mG[n] = 0.0
    mG[3] = -g[0]; mG[4] = -g[1]; mG[5] = -g[2]
    # the bodies' inertias, twists, Ā, momenta, M Ā and own wrenches in frame o
    for b in range(nb):
        C = &d.oMi[12 * b]
        rigid_world_inertia(C, &C[9], &m.inert[b, 0], &d.gIc[10 * b])
        twist_Ad(C, &C[9], &d.v[6 * b], &d.gV[6 * b])
        twist_Ad(C, &C[9], &d.a[6 * b], &d.gA[6 * b])
        for n in range(3):
            d.gA[6 * b + 3 + n] -= g[n]
        rigid_apply_packed(&d.gIc[10 * b], &d.gV[6 * b], &d.gH[6 * b])
        rigid_apply_packed(&d.gIc[10 * b], &d.gA[6 * b], &d.gMA[6 * b])
        for n in range(6):
            d.gF[6 * b + n] = d.gMA[6 * b + n]
        add_gyroscopic(&d.gV[6 * b], &d.gH[6 * b], &d.gF[6 * b])
    for b in range(nb - 1, 0, -1):
        p = m.parent[b]
        if p >= 0:
            twist_add(&d.gF[6 * p], &d.gF[6 * b])
    for n in range(nv * w):
        dtau[n] = 0.0
    for mm in range(k):
        i = <int>js[mm]
        p = m.parent[i]
        _gs_reference_pose(m, d, i, Fr)
        _gs_reference_screws(Fr, Y)
        if p >= 0:
            for n in range(6):
                Vp[n] = d.gV[6 * p + n]
            AGp = &d.gA[6 * p]
        else:
            for n in range(6):
                Vp[n] = 0.0
            AGp = mG
        for kk in range(6):
            twist_bracket(Vp, &Y[6 * kk], &P[6 * kk])
            twist_bracket(AGp, &Y[6 * kk], &Q[6 * kk])
        # the subtree of i (bodies are numbered parent-first) and its own δw
        for c in range(i, nb):
            d.gsub[c] = c == i or (m.parent[c] >= i and d.gsub[m.parent[c]])
            if not d.gsub[c]:
                continue
            for n in range(6):
                Vr[n] = d.gV[6 * c + n] - Vp[n]
            for kk in range(6):
                dw = &d.gdF[36 * c + 6 * kk]
                for n in range(6):
                    dw[n] = 0.0
                add_gyroscopic(&Y[6 * kk], &d.gMA[6 * c], dw)
                twist_bracket(&P[6 * kk], Vr, x)
                twist_add(x, &Q[6 * kk])
                rigid_apply_packed(&d.gIc[10 * c], x, t6)
                twist_add(dw, t6)
                twist_bracket(&Y[6 * kk], Vr, x)
                add_gyroscopic(x, &d.gH[6 * c], dw)
                rigid_apply_packed(&d.gIc[10 * c], &P[6 * kk], y)
                add_gyroscopic(&Y[6 * kk], &d.gH[6 * c], y)
                add_gyroscopic(&d.gV[6 * c], y, dw)
        # subtree sums δF, leaves to i
        for c in range(nb - 1, i, -1):
            if d.gsub[c]:
                p = m.parent[c]
                for n in range(36):
                    d.gdF[36 * p + n] += d.gdF[36 * c + n]
        # δτ of the subtree's freedoms: [Y, J]ᵀ F + Jᵀ δF
        for c in range(i, nb):
            if not d.gsub[c]:
                continue
            C = &d.oMi[12 * c]
            for j in range(m.voff[c], m.voff[c] + m.nvj[c]):
                twist_Ad(C, &C[9], &d.S[6 * j], J)
                for kk in range(6):
                    twist_bracket(&Y[6 * kk], J, YJ)
                    dtau[j * w + 6 * mm + kk] = (dot6(YJ, &d.gF[6 * c])
                                                 + dot6(J, &d.gdF[36 * c + 6 * kk]))
        # … and of the freedoms above i: Jᵀ δF_i
        b = m.parent[i]
        while b >= 0:
            C = &d.oMi[12 * b]
            for j in range(m.voff[b], m.voff[b] + m.nvj[b]):
                twist_Ad(C, &C[9], &d.S[6 * j], J)
                for kk in range(6):
                    dtau[j * w + 6 * mm + kk] = dot6(J, &d.gdF[36 * i + 6 * kk])
            b = m.parent[b]
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_geometric_sensitivity(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out: frame derivatives, out2: ∂τ/∂π (or NULL, then c.v, c.a are NULL);
    c.fext carries the plan (shared by the samples, c.sf = 0; see the kernel)."""
    return geometric_sensitivity_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.rep, c.out,
                                        c.out2)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line; Python-visible)
def geometric_sensitivity(ModelCore self, q, v=None, a=None, frames=(), joints=None,
                          representation="body", gravity=None, data=None):
    """Derivatives of τ = inverse_dynamics(q, v, a) and of frame poses with respect
    to the reference-pose parameters of ``joints``: the calibration Jacobian
    (Müller 2018, §6.2; docs/derivatives.md, "Geometric sensitivity";
    cysrc/geometric_sensitivity.pxi).

    Joint i's reference pose B_i (``model.B[i]``, its frame in the parent body at
    q_i = 0) is perturbed as ``B_i exp(π̂_i)``, π_i = (δφ, δr) ∈ R⁶ a twist in the
    joint's reference frame (angular first); :meth:`with_reference_offsets` builds
    the perturbed robot.

    Parameters
    ----------
    q : array_like, shape (nq,) or (N, nq)
    v, a : array_like, shape (nv,) or (N, nv), optional
        Velocities and accelerations; give both for ∂τ/∂π, or neither for the
        frame derivatives only.
    frames : str or sequence of str
        Bodies or named frames whose pose derivatives are wanted.
    joints : sequence of str or int, optional
        Joint names or body indices (default: every joint, in body order).
    representation : {"body", "spatial", "hybrid"}
        Of the frame derivatives: "body" C_f⁻¹ ∂C_f, "spatial" ∂C_f C_f⁻¹,
        "hybrid" angular as spatial, linear ∂r_f.
    gravity : array_like, shape (3,), optional
        World-frame gravity (default: ``model.gravity``).
    data : Data, optional
        Single state: the Data to work in.

    Returns
    -------
    dict
        ``"joints"``: the joint names in column order (k of them); ``"tau"``:
        ∂τ/∂π, (nv, 6 k) or (N, nv, 6 k), None without v and a; ``"frames"``:
        {name: (6, 6 k) or (N, 6, 6 k)}.  Columns 6 m … 6 m + 5 belong to the
        m-th joint: (δφ, δr) in its reference frame.  External wrenches are not
        included.  Loop-closed models: the tree's τ and frame poses at the given
        full q; :func:`treedyn.sensitivity.closure_sensitivity` and
        :func:`treedyn.sensitivity.closed_loop_sensitivity` differentiate the
        closure residual, the assembly and closed-loop inverse dynamics.

    Example
    -------
    >>> S = model.geometric_sensitivity(q, v, a, frames=["link7"], joints=["joint2"])
    >>> S["tau"].shape, S["frames"]["link7"].shape         # (7, 6), (6, 6) on panda
    """
    where = "geometric_sensitivity"
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = None, aa = None, res_t = None, res_f, plan
    cdef double gbuf[3]
    cdef double* pl
    cdef cnp.npy_intp dims[3]
    cdef Call c
    cdef int k, nf, m, b, rep
    if (v is None) != (a is None):
        raise InputError(f"{where}: give both v and a (for ∂τ/∂π) or neither")
    if v is not None:
        va = self._like(qa, v, self.nv, "v")
        aa = self._like(qa, a, self.nv, "a")
    if not isinstance(representation, str) or representation not in ("body", "spatial",
                                                                      "hybrid"):
        raise InputError(f"{where}: representation must be one of ('body', 'spatial', "
                         f"'hybrid'), got {representation!r}")
    rep = ("body", "spatial", "hybrid").index(representation)
    names = list(getattr(self, "joint_names"))
    if joints is None:
        js = list(range(self.nb))
    else:
        if isinstance(joints, str):
            joints = [joints]
        js = []
        for jn in joints:
            if isinstance(jn, str):
                if jn not in names:
                    raise InputError(f"{where}: joints: no moving tree joint named {jn!r}")
                js.append(names.index(jn))
            elif isinstance(jn, (int, np.integer)) and not isinstance(jn, (bool, np.bool_)) \
                    and 0 <= jn < self.nb:
                js.append(int(jn))
            else:
                raise InputError(f"{where}: joints: expected joint names or indices 0.."
                                 f"{self.nb - 1}, got {jn!r}")
        if len(set(js)) != len(js):
            raise InputError(f"{where}: joints: a joint is listed more than once")
    if isinstance(frames, str):
        frames = [frames]
    frames = list(dict.fromkeys(frames))
    targets = []
    for name in frames:
        try:
            targets.append(self._target(name))
        except InputError:
            raise InputError(f"{where}: frames: no body or frame named {name!r}") from None
    k = len(js)
    nf = len(frames)
    plan = np.full(2 + k + 2 * nf + self.nb, -1.0)
    pl = <double*>cnp.PyArray_DATA(plan)
    pl[0] = k
    for m in range(k):
        pl[1 + m] = js[m]
        pl[2 + k + 2 * nf + js[m]] = m
    pl[1 + k] = nf
    for m in range(nf):
        pl[2 + k + 2 * m] = targets[m][0]
        pl[3 + k + 2 * m] = targets[m][1]
    memset(&c, 0, sizeof(Call))
    dims[0] = nf; dims[1] = 6; dims[2] = 6 * k
    res_f = self._output(None, qa, 3, dims)
    if va is not None:
        dims[0] = self.nv; dims[1] = 6 * k
        res_t = self._output(None, qa, 2, dims)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(aa)
        c.out2 = <double*>cnp.PyArray_DATA(res_t)
        c.so2 = self.nv * 6 * k
    c.g = self._gravity_ptr(gravity, gbuf)
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.fext = pl
    c.rep = rep
    c.out = <double*>cnp.PyArray_DATA(res_f)
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.so = nf * 36 * k
    self._dispatch(_k_geometric_sensitivity, &c, self._batch(qa), data, -1,
                   "geometric_sensitivity: ∂τ/∂π or the frame derivatives")
    batch = cnp.PyArray_NDIM(qa) == 2
    return {"joints": [names[i] for i in js], "tau": res_t,
            "frames": {name: (res_f[:, n] if batch else res_f[n])
                       for n, name in enumerate(frames)}}
