# The kernels written once for one state and for TD_VL states side by side (vector
# lanes; cysrc/lanes.h, docs/algorithms.md "Vector lanes"): the sweeps of the spatial
# RNEA (rnea_spatial_sweeps.h), of the inverse-dynamics derivatives
# (rnea_derivatives_sweeps.h), passes 1–3 of M⁻¹ (minverse_sweeps.h) and of the ABA
# (aba_sweeps.h, the rollouts' stages: integrators_lanes.pxi), compiled for
# double and for td_vec, and for lanes the spatial poses (poses_sweeps.h).  This block
# comes after minverse.pxi and rnea_derivatives.pxi, whose one-state column loops and
# ancestor pairs it uses; the entry points take a lane count (1 or TD_VL) and double
# pointers.  Below: moving states into and out of the lanes.

cdef extern from *:
    """
    /* td_ancestor_pairs for one state, through the sweeps' output pointers */
    static inline void td_ancestor_pairs_s(long nv, long b, const int* runs, int nruns,
                                           const double* S, long ld, const double* ub,
                                           const double* wb, const double* eb,
                                           const double* G, const double* H,
                                           double* const* dq, double* const* dv,
                                           double* const* M)
    {
        td_ancestor_pairs(nv, b, runs, nruns, S, ld, ub, wb, eb, G, H, dq[0], dv[0],
                          M ? M[0] : NULL);
    }

    #define TD_KIND_SCREWS 0        /* kinds.pxd */
    #define TD_KIND_FREE_SO3R3 3
    #define TD_FAST_REV_X 1         /* joints.pxi FAST_* */
    #define TD_FAST_REV_Z 3
    #define TD_FAST_SCREW 4
    #define TD_T double
    #define TD_LANES 1
    #define TD_FN(name) td_##name##_s
    #include "lanes.h"
    #undef TD_T
    #undef TD_LANES
    #undef TD_FN

    #if TD_VL
    /* The same entries for TD_VL states side by side (lane l: state l, written to
       dq[l], dv[l], M[l]), one ancestor freedom a at a time. */
    static void td_ancestor_pairs_l(long nv, long b, const int* runs, int nruns,
                                    const td_vec* S, long ld, const td_vec* ub,
                                    const td_vec* wb, const td_vec* eb, const td_vec* G,
                                    const td_vec* H, double* const* dq, double* const* dv,
                                    double* const* M)
    {
        for (int r = 0; r < nruns; r++) {
            #define TD_LDL(k) (S[(k) * ld + a])
            for (long a = runs[2 * r]; a < runs[2 * r + 1]; a++) {
                TD_PAIR(td_vec, TD_LDL)
                for (int l = 0; l < TD_VL; l++) {
                    dq[l][b * nv + a] = q_[l];
                    dv[l][b * nv + a] = v_[l];
                    dq[l][a * nv + b] = g_[l];
                    dv[l][a * nv + b] = h_[l];
                    if (M) {
                        M[l][b * nv + a] = m_[l];
                        M[l][a * nv + b] = m_[l];
                    }
                }
            }
            #undef TD_LDL
        }
    }
    #define TD_T td_vec
    #define TD_LANES TD_VL
    #define TD_FN(name) td_##name##_l
    #include "lanes.h"
    #undef TD_T
    #undef TD_LANES
    #undef TD_FN
    #define TD_LANE_CALL(call) call
    #else
    #define TD_LANE_CALL(call) ((void)0)
    #endif

    /* The sweeps on `lanes` states (1, or TD_VL side by side; arrays of doubles,
       lane-interleaved for TD_VL) */
    static void td_deriv_forward(int lanes, int nb, const int* parent, const int* voff,
                                 const int* nvj, const int* kind, const int* fast,
                                 const double* inert, const double* C, const double* J,
                                 const double* qd, const double* qdd, const double* a0,
                                 const double* Fx, double* V, double* A, double* F,
                                 double* Ic, double* Bc, double* YPX)
    {
        if (lanes == 1)
            td_deriv_forward_s(nb, parent, voff, nvj, kind, fast, inert, C, J, qd, qdd, a0,
                               Fx, V, A, F, Ic, Bc, YPX);
        else
            TD_LANE_CALL(td_deriv_forward_l(nb, parent, voff, nvj, kind, fast, inert,
                (const td_vec*)C, (const td_vec*)J, (const td_vec*)qd, (const td_vec*)qdd,
                (const td_vec*)a0, (const td_vec*)Fx, (td_vec*)V, (td_vec*)A, (td_vec*)F,
                (td_vec*)Ic, (td_vec*)Bc, (td_vec*)YPX));
    }

    static void td_deriv_components(int lanes, int nv, const double* J, const double* YPX,
                                    double* S)
    {
        if (lanes == 1)
            td_deriv_components_s(nv, J, YPX, S);
        else
            TD_LANE_CALL(td_deriv_components_l(nv, (const td_vec*)J, (const td_vec*)YPX,
                                               (td_vec*)S));
    }

    static void td_deriv_backward(int lanes, int nb, int nv, const int* parent,
                                  const int* voff, const int* nvj, const int* kind,
                                  const int* anc_ptr, const int* anc_run,
                                  const double* armature, const double* J,
                                  const double* YPX, const double* S, double* F, double* Ic,
                                  double* Bc, double* E, int fext_frame, double* const* dq,
                                  double* const* dv, double* const* M)
    {
        if (lanes == 1)
            td_deriv_backward_s(nb, nv, parent, voff, nvj, kind, anc_ptr, anc_run, armature,
                                J, YPX, S, F, Ic, Bc, E, fext_frame, dq, dv, M);
        else
            TD_LANE_CALL(td_deriv_backward_l(nb, nv, parent, voff, nvj, kind, anc_ptr,
                anc_run, armature, (const td_vec*)J, (const td_vec*)YPX, (const td_vec*)S,
                (td_vec*)F, (td_vec*)Ic, (td_vec*)Bc, (td_vec*)E, fext_frame, dq, dv, M));
    }

    static void td_rnea_spatial(int lanes, int nb, const int* parent, const int* voff,
                                const int* nvj, const int* fast, const double* inert,
                                const double* armature, const double* g, const double* C,
                                const double* J, const double* Sdq, const double* qd,
                                const double* qdd, const double* Fx, double* V, double* A,
                                double* F, double* tau)
    {
        if (lanes == 1)
            td_rnea_spatial_sweeps_s(nb, parent, voff, nvj, fast, inert, armature, g, C, J, Sdq,
                                     qd, qdd, Fx, V, A, F, tau);
        else
            TD_LANE_CALL(td_rnea_spatial_sweeps_l(nb, parent, voff, nvj, fast, inert, armature,
                g, (const td_vec*)C, (const td_vec*)J, (const td_vec*)Sdq, (const td_vec*)qd,
                (const td_vec*)qdd, (const td_vec*)Fx, (td_vec*)V, (td_vec*)A, (td_vec*)F,
                (td_vec*)tau));
    }

    static void td_lanes_spatial_poses(int nb, const int* parent, const int* voff,
                                       const int* nvj, const int* fast, const double* X,
                                       const double* Bref, const double* sc, const double* T,
                                       const double* S, double* C, double* J)
    {
        TD_LANE_CALL(td_spatial_poses_l(nb, parent, voff, nvj, fast, X, Bref,
            (const td_vec*)sc, (const td_vec*)T, (const td_vec*)S, (td_vec*)C, (td_vec*)J));
    }

    static void td_aba_lanes(int nb, const int* parent, const int* voff, const int* nvj,
                             const int* fast, const double* inert, const double* armature,
                             const double* C, const double* J, const double* Sdq,
                             const double* qd, const double* tau, const double* a0, double* V,
                             double* cb, double* IA, double* pA, double* A, double* U,
                             double* Dl, double* u, double* qdd, int* codes)
    {
        TD_LANE_CALL(td_aba_sweeps_l(nb, parent, voff, nvj, fast, inert, armature,
            (const td_vec*)C, (const td_vec*)J, (const td_vec*)Sdq, (const td_vec*)qd,
            (const td_vec*)tau, (const td_vec*)a0, (td_vec*)V, (td_vec*)cb, (td_vec*)IA,
            (td_vec*)pA, (td_vec*)A, (td_vec*)U, (td_vec*)Dl, (td_vec*)u, (td_vec*)qdd,
            codes));
    }

    /* dst[l][k] = lane l of element k of the lane array src, k < n: TD_VL × TD_VL
       blocks transposed in registers (each source vector read once) */
    #if defined(__clang__)
    #define TD_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
    #else
    #define TD_SHUF(a, b, ...) __builtin_shuffle(a, b, (td_ivec){__VA_ARGS__})
    #endif
    static void td_lanes_scatter(long n, const double* src, double* const* dst)
    {
        long k = 0;
    #if TD_VL == 4
        for (; k + 4 <= n; k += 4) {
            const td_vec a = *(const td_vec*)(src + 4 * k), b = *(const td_vec*)(src + 4 * k + 4),
                         c = *(const td_vec*)(src + 4 * k + 8),
                         d = *(const td_vec*)(src + 4 * k + 12);
            const td_vec t0 = TD_SHUF(a, b, 0, 4, 2, 6), t1 = TD_SHUF(a, b, 1, 5, 3, 7),
                         t2 = TD_SHUF(c, d, 0, 4, 2, 6), t3 = TD_SHUF(c, d, 1, 5, 3, 7);
            *(td_uvec*)(dst[0] + k) = TD_SHUF(t0, t2, 0, 1, 4, 5);
            *(td_uvec*)(dst[1] + k) = TD_SHUF(t1, t3, 0, 1, 4, 5);
            *(td_uvec*)(dst[2] + k) = TD_SHUF(t0, t2, 2, 3, 6, 7);
            *(td_uvec*)(dst[3] + k) = TD_SHUF(t1, t3, 2, 3, 6, 7);
        }
    #elif TD_VL == 2
        for (; k + 2 <= n; k += 2) {
            const td_vec a = *(const td_vec*)(src + 2 * k), b = *(const td_vec*)(src + 2 * k + 2);
            *(td_uvec*)(dst[0] + k) = TD_SHUF(a, b, 0, 2);
            *(td_uvec*)(dst[1] + k) = TD_SHUF(a, b, 1, 3);
        }
    #endif
        for (; k < n; k++)
            for (int l = 0; l < TD_VL; l++)
                dst[l][k] = src[k * TD_VL + l];
    }

    static void td_minverse(int lanes, int nb, long nv, const int* parent, const int* voff,
                            const int* nvj, const int* root, const double* inert,
                            const double* armature, const double* C, const double* J,
                            double* IA, double* F, double* U, double* Dinv, int* se,
                            double* Mi, int* codes)
    {
        if (lanes == 1)
            td_minverse_s(nb, nv, parent, voff, nvj, root, inert, armature, C, J, IA, F, U,
                          Dinv, se, Mi, codes);
        else
            TD_LANE_CALL(td_minverse_l(nb, nv, parent, voff, nvj, root, inert, armature,
                (const td_vec*)C, (const td_vec*)J, (td_vec*)IA, (td_vec*)F, (td_vec*)U,
                (td_vec*)Dinv, se, (td_vec*)Mi, codes));
    }
    """
    int TD_VL
    void td_deriv_forward(int lanes, int nb, const int* parent, const int* voff,
                          const int* nvj, const int* kind, const int* fast,
                          const double* inert, const double* C, const double* J,
                          const double* qd, const double* qdd, const double* a0,
                          const double* Fx, double* V, double* A, double* F, double* Ic,
                          double* Bc, double* YPX) noexcept nogil
    void td_deriv_components(int lanes, int nv, const double* J, const double* YPX,
                             double* S) noexcept nogil
    void td_deriv_backward(int lanes, int nb, int nv, const int* parent, const int* voff,
                           const int* nvj, const int* kind, const int* anc_ptr,
                           const int* anc_run, const double* armature, const double* J,
                           const double* YPX, const double* S, double* F, double* Ic,
                           double* Bc, double* E, int fext_frame, double* const* dq,
                           double* const* dv, double* const* M) noexcept nogil
    void td_lanes_scatter(long n, const double* src, double* const* dst) noexcept nogil
    void td_rnea_spatial(int lanes, int nb, const int* parent, const int* voff, const int* nvj,
                         const int* fast, const double* inert, const double* armature,
                         const double* g, const double* C, const double* J, const double* Sdq,
                         const double* qd, const double* qdd, const double* Fx, double* V,
                         double* A, double* F, double* tau) noexcept nogil
    void td_lanes_spatial_poses(int nb, const int* parent, const int* voff, const int* nvj,
                                const int* fast, const double* X, const double* Bref,
                                const double* sc, const double* T, const double* S, double* C,
                                double* J) noexcept nogil
    void td_aba_lanes(int nb, const int* parent, const int* voff, const int* nvj,
                      const int* fast, const double* inert, const double* armature,
                      const double* C, const double* J, const double* Sdq, const double* qd,
                      const double* tau, const double* a0, double* V, double* cb, double* IA,
                      double* pA, double* A, double* U, double* Dl, double* u, double* qdd,
                      int* codes) noexcept nogil
    void td_minverse(int lanes, int nb, long nv, const int* parent, const int* voff,
                     const int* nvj, const int* root, const double* inert,
                     const double* armature, const double* C, const double* J, double* IA,
                     double* F, double* U, double* Dinv, int* se, double* Mi,
                     int* codes) noexcept nogil


