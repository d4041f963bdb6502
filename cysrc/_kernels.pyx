# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled kernels of treedyn.

This file is the include list and the shared core.  ``ModelCore`` holds the
flat, read-only tables of a compiled model that the kernels read (topological
order, parent[i] < i; computed by treedyn/tables.py), the Data pool, the
dispatcher, batches and thread teams and the shared input checks;
``treedyn.model.Model`` subclasses it.  Everything a kernel writes goes into a
``Data`` (data.pxi) or into the caller's outputs, never into the model.  Each
algorithm lives in its own ``.pxi`` file included below, with its kernel, its
adapters to the dispatcher and its public entry (a module-level
``def name(ModelCore self, ...)`` bound in ``Model`` by one line); the inline
SE(3) primitives are in ``se3.pxd``, the joint kinds in ``kinds.pxd``.  The map:
docs/architecture.md.

The binding is one dispatcher (``ModelCore._dispatch``): an entry point checks
its inputs, fills a ``Call`` with pointers and per-sample strides, and the
dispatcher runs the kernel once (on the caller's Data or one from the model's
pool, releasing the GIL for models with at least ``GIL_RELEASE_NV`` velocity
coordinates while another Python thread exists) or over a batch in an OpenMP
``prange`` with one Data per thread.
"""
import os
from types import MappingProxyType

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
cimport openmp
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport isfinite, sin, cos, fmax, fabs, sqrt, INFINITY
from libc.string cimport memcpy, memset, memcmp
from libc.stdint cimport uint64_t
from libc.stdlib cimport malloc, free
cimport cython

from se3 cimport *
from kinds cimport *

from treedyn.errors import InputError, SingularModelError

cnp.import_array()

# the joint kinds for the Python layer (one definition: kinds.pxd)
globals().update(KIND_SCREWS=KIND_SCREWS, KIND_SPHERICAL=KIND_SPHERICAL,
                 KIND_FREE_SE3=KIND_FREE_SE3, KIND_FREE_SO3R3=KIND_FREE_SO3R3)

#: single-state calls on models with at least this many velocity coordinates
#: release the GIL while the kernel runs (docs/algorithms.md, "Threads": below it
#: the release/acquire costs more than the concurrency it allows).
GIL_RELEASE_NV = 20
cdef int _gil_release_nv = GIL_RELEASE_NV
#: ... but only while another Python thread exists (one that could take the GIL),
#: or from this many freedoms on (calls of ≥ ~10 µs: a thread that attaches itself
#: to Python from C during the call need not wait for it)
GIL_RELEASE_ALONE_NV = 256
cdef int _gil_release_alone_nv = GIL_RELEASE_ALONE_NV
cdef Py_ssize_t _gil_releases = 0           # single-state calls that released it (a test hook)

cdef extern from *:
    """
    /* Another Python thread state exists (in any interpreter): a thread that may
       wait for the GIL.  Read without the runtime's head lock: a thread state
       being created meanwhile is seen at the next call. */
    static int td_other_threads(void) {
        PyInterpreterState* i = PyInterpreterState_Head();
        PyThreadState* t;
        if (i == NULL || PyInterpreterState_Next(i) != NULL) return 1;
        t = PyInterpreterState_ThreadHead(i);
        return t == NULL || PyThreadState_Next(t) != NULL;
    }
    """
    int td_other_threads() noexcept


cdef inline bint _release_gil(int work) noexcept:
    """Whether a single-state kernel visiting ``work`` freedoms runs without the GIL
    (called with it held): releasing and taking it back costs ~50 ns, worth it only
    when another thread can use the GIL meanwhile."""
    global _gil_releases
    if work >= _gil_release_nv and (work >= _gil_release_alone_nv or td_other_threads()):
        _gil_releases += 1
        return True
    return False
# batches run their group kernels (TD_VL samples side by side); a test hook
# (_set_lanes) turns them off
cdef bint _lanes_enabled = True
cdef Py_ssize_t _lane_groups_run = 0        # groups of lanes run so far (a test hook)

include "joints.pxi"
include "rnea_common.pxi"
include "data.pxi"
include "sweep.pxi"
include "fk.pxi"
include "jacobian.pxi"
include "rnea_body.pxi"
include "rnea_spatial.pxi"
include "rnea_hybrid.pxi"
include "rnea_derivatives.pxi"
include "kinematics.pxi"
include "kinematic_derivatives.pxi"
include "rnea_rates.pxi"
include "rnea_rates_spatial.pxi"
include "rnea_rates_hybrid.pxi"
include "regressor.pxi"
include "geometric_sensitivity.pxi"
include "crba.pxi"
include "aba.pxi"
include "minverse.pxi"
include "lanes.pxi"
include "aba_derivatives.pxi"
include "lie_groups.pxi"
include "lie_jacobians.pxi"
include "ltl.pxi"
include "loops.pxi"
include "closed_loop_id.pxi"
include "integrators.pxi"
include "integrators_lanes.pxi"
include "simulator.pxi"
include "rollout.pxi"

#: the kernels' codes and column layouts with which treedyn.tables builds the tables
KERNEL_CODES = dict(
    FAST_REV_X=FAST_REV_X, FAST_SCREW=FAST_SCREW, G_OFFP=G_OFFP, G_OFFC=G_OFFC,
    G_POINT=G_POINT, G_AXIS=G_AXIS, G_U1=G_U1, G_U2=G_U2, G_A1=G_A1, G_A2=G_A2,
    G_C12=G_C12, G_PITCH=G_PITCH, G_WIDTH=G_WIDTH, B_PNT_P=B_PNT_P, B_PNT_C=B_PNT_C,
    B_ORG_P=B_ORG_P, B_ORG_C=B_ORG_C, B_AX_P=B_AX_P, B_AX_C=B_AX_C, B_U1_P=B_U1_P,
    B_U2_P=B_U2_P, B_A1_P=B_A1_P, B_A2_C=B_A2_C, B_WIDTH=B_WIDTH)

#: stands for zero velocities or accelerations in the library's own calls
#: (bias_forces, gravity_forces) so that they need not allocate them in Python.
_ZERO = object()

cdef dict _WRENCH_FRAMES = {"world": 0, "body": 1, "hybrid": 2}
cdef tuple _REPRESENTATIONS = ("body", "spatial", "hybrid", "mixed")


# ---------------------------------------------------------------------- dispatcher
cdef struct Call:
    # inputs of one state (the dispatcher shifts them by the strides per sample)
    const double* q
    const double* v
    const double* a            # accelerations, or torques for forward dynamics
    const double* g            # gravity (3,), shared by all samples
    const double* fext         # (nb, 6) or NULL
    int fframe                 # 0 world, 1 body, 2 hybrid
    int body, frame, rep       # Jacobian target and representation
    double k1, k2, rcond       # constrained dynamics: Baumgarte gains, rank tolerance
    int check                  # which outputs may overflow: CHECK_ALL, CHECK_POSES, CHECK_SPD,
                               # or CHECK_KERNEL
    double* out
    double* out2
    double* out3
    # per-sample strides in doubles (0: shared)
    Py_ssize_t sq, sv, sa, sf, so, so2, so3
    # a kernel's scratch from its entry point, shared by the samples: nwork slices of
    # swork doubles, one per thread (omp_get_thread_num); NULL: none
    double* work
    Py_ssize_t swork
    int nwork
    int stream                 # the outputs are a large batch's: non-temporal stores

ctypedef int (*kernel_t)(ModelCore m, DataC* d, const Call* c) noexcept nogil


cdef inline const double* _shift_c(const double* p, Py_ssize_t k) noexcept nogil:
    return NULL if p == NULL else p + k


cdef inline double* _shift(double* p, Py_ssize_t k) noexcept nogil:
    return NULL if p == NULL else p + k


cdef inline void _sample_call(const Call* base, Py_ssize_t s, Call* c) noexcept nogil:
    """c: the call of sample s of a batch (the base pointers shifted by s strides)."""
    c[0] = base[0]
    c.q = _shift_c(base.q, s * base.sq)
    c.v = _shift_c(base.v, s * base.sv)
    c.a = _shift_c(base.a, s * base.sa)
    c.fext = _shift_c(base.fext, s * base.sf)
    c.out = _shift(base.out, s * base.so)
    c.out2 = _shift(base.out2, s * base.so2)
    c.out3 = _shift(base.out3, s * base.so3)


cdef int _call_sample(kernel_t fn, ModelCore m, DataC* d, const Call* base,
                      Py_ssize_t s) noexcept nogil:
    """fn on sample s of a batch."""
    cdef Call c
    _sample_call(base, s, &c)
    return _checked_outputs(fn(m, d, &c), &c)


# A kernel's result that is not finite although its inputs are (checked before the
# call) means an overflow, e.g. |v| ~ 1e200 squared in the bias forces: reported as
# an error, never returned.  Finite iff the magnitude's bits do not exceed
# DBL_MAX's (compat.h td_bits_above; the integer OR-reduction vectorizes).
cdef enum:
    CODE_OVERFLOW = 1 << 30
    CHECK_ALL = 0          # every output value
    CHECK_POSES = 1        # 4x4 poses: translations only
    CHECK_SPD = 2          # a symmetric positive semidefinite matrix: its diagonal
    CHECK_KERNEL = 3       # the kernel function checks its own outputs


cdef inline bint _finite_bits(const double* x, Py_ssize_t n) noexcept nogil:
    return (td_bits_above(x, n, TD_BITS_DBL_MAX, 0) >> 63) == 0


cdef inline bint _finite_translations(const double* T, Py_ssize_t n) noexcept nogil:
    """The translations of n/16 homogeneous 4x4 poses are finite (their rotations
    are products of rotations of finite angles or unit quaternions: bounded)."""
    cdef Py_ssize_t k
    cdef double s = 0.0
    for k in range(0, n, 16):
        s += T[k + 3] * 0.0 + T[k + 7] * 0.0 + T[k + 11] * 0.0    # NaN iff one is not finite
    return s == 0.0


cdef inline bint _finite_diagonal(const double* M, Py_ssize_t n2) noexcept nogil:
    """The diagonal of a symmetric positive semidefinite n × n matrix is finite (then
    so is every entry: |M_ij| ≤ √(M_ii M_jj))."""
    cdef Py_ssize_t n = <Py_ssize_t>sqrt(<double>n2 + 0.5), k
    cdef double s = 0.0
    for k in range(n):
        s += M[k * (n + 1)] * 0.0                     # NaN iff an entry is not finite
    return s == 0.0


cdef inline int _checked_outputs(int code, const Call* c, int check=-1) noexcept nogil:
    """code, or CODE_OVERFLOW if an output c.check (or check) covers is not finite."""
    if check < 0:
        check = c.check
    if code or check == CHECK_KERNEL:
        return code
    if check == CHECK_POSES:
        if not _finite_translations(c.out, c.so):
            return CODE_OVERFLOW
    elif check == CHECK_SPD:
        if not _finite_diagonal(c.out, c.so):
            return CODE_OVERFLOW
    elif not (_finite_bits(c.out, c.so)
              and (c.out2 == NULL or _finite_bits(c.out2, c.so2))
              and (c.out3 == NULL or _finite_bits(c.out3, c.so3))):
        return CODE_OVERFLOW
    return 0


# Output arrays.  NumPy caches the memory of arrays up to 1 KiB; a larger result
# (panda's 9 poses are 1152 bytes) would go through the general malloc path,
# which costs about as much as the forward-kinematics kernel itself.  Results
# between 1 and 64 KiB therefore take their memory from a small cache of blocks
# that dead results gave back (under the GIL: arrays are made and freed with it).
cdef enum:
    # a batch visiting fewer freedoms than this in total (N × nv, or N × the path
    # length for Jacobians) runs on the calling thread
    _SMALL_BATCH_WORK = 256

cdef enum:
    _CACHE_SLOTS = 8
    _CACHE_MIN = 1024
    _CACHE_MAX = 65536
cdef void* _cache_ptr[_CACHE_SLOTS]
cdef size_t _cache_len[_CACHE_SLOTS]
cdef int _cache_n = 0


@cython.freelist(16)
cdef class _Block:
    """Owner (the array's ``base``) of a result's memory; gives it back to the cache."""
    cdef void* ptr
    cdef size_t nbytes

    def __dealloc__(self):
        global _cache_n
        if self.ptr == NULL:
            return
        if _cache_n < _CACHE_SLOTS:
            _cache_ptr[_cache_n] = self.ptr
            _cache_len[_cache_n] = self.nbytes
            _cache_n += 1
        else:
            free(self.ptr)


cdef cnp.ndarray _new_output(int nd, cnp.npy_intp* dims):
    """An uninitialized C-contiguous float64 array of shape dims[:nd]."""
    global _cache_n
    cdef size_t nbytes = sizeof(double)
    cdef int k
    cdef void* ptr = NULL
    cdef _Block blk
    for k in range(nd):
        nbytes *= <size_t>dims[k]
    if nbytes <= _CACHE_MIN or nbytes > _CACHE_MAX:
        return cnp.PyArray_EMPTY(nd, dims, cnp.NPY_DOUBLE, 0)
    for k in range(_cache_n - 1, -1, -1):
        if _cache_len[k] == nbytes:
            ptr = _cache_ptr[k]
            _cache_n -= 1
            _cache_ptr[k] = _cache_ptr[_cache_n]
            _cache_len[k] = _cache_len[_cache_n]
            break
    if ptr == NULL:
        ptr = malloc(nbytes)
        if ptr == NULL:
            raise MemoryError()
    blk = _Block.__new__(_Block)
    blk.ptr = ptr
    blk.nbytes = nbytes
    arr = cnp.PyArray_SimpleNewFromData(nd, dims, cnp.NPY_DOUBLE, ptr)
    cnp.set_array_base(arr, blk)
    return arr


cdef inline bint _output_ok(object out, int nd, const cnp.npy_intp* dims):
    """out is a writable C-contiguous native float64 ndarray of shape dims[:nd]."""
    cdef int k
    if not (cnp.PyArray_CheckExact(out) and cnp.PyArray_TYPE(<cnp.ndarray>out) == cnp.NPY_DOUBLE
            and cnp.PyArray_NDIM(<cnp.ndarray>out) == nd
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out)
            and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>out)):
        return False
    for k in range(nd):
        if cnp.PyArray_DIMS(<cnp.ndarray>out)[k] != dims[k]:
            return False
    return True


# kernel adapters: Call -> the kernel's own arguments


# group adapters: TD_VL samples s0, s0 + 1, … of a batch at once (codes into errs[l])
ctypedef void (*group_t)(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                         int* errs) noexcept nogil

cdef struct _LaneCalls:
    # the calls of the samples of one group, their inputs' and outputs' pointers, codes
    # and output bounds (INFINITY: none)
    Call cs[8]
    const double* q[8]
    const double* v[8]
    const double* a[8]
    const double* f[8]
    double* o1[8]
    double* o2[8]
    double* o3[8]
    int codes[8]
    double B[8]


cdef void _lane_calls(const Call* base, Py_ssize_t s0, _LaneCalls* g) noexcept nogil:
    """The calls of samples s0 … s0 + TD_VL − 1."""
    cdef int l
    for l in range(TD_VL):
        _sample_call(base, s0 + l, &g.cs[l])
        g.q[l] = g.cs[l].q; g.v[l] = g.cs[l].v; g.a[l] = g.cs[l].a; g.f[l] = g.cs[l].fext
        g.o1[l] = g.cs[l].out; g.o2[l] = g.cs[l].out2; g.o3[l] = g.cs[l].out3
        g.B[l] = INFINITY


cdef void _lane_errors(_LaneCalls* g, int* errs) noexcept nogil:
    """errs[l]: each sample's code, or as _call_sample its output check (CHECK_KERNEL
    calls: all outputs checked unless their bound g.B[l] proves them finite)."""
    cdef int l
    for l in range(TD_VL):
        if g.cs[l].check != CHECK_KERNEL:
            errs[l] = _checked_outputs(g.codes[l], &g.cs[l])
        else:
            errs[l] = _bounded_outputs(g.codes[l], &g.cs[l], g.B[l])


cdef long _next_serial = 0


cdef class ModelCore:
    """Kernel-side arrays of a compiled model (see ``treedyn.model.Model``).

    Every array is a read-only view of an immutable ``bytes`` object (the tables of
    ``treedyn.tables``): nothing reachable from Python can make it writable, so
    what the kernels read cannot change after the model is built."""

    cdef readonly int nq, nv           # sizes of q and v
    cdef int nb
    cdef long serial                   # identifies the model a Data was made for
    cdef const int[::1] parent
    cdef const int[::1] kind
    cdef const int[::1] qoff
    cdef const int[::1] voff
    cdef const int[::1] nqj
    cdef const int[::1] nvj
    cdef const double[:, ::1] Bref     # (nb, 12): rotation (row-major) + position of B_i
    cdef const double[:, ::1] X        # (nv, 6): body-fixed joint screws at q = 0
    cdef const double[:, ::1] center   # (nb, 3): spherical joint centre, body frame
    cdef const int[::1] fast           # 1-dof fast-path code per body (joints.pxi)
    cdef const int[::1] screw_rev      # FAST_SCREW revolute about a coordinate axis
    cdef const int[::1] turns          # 1: a one-freedom joint that turns (angle_prepass)
    cdef const int[::1] ang_slot       # angle_prepass: sc_q slot and q index of each angle
    cdef const int[::1] ang_q          # (tables.angle_slots), n_ang of them
    cdef int n_ang
    cdef const int[:, ::1] screw_runs  # (runs, 3): q, v offsets and length of screw chains
    cdef const int[::1] group_body     # the other bodies (spherical, free joints)
    cdef int n_group
                                       # direction k: 1 + k, else 0 (joint_pose_offset)
    cdef const double[:, ::1] screw_pt # (nb, 3) its axis point nearest the body origin
    cdef const int[::1] univ           # 1: two revolute screws whose axes meet (universal)
    cdef const double[:, ::1] univ_pt  # (nb, 3) that point, body frame (universal_calc)
    cdef const int[::1] root           # the body of each subtree that hangs from the world
    cdef const int[::1] path_nv        # freedoms on the path world -> body (inclusive)
    # the ancestors' freedoms of body i as runs of consecutive indices [lo, hi),
    # nearest first: runs anc_run[anc_ptr[i] .. anc_ptr[i + 1]), lo = anc_run[2 r]
    cdef const int[::1] anc_ptr
    cdef const int[::1] anc_run
    cdef const int[::1] crba_grp       # CRBA column groups: bodies [grp[g], grp[g + 1])
    cdef const int[::1] dof_parent     # (nv,) the freedom before j on its path (-1: none)
    cdef const double[:, ::1] inert    # (nb, 22): m, COM (3), Θ_COM (9), Θ_origin (9)
    cdef const double[::1] armature    # (nv,)
    cdef double max_armature
    cdef int max_pending               # most subtrees waiting for their parent, leaves to roots
    cdef bint fd_recursive             # forward-dynamics derivatives: M⁻¹ products by recursion
    cdef const double[::1] grav        # (3,)
    cdef const int[::1] fbody          # owning body of each named frame (-1: world)
    cdef const double[:, ::1] foff     # (n_frames, 12): pose of each frame in its body
    cdef dict _targets                 # body or frame name -> (body, frame index or -1)
    # loop closures and mimic couplings (loops.pxi; set by _init_loops)
    cdef int n_crows                   # constraint rows m
    cdef const int[:, ::1] cl_int      # (closures, 3): row kind, parent-side, child-side body
    cdef const double[:, ::1] cl_geo   # (closures, G_WIDTH): attachment frames and geometry
    cdef const double[:, ::1] cl_body  # (closures, B_WIDTH): the geometry in body coordinates
    cdef const int[::1] cl_parallel    # 1: the closure's axes stay parallel for every q
    cdef const int[:, ::1] mm_int      # (couplings, 4): follower, leader freedom; their q index
    cdef const double[:, ::1] mm_dbl   # (couplings, 2): multiplier, offset
    cdef dict _tabs                    # the tables above by name (see _tables)
    cdef Data _idle                    # idle Data for plain calls (a pool, not model
    cdef list _pool                    # state: no result depends on them)
    cdef list _teams                   # idle teams of Data for batches (likewise)

    @property
    def _tables(self):
        """The kernel tables by name (read-only arrays; test and debug access)."""
        return MappingProxyType(self._tabs)

    @property
    def _nb(self):
        return self.nb

    @property
    def _n_crows(self):
        return self.n_crows

    @property
    def _serial(self):
        return self.serial

    def _init_core(self, dict t, dict names):
        """Set the kernel tables (``treedyn.tables.core_tables``: arrays on immutable
        memory, checked here) from the compiler; called once per model."""
        global _next_serial
        _next_serial += 1
        self.serial = _next_serial
        self._tabs = {}
        self.parent = self._table(t, "parent")
        self.kind = self._table(t, "kind")
        self.qoff = self._table(t, "qoff")
        self.voff = self._table(t, "voff")
        self.nqj = self._table(t, "nqj")
        self.nvj = self._table(t, "nvj")
        self.nb = self.parent.shape[0]
        self.nq = int(np.sum(t["nqj"]))
        self.nv = int(np.sum(t["nvj"]))
        self.Bref = self._table(t, "Bref")
        self.X = self._table(t, "X")
        self.center = self._table(t, "center")
        self.inert = self._table(t, "inert")
        self.armature = self._table(t, "armature")
        self.max_armature = float(np.abs(t["armature"]).max())
        self.grav = self._table(t, "grav")
        self.fast = self._table(t, "fast")
        self.screw_rev = self._table(t, "screw_rev")
        self.turns = self._table(t, "turns")
        self.ang_slot = self._table(t, "ang_slot")
        self.ang_q = self._table(t, "ang_q")
        self.n_ang = int(np.sum(t["turns"] != 0)) + 2 * int(np.sum(t["univ"] != 0))
        self.screw_runs = self._table(t, "screw_runs")
        self.group_body = self._table(t, "group_body")
        self.n_group = int(np.sum(np.asarray(t["kind"]) != KIND_SCREWS))
        self.screw_pt = self._table(t, "screw_pt")
        self.univ = self._table(t, "univ")
        self.univ_pt = self._table(t, "univ_pt")
        self.root = self._table(t, "root")
        self.path_nv = self._table(t, "path_nv")
        self.max_pending = t["max_pending"]
        self.fd_recursive = t["fd_recursive"]
        self._tabs["max_pending"] = self.max_pending
        self._tabs["fd_recursive"] = self.fd_recursive
        self.anc_ptr = self._table(t, "anc_ptr")
        self.anc_run = self._table(t, "anc_run")
        self.crba_grp = self._table(t, "crba_grp")
        self.dof_parent = self._table(t, "dof_parent")
        self.fbody = self._table(t, "fbody")
        self.foff = self._table(t, "foff")
        targets = {}
        for k, name in enumerate(names["frame_names"]):
            targets[name] = (int(t["fbody"][k]), k)
        for i, name in enumerate(names["body_names"]):
            targets[name] = (i, -1)
        self._targets = targets
        self._pool = []
        self._teams = []
        self.n_crows = 0
        empty = {"cl_int": (np.int32, (0, 3)), "cl_geo": (np.float64, (0, G_WIDTH)),
                 "cl_body": (np.float64, (0, B_WIDTH)), "cl_parallel": (np.int32, (1,)),
                 "mm_int": (np.int32, (0, 4)), "mm_dbl": (np.float64, (0, 2))}
        e = {k: np.frombuffer(bytes(np.zeros(shape, dt).nbytes), dt).reshape(shape)
             for k, (dt, shape) in empty.items()}
        self.cl_int = self._table(e, "cl_int")
        self.cl_geo = self._table(e, "cl_geo")
        self.cl_body = self._table(e, "cl_body")
        self.cl_parallel = self._table(e, "cl_parallel")
        self.mm_int = self._table(e, "mm_int")
        self.mm_dbl = self._table(e, "mm_dbl")

    cdef object _table(self, dict t, str name):
        """t[name], kept in _tables, if its memory is an immutable bytes object (then
        no view of it can be made writable); else ValueError."""
        a = t[name]
        base = a
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        if not (isinstance(a, np.ndarray) and not a.flags.writeable and isinstance(base, bytes)
                and a.flags.c_contiguous):
            raise ValueError(f"kernel table {name}: expected a read-only array on bytes "
                             f"(treedyn.tables.frozen)")
        self._tabs[name] = a
        return a

    def _init_loops(self, dict t):
        """Set the compiled loop closures (``treedyn.tables.closure_tables``).  Called
        once, while the model is built, before any Data exists."""
        if self._idle is not None or self._pool or self._teams:
            raise RuntimeError("_init_loops after Data were created")
        self.cl_int = self._table(t, "cl_int")
        self.cl_geo = self._table(t, "cl_geo")
        self.cl_body = self._table(t, "cl_body")
        self.cl_parallel = self._table(t, "cl_parallel")
        self.mm_int = self._table(t, "mm_int")
        self.mm_dbl = self._table(t, "mm_dbl")
        self.n_crows = t["n_rows"]

    # ------------------------------------------------------------------ Data
    def create_data(self):
        """A new :class:`Data` for this model: pass it as ``data=`` to the
        single-state entry points for allocation-free calls and to read the
        kernels' intermediates.  One Data per thread."""
        return Data(self)

    cdef Data _data(self, object data):
        """The caller's Data (checked), or an idle one from the pool (given back by
        _done): plain calls from several threads each get their own."""
        cdef Data d
        if data is None:
            d = self._idle
            if d is not None:
                self._idle = None
                return d
            if self._pool:
                return <Data>self._pool.pop()
            return Data(self)
        if not isinstance(data, Data):
            raise InputError(f"data: expected a treedyn Data from model.create_data(), "
                             f"got {type(data).__name__}")
        if (<Data>data).model_serial != self.serial:
            raise InputError("data: this Data was created for another model "
                             "(use this model's create_data())")
        return <Data>data

    cdef inline void _done(self, Data d, object data):
        if data is not None:
            return
        if self._idle is None:
            self._idle = d
        elif len(self._pool) < 64:
            self._pool.append(d)

    cdef _Team _team(self, int nth, bint lanes):
        """An idle team of at least nth Data (with the vector lanes' arrays if
        ``lanes``) from the pool, or a new one: making a team costs the first touch of
        its memory, which for small batches costs more than the batch."""
        cdef _Team team
        cdef Py_ssize_t k
        for k in range(len(self._teams) - 1, -1, -1):
            team = <_Team>self._teams[k]
            if team.n >= nth:
                del self._teams[k]
                break
        else:
            team = _Team(self, nth)
        if lanes:
            team._add_lanes(self)
        return team

    cdef inline void _team_done(self, _Team team):
        # (a team of a 100 000-body model holds hundreds of MB: keep one at most)
        if len(self._teams) < (4 if self.nb < 10_000 else 1):
            self._teams.append(team)

    cdef int _dispatch(self, kernel_t fn, Call* c, Py_ssize_t N, object data,
                       int work=-1, str what="the result", group_t group=NULL) except -1:
        """Run fn on one state (N < 0) or on N samples; raise for a kernel's code,
        or if an output (c.out, out2, out3: c.so, so2, so3 doubles per sample) is
        not finite (``what`` names it in the message).  One state: the GIL is
        released while fn runs if it visits at least GIL_RELEASE_NV freedoms
        (``work``; default nv, the whole model).  ``group`` (if not NULL): fn on
        TD_VL samples at once, used for the batch's full groups of TD_VL."""
        cdef Data d
        cdef int code = 0
        if N < 0:
            if data is None and self._idle is not None:
                d = self._idle                  # the pool's idle slot (_data, _done)
                self._idle = None
            elif type(data) is Data and (<Data>data).model_serial == self.serial:
                d = <Data>data
            else:
                d = self._data(data)
            if work < 0:
                work = self.nv
            if _release_gil(work):
                with nogil:
                    code = _checked_outputs(fn(self, &d.c, c), c)
            else:
                code = _checked_outputs(fn(self, &d.c, c), c)
            if data is None:
                if self._idle is None:
                    self._idle = d
                else:
                    self._done(d, data)
            if code:
                self._raise_code(code, -1, what)
            return 0
        if data is not None:
            raise InputError("data: only for single-state calls (a batch uses one Data "
                             "per thread internally)")
        if N == 0:
            return 0
        return self._dispatch_batch(fn, c, N, work, what, group)

    cdef int _dispatch_batch(self, kernel_t fn, Call* c, Py_ssize_t N, int work, str what,
                             group_t group) except -1:
        """The batch half of _dispatch (N > 0 samples).  Kept out of _dispatch so
        that single calls stay lean (the chunk loop's Python objects and
        try/finally cost single calls about 30 ns when they shared one function)."""
        cdef _Team team
        cdef int nth, L = TD_VL
        cdef Py_ssize_t s, ng = 0, items, per, i0, i1
        cdef double tick = 0.0
        cdef int[::1] errs
        global _omp_started, _lane_groups_run
        nth = _batch_threads()
        if nth > N:
            nth = <int>N
        if N * (work if work >= 0 else self.nv) < _SMALL_BATCH_WORK:
            nth = 1            # waking a thread team costs more than the work (and much
                               # more when the cores are busy with other processes)
        if group != NULL and L > 1 and _lanes_enabled:
            ng = N // L
        team = self._team(nth, ng > 0)
        errs = np.zeros(N, dtype=np.int32)
        # items 0 … ng − 1: groups of L samples; then the remaining samples one by one.
        # Large batches run in chunks of items of 1–4 ms, signals handled between
        # them (Ctrl-C: KeyboardInterrupt, the outputs are dropped by the caller)
        items = ng + N - ng * L
        per = items if N * (work if work >= 0 else self.nv) < 65536 else 64 * nth
        i0 = 0
        if per < items:
            from time import perf_counter
        try:
            while i0 < items:
                i1 = min(items, i0 + per)
                if per < items:
                    tick = perf_counter()
                if nth == 1:
                    with nogil:
                        for s in range(i0, i1):
                            if s < ng:
                                group(self, &team.c[0], c, s * L, &errs[s * L])
                            else:
                                errs[s - ng + ng * L] = _call_sample(fn, self, &team.c[0], c,
                                                                     s - ng + ng * L)
                else:
                    _omp_started = True
                    with nogil:
                        for s in prange(i0, i1, schedule="dynamic",
                                        chunksize=16 if ng == 0 else 4, num_threads=nth):
                            if s < ng:
                                group(self, &team.c[threadid()], c, s * L, &errs[s * L])
                            else:
                                errs[s - ng + ng * L] = _call_sample(fn, self, &team.c[threadid()],
                                                                     c, s - ng + ng * L)
                i0 = i1
                if i0 < items:
                    tick = perf_counter() - tick
                    if tick < 1e-3:
                        per *= 2
                    elif tick > 4e-3 and per > nth:
                        per //= 2
                    PyErr_CheckSignals()
        finally:
            self._team_done(team)
        _lane_groups_run += ng
        for s in range(N):
            if errs[s]:
                self._raise_code(errs[s], s, what)
        return 0

    cdef _raise_code(self, int code, Py_ssize_t sample, str what):
        if code == CODE_MASS_NOT_PD:
            at = f" (sample {sample})" if sample >= 0 else ""
            raise SingularModelError(f"{what}{at}: the mass matrix is not positive definite "
                                     f"(massless subtree without armature?)")
        if code == CODE_OVERFLOW:
            at = f" (sample {sample})" if sample >= 0 else ""
            raise InputError(f"{what}{at} overflowed to infinity or NaN although the inputs "
                             f"are finite: they are too large (e.g. velocities |v| ~ 1e200 "
                             f"whose squares exceed the float64 range)")
        if code > 0:
            self._raise_bad_quaternion(code - 1, sample)
        self._raise_singular(-code - 1)

    # ------------------------------------------------------------------ input checks
    cdef cnp.ndarray _states(self, object x, int width, str name):
        """x as a C-contiguous float64 array of shape (width,) or (N, width); finite."""
        return _as_states(x, width, name)

    cdef cnp.ndarray _like(self, cnp.ndarray ref, object x, int width, str name):
        """x checked like _states and with the same batch shape as ref."""
        cdef cnp.ndarray arr = _as_states(x, width, name)
        cdef int nd = cnp.PyArray_NDIM(arr)
        if nd != cnp.PyArray_NDIM(ref) or (nd == 2 and cnp.PyArray_DIMS(arr)[0] != cnp.PyArray_DIMS(ref)[0]):
            want = np.shape(ref)[:-1] + (width,)
            raise InputError(f"{name}: expected shape {want} (the batch shape of q "
                             f"{np.shape(ref)}), got {np.shape(arr)}")
        return arr

    cdef cnp.ndarray _zero_or_like(self, cnp.ndarray qa, object x, str name):
        """_like(qa, x, nv, name), or zeros of that shape for x = _ZERO (the
        library's bias and gravity forces; not a user value)."""
        cdef cnp.npy_intp dims[2]
        if x is not _ZERO:
            return self._like(qa, x, self.nv, name)
        dims[0] = cnp.PyArray_DIMS(qa)[0]
        dims[cnp.PyArray_NDIM(qa) - 1] = self.nv
        return cnp.PyArray_ZEROS(cnp.PyArray_NDIM(qa), dims, cnp.NPY_DOUBLE, 0)

    cdef cnp.ndarray _output(self, object out, cnp.ndarray qa, int nd, cnp.npy_intp* dims):
        """out checked (float64, C-contiguous, writable, shape: q's batch shape +
        dims[:nd]), or a new uninitialized array of that shape."""
        cdef cnp.npy_intp full[4]
        cdef int k, lead = cnp.PyArray_NDIM(qa) - 1
        cdef bint ok
        if lead:
            full[0] = cnp.PyArray_DIMS(qa)[0]
        for k in range(nd):
            full[lead + k] = dims[k]
        if out is None:
            return _new_output(lead + nd, full)
        if _output_ok(out, lead + nd, full):
            return <cnp.ndarray>out
        ok = (cnp.PyArray_Check(out) and cnp.PyArray_TYPE(<cnp.ndarray>out) == cnp.NPY_DOUBLE
              and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out)
              and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out)
              and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>out)
              and cnp.PyArray_NDIM(<cnp.ndarray>out) == lead + nd)
        if ok:
            for k in range(lead + nd):
                if cnp.PyArray_DIMS(<cnp.ndarray>out)[k] != full[k]:
                    ok = False
        if not ok:
            want = tuple([full[k] for k in range(lead + nd)])
            raise InputError(f"out: expected a writable C-contiguous float64 array of shape "
                             f"{want}, got {type(out).__name__} "
                             f"{getattr(out, 'dtype', '')} {np.shape(out)}")
        return <cnp.ndarray>out

    cdef _raise_bad_quaternion(self, int body, Py_ssize_t sample):
        raise InputError(self._bad_quaternion_message(body, sample))

    def _bad_quaternion_message(self, body, sample):
        return f"q: quaternion of joint #{body} is not unit (|Q| - 1 > 1e-6)"

    def _raise_singular(self, body):
        raise SingularModelError(f"the articulated inertia seen by joint #{body} is singular "
                                 f"(massless subtree without armature?)")

    cdef const double* _gravity_ptr(self, object gravity, double* gbuf) except NULL:
        """Pointer to the gravity to use: the model's, or ``gravity`` copied into gbuf."""
        cdef cnp.ndarray garr
        cdef int k
        if gravity is None:
            return &self.grav[0]
        garr = self._states(gravity, 3, "gravity")
        if cnp.PyArray_NDIM(garr) != 1:
            raise InputError(f"gravity: expected shape (3,), got {np.shape(garr)}")
        for k in range(3):
            gbuf[k] = (<double*>cnp.PyArray_DATA(garr))[k]
        return gbuf

    cdef int _rep_code(self, object representation) except -1:
        """Index of a representation name in _REPRESENTATIONS, or InputError."""
        if not isinstance(representation, str) or representation not in _REPRESENTATIONS:
            raise InputError(f"representation must be one of {_REPRESENTATIONS}, "
                             f"got {representation!r}")
        return _REPRESENTATIONS.index(representation)

    cdef tuple _outputs(self, object out, cnp.ndarray qa, int nd, cnp.npy_intp* dims,
                        tuple names):
        """len(names) outputs of q's batch shape + dims[:nd]: the caller's ``out``
        tuple (checked: shapes, no two sharing memory) or new arrays."""
        cdef int n = len(names), j, k
        if out is None:
            outs = (None,) * n
        elif isinstance(out, tuple) and len(out) == n:
            outs = out
        else:
            raise InputError(f"out: expected None or a tuple of {n} arrays "
                             f"({', '.join(names)}), got {type(out).__name__}")
        res = tuple([self._output(o, qa, nd, dims) for o in outs])
        if out is not None:
            for j in range(n):
                for k in range(j + 1, n):
                    if np.may_share_memory(res[j], res[k]):
                        raise InputError(f"out: the {n} arrays must be distinct (not "
                                         f"sharing memory)")
        return res

    cdef int _wrench_frame(self, object f_ext_frame) except -1:
        if not isinstance(f_ext_frame, str):
            raise InputError(f"f_ext_frame: expected a wrench frame name (str), got "
                             f"{type(f_ext_frame).__name__} {f_ext_frame!r:.60}")
        if f_ext_frame not in _WRENCH_FRAMES:
            raise InputError(f"f_ext_frame: no wrench frame named {f_ext_frame!r}; expected "
                             f"one of 'body', 'hybrid', 'world'")
        return _WRENCH_FRAMES[f_ext_frame]

    cdef cnp.ndarray _wrenches(self, cnp.ndarray qa, object f_ext):
        cdef cnp.ndarray fa
        if isinstance(f_ext, np.ma.MaskedArray):
            raise InputError("f_ext: expected real numbers, got a numpy masked array")
        try:
            fa = np.asarray(f_ext)
            if fa.dtype.kind not in "fiu" or fa.dtype == np.bool_:
                raise TypeError(f"dtype {fa.dtype}")
            fa = np.ascontiguousarray(fa, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"f_ext: expected real numbers of shape ({self.nb}, 6) or "
                             f"(N, {self.nb}, 6), got {exc}") from None
        cdef tuple want
        if cnp.PyArray_NDIM(qa) == 1:
            want = (self.nb, 6)
        else:
            want = (int(cnp.PyArray_DIMS(qa)[0]), self.nb, 6)
        if np.shape(fa) != want:
            raise InputError(f"f_ext: expected shape {want} (one wrench per body), "
                             f"got {np.shape(fa)}")
        if not _all_finite(<double*>cnp.PyArray_DATA(fa), cnp.PyArray_SIZE(fa)):
            raise InputError(f"f_ext: expected finite numbers of shape {want}, got NaN or "
                             f"infinity")
        return fa

    cdef object _loads(self, Call* c, cnp.ndarray qa, object f_ext, object gravity,
                       object f_ext_frame, double* gbuf):
        """Fill gravity and external wrenches of c; returns the wrench array (kept
        alive by the caller) or None."""
        c.g = self._gravity_ptr(gravity, gbuf)
        c.fext = NULL
        c.sf = 0
        c.fframe = 0 if f_ext_frame is "world" else self._wrench_frame(f_ext_frame)
        if f_ext is None:
            return None
        fa = self._wrenches(qa, f_ext)
        c.fext = <double*>cnp.PyArray_DATA(fa)
        c.sf = 6 * self.nb
        return fa

    cdef inline Py_ssize_t _batch(self, cnp.ndarray qa):
        return -1 if cnp.PyArray_NDIM(qa) == 1 else cnp.PyArray_DIMS(qa)[0]

    # ------------------------------------------------------------------ kinematics


    cdef tuple _target(self, object frame):
        """(body or -1, named-frame index or -1) of a body index, body or frame name."""
        if isinstance(frame, (int, np.integer)) and not isinstance(frame, (bool, np.bool_)):
            if not 0 <= frame < self.nb:
                raise InputError(f"frame: body index {frame} out of range 0..{self.nb - 1}")
            return (int(frame), -1)
        try:
            return self._targets[frame]
        except (KeyError, TypeError):
            raise InputError(f"frame: no body or frame named {frame!r}") from None


    cdef object _frame_call(self, kernel_t fn, object q, object frame, object representation,
                            object data, object out, int nd, str what):
        """q -> one (6, nv) (nd = 2) or (6, nv, nv) (nd = 3) array per state for a body
        or frame: zero outside the path world → frame, all zero for a frame attached
        to the world."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef tuple tgt = self._target(frame)
        cdef int rep
        cdef cnp.npy_intp dims[3]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        rep = self._rep_code(representation)
        dims[0] = 6; dims[1] = self.nv; dims[2] = self.nv
        cdef cnp.ndarray res = self._output(out, qa, nd, dims)
        memset(cnp.PyArray_DATA(res), 0, cnp.PyArray_NBYTES(res))
        if tgt[0] < 0 or self.nv == 0:              # attached to the world
            if data is not None:
                self._data(data)
            return res
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.sq = self.nq
        c.body = tgt[0]
        c.frame = tgt[1]
        c.rep = rep
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = 6 * self.nv * (self.nv if nd == 3 else 1)
        self._dispatch(fn, &c, self._batch(qa), data, self.path_nv[c.body], what)
        return res

    cdef object _joint_space_call(self, kernel_t fn, object q, object v, object x, str xname,
                                  object f_ext, object gravity, object f_ext_frame,
                                  object data, object out):
        """Inverse or forward dynamics: (q, v, x = a or τ) with loads -> (nv,) per state."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._zero_or_like(qa, v, "v")
        cdef cnp.ndarray xa = self._zero_or_like(qa, x, xname)
        cdef double gbuf[3]
        cdef cnp.npy_intp dims[1]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        fa = self._loads(&c, qa, f_ext, gravity, f_ext_frame, gbuf)
        dims[0] = self.nv
        cdef cnp.ndarray res = self._output(out, qa, 1, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(xa)
        c.sq = self.nq
        c.sv = self.nv
        c.sa = self.nv
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = self.nv
        self._dispatch(fn, &c, self._batch(qa), data, -1,
                       "inverse dynamics: τ" if xname == "a" else "forward dynamics: v̇")
        return res

    # ------------------------------------------------------------------ dynamics


    cdef object _spd_matrix_call(self, kernel_t fn, object q, object data, object out,
                                 str what, group_t group=NULL):
        """q -> a symmetric positive (semi)definite (nv, nv) matrix per state."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.npy_intp dims[2]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        dims[0] = self.nv; dims[1] = self.nv
        cdef cnp.ndarray res = self._output(out, qa, 2, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.sq = self.nq
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = self.nv * self.nv
        c.check = CHECK_SPD
        self._dispatch(fn, &c, self._batch(qa), data, -1, what, group)
        return res


    cdef tuple _derivatives_call(self, kernel_t fn, group_t group, object q, object v,
                                 object x, str xname,
                                 object f_ext, object gravity, object f_ext_frame,
                                 object data, object out, tuple names, str what):
        """(q, v, x) with loads -> three (nv, nv) matrices per state."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._zero_or_like(qa, v, "v")
        cdef cnp.ndarray aa = self._zero_or_like(qa, x, xname)
        cdef double gbuf[3]
        cdef cnp.npy_intp dims[2]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        fa = self._loads(&c, qa, f_ext, gravity, f_ext_frame, gbuf)
        dims[0] = self.nv; dims[1] = self.nv
        cdef cnp.ndarray r1, r2, r3
        r1, r2, r3 = self._outputs(out, qa, 2, dims, names)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(aa)
        c.sq = self.nq
        c.sv = self.nv
        c.sa = self.nv
        c.out = <double*>cnp.PyArray_DATA(r1)
        c.out2 = <double*>cnp.PyArray_DATA(r2)
        c.out3 = <double*>cnp.PyArray_DATA(r3)
        c.so = self.nv * self.nv
        c.so2 = c.so
        c.so3 = c.so
        c.check = CHECK_KERNEL
        self._dispatch(fn, &c, self._batch(qa), data, -1, what, group)
        return r1, r2, r3


    # ------------------------------------------------------------------ motion


    # ------------------------------------------------------------------ kinematic derivatives


    # ------------------------------------------------------------------ loop closures
    cdef int _require_loops(self) except -1:
        if self.cl_int.shape[0] + self.mm_int.shape[0] == 0:
            raise InputError("the model has no loop closures or mimic couplings")
        return 0


    # ------------------------------------------------------------------ time stepping
    cdef _check_unit_quaternions(self, cnp.ndarray qa, str name):
        """Raise unless every quaternion of q (or of each row) is unit to 1e-6."""
        cdef Py_ssize_t N, s
        cdef int i, j
        cdef double n2
        cdef double* p = <double*>cnp.PyArray_DATA(qa)
        N = 1 if cnp.PyArray_NDIM(qa) == 1 else cnp.PyArray_DIMS(qa)[0]
        for s in range(N):
            for i in range(self.nb):
                if self.kind[i] == KIND_SCREWS:
                    continue
                j = self.qoff[i] + (0 if self.kind[i] == KIND_SPHERICAL else 3)
                n2 = (p[s * self.nq + j] ** 2 + p[s * self.nq + j + 1] ** 2
                      + p[s * self.nq + j + 2] ** 2 + p[s * self.nq + j + 3] ** 2)
                if fabs(sqrt(n2) - 1.0) > QUAT_NORM_TOL:
                    self._raise_bad_quaternion(i, s if cnp.PyArray_NDIM(qa) == 2 else -1)


    cdef int _check_quaternions_named(self, cnp.ndarray qa, str name) except -1:
        """_check_unit_quaternions with the argument's name in the message."""
        try:
            self._check_unit_quaternions(qa, name)
        except InputError as exc:
            text = str(exc)
            raise InputError(name + text[1:] if text.startswith("q") else text) from None
        return 0


cdef inline int _states_ok(object x, int width) noexcept:
    """x's ndim (1 or 2) if it needs no conversion or message: an exact native
    float64 C-contiguous ndarray of shape (width,) or (N, width), finite; else 0."""
    cdef int nd
    if not (cnp.PyArray_CheckExact(x) and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_DOUBLE
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x)):
        return 0
    nd = cnp.PyArray_NDIM(<cnp.ndarray>x)
    if ((nd == 1 or nd == 2) and cnp.PyArray_DIMS(<cnp.ndarray>x)[nd - 1] == width
            and _all_finite(<double*>cnp.PyArray_DATA(<cnp.ndarray>x),
                            cnp.PyArray_SIZE(<cnp.ndarray>x))):
        return nd
    return 0


