# Data: everything a kernel writes, as named per-body and per-freedom arrays.
#
# The model (ModelCore) is read-only; every kernel takes (model, data, inputs,
# outputs) and writes only into the DataC it is given and into its outputs.  Names
# carry their frames (docs/algorithms.md, "Data"):
#   o  the world frame (origin and axes)
#   s  the spatial frame of the kernels: world axes, origin at the current origin
#      of the subtree's root body (the body hanging from the world); see
#      root_relative_pose in rnea_common.pxi
#   i  body i's own frame (joint frame; "body-fixed")
#   h  hybrid: world axes at body i's origin
# Poses are 12 doubles (rotation row-major, then position); twists (ω, v) and
# wrenches (torque, force) 6 doubles, angular first.

cdef struct DataC:
    int nb, nv
    # joint step (every kernel)
    double* liMi      # (nb, 12) pose of body i in its parent's frame, B_i J_i(q_i)
    double* S         # (nv, 6)  body-fixed motion subspace S_i (columns of body i's freedoms)
    # poses
    double* oMi       # (nb, 12) world pose of body i (fk, frames, Jacobians, body motion)
    double* sMi       # (nb, 12) pose in the spatial frame s (spatial/hybrid RNEA, CRBA, ABA)
    double* sJ        # (nv, 6)  spatial joint screws Ad_{sMi} S (spatial RNEA, CRBA, ABA)
    double* hJ        # (nv, 6)  hybrid joint screws Ad_{R_i} S (hybrid RNEA)
    # body-fixed motion and wrenches (body frame i, about its origin)
    double* v         # (nb, 6)  twists Vᵇ_i
    double* a         # (nb, 6)  twist derivatives, no gravity (body motion)
    double* a_gf      # (nb, 6)  twist derivatives with gravity as base acceleration (body RNEA)
    double* f         # (nb, 6)  wrench the joint transmits to body i's subtree (body RNEA)
    # spatial (frame s)
    double* sv        # (nb, 6)  twists
    double* sa_gf     # (nb, 6)  twist derivatives with gravity (spatial RNEA, ABA pass 3)
    double* sf        # (nb, 6)  joint wrenches (spatial RNEA)
    double* sc        # (nb, 6)  ABA bias acceleration ad_V J q̇ + Ad Ṡ q̇
    double* Sdq       # (nb, 6)  Ṡ q̇ of the joints without a fast path, body frame (spatial RNEA)
    double* sIc       # (nb, 10) CRBA composite inertia: m, h = m c (3), Θ about s packed (6)
    double* sIA       # (nb, 21) articulated inertia Iᴬ (packed symmetric, minverse.pxi)
    double* sIA6      # (nb, 36) ABA articulated inertia Iᴬ (full row-major 6 × 6, aba.pxi)
    double* spA       # (nb, 6)  ABA articulated bias force
    # hybrid (world axes at the body origin)
    double* hv        # (nb, 6)  twists (ω, ṙ)
    double* ha_gf     # (nb, 6)  derivatives (ω̇, r̈) with gravity
    double* hf        # (nb, 6)  joint wrenches about the body origin
    # ABA joint-space terms
    double* U         # (nv, 6)  U = Iᴬ J
    double* Dinv      # (nv, 6)  per joint: 1/D (one freedom) or the k × k Cholesky factor of D
                      #          (inverse_mass_matrix: D⁻¹)
    double* u         # (nv,)    u = τ − Jᵀ pᴬ
    # inverse mass matrix (minverse.pxi)
    double* sF        # (6, nv)  row-major: articulated forces of the unit-torque columns
                      #          (backward pass), then their accelerations (forward pass)
    int* sub_end      # (nb,)    one past the last freedom of body i's subtree
    # scratch
    double* sc_q      # (2 nb, 2) sin, cos of the turning one-freedom joints and of the
                      #          universal joints' angles (angle_prepass; tables.angle_slots)
    int* path         # (nb,)    ancestor chain of one body (Jacobians)
    # loop closures (loops.pxi; NULL for models without closures or mimic couplings)
    double* oJ        # (nv, 6)  world screws about the world origin
    double* zero_v    # (nv,)    zeros (set at creation, never written)
    double* cG        # (m, nv)  constraint Jacobian G
    double* cgam      # (m,)     Ġv
    double* cM        # (nv, nv) mass matrix, then its Cholesky factor
    double* cY        # (nv, m)  L⁻ᵀ Gᵀ
    double* cK        # (m, m)   G M⁻¹ Gᵀ, then its pivoted Cholesky factor F
    double* cS        # (m, m)   FᵀF
    double* cb        # (m,)     right-hand side, then λ
    double* cw        # (m,)
    double* cw2       # (nv,)
    double* cKd       # (m,)     1 / F_ii of the pivots
    int* cperm        # (m,)     pivot order of F
    int* cnz          # (m,)     the rows of G that are not exactly zero
    int cmz           #          how many
    int crank         #          rank of G M⁻¹ Gᵀ (columns of F)
    bint cfac         # cM, cY, cK hold the factors at q = cfq (and rcond = cfrcond)
    double cfrcond
    double* cfq       # (nq,)
    double* cg        # (m,)     residual during projections
    double* clam      # (m,)     multipliers of the time steps' stages
    double* cq        # (nq,)    configuration during projections
    const double* q_loop   # the configuration of the rows being evaluated
    # inverse-dynamics derivatives (rnea_derivatives.pxi)
    double* dYPX      # (nv, 18) per freedom: Y, P − Z, X (frame s)
    double* dS        # (21, nv) the same by component: T, P − Z, X, angular Y
    double* dB        # (nb, 12) subtree coupling: K (3 × 3), p
    double* dE        # (nb, 16) subtree external-wrench sums (world: Σf; hybrid: N, F, s, Q)
    double* dFx       # (nb, 6)  external wrenches in frame s
    double* dqdd      # (nv,)    forward-dynamics derivatives: v̇ (aba_derivatives.pxi)
    double* dcol      # (nv, 4)  a block of four columns of a product
    int* dnz          # (nv,)    rows of the block with a nonzero entry
    double* drec      # (maxp + 2, 6, W) recursive M⁻¹ products: stack, A, T (W = min(nv, 64))
    int* drecb        # (maxp,)  bodies on that stack
    # inverse-dynamics rates (rnea_rates.pxi; body frame i, about its origin)
    double* rjerk     # (nb, 6)  V̈ᵇ_i
    double* rjounce   # (nb, 6)  V⃛ᵇ_i
    double* rfd       # (nb, 6)  Ẇ_i, the rate of the wrench the joint transmits
    double* rfdd      # (nb, 6)  Ẅ_i
    double* ru        # (nb, 12) relative twist u = S q̇ of joint i and its rate u̇ (body
                      #          kernel; not written for axis revolutes)
    # geometric sensitivity (geometric_sensitivity.pxi; frame o: world axes and origin)
    double* gIc       # (nb, 10) body inertia (m, m c, Θ about the world origin packed)
    double* gV        # (nb, 6)  twist Vˢ_i
    double* gA        # (nb, 6)  twist derivative with gravity V̇ˢ_i − (0, g)
    double* gH        # (nb, 6)  momentum Mˢ V
    double* gMA       # (nb, 6)  Mˢ (V̇ − (0, g))
    double* gF        # (nb, 6)  subtree sums of the bodies' own wrenches (the joint wrenches)
    double* gdF       # (nb, 36) subtree sums of δw for the six directions of one joint
    int* gsub         # (nb,)    1 for the bodies of that joint's subtree
    # the lane kernels on TD_VL states side by side (lanes.pxi; element k of state l at
    # k·TD_VL + l; 64-byte aligned); NULL except in the Data of a batch's threads
    # (_Team).  The derivative sweeps (rnea_derivatives.pxi _Sweep):
    double* lC
    double* lJ
    double* lqd
    double* lqdd
    double* la0
    double* lV
    double* lA
    double* lF
    double* lFx
    double* lIc
    double* lB
    double* lE
    double* lYPX
    double* lS
    double* lIA       # M⁻¹ (minverse_sweeps.h): articulated inertias, forces, U, D⁻¹, M⁻¹
    double* lsF
    double* lU
    double* lDinv
    double* lMi       # (NULL where nv > LANES_MAX_NV: those batches run one state at a time)
    double* lh        # forward-dynamics derivatives: τ − h
    double* lsc       # joint steps (poses_sweeps.h): sin, cos (nb, 2), joint poses (nb, 12),
    double* lT        # body-fixed subspaces (nv, 6)
    double* lSb
    double* lSdq      # (nb, 6) Ṡ q̇ (rnea_spatial_sweeps.h)
    double* lIA6      # ABA (aba_sweeps.h): articulated inertias (nb, 36), bias forces
    double* lpA       # (nb, 6), bias accelerations (nb, 6), u (nv), τ (nv)
    double* lcb
    double* lu
    double* ltau