cdef inline void _lanes_gather_poses(ModelCore m, DataC* d, int l) noexcept nogil:
    """Lane l of d.lC, d.lJ: this state's poses and spatial screws (d.sMi, d.sJ)."""
    cdef int L = TD_VL
    cdef long n
    for n in range(12 * m.nb):
        d.lC[n * L + l] = d.sMi[n]
    for n in range(6 * m.nv):
        d.lJ[n * L + l] = d.sJ[n]


cdef int _lane_joint_steps(ModelCore m, DataC* d, int l, const double* q,
                           const double* qd=NULL, bint angles=True) noexcept nogil:
    """Lane l of d.lsc, d.lT, d.lSb (and d.lSdq if qd is not NULL): this state's
    joint-local results for td_lanes_spatial_poses and td_rnea_spatial (sin, cos of the
    revolute fast-path angles, unless ``angles`` is False: _lanes_angles put them
    there; the joint poses liMi of the other joints; the body-fixed subspaces and Ṡ q̇
    of the joints without a fast path).  Returns 0 or i + 1 for a non-unit quaternion
    of joint i."""
    cdef int L = TD_VL, i, k, f, o, bad = 0
    cdef double cJ[6]
    if angles:
        angle_prepass(m, d, q)
    for i in range(m.nb):
        f = m.fast[i]
        if f >= FAST_REV_X and f <= FAST_REV_Z:
            if angles:
                d.lsc[2 * i * L + l] = d.sc_q[2 * i]
                d.lsc[(2 * i + 1) * L + l] = d.sc_q[2 * i + 1]
            continue
        if not angles:
            body_angles(m, d, i, q)     # (the axis fast paths went on above)
        if joint_step(m, d, i, q, qd, cJ, True) and bad == 0:
            bad = i + 1
        for k in range(12):
            d.lT[(12 * i + k) * L + l] = d.liMi[12 * i + k]
        if f == FAST_NONE:
            o = m.voff[i]
            for k in range(6 * m.nvj[i]):
                d.lSb[(6 * o + k) * L + l] = d.S[6 * o + k]
            if qd != NULL:
                for k in range(6):
                    d.lSdq[(6 * i + k) * L + l] = cJ[k]
    return bad