cdef inline cnp.ndarray _as_states(object x, int width, str name):
    """x as a C-contiguous float64 array of shape (width,) or (N, width); finite."""
    if _states_ok(x, width):
        return <cnp.ndarray>x
    return _as_states_checked(x, width, name)


cdef cnp.ndarray _as_states_checked(object x, int width, str name):
    """_as_states off its fast path: converts x, or names what is wrong with it."""
    cdef cnp.ndarray arr
    cdef int nd
    if cnp.PyArray_CheckExact(x) and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_DOUBLE \
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x) \
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x):
        arr = <cnp.ndarray>x
    else:
        if isinstance(x, np.ma.MaskedArray):        # masked entries have no value
            raise InputError(f"{name}: expected real numbers, got a numpy masked array "
                             f"(pass np.ma.filled(x, value) or the unmasked rows)")
        try:
            arr = np.asarray(x)
        except Exception as exc:
            raise InputError(f"{name}: cannot be read as an array: {exc}") from None
        if arr.dtype.kind not in "fiu" or arr.dtype == np.bool_:
            raise InputError(f"{name}: expected real numbers of shape ({width},) or "
                             f"(N, {width}), got dtype {arr.dtype}")
        if arr.ndim == 0:
            raise InputError(f"{name}: expected shape ({width},) or (N, {width}), got ()")
        arr = np.ascontiguousarray(arr, dtype=np.float64)
    nd = cnp.PyArray_NDIM(arr)
    if (nd != 1 and nd != 2) or cnp.PyArray_DIMS(arr)[nd - 1] != width:
        raise InputError(
            f"{name}: expected shape ({width},) or (N, {width}), got {np.shape(arr)}")
    if not _all_finite(<double*>cnp.PyArray_DATA(arr), cnp.PyArray_SIZE(arr)):
        raise InputError(f"{name}: expected finite numbers of shape {np.shape(arr)}, got "
                         f"NaN or infinity (first at flat index "
                         f"{int(np.flatnonzero(~np.isfinite(arr))[0])})")
    return arr