cdef enum:
    # models with more freedoms run M⁻¹ and the forward-dynamics derivatives one state
    # at a time (the lanes' M⁻¹ scratch, nv² per lane, would exceed 2 MiB; their
    # column loops are long enough to fill vectors within one state)
    LANES_MAX_NV = 256

# ---------------------------------------------------------------- the table
# Every array of a Data, declared once: (its DataC field, buffer, rows, width, view).
# The buffers are carved in this order, so the table alone gives each field's
# offset and each buffer's size; ``view``: a read-only NumPy view as an attribute
# of Data (main buffer only).  Adding a field: its pointer in DataC above and one
# line here.  Rows: the count that multiplies the width.
cdef enum:
    R_NB = 0           # bodies
    R_NB1              # bodies, at least 1
    R_NV1              # freedoms, at least 1
    R_NQ               # configuration coordinates
    R_M1               # constraint rows, at least 1
    R_NV2              # R_NV1²
    R_MNV              # R_M1 · R_NV1
    R_M2               # R_M1²
    R_REC              # recursive M⁻¹ products: W (max_pending + 2), W = min(nv, 64)
    R_MAXP             # max_pending
    R_ONE
    R_LMI              # R_NV2 where nv <= LANES_MAX_NV, else 0 (then the field is NULL)
    R_COUNT
