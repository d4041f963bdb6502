# Inverse dynamics, spatial representation (Müller 2018, eqs. 70-71; signs as
# verified in docs/conventions.md).  All twists, accelerations and wrenches are
# spatial: world axes, about one fixed point (the current origin of the subtree's
# root body rather than the world origin, see root_relative_pose; τ is the same):
#   J_i = Ad_{C_i} S_i,  V_i = V_p + J_i q̇_i
#   V̇_i = V̇_p + J_i q̈_i + Ad_{C_i} Ṡ_i q̇_i + ad_{V_i} J_i q̇_i
#   W_i = Σ_c W_c + Mˢ_i V̇_i − ad_{V_i}ᵀ Mˢ_i V_i − W_i^ext,   Q_i = J_iᵀ W_i
# The body term Mˢ_i V̇_i − ad_{V_i}ᵀ Mˢ_i V_i is evaluated as Newton–Euler about the
# COM c = r + R d (se3.pxd com_wrench), never forming Mˢ_i.

cdef int rnea_spatial_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                             const double* qdd, const double* g, const double* fext,
                             int fext_frame, double* tau, bint poses_ready=False) noexcept nogil:
    """τ (nv); fills d.liMi, d.S, d.sMi, d.sJ, d.Sdq, d.sv, d.sa_gf, d.sf (frame s).
    Returns 0 or i + 1 for a non-unit quaternion of joint i.  ``poses_ready``:
    d.sMi and d.sJ already hold this q's poses and screws (a kernel just ran on q),
    so one-freedom joints skip their joint step.  The joint steps here, the sweeps
    in rnea_spatial_sweeps.h."""
    cdef int bad = spatial_poses(m, d, q, qd, poses_ready, d.Sdq)
    if fext != NULL:
        _external_wrenches(m, d, 1, 0, fext, fext_frame, d.dFx, NULL)
    td_rnea_spatial(1, m.nb, &m.parent[0], &m.voff[0], &m.nvj[0], &m.fast[0], &m.inert[0, 0],
                    &m.armature[0], g, d.sMi, d.sJ, d.Sdq, qd, qdd,
                    d.dFx if fext != NULL else NULL, d.sv, d.sa_gf, d.sf, tau)
    return bad


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_rnea_spatial(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_spatial_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)