def _set_fd_products(int mode):
    """Test hook: 0 each model's choice, 1 dense products, 2 the recursion for the
    M⁻¹ products of forward_dynamics_derivatives; returns the previous mode."""
    global _fd_products
    if mode not in (0, 1, 2):
        raise ValueError("mode: 0, 1 or 2")
    old = _fd_products
    _fd_products = mode
    return old


def _set_lanes(bint enabled):
    """Test hook: whether batches run the group kernels that compute TD_VL samples side
    by side (the derivative kernels and M⁻¹); returns the previous setting."""
    global _lanes_enabled
    old = _lanes_enabled
    _lanes_enabled = enabled
    return old


def _lanes():
    """(TD_VL, the number of lane groups batches have run so far): test hooks."""
    return TD_VL, _lane_groups_run


def _set_gil_release_nv(int n):
    """Set the GIL-release threshold (benchmarks/bench_threads.py studies it);
    returns the previous value."""
    global _gil_release_nv
    old = _gil_release_nv
    _gil_release_nv = n
    return old


def _set_gil_release_alone_nv(int n):
    """Set the threshold from which single-state calls release the GIL with no other
    Python thread (0: always, as bench_threads.py measures the release's cost);
    returns the previous value."""
    global _gil_release_alone_nv
    old = _gil_release_alone_nv
    _gil_release_alone_nv = n
    return old