cdef enum:
    # the buffers: the fields every kernel uses (ints: path, sub_end), the loop-closure
    # kernels' (models with closures or couplings), the derivative kernels', and the
    # vector lanes' (a batch thread's Data; every row is TD_VL states wide)
    BUF_MAIN = 0
    BUF_MAIN_INT
    BUF_LOOPS
    BUF_LOOPS_INT
    BUF_DERIV
    BUF_DERIV_INT
    BUF_LANES
    BUF_COUNT

cdef DataC _proto                    # (only its fields' addresses are used)


cdef inline size_t _at(void* field) noexcept:
    """Offset of a DataC field (a pointer to _proto's field)."""
    return <size_t>field - <size_t>&_proto


_DATA_TABLE = (
    # main (fields one kernel uses together are adjacent: for a small robot they
    # share a few 4 KiB pages, as the kernels' loads and stores interleave)
    (_at(&_proto.liMi), BUF_MAIN, R_NB, 12, "liMi"),
    (_at(&_proto.sMi), BUF_MAIN, R_NB, 12, "sMi"),
    (_at(&_proto.sv), BUF_MAIN, R_NB, 6, "sv"),
    (_at(&_proto.sa_gf), BUF_MAIN, R_NB, 6, "sa_gf"),
    (_at(&_proto.sf), BUF_MAIN, R_NB, 6, "sf"),
    (_at(&_proto.sJ), BUF_MAIN, R_NV1, 6, "sJ"),
    (_at(&_proto.sc_q), BUF_MAIN, R_NB, 4, None),
    (_at(&_proto.S), BUF_MAIN, R_NV1, 6, "S"),
    (_at(&_proto.v), BUF_MAIN, R_NB, 6, "v"),
    (_at(&_proto.a_gf), BUF_MAIN, R_NB, 6, "a_gf"),
    (_at(&_proto.f), BUF_MAIN, R_NB, 6, "f"),
    (_at(&_proto.oMi), BUF_MAIN, R_NB, 12, "oMi"),
    (_at(&_proto.a), BUF_MAIN, R_NB, 6, "a"),
    (_at(&_proto.hJ), BUF_MAIN, R_NV1, 6, "hJ"),
    (_at(&_proto.hv), BUF_MAIN, R_NB, 6, "hv"),
    (_at(&_proto.ha_gf), BUF_MAIN, R_NB, 6, "ha_gf"),
    (_at(&_proto.hf), BUF_MAIN, R_NB, 6, "hf"),
    (_at(&_proto.sc), BUF_MAIN, R_NB, 6, "sc"),
    (_at(&_proto.Sdq), BUF_MAIN, R_NB, 6, None),
    (_at(&_proto.sIc), BUF_MAIN, R_NB, 10, "sIc"),
    (_at(&_proto.sIA), BUF_MAIN, R_NB, 21, "sIA"),
    (_at(&_proto.spA), BUF_MAIN, R_NB, 6, "spA"),
    (_at(&_proto.sIA6), BUF_MAIN, R_NB, 36, None),
    (_at(&_proto.U), BUF_MAIN, R_NV1, 6, None),
    (_at(&_proto.Dinv), BUF_MAIN, R_NV1, 6, None),
    (_at(&_proto.u), BUF_MAIN, R_NV1, 1, None),
    (_at(&_proto.sF), BUF_MAIN, R_NV1, 6, None),
    (_at(&_proto.path), BUF_MAIN_INT, R_NB, 1, None),
    (_at(&_proto.sub_end), BUF_MAIN_INT, R_NB, 1, None),
    # loop closures (loops.pxi)
    (_at(&_proto.oJ), BUF_LOOPS, R_NV1, 6, None),
    (_at(&_proto.zero_v), BUF_LOOPS, R_NV1, 1, None),
    (_at(&_proto.cw2), BUF_LOOPS, R_NV1, 1, None),
    (_at(&_proto.cM), BUF_LOOPS, R_NV2, 1, None),
    (_at(&_proto.cG), BUF_LOOPS, R_MNV, 1, None),
    (_at(&_proto.cY), BUF_LOOPS, R_MNV, 1, None),
    (_at(&_proto.cK), BUF_LOOPS, R_M2, 1, None),
    (_at(&_proto.cS), BUF_LOOPS, R_M2, 1, None),
    (_at(&_proto.cgam), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.cb), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.cw), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.cg), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.clam), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.cKd), BUF_LOOPS, R_M1, 1, None),
    (_at(&_proto.cq), BUF_LOOPS, R_NQ, 1, None),
    (_at(&_proto.cfq), BUF_LOOPS, R_NQ, 1, None),
    (_at(&_proto.cperm), BUF_LOOPS_INT, R_M1, 1, None),
    (_at(&_proto.cnz), BUF_LOOPS_INT, R_M1, 1, None),
    # derivatives (rnea_derivatives.pxi, aba_derivatives.pxi)
    (_at(&_proto.dYPX), BUF_DERIV, R_NV1, 18, None),
    (_at(&_proto.dS), BUF_DERIV, R_NV1, 21, None),
    (_at(&_proto.dB), BUF_DERIV, R_NB1, 12, None),
    (_at(&_proto.dE), BUF_DERIV, R_NB1, 16, None),
    (_at(&_proto.dFx), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.dqdd), BUF_DERIV, R_NV1, 1, None),
    (_at(&_proto.dcol), BUF_DERIV, R_NV1, 4, None),
    (_at(&_proto.drec), BUF_DERIV, R_REC, 6, None),
    (_at(&_proto.dnz), BUF_DERIV_INT, R_NV1, 1, None),
    (_at(&_proto.drecb), BUF_DERIV_INT, R_MAXP, 1, None),
    # inverse-dynamics rates (rnea_rates.pxi)
    (_at(&_proto.rjerk), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.rjounce), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.rfd), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.rfdd), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.ru), BUF_DERIV, R_NB1, 12, None),
    # geometric sensitivity (geometric_sensitivity.pxi)
    (_at(&_proto.gIc), BUF_DERIV, R_NB1, 10, None),
    (_at(&_proto.gV), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.gA), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.gH), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.gMA), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.gF), BUF_DERIV, R_NB1, 6, None),
    (_at(&_proto.gdF), BUF_DERIV, R_NB1, 36, None),
    (_at(&_proto.gsub), BUF_DERIV_INT, R_NB1, 1, None),
    # vector lanes (lanes.pxi; widths per state, times TD_VL)
    (_at(&_proto.lC), BUF_LANES, R_NB1, 12, None),
    (_at(&_proto.lJ), BUF_LANES, R_NV1, 6, None),
    (_at(&_proto.lqd), BUF_LANES, R_NV1, 1, None),
    (_at(&_proto.lqdd), BUF_LANES, R_NV1, 1, None),
    (_at(&_proto.la0), BUF_LANES, R_ONE, 6, None),
    (_at(&_proto.lV), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lA), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lF), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lFx), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lIc), BUF_LANES, R_NB1, 10, None),
    (_at(&_proto.lB), BUF_LANES, R_NB1, 12, None),
    (_at(&_proto.lE), BUF_LANES, R_NB1, 16, None),
    (_at(&_proto.lYPX), BUF_LANES, R_NV1, 18, None),
    (_at(&_proto.lS), BUF_LANES, R_NV1, 21, None),
    (_at(&_proto.lIA), BUF_LANES, R_NB1, 21, None),
    (_at(&_proto.lsF), BUF_LANES, R_NV1, 6, None),
    (_at(&_proto.lU), BUF_LANES, R_NV1, 6, None),
    (_at(&_proto.lDinv), BUF_LANES, R_NV1, 6, None),
    (_at(&_proto.lh), BUF_LANES, R_NV1, 1, None),
    (_at(&_proto.lsc), BUF_LANES, R_NB1, 2, None),
    (_at(&_proto.lT), BUF_LANES, R_NB1, 12, None),
    (_at(&_proto.lSb), BUF_LANES, R_NV1, 6, None),
    (_at(&_proto.lSdq), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lIA6), BUF_LANES, R_NB1, 36, None),
    (_at(&_proto.lpA), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lcb), BUF_LANES, R_NB1, 6, None),
    (_at(&_proto.lu), BUF_LANES, R_NV1, 1, None),
    (_at(&_proto.ltau), BUF_LANES, R_NV1, 1, None),
    (_at(&_proto.lMi), BUF_LANES, R_LMI, 1, None),
)
# spare entries before / after each buffer's fields (keep neighbouring Data, one per
# thread of a batch, off each other's cache lines); the lanes' buffer is 64-byte
# aligned after its front spare (up to 7 more doubles), within its back spare
cdef int _SPARE[BUF_COUNT]
_SPARE[:] = [8, 16, 8, 16, 8, 16, 8]
cdef int _SPARE_BACK[BUF_COUNT]
_SPARE_BACK[:] = [8, 16, 8, 16, 8, 16, 24]

