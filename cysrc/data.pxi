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
    double* sIA       # (nb, 21) ABA articulated inertia (packed symmetric, aba.pxi)
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
    double* sc_q      # (nb, 2)  sin, cos of the revolute fast-path joints' angles
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


cdef enum:
    # models with more freedoms run M⁻¹ and the forward-dynamics derivatives one state
    # at a time (the lanes' M⁻¹ scratch, nv² per lane, would exceed 2 MiB; their
    # column loops are long enough to fill vectors within one state)
    LANES_MAX_NV = 256

# doubles per body and per freedom in Data.buf, in the order of the DataC fields
cdef enum:
    _DATA_PER_BODY = 12 + 12 + 12 + 6 * 4 + 6 * 4 + 10 + 21 + 6 + 6 * 3 + 2 + 6
    _DATA_PER_DOF = 6 * 6 + 1

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
    inertias; ``sIA`` (nb, 21) articulated inertias (packed symmetric).
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

    def __cinit__(self, ModelCore model):
        cdef int nb = model.nb, nv = model.nv, i, o, n, k
        cdef Py_ssize_t size = (_DATA_PER_BODY * <Py_ssize_t>nb
                                + _DATA_PER_DOF * <Py_ssize_t>(nv if nv > 0 else 1) + 16)
        self.nb = nb
        self.nv = nv
        self.model_serial = model.serial
        # one block; 8 spare doubles at each end keep neighbouring Data (batches:
        # one per thread) off each other's cache lines
        self.buf = np.zeros(size)
        # ints: path, sub_end; 16 spare ints at each end, as for buf (sub_end is
        # written on every inverse_mass_matrix call, by each thread of a batch)
        self.ibuf = np.zeros(2 * nb + 32, dtype=np.int32)
        cdef double* p = &self.buf[8]
        n = nv if nv > 0 else 1
        self.c.nb = nb
        self.c.nv = nv
        # fields one kernel uses together are adjacent (for a small robot they share
        # a few 4 KiB pages, as the kernels' loads and stores interleave)
        self.c.liMi = p; p += 12 * nb
        self.c.sMi = p; p += 12 * nb
        self.c.sv = p; p += 6 * nb
        self.c.sa_gf = p; p += 6 * nb
        self.c.sf = p; p += 6 * nb
        self.c.sJ = p; p += 6 * n
        self.c.sc_q = p; p += 2 * nb
        self.c.S = p; p += 6 * n
        self.c.v = p; p += 6 * nb
        self.c.a_gf = p; p += 6 * nb
        self.c.f = p; p += 6 * nb
        self.c.oMi = p; p += 12 * nb
        self.c.a = p; p += 6 * nb
        self.c.hJ = p; p += 6 * n
        self.c.hv = p; p += 6 * nb
        self.c.ha_gf = p; p += 6 * nb
        self.c.hf = p; p += 6 * nb
        self.c.sc = p; p += 6 * nb
        self.c.Sdq = p; p += 6 * nb
        self.c.sIc = p; p += 10 * nb
        self.c.sIA = p; p += 21 * nb
        self.c.spA = p; p += 6 * nb
        self.c.U = p; p += 6 * n
        self.c.Dinv = p; p += 6 * n
        self.c.u = p; p += n
        self.c.sF = p; p += 6 * n
        self.c.path = &self.ibuf[16]
        self.c.sub_end = &self.ibuf[16 + nb]
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
        cdef int n = model.nv if model.nv > 0 else 1
        cdef int mr = model.n_crows if model.n_crows > 0 else 1
        cdef double* p
        self.c.oJ = NULL
        if model.cl_int.shape[0] + model.mm_int.shape[0] == 0:
            return
        self.cbuf = np.zeros((6 + 1 + 1) * n + n * n + 2 * mr * n + 2 * mr * mr
                             + 6 * mr + 2 * model.nq + 16)
        self.cibuf = np.zeros(2 * mr, dtype=np.int32)
        p = &self.cbuf[8]
        self.c.oJ = p; p += 6 * n
        self.c.zero_v = p; p += n
        self.c.cw2 = p; p += n
        self.c.cM = p; p += n * n
        self.c.cG = p; p += mr * n
        self.c.cY = p; p += mr * n
        self.c.cK = p; p += mr * mr
        self.c.cS = p; p += mr * mr
        self.c.cgam = p; p += mr
        self.c.cb = p; p += mr
        self.c.cw = p; p += mr
        self.c.cg = p; p += mr
        self.c.clam = p; p += mr
        self.c.cKd = p; p += mr
        self.c.cq = p; p += model.nq
        self.c.cfq = p; p += model.nq
        self.c.cfac = False
        self.c.cperm = &self.cibuf[0]
        self.c.cnz = &self.cibuf[mr]

    cdef _derivative_scratch(self, ModelCore model):
        """Scratch of the derivative kernels (rnea_derivatives.pxi)."""
        cdef int n = model.nv if model.nv > 0 else 1
        cdef int nb = model.nb if model.nb > 0 else 1
        cdef double* p
        cdef int w = n if n < FD_REC_COLUMNS else FD_REC_COLUMNS
        cdef int maxp = model.max_pending
        self.dbuf = np.zeros(44 * n + 34 * nb + 6 * w * (maxp + 2) + 16)
        self.dibuf = np.zeros(n + maxp + 32, dtype=np.int32)
        p = &self.dbuf[8]
        self.c.dYPX = p; p += 18 * n
        self.c.dS = p; p += 21 * n
        self.c.dB = p; p += 12 * nb
        self.c.dE = p; p += 16 * nb
        self.c.dFx = p; p += 6 * nb
        self.c.dqdd = p; p += n
        self.c.dcol = p; p += 4 * n
        self.c.drec = p; p += 6 * w * (maxp + 2)
        self.c.dnz = &self.dibuf[16]
        self.c.drecb = &self.dibuf[16 + n]
        self.c.lC = NULL

    cdef _lane_scratch(self, ModelCore model):
        """The arrays of the lane kernels (a batch thread's Data; none where the build
        has no vector lanes, TD_VL = 0)."""
        cdef int n = model.nv if model.nv > 0 else 1
        cdef int nb = model.nb if model.nb > 0 else 1
        cdef int L = TD_VL
        cdef long mi
        cdef double* p
        if L == 0 or self.c.lC != NULL:
            return
        mi = n * n if n <= LANES_MAX_NV else 0
        self.lbuf = np.zeros(L * (115 * nb + 72 * n + 6 + mi) + 32)
        p = &self.lbuf[8]
        # 64-byte aligned; every block is a multiple of L doubles, so each stays aligned
        # for the lanes' vectors of L doubles
        p += (64 - (<size_t>p) % 64) // 8
        self.c.lC = p; p += L * 12 * nb
        self.c.lJ = p; p += L * 6 * n
        self.c.lqd = p; p += L * n
        self.c.lqdd = p; p += L * n
        self.c.la0 = p; p += L * 6
        self.c.lV = p; p += L * 6 * nb
        self.c.lA = p; p += L * 6 * nb
        self.c.lF = p; p += L * 6 * nb
        self.c.lFx = p; p += L * 6 * nb
        self.c.lIc = p; p += L * 10 * nb
        self.c.lB = p; p += L * 12 * nb
        self.c.lE = p; p += L * 16 * nb
        self.c.lYPX = p; p += L * 18 * n
        self.c.lS = p; p += L * 21 * n
        self.c.lIA = p; p += L * 21 * nb
        self.c.lsF = p; p += L * 6 * n
        self.c.lU = p; p += L * 6 * n
        self.c.lDinv = p; p += L * 6 * n
        self.c.lh = p; p += L * n
        self.c.lsc = p; p += L * 2 * nb
        self.c.lT = p; p += L * 12 * nb
        self.c.lSb = p; p += L * 6 * n
        self.c.lSdq = p; p += L * 6 * nb
        self.c.lMi = p if mi else NULL

    cdef _view(self, double* p, int rows, int width):
        """Read-only (rows, width) view of a field."""
        cdef Py_ssize_t start = p - &self.buf[0]
        arr = np.asarray(self.buf)[start:start + <Py_ssize_t>rows * width].reshape(rows, width)
        arr.setflags(write=False)
        return arr

    @property
    def liMi(self): return self._view(self.c.liMi, self.nb, 12)
    @property
    def oMi(self): return self._view(self.c.oMi, self.nb, 12)
    @property
    def sMi(self): return self._view(self.c.sMi, self.nb, 12)
    @property
    def S(self): return self._view(self.c.S, self.nv, 6)
    @property
    def sJ(self): return self._view(self.c.sJ, self.nv, 6)
    @property
    def hJ(self): return self._view(self.c.hJ, self.nv, 6)
    @property
    def v(self): return self._view(self.c.v, self.nb, 6)
    @property
    def a(self): return self._view(self.c.a, self.nb, 6)
    @property
    def a_gf(self): return self._view(self.c.a_gf, self.nb, 6)
    @property
    def f(self): return self._view(self.c.f, self.nb, 6)
    @property
    def sv(self): return self._view(self.c.sv, self.nb, 6)
    @property
    def sa_gf(self): return self._view(self.c.sa_gf, self.nb, 6)
    @property
    def sf(self): return self._view(self.c.sf, self.nb, 6)
    @property
    def sc(self): return self._view(self.c.sc, self.nb, 6)
    @property
    def sIc(self): return self._view(self.c.sIc, self.nb, 10)
    @property
    def sIA(self): return self._view(self.c.sIA, self.nb, 21)
    @property
    def spA(self): return self._view(self.c.spA, self.nb, 6)
    @property
    def hv(self): return self._view(self.c.hv, self.nb, 6)
    @property
    def ha_gf(self): return self._view(self.c.ha_gf, self.nb, 6)
    @property
    def hf(self): return self._view(self.c.hf, self.nb, 6)

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