def _gil_release_count():
    """How many single-state calls have released the GIL so far (a test hook)."""
    return _gil_releases


# OpenMP and fork: GNU OpenMP's thread pool does not survive fork(), so a child
# forked after this process ran a parallel region would wait forever on the
# first one it starts.  Such a child runs its batches on one thread.
cdef bint _omp_started = False      # this process has run a parallel region
cdef bint _omp_unusable = False     # forked from a process that had


def _after_fork_in_child():
    global _omp_unusable
    if _omp_started:
        _omp_unusable = True


os.register_at_fork(after_in_child=_after_fork_in_child)


cdef int _batch_threads():
    if _omp_unusable:
        return 1
    return max(1, openmp.omp_get_max_threads())


def batch_threads():
    """Number of threads a batch call uses: ``OMP_NUM_THREADS`` or the number of
    cores, and 1 in a process forked (``multiprocessing`` "fork" start method)
    after its parent ran a threaded batch, whose OpenMP thread pool the child
    cannot use; "spawn" and "forkserver" workers keep all threads."""
    return _batch_threads()


cdef inline bint _all_finite(const double* x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        if not isfinite(x[k]):
            return False
    return True


def _sincos(x):
    """(sin x, cos x) computed as the kernels compute them (compat.h td_sincos);
    a hook for the tests."""
    cdef double[::1] xv = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef Py_ssize_t i, n = xv.shape[0]
    s = np.empty(n)
    c = np.empty(n)
    cdef double[::1] sv = s
    cdef double[::1] cv = c
    for i in range(n):
        sincos(xv[i], &sv[i], &cv[i])
    return s, c


def _sincos4(x):
    """(sin x, cos x) four at a time, as the kernels' angle prepass computes them
    (simd.h td_sincos4; the last group padded); a hook for the tests."""
    cdef double[::1] xv = np.ascontiguousarray(x, dtype=np.float64).ravel()
    cdef Py_ssize_t i, l, n = xv.shape[0]
    cdef double xb[4]
    cdef double sb[4]
    cdef double cb[4]
    s = np.empty(n)
    c = np.empty(n)
    cdef double[::1] sv = s
    cdef double[::1] cv = c
    for i in range(0, n, 4):
        for l in range(4):
            xb[l] = xv[i + l] if i + l < n else 1.0
        td_sincos4(xb, sb, cb)
        for l in range(4):
            if i + l < n:
                sv[i + l] = sb[l]
                cv[i + l] = cb[l]
    return s, c


cdef extern from *:
    """
    /* The instruction set this module was compiled for, and whether the CPU runs
       AVX2 and FMA code (cpuid and the OS's saving of the AVX registers, by the
       compiler's runtime check). */
    #if defined(__AVX2__)
    #define TD_ISA "avx2"
    #else
    #define TD_ISA "baseline"
    #endif
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    static int td_cpu_has_avx2(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx2"); }
    static int td_cpu_has_fma(void) { __builtin_cpu_init(); return __builtin_cpu_supports("fma"); }
    #else
    static int td_cpu_has_avx2(void) { return 0; }
    static int td_cpu_has_fma(void) { return 0; }
    #endif
    """
    const char* TD_ISA
    int td_cpu_has_avx2() noexcept nogil
    int td_cpu_has_fma() noexcept nogil

#: the instruction set this build of the kernels was compiled for: "baseline"
#: (the platform's default, SSE2 on x86-64) or "avx2" (treedyn._kernels_avx2)
ISA = TD_ISA.decode()


def _cpu_has_avx2():
    """Whether this CPU (and OS) runs AVX2 code."""
    return bool(td_cpu_has_avx2())


def _cpu_has_fma():
    """Whether this CPU runs FMA3 code (which the AVX2 build of the kernels needs too)."""
    return bool(td_cpu_has_fma())