cdef struct _Field:
    size_t offset
    int buf, rows, width
cdef _Field _fields[128]
cdef int _n_fields = 0
#: name -> (rows: "nb" or "nv", width, DataC offset) of the fields Data shows as
#: read-only arrays
cdef dict _DATA_VIEWS = {}


def _build_data_table():
    global _n_fields
    for off, buf, rows, width, view in _DATA_TABLE:
        if _n_fields == 128:
            raise RuntimeError("data.pxi: more than 128 Data fields")
        _fields[_n_fields].offset = off
        _fields[_n_fields].buf = buf
        _fields[_n_fields].rows = rows
        _fields[_n_fields].width = width
        _n_fields += 1
        if view is not None:
            assert buf == BUF_MAIN and rows in (R_NB, R_NV1), view
            _DATA_VIEWS[view] = ("nb" if rows == R_NB else "nv", width, off)


_build_data_table()


cdef Py_ssize_t _buffer_size(int buf, const Py_ssize_t* rows, int lanes) noexcept:
    """Entries of buffer buf (its fields and spares) for the given row counts."""
    cdef Py_ssize_t n = _SPARE[buf] + _SPARE_BACK[buf]
    cdef int k
    for k in range(_n_fields):
        if _fields[k].buf == buf:
            n += rows[_fields[k].rows] * _fields[k].width * lanes
    return n