cdef inline void _lanes_spatial_poses(ModelCore m, DataC* d) noexcept nogil:
    """d.lC, d.lJ (poses and spatial screws in frame s) of the states whose joint steps
    _lane_joint_steps put in the lanes."""
    td_lanes_spatial_poses(m.nb, &m.parent[0], &m.voff[0], &m.nvj[0], &m.fast[0], &m.X[0, 0],
                           &m.Bref[0, 0], d.lsc, d.lT, d.lSb, d.lC, d.lJ)


cdef extern from "simd.h" nogil:
    void td_sincos_lanes(int nb, const int* fast, int lo, int hi, const int* qoff,
                         double* const* q, double* sc)


cdef inline void _lanes_angles(ModelCore m, DataC* d, double* const* q) noexcept nogil:
    """d.lsc of the TD_VL states q[l]: sin and cos of every revolute fast-path angle,
    one joint's lanes in one vector (td_sincos_lanes: bitwise td_sincos,
    angle_prepass's values, with fewer calls than one state at a time)."""
    td_sincos_lanes(m.nb, &m.fast[0], FAST_REV_X, FAST_REV_Z, &m.qoff[0], q, d.lsc)


cdef int _aba_lanes(ModelCore m, DataC* d, double* const* q, double* const* qd,
                    double* const* tau, const double* const* g, double* const* qdd,
                    int* codes) noexcept nogil:
    """aba_kernel (no external wrenches) of TD_VL states side by side, bitwise each
    state's: q̈ of lane l into qdd[l], its code (aba_kernel's: 0, i + 1 for a non-unit
    quaternion of joint i, −(i + 1) for a singular articulated inertia) into codes[l].
    The revolute angles' sines across the lanes (_lanes_angles), the other joint steps
    one state at a time (_lane_joint_steps), the poses and passes 1–3 in lanes (td_lanes_spatial_poses, aba_sweeps.h).  Returns the number of lanes
    with a nonzero code."""
    cdef int L = TD_VL, nv = m.nv, l, n, bad = 0
    cdef int acodes[8]
    _lanes_angles(m, d, q)
    for l in range(L):
        codes[l] = _lane_joint_steps(m, d, l, q[l], qd[l], False)
        acodes[l] = 0
        for n in range(nv):
            d.lqd[n * L + l] = qd[l][n]
            d.ltau[n * L + l] = tau[l][n]
        for n in range(3):
            d.la0[n * L + l] = 0.0
            d.la0[(3 + n) * L + l] = -g[l][n]
    _lanes_spatial_poses(m, d)
    td_aba_lanes(m.nb, &m.parent[0], &m.voff[0], &m.nvj[0], &m.fast[0], &m.inert[0, 0],
                 &m.armature[0], d.lC, d.lJ, d.lSdq, d.lqd, d.ltau, d.la0, d.lV, d.lcb,
                 d.lIA6, d.lpA, d.lA, d.lU, d.lDinv, d.lu, d.lqdd, acodes)
    td_lanes_scatter(nv, d.lqdd, qdd)
    for l in range(L):
        if codes[l] == 0:
            codes[l] = acodes[l]
        if codes[l]:
            bad += 1
    return bad