cdef void _carve(DataC* c, int buf, const Py_ssize_t* rows, char* base, size_t item,
                 int lanes) noexcept:
    """Point buf's fields of c into its memory (base: the first field), in table
    order; a field of no rows (R_LMI) is NULL."""
    cdef int k
    cdef Py_ssize_t n
    for k in range(_n_fields):
        if _fields[k].buf != buf:
            continue
        n = rows[_fields[k].rows] * _fields[k].width * lanes
        (<char**>(<char*>c + _fields[k].offset))[0] = base if (n or _fields[k].rows != R_LMI) else NULL
        base += n * item


cdef void _data_rows(ModelCore model, Py_ssize_t* rows) noexcept:
    cdef Py_ssize_t nv1 = model.nv if model.nv > 0 else 1
    cdef Py_ssize_t m1 = model.n_crows if model.n_crows > 0 else 1
    cdef Py_ssize_t w = nv1 if nv1 < FD_REC_COLUMNS else FD_REC_COLUMNS
    rows[R_NB] = model.nb
    rows[R_NB1] = model.nb if model.nb > 0 else 1
    rows[R_NV1] = nv1
    rows[R_NQ] = model.nq
    rows[R_M1] = m1
    rows[R_NV2] = nv1 * nv1
    rows[R_MNV] = m1 * nv1
    rows[R_M2] = m1 * m1
    rows[R_REC] = w * (model.max_pending + 2)
    rows[R_MAXP] = model.max_pending
    rows[R_ONE] = 1
    rows[R_LMI] = nv1 * nv1 if nv1 <= LANES_MAX_NV else 0


cdef long _model_serial = 0


cdef class Data:
    """Per-call state of the kernels for one model: named per-body arrays.

    Create with ``model.create_data()``; pass as ``data=`` to the single-state
    entry points for allocation-free calls, and read the intermediates of the
    last call afterwards (the fields a kernel does not compute keep older
    values).  A Data must not be used by two threads at once; plain calls
    without ``data=`` take one from the model's pool and are thread-safe.

    Fields (read-only NumPy views into the Data, overwritten by the next call;
    poses are (nb, 12): rotation row-major then position; twists (ω, v) and
    wrenches (torque, force) angular first; see docs/algorithms.md for which
    kernel fills which):

    ``liMi`` (nb, 12) pose of body i in its parent's frame;
    ``oMi`` (nb, 12) world pose; ``sMi`` (nb, 12) pose in the spatial frame s
    (world axes, origin at the subtree root body's origin);
    ``S`` (nv, 6) body-fixed motion subspaces; ``sJ`` (nv, 6) spatial joint
    screws (frame s); ``hJ`` (nv, 6) hybrid joint screws;
    ``v``, ``a``, ``a_gf``, ``f`` (nb, 6) body-frame twists, twist derivatives
    (without / with gravity) and joint wrenches; ``sv``, ``sa_gf``, ``sf``,
    ``sc``, ``spA`` (nb, 6) the same in frame s (ABA bias acceleration and
    force); ``hv``, ``ha_gf``, ``hf`` (nb, 6) hybrid; ``sIc`` (nb, 10) composite
    inertias; ``sIA`` (nb, 21) articulated inertias (packed symmetric) of
    ``inverse_mass_matrix``.
    """
    cdef DataC c
    cdef readonly int nb, nv
    cdef long model_serial
    cdef double[::1] buf
    cdef int[::1] ibuf
    cdef double[::1] cbuf
    cdef int[::1] cibuf
    cdef double[::1] dbuf
    cdef int[::1] dibuf
    cdef double[::1] lbuf
    cdef Py_ssize_t rows[R_COUNT]      # the row counts of the table (_data_rows)

    def __cinit__(self, ModelCore model):
        cdef int nb = model.nb, nv = model.nv, i, o, n, k
        _data_rows(model, self.rows)
        self.nb = nb
        self.nv = nv
        self.model_serial = model.serial
        self.buf = np.zeros(_buffer_size(BUF_MAIN, self.rows, 1))
        self.ibuf = np.zeros(_buffer_size(BUF_MAIN_INT, self.rows, 1), dtype=np.int32)
        self.c.nb = nb
        self.c.nv = nv
        _carve(&self.c, BUF_MAIN, self.rows, <char*>&self.buf[_SPARE[BUF_MAIN]], sizeof(double), 1)
        _carve(&self.c, BUF_MAIN_INT, self.rows, <char*>&self.ibuf[_SPARE[BUF_MAIN_INT]],
               sizeof(int), 1)
        self._loop_scratch(model)
        self._derivative_scratch(model)
        # S of a one-freedom joint is its constant body-fixed screw: set once here
        # (the kernels' fast paths never write these rows); a revolute fast-path
        # joint's is the exact axis ±e_k the fast path uses
        for i in range(nb):
            if model.fast[i] != FAST_NONE:
                o = model.voff[i]
                for n in range(6):
                    self.c.S[6 * o + n] = model.X[o, n]
                if model.fast[i] != FAST_SCREW:
                    for n in range(6):
                        self.c.S[6 * o + n] = 0.0
                    k = model.fast[i] - FAST_REV_X
                    self.c.S[6 * o + k] = 1.0 if model.X[o, k] > 0.0 else -1.0

    cdef _loop_scratch(self, ModelCore model):
        """Scratch of the loop-closure kernels (loops.pxi), if the model has any."""
        self.c.oJ = NULL
        if model.cl_int.shape[0] + model.mm_int.shape[0] == 0:
            return
        self.cbuf = np.zeros(_buffer_size(BUF_LOOPS, self.rows, 1))
        self.cibuf = np.zeros(_buffer_size(BUF_LOOPS_INT, self.rows, 1), dtype=np.int32)
        _carve(&self.c, BUF_LOOPS, self.rows, <char*>&self.cbuf[_SPARE[BUF_LOOPS]], sizeof(double), 1)
        _carve(&self.c, BUF_LOOPS_INT, self.rows, <char*>&self.cibuf[_SPARE[BUF_LOOPS_INT]],
               sizeof(int), 1)
        self.c.cfac = False

    cdef _derivative_scratch(self, ModelCore model):
        """Scratch of the derivative kernels (rnea_derivatives.pxi)."""
        self.dbuf = np.zeros(_buffer_size(BUF_DERIV, self.rows, 1))
        self.dibuf = np.zeros(_buffer_size(BUF_DERIV_INT, self.rows, 1), dtype=np.int32)
        _carve(&self.c, BUF_DERIV, self.rows, <char*>&self.dbuf[_SPARE[BUF_DERIV]], sizeof(double), 1)
        _carve(&self.c, BUF_DERIV_INT, self.rows, <char*>&self.dibuf[_SPARE[BUF_DERIV_INT]],
               sizeof(int), 1)
        self.c.lC = NULL

    cdef _lane_scratch(self, ModelCore model):
        """The arrays of the lane kernels (a batch thread's Data; none where the build
        has no vector lanes, TD_VL = 0)."""
        cdef int L = TD_VL
        cdef double* p
        if L == 0 or self.c.lC != NULL:
            return
        self.lbuf = np.zeros(_buffer_size(BUF_LANES, self.rows, L))
        p = &self.lbuf[_SPARE[BUF_LANES]]
        # 64-byte aligned; every block is a multiple of L doubles, so each stays aligned
        # for the lanes' vectors of L doubles
        p += (64 - (<size_t>p) % 64) // 8
        _carve(&self.c, BUF_LANES, self.rows, <char*>p, sizeof(double), L)

    def __getattribute__(self, name):
        # the fields the table (_DATA_TABLE) shows, looked up first: read-only
        # (rows, width) views of the Data's memory
        view = _DATA_VIEWS.get(name)
        if view is None:
            return object.__getattribute__(self, name)
        return self._field_view(view)

    cdef _field_view(self, tuple view):
        cdef Py_ssize_t start
        rows, width, start = view
        n = self.nb if rows == "nb" else self.nv
        start = (<double**>(<char*>&self.c + <size_t>start))[0] - &self.buf[0]
        arr = np.asarray(self.buf)[start:start + <Py_ssize_t>n * width]
        arr = arr.reshape(n, width)
        arr.setflags(write=False)
        return arr

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(_DATA_VIEWS))

    @property
    def nbytes(self):
        """Memory held by this Data, bytes."""
        return (self.buf.shape[0] * 8 + self.ibuf.shape[0] * 4
                + (0 if self.cbuf is None else self.cbuf.shape[0] * 8 + self.cibuf.shape[0] * 4)
                + self.dbuf.shape[0] * 8 + self.dibuf.shape[0] * 4
                + (0 if self.lbuf is None else self.lbuf.shape[0] * 8))

    @staticmethod
    def pose_matrices(poses):
        """(…, 12) poses as stored in Data -> (…, 4, 4) homogeneous matrices."""
        P = np.asarray(poses)
        out = np.zeros(P.shape[:-1] + (4, 4))
        out[..., :3, :3] = P[..., :9].reshape(P.shape[:-1] + (3, 3))
        out[..., :3, 3] = P[..., 9:]
        out[..., 3, 3] = 1.0
        return out

    def __reduce__(self):
        raise TypeError("a treedyn Data is per-process scratch and is not pickled: "
                        "call model.create_data() where it is needed")

    def __repr__(self):
        return f"<treedyn.Data: nb={self.nb}, nv={self.nv}, {self.nbytes} bytes>"


cdef class _Team:
    """One Data per OpenMP thread of a batch call, their DataC in a C array."""
    cdef list datas
    cdef DataC* c
    cdef int n

    def __cinit__(self, ModelCore model, int n):
        cdef int k
        self.n = n
        self.datas = [Data(model) for k in range(n)]
        self.c = <DataC*>PyMem_Malloc(n * sizeof(DataC))
        if self.c == NULL:
            raise MemoryError()
        for k in range(n):
            self.c[k] = (<Data>self.datas[k]).c

    cdef _add_lanes(self, ModelCore model):
        """Give every Data of the team the vector lanes' arrays (once)."""
        cdef int k
        if self.c[0].lC != NULL:
            return
        for k in range(self.n):
            (<Data>self.datas[k])._lane_scratch(model)
            self.c[k] = (<Data>self.datas[k]).c

    def __dealloc__(self):
        PyMem_Free(self.c)
