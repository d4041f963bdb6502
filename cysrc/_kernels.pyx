# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled kernels of treedyn.

``ModelCore`` holds the flat, read-only arrays of a compiled model that the
kernels read (topological order, parent[i] < i) and exposes the per-state entry
points; ``treedyn.model.Model`` subclasses it.  Everything a kernel writes goes
into a ``Data`` (data.pxi) or into the caller's outputs, never into the model.
Each algorithm lives in its own ``.pxi`` file included below; the inline SE(3)
primitives are in ``se3.pxd``, the joint kinds in ``kinds.pxd``.

The binding is one dispatcher (``ModelCore._dispatch``): an entry point checks
its inputs, fills a ``Call`` with pointers and per-sample strides, and the
dispatcher runs the kernel once (on the caller's Data or one from the model's
pool, releasing the GIL for models with at least ``GIL_RELEASE_NV`` velocity
coordinates) or over a batch in an OpenMP ``prange`` with one Data per thread.
"""
import os

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
cimport openmp
from cpython.mem cimport PyMem_Malloc, PyMem_Free
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


# kernel adapters: Call -> the kernel's own arguments
cdef int _k_fk(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return fk_kernel(m, d, c.q, c.out)

cdef int _k_frame_poses(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return frame_poses_kernel(m, d, c.q, c.out)

cdef int _k_jacobian(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return frame_jacobian_kernel(m, d, c.q, c.body, c.frame, c.rep, c.out)

cdef int _k_rnea_body(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_body_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)

cdef int _k_rnea_spatial(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_spatial_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)

cdef int _k_rnea_hybrid(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return rnea_hybrid_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)

cdef inline bint _bound_is_cheaper(ModelCore m, int outputs) noexcept nogil:
    """Whether the derivative kernels' overflow bound (rnea_derivatives.pxi) reads
    fewer values than checking ``outputs`` nv × nv matrices."""
    return outputs * m.nv * m.nv > 24 * m.nv + 44 * m.nb


cdef inline int _bounded_outputs(int code, const Call* c, double B) noexcept nogil:
    """For CHECK_KERNEL calls: code, or the check of all outputs unless their bound B
    (the derivative kernels' overflow bound, +inf: none) proves them finite."""
    if code or B <= 1e300:
        return code
    return _checked_outputs(0, c, CHECK_ALL)


cdef int _k_rnea_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """CHECK_KERNEL (rnea_derivatives.pxi's bound)."""
    cdef double B = INFINITY
    cdef int code = rnea_derivatives_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe,
                                            c.out, c.out2, c.out3, False,
                                            &B if _bound_is_cheaper(m, 3) else NULL)
    return _bounded_outputs(code, c, B)

cdef int _k_aba_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """CHECK_KERNEL (aba_derivatives.pxi's bound)."""
    cdef double B = INFINITY
    cdef int code = aba_derivatives_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe,
                                           c.out, c.out2, c.out3,
                                           &B if _bound_is_cheaper(m, 2) else NULL)
    return _bounded_outputs(code, c, B)

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


cdef void _g_rnea_derivatives(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                              int* errs) noexcept nogil:
    """_k_rnea_derivatives on TD_VL samples (rnea_derivatives_lanes)."""
    cdef _LaneCalls g
    cdef int l
    _lane_calls(c, s0, &g)
    rnea_derivatives_lanes(m, d, g.q, g.v, g.a, c.g, g.f, c.fframe, g.o1, g.o2, g.o3, g.codes,
                           g.B if _bound_is_cheaper(m, 3) else NULL)
    for l in range(1, TD_VL):
        g.B[l] = g.B[0]                 # one bound for the group
    _lane_errors(&g, errs)


cdef void _g_aba_derivatives(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                             int* errs) noexcept nogil:
    """_k_aba_derivatives on TD_VL samples (aba_derivatives_lanes)."""
    cdef _LaneCalls g
    _lane_calls(c, s0, &g)
    aba_derivatives_lanes(m, d, g.q, g.v, g.a, c.g, g.f, c.fframe, g.o1, g.o2, g.o3, g.codes,
                          g.B if _bound_is_cheaper(m, 2) else NULL)
    _lane_errors(&g, errs)


cdef void _g_minverse(ModelCore m, DataC* d, const Call* c, Py_ssize_t s0,
                      int* errs) noexcept nogil:
    """_k_minverse on TD_VL samples (minverse_lanes)."""
    cdef _LaneCalls g
    _lane_calls(c, s0, &g)
    minverse_lanes(m, d, g.q, g.o1, g.codes)
    _lane_errors(&g, errs)


cdef int _k_crba(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return crba_kernel(m, d, c.q, c.out)

cdef int _k_aba(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    return aba_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.out)

cdef int _k_loop_rows(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out g (m), out2 G (m, nv), out3 Ġv (m) at (q, v)."""
    return loop_rows_kernel(m, d, c.q, c.v, c.out, c.out2, c.out3)

cdef int _k_constrained_fd(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out v̇ (nv), out2 λ (m), out3 g (m) at (q, v, τ = c.a)."""
    return constrained_fd_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.k1, c.k2,
                                 c.rcond, c.out, c.out2, c.out3)

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

cdef int _k_jacobian_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (6, nv, nv): ∂J/∂q of target c.body / c.frame in representation c.rep."""
    return jacobian_derivatives_kernel(m, d, c.q, c.body, c.frame, c.rep, c.out)

cdef int _k_frame_acceleration_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out / out2 / out3 (6, nv): ∂A/∂q, ∂A/∂v, ∂A/∂a of target c.body / c.frame."""
    return frame_acceleration_derivatives_kernel(m, d, c.q, c.v, c.a, c.body, c.frame, c.rep,
                                                 c.out, c.out2, c.out3)

cdef int _k_frame_velocity_derivatives(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out / out2 (6, nv): ∂V/∂q, ∂V/∂v = J of target c.body / c.frame."""
    return frame_acceleration_derivatives_kernel(m, d, c.q, c.v, c.v, c.body, c.frame, c.rep,
                                                 NULL, c.out, c.out2, True)

cdef int _k_body_jerks(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out (nb, 6) body jerks at (q, v, v̇ = c.a, v̈ = c.fext: the call's fourth input
    rides in the wrench slot, stride c.sf)."""
    return body_jerks_kernel(m, d, c.q, c.v, c.a, c.fext, c.rep, c.out)


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
    #: the kernel tables by name (the arrays above, read-only; test and debug access)
    cdef readonly dict _tables
    cdef Data _idle                    # idle Data for plain calls (a pool, not model
    cdef list _pool                    # state: no result depends on them)
    cdef list _teams                   # idle teams of Data for batches (likewise)

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
        self._tables = {}
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
        self.screw_pt = self._table(t, "screw_pt")
        self.univ = self._table(t, "univ")
        self.univ_pt = self._table(t, "univ_pt")
        self.root = self._table(t, "root")
        self.path_nv = self._table(t, "path_nv")
        self.max_pending = t["max_pending"]
        self.fd_recursive = t["fd_recursive"]
        self._tables["max_pending"] = self.max_pending
        self._tables["fd_recursive"] = self.fd_recursive
        self.anc_ptr = self._table(t, "anc_ptr")
        self.anc_run = self._table(t, "anc_run")
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
        self._tables[name] = a
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
        cdef _Team team
        cdef int code = 0, nth, L = TD_VL
        cdef Py_ssize_t s, ng = 0
        cdef int[::1] errs
        if N < 0:
            d = self._data(data)
            if work < 0:
                work = self.nv
            if work >= _gil_release_nv:
                with nogil:
                    code = _checked_outputs(fn(self, &d.c, c), c)
            else:
                code = _checked_outputs(fn(self, &d.c, c), c)
            self._done(d, data)
            if code:
                self._raise_code(code, -1, what)
            return 0
        if data is not None:
            raise InputError("data: only for single-state calls (a batch uses one Data "
                             "per thread internally)")
        if N == 0:
            return 0
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
        # items 0 … ng − 1: groups of L samples; then the remaining samples one by one
        if nth == 1:
            with nogil:
                for s in range(ng + N - ng * L):
                    if s < ng:
                        group(self, &team.c[0], c, s * L, &errs[s * L])
                    else:
                        errs[s - ng + ng * L] = _call_sample(fn, self, &team.c[0], c,
                                                             s - ng + ng * L)
        else:
            _omp_started = True
            with nogil:
                for s in prange(ng + N - ng * L, schedule="dynamic",
                                chunksize=16 if ng == 0 else 4, num_threads=nth):
                    if s < ng:
                        group(self, &team.c[threadid()], c, s * L, &errs[s * L])
                    else:
                        errs[s - ng + ng * L] = _call_sample(fn, self, &team.c[threadid()], c,
                                                             s - ng + ng * L)
        _lane_groups_run += ng
        self._team_done(team)
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
    def forward_kinematics(self, q, data=None, out=None):
        """Poses of all bodies in the world frame.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
            Joint configuration(s), layout in docs/conventions.md.
        data : Data, optional
            Single state only: the Data to work in (``model.create_data()``);
            its ``oMi`` holds the poses afterwards.
        out : ndarray, optional
            Output array of the result's shape (float64, C-contiguous).

        Returns
        -------
        ndarray, shape (nb, 4, 4) or (N, nb, 4, 4)
            Homogeneous transforms C_i (body frame -> world), in ``body_names`` order.
        """
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.npy_intp dims[3]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        dims[0] = self.nb; dims[1] = 4; dims[2] = 4
        cdef cnp.ndarray res = self._output(out, qa, 3, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.sq = self.nq
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = 16 * self.nb
        c.check = CHECK_POSES
        self._dispatch(_k_fk, &c, self._batch(qa), data, -1, "forward_kinematics: the body poses")
        return res

    def frame_poses(self, q, data=None, out=None):
        """World poses of all named frames, shape (n_frames, 4, 4) (or (N, n_frames, 4, 4)),
        in ``frame_names`` order: the world, every link (moving or merged), extra frames.
        ``data`` / ``out`` as in :meth:`forward_kinematics`."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.npy_intp dims[3]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        dims[0] = self.fbody.shape[0]; dims[1] = 4; dims[2] = 4
        cdef cnp.ndarray res = self._output(out, qa, 3, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.sq = self.nq
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = 16 * dims[0]
        c.check = CHECK_POSES
        self._dispatch(_k_frame_poses, &c, self._batch(qa), data, -1, "frame_poses: the frame poses")
        return res

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

    def jacobian(self, q, frame, representation="body", data=None, out=None):
        """Geometric Jacobian (6, nv) (or (N, 6, nv)) of a body or named frame: its
        twist in ``representation`` is ``J @ v``.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        frame : str or int
            A body name, a named frame (any link, merged links included) or a
            body index.
        representation : {"body", "spatial", "hybrid", "mixed"}
            "body": body frame at its origin (Pinocchio LOCAL); "spatial": world
            frame at the world origin (WORLD); "hybrid": world axes at the frame's
            origin, (ω, ṙ) (LOCAL_WORLD_ALIGNED); "mixed": (ω in the frame's
            axes, ṙ in world axes).
        data, out : as in :meth:`forward_kinematics` (``out`` (6, nv) or (N, 6, nv))

        Only the joints on the path world → frame are visited; the other columns
        are zero.
        """
        return self._frame_call(_k_jacobian, q, frame, representation, data, out, 2,
                                "jacobian: the Jacobian")

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
    def inverse_dynamics(self, q, v, a, representation="body", f_ext=None, gravity=None,
                         f_ext_frame="world", data=None, out=None):
        """Joint forces τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext by the O(n) recursive
        Newton–Euler algorithm.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        v, a : array_like, shape (nv,) or (N, nv)
            Velocities and accelerations (layout in docs/conventions.md).
        representation : {"body", "spatial", "hybrid"}
            Which recursion computes τ (Müller 2018, eqs. 66-67, 70-71, 75-76).
            All three give the same τ; they differ in the frames of the
            intermediate twists and wrenches (Data fields v/a_gf/f, sv/sa_gf/sf,
            hv/ha_gf/hf).
        f_ext : array_like, shape (nb, 6) or (N, nb, 6), optional
            External wrench (torque, force) acting on each body, in ``f_ext_frame``.
        gravity : array_like, shape (3,), optional
            World-frame gravity in m/s² (default: ``model.gravity``).
        f_ext_frame : {"world", "body", "hybrid"}
            "world": about the world origin, world axes; "body": about the body
            origin, body axes; "hybrid": about the body origin, world axes.
        data : Data, optional
            Single state: the Data to work in; holds the recursion's per-body
            quantities afterwards.
        out : ndarray, optional
            Output array, shape (nv,) or (N, nv), float64, C-contiguous.

        Returns
        -------
        ndarray, shape (nv,) or (N, nv)
            Joint forces/torques (N, N·m; free joints: the wrench in the
            joint's velocity coordinates).
        """
        cdef kernel_t fn
        if representation == "body":
            fn = _k_rnea_body
        elif representation == "spatial":
            fn = _k_rnea_spatial
        elif representation == "hybrid":
            fn = _k_rnea_hybrid
        else:
            raise InputError(f"representation must be 'body', 'spatial' or 'hybrid', "
                             f"got {representation!r}")
        return self._joint_space_call(fn, q, v, a, "a", f_ext, gravity, f_ext_frame, data, out)

    def mass_matrix(self, q, data=None, out=None):
        """Joint-space mass matrix M(q) by the composite-rigid-body algorithm.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        data, out : as in :meth:`inverse_dynamics` (``out`` (nv, nv) or (N, nv, nv))

        Returns
        -------
        ndarray, shape (nv, nv) or (N, nv, nv)
            Symmetric, both triangles filled; armature on the diagonal.
            Units: kg, kg·m, kg·m² by the coordinates involved.
        """
        return self._spd_matrix_call(_k_crba, q, data, out, "mass_matrix: M")

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

    def inverse_dynamics_derivatives(self, q, v, a, f_ext=None, gravity=None,
                                     f_ext_frame="world", data=None, out=None):
        """Partial derivatives of inverse dynamics τ(q, v, a) by one forward and one
        backward recursion (cysrc/rnea_derivatives.pxi), with M = ∂τ/∂a.

        Derivatives with respect to q are taken along each joint's group:
        ``dtau_dq @ δ = d/dε τ(integrate(q, ε δ), v, a)`` at ε = 0, so every
        matrix is nv × nv, also for spherical and free joints (docs/conventions.md,
        "Derivatives and tangent spaces").  τ, hence its derivatives, do not depend on
        the representation of :meth:`inverse_dynamics`.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        v, a : array_like, shape (nv,) or (N, nv)
        f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics`.  A wrench
            given in the world frame stays fixed in space while q varies; in the
            body frame it moves with its body; in the hybrid frame it follows the
            body's origin and keeps world axes.
        data : Data, optional (single state)
        out : tuple of three ndarrays, optional
            (dtau_dq, dtau_dv, M) to write into, each (nv, nv) or (N, nv, nv).

        Returns
        -------
        dtau_dq, dtau_dv, M : ndarray, shape (nv, nv) or (N, nv, nv)
            Entry (i, j) is ∂τ_i/∂x_j (N·m/rad, N/m, N·m·s/rad, ... by the
            coordinates involved); M is the mass matrix with armature.
        """
        return self._derivatives_call(_k_rnea_derivatives, _g_rnea_derivatives, q, v, a, "a",
                                      f_ext, gravity,
                                      f_ext_frame, data, out, ("dtau_dq", "dtau_dv", "M"),
                                      "inverse_dynamics_derivatives")

    def forward_dynamics_derivatives(self, q, v, tau, f_ext=None, gravity=None,
                                     f_ext_frame="world", data=None, out=None):
        """Partial derivatives of forward dynamics v̇(q, v, τ): ∂v̇/∂q = −M⁻¹ ∂τ/∂q and
        ∂v̇/∂v = −M⁻¹ ∂τ/∂v at v̇, and ∂v̇/∂τ = M⁻¹ (cysrc/aba_derivatives.pxi: ABA,
        the inverse-dynamics derivatives and the O(n²) M⁻¹ recursion in one call).

        q-derivatives are taken along each joint's group as in
        :meth:`inverse_dynamics_derivatives`.

        Parameters
        ----------
        q, v, tau : array_like, shapes (nq,), (nv,), (nv,) or with a leading batch axis
        f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics_derivatives`
        data : Data, optional (single state)
        out : tuple of three ndarrays, optional
            (ddq_dq, ddq_dv, Minv) to write into, each (nv, nv) or (N, nv, nv).

        Returns
        -------
        ddq_dq, ddq_dv, Minv : ndarray, shape (nv, nv) or (N, nv, nv)
            Entry (i, j) is ∂v̇_i/∂x_j; Minv is M⁻¹ with armature, both triangles.

        Raises
        ------
        SingularModelError
            If M is singular (a massless subtree without armature).
        """
        return self._derivatives_call(_k_aba_derivatives,
                                      <group_t>NULL if (_fd_by_recursion(self)
                                                        or self.nv > LANES_MAX_NV)
                                      else _g_aba_derivatives,
                                      q, v, tau, "tau", f_ext, gravity,
                                      f_ext_frame, data, out, ("ddq_dq", "ddq_dv", "Minv"),
                                      "forward_dynamics_derivatives")

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

    def forward_dynamics(self, q, v, tau, f_ext=None, gravity=None, f_ext_frame="world",
                         method="aba", data=None, out=None):
        """Joint accelerations q̈ = M⁻¹ (τ − h(q, v) + Σ Jᵀ f_ext).

        Parameters
        ----------
        q, v, tau : array_like, shapes (nq,), (nv,), (nv,) or with a leading batch axis
        f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics`
        method : {"aba", "cholesky"}
            "aba": the O(n) articulated-body kernel (default); "cholesky": M from
            the CRBA kernel and h from inverse dynamics, solved by a Cholesky
            factorization (LAPACK).
        data, out : as in :meth:`inverse_dynamics` (method "aba"; ``out`` (nv,) or (N, nv))

        Returns
        -------
        ndarray, shape (nv,) or (N, nv)

        Raises
        ------
        SingularModelError
            If the model has no finite acceleration (e.g. a massless subtree
            without armature); the message names the joint.
        """
        if method != "aba":
            if method == "cholesky":
                if data is not None or out is not None:
                    raise InputError("data= and out= are for method='aba'")
                return self._forward_dynamics_cholesky(q, v, tau, f_ext, gravity, f_ext_frame)
            raise InputError(f"method must be 'aba' or 'cholesky', got {method!r}")
        return self._joint_space_call(_k_aba, q, v, tau, "tau", f_ext, gravity, f_ext_frame,
                                      data, out)

    def inverse_mass_matrix(self, q, data=None, out=None):
        """Inverse of the joint-space mass matrix, M(q)⁻¹, in O(n²) without forming M:
        the articulated-body recursion run on all unit-torque columns at once
        (Carpentier & Mansard 2018; ``cysrc/minverse.pxi``).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        data : Data, optional
            Single state: the Data to work in; holds the articulated inertias
            (``sIA``, frame s) and the joint screws afterwards.
        out : ndarray, optional
            Output array, shape (nv, nv) or (N, nv, nv), float64, C-contiguous.

        Returns
        -------
        ndarray, shape (nv, nv) or (N, nv, nv)
            Symmetric positive definite, both triangles filled; the armature is
            part of M.  Units: the inverses of those of :meth:`mass_matrix`.

        Raises
        ------
        SingularModelError
            If M is singular (a massless subtree without armature); the message
            names the joint, as :meth:`forward_dynamics` does.
        """
        return self._spd_matrix_call(_k_minverse, q, data, out, "inverse_mass_matrix: M⁻¹",
                                     _g_minverse if self.nv <= LANES_MAX_NV else <group_t>NULL)

    # ------------------------------------------------------------------ motion
    def _body_motion(self, q, v=None, a=None, data=None):
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

    def _spatial_screws(self, q):
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

    def _spatial_screw_rates(self, q, v):
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

    # ------------------------------------------------------------------ kinematic derivatives
    def jacobian_derivatives(self, q, frame, representation="body", data=None, out=None):
        """Partial derivatives of a body's or frame's Jacobian with respect to q.

        ``H[:, j, k] = ∂J[:, j]/∂q_k`` with ``J = jacobian(q, frame,
        representation)``, the derivative taken along joint k's group:
        ``H @ δ = d/dε J(integrate(q, ε δ))`` at ε = 0 (so the last axis is nv wide
        also for quaternion joints).  Closed form from Lie brackets of the columns
        (Müller 2018, eqs. 5, 15, 25; cysrc/kinematic_derivatives.pxi); the same
        layout as Pinocchio's ``getJointKinematicHessian``.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        frame : str or int
            A body name, a named frame or a body index (as in :meth:`jacobian`).
        representation : {"body", "spatial", "hybrid", "mixed"}
            As in :meth:`jacobian` (Pinocchio LOCAL, WORLD, LOCAL_WORLD_ALIGNED).
        data, out : as in :meth:`forward_kinematics` (``out`` (6, nv, nv) or
            (N, 6, nv, nv))

        Returns
        -------
        ndarray, shape (6, nv, nv) or (N, 6, nv, nv)
            Units of J per rad or per m of the coordinate k.  Entries of freedoms
            off the path world → frame are zero.
        """
        return self._frame_call(_k_jacobian_derivatives, q, frame, representation, data, out,
                                3, "jacobian_derivatives: ∂J/∂q")

    def _frame_acceleration_derivatives(self, q, v, a, frame, representation, data, out,
                                        bint velocity=False):
        """Binding of Model.frame_acceleration_derivatives (see there); with
        ``velocity``, of Model.frame_velocity_derivatives (a unused, two outputs)."""
        cdef bint vel = velocity
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef cnp.ndarray aa = va if vel else self._like(qa, a, self.nv, "a")
        cdef tuple tgt = self._target(frame)
        cdef cnp.npy_intp dims[2]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        rep = self._rep_code(representation)
        dims[0] = 6; dims[1] = self.nv
        res = self._outputs(out, qa, 2, dims, ("dV_dq", "dV_dv") if vel else
                            ("dA_dq", "dA_dv", "dA_da"))
        for r in res:
            memset(cnp.PyArray_DATA(r), 0, cnp.PyArray_NBYTES(r))
        if tgt[0] < 0 or self.nv == 0:              # attached to the world
            if data is not None:
                self._data(data)
            return res
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(aa)
        c.sq = self.nq
        c.sv = self.nv
        c.sa = self.nv
        c.body = tgt[0]
        c.frame = tgt[1]
        c.rep = rep
        c.out = <double*>cnp.PyArray_DATA(res[0])
        c.out2 = <double*>cnp.PyArray_DATA(res[1])
        c.out3 = NULL if vel else <double*>cnp.PyArray_DATA(res[2])
        c.so = 6 * self.nv
        c.so2 = c.so
        c.so3 = c.so
        if vel:
            self._dispatch(_k_frame_velocity_derivatives, &c, self._batch(qa), data,
                           self.path_nv[c.body], "frame_velocity_derivatives")
        else:
            self._dispatch(_k_frame_acceleration_derivatives, &c, self._batch(qa), data,
                           self.path_nv[c.body], "frame_acceleration_derivatives")
        return res

    def body_jerks(self, q, v, a, j, representation="body", data=None, out=None):
        """Time derivatives of :meth:`body_accelerations`: the second time
        derivatives of the twists of all bodies, gravity not included.

        Recursive (Müller 2018, §2: the acceleration recursion differentiated once
        more), body-fixed, then converted per body (cysrc/kinematic_derivatives.pxi).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        v, a, j : array_like, shape (nv,) or (N, nv)
            Velocities, their first (v̇ = a) and second (v̈ = j) time derivatives.
        representation : {"body", "spatial", "hybrid", "mixed"}
            As in ``body_accelerations``: "body" V̈ᵇ; "spatial" d²/dt² (Ad_C Vᵇ);
            "hybrid" (d²ω/dt² in world axes, r⃛); "mixed" (d²ωᵇ/dt², r⃛).
        data, out : as in :meth:`forward_kinematics` (``out`` (nb, 6) or (N, nb, 6))

        Returns
        -------
        ndarray, shape (nb, 6) or (N, nb, 6)
            Angular first: rad/s³ and m/s³.
        """
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef cnp.ndarray aa = self._like(qa, a, self.nv, "a")
        cdef cnp.ndarray ja = self._like(qa, j, self.nv, "j")
        cdef cnp.npy_intp dims[2]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        rep = self._rep_code(representation)
        dims[0] = self.nb; dims[1] = 6
        cdef cnp.ndarray res = self._output(out, qa, 2, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(aa)
        c.fext = <double*>cnp.PyArray_DATA(ja)      # the jerks v̈ (see _k_body_jerks)
        c.rep = rep
        c.sq = self.nq
        c.sv = self.nv
        c.sa = self.nv
        c.sf = self.nv
        c.out = <double*>cnp.PyArray_DATA(res)
        c.so = 6 * self.nb
        self._dispatch(_k_body_jerks, &c, self._batch(qa), data, -1, "body_jerks: the jerks")
        return res

    # ------------------------------------------------------------------ loop closures
    cdef int _require_loops(self) except -1:
        if self.cl_int.shape[0] + self.mm_int.shape[0] == 0:
            raise InputError("the model has no loop closures or mimic couplings")
        return 0

    def _project(self, q, v=None, double tol=1e-12, int max_iter=20):
        """Compiled projection of one state onto the constraints (project_kernel):
        Gauss–Newton steps of q in the kinetic-energy metric (at most max_iter; 0
        leaves q alone), then v (if given) onto G v = 0.  Returns (q, v or None,
        max |g(q)|); inputs are checked by the caller (unit quaternions here)."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        if cnp.PyArray_NDIM(qa) != 1:
            raise InputError(f"q: expected one state of shape ({self.nq},), got {np.shape(qa)}")
        self._check_unit_quaternions(qa, "q")
        self._require_loops()
        qo = np.array(qa, dtype=np.float64)
        vo = None if v is None else np.array(self._like(qa, v, self.nv, "v"), dtype=np.float64)
        cdef double[::1] qv = qo
        cdef double[::1] vv
        cdef double* vp = NULL
        cdef double res = 0.0
        cdef int code
        cdef Data data = self._data(None)
        if vo is not None and self.nv > 0:
            vv = vo
            vp = &vv[0]
        with nogil:
            code = project_kernel(self, &data.c, &qv[0], vp, tol, max_iter, 1e-10, &res)
        self._done(data, None)
        if code:
            self._raise_code(code, -1, "projection")
        return qo, vo, res

    def _loop_rows(self, q, v=None):
        """Constraint rows (docs/constraints.md) at q (nq,) or (N, nq) and v (zero if
        None): g (…, m), G (…, m, nv), Ġv (…, m)."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._zero_or_like(qa, _ZERO if v is None else v, "v")
        cdef Call c
        memset(&c, 0, sizeof(Call))
        self._require_loops()
        cdef int mr = self.n_crows
        cdef cnp.npy_intp dims[2]
        dims[0] = mr
        dims[1] = self.nv
        g = self._output(None, qa, 1, dims)
        G = self._output(None, qa, 2, dims)
        gam = self._output(None, qa, 1, dims)
        if mr == 0:
            return g, G, gam
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.out = <double*>cnp.PyArray_DATA(g)
        c.out2 = <double*>cnp.PyArray_DATA(G)
        c.out3 = <double*>cnp.PyArray_DATA(gam)
        c.sq = self.nq
        c.sv = self.nv
        c.so = mr
        c.so2 = mr * self.nv
        c.so3 = mr
        self._dispatch(_k_loop_rows, &c, self._batch(qa), None, -1,
                       "constraints: the residual g, Jacobian G or Ġv")
        return g, G, gam

    cdef tuple _clid_work(self, object act, ClidWork* w):
        """Scratch of the closed-loop kernels (closed_loop_id.pxi) for the actuated
        velocity indices ``act``: returns (ib, buffer, na); ib holds act, then the
        other freedoms, then the QR pivots; the buffer backs w's arrays.  Both must
        stay alive while a kernel uses w."""
        cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, j
        cdef const int[::1] act_in = np.asarray(act, dtype=np.int32).reshape(-1)
        cdef int na = act_in.shape[0]
        cdef int nd = nv - na
        cdef int big = max(mr, nv, na + mr, 1)
        cdef int ns = 3 * big + 2 * big * big
        cdef int nA = max(mr * max(nd, 1), nv * (na + mr), nd * nd, 1)
        ib = np.empty(na + nv + big + 1, dtype=np.int32)
        cdef int[::1] ibv = ib
        cdef int* ia = &ibv[0]
        cdef int* idp = &ibv[na]
        for k in range(nv):
            idp[k] = 1
        for k in range(na):
            ia[k] = act_in[k]
            if not 0 <= ia[k] < nv or idp[ia[k]] == 0:
                raise InputError(f"act: expected distinct velocity indices in [0, {nv}), "
                                 f"got {np.asarray(act_in).tolist()}")
            idp[ia[k]] = 0
        j = 0
        for k in range(nv):
            if idp[k]:
                idp[j] = k
                j += 1
        buf = np.empty(nA + big + ns + nd * nd + nd + nv + nq + mr + 2 * mr * nv + mr + 8)
        cdef double[::1] bv = buf
        cdef double* p = &bv[0]
        w.A = p; p += nA
        w.b = p; p += big
        w.s = p; p += ns
        w.perm = &ibv[na + nv]
        w.H = p; p += nd * nd
        w.grad = p; p += nd
        w.step = p; p += nv
        w.qn = p; p += nq
        w.gn = p; p += mr
        w.Gn = p; p += mr * nv
        w.gam = p; p += mr
        return ib, buf, na

    def _assemble(self, q, free, double tol=1e-12, int max_iter=200):
        """Compiled Levenberg–Marquardt assembly (closed_loop_id.pxi assemble_kernel)
        of one configuration: g(q) = 0 moving only the velocity indices ``free``.
        Inputs are checked by the caller (treedyn.constraints.assemble).  Returns
        (status, q, max |g(q)|, iterations), status "ok", "no progress" (the damping
        grew past 1e12), "not converged" (max_iter iterations) or "overflow" (the
        residual at the guess is not finite); a non-unit quaternion raises."""
        cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, iters = 0, code
        self._require_loops()
        fixed = np.ones(nv, dtype=bool)
        fixed[np.asarray(free, dtype=np.intp)] = False
        cdef ClidWork w
        ib, wbuf, na_ = self._clid_work(np.flatnonzero(fixed), &w)
        cdef int[::1] ibv = ib
        cdef int na = na_
        qo = np.array(q, dtype=np.float64)
        g = np.empty(mr)
        G = np.empty((mr, nv))
        cdef double[::1] qv = qo, gv = g
        cdef double[:, ::1] Gv = G
        cdef Data data = self._data(None)
        with nogil:
            code = assemble_kernel(self, &data.c, &ibv[na], nv - na, &qv[0], tol, max_iter,
                                   &gv[0] if mr else NULL, &Gv[0, 0] if mr else NULL, &w,
                                   &iters)
        self._done(data, None)
        if code > 0:
            self._raise_code(code, -1, "assemble")
        status = {0: "ok", CLID_NO_PROGRESS: "no progress", CLID_NOT_CONVERGED: "not converged",
                  CLID_OVERFLOW: "overflow"}[code]
        return status, qo, float(np.abs(g).max()) if mr else 0.0, iters

    def _closed_loop_inverse_dynamics(self, q, act, v_act, a_act, gravity=None,
                                      double tol=1e-12, int max_iter=200,
                                      double rcond=1e-10, closure_rows=None):
        """Compiled closed-loop inverse dynamics (closed_loop_id.pxi) of one state.
        q (nq,): the guess with the actuated coordinates set; act: the actuated
        velocity indices; v_act, a_act their rates; closure_rows: the number of rows
        of each closure (for the wrenches).  Inputs are checked by the caller.
        Returns (code, q, v, a, τ, x = (τ_a, λ), D (m, 6), residual, wrenches
        (n_closures, 6) = per closure Dᵀλ); code 0, or a CLID_* / quaternion code, or
        CODE_OVERFLOW for a result that is not finite (then the other entries are
        undefined)."""
        cdef int nv = self.nv, nq = self.nq, mr = self.n_crows, k, j
        self._require_loops()
        cdef ClidWork w
        ib, wbuf, na_ = self._clid_work(act, &w)        # kept alive until the call returns
        cdef int[::1] ibv = ib
        cdef int na = na_
        cdef int nd = nv - na
        cdef int* ia = &ibv[0]
        cdef int* idp = &ibv[na]
        # the outputs (views of one buffer) and the inputs' copies
        cdef int nout = nq + 3 * nv + na + mr + 6 * mr
        buf = np.empty(nout + 2 * na + mr + mr * nv + 1)
        cdef double[::1] bv = buf
        cdef const double[::1] qin = np.asarray(q, dtype=np.float64)
        cdef const double[::1] vin = np.asarray(v_act, dtype=np.float64)
        cdef const double[::1] ain = np.asarray(a_act, dtype=np.float64)
        qo = buf[:nq]
        v = buf[nq:nq + nv]
        a = buf[nq + nv:nq + 2 * nv]
        tau = buf[nq + 2 * nv:nq + 3 * nv]
        x = buf[nq + 3 * nv:nq + 3 * nv + na + mr]
        D = buf[nq + 3 * nv + na + mr:nout].reshape(mr, 6)
        cdef double* p = &bv[0]
        cdef double* qp = p
        cdef double* vp = &p[nq]
        cdef double* ap = &p[nq + nv]
        cdef double* tp = &p[nq + 2 * nv]
        cdef double* xp = &p[nq + 3 * nv]
        cdef double* Dp = &p[nq + 3 * nv + na + mr]
        cdef double* vap = &p[nout]
        cdef double* aap = &p[nout + na]
        cdef double* gp_ = &p[nout + 2 * na]
        cdef double* Gp = &p[nout + 2 * na + mr]
        for k in range(nq):
            qp[k] = qin[k]
        for k in range(na):
            vap[k] = vin[k]
            aap[k] = ain[k]
        cdef double gbuf[3]
        cdef const double* gp = self._gravity_ptr(gravity, gbuf)
        cdef double res = 0.0
        cdef int code
        cdef Data data = self._data(None)
        cdef const int[::1] crows = np.asarray(closure_rows if closure_rows is not None
                                               else [mr], dtype=np.int32)
        cdef int ncl = crows.shape[0], c, r0
        W = np.zeros((ncl, 6))
        cdef double[:, ::1] Wv = W
        with nogil:
            code = closed_loop_id_kernel(self, &data.c, ia, na, idp, nd, qp, vap, aap, gp, tol,
                                         max_iter, rcond, gp_, Gp, vp, ap, tp, xp, Dp, &res, &w)
            if code == 0 and not (_finite_bits(&bv[0], nout) and isfinite(res)):
                code = CODE_OVERFLOW
            if code == 0:                               # closure c's wrench: D_cᵀ λ_c
                r0 = 0
                for c in range(ncl):
                    for k in range(r0, r0 + crows[c]):
                        for j in range(6):
                            Wv[c, j] += Dp[6 * k + j] * xp[na + k]
                    r0 += crows[c]
        self._done(data, None)
        return code, qo, v, a, tau, x, D, res, W

    def _constrained_forward_dynamics(self, q, v, tau, f_ext=None, gravity=None,
                                      f_ext_frame="world", double k1=0.0, double k2=0.0,
                                      double rcond=1e-10):
        """(v̇, λ, g) of the index-1 equations (loops.pxi) for one state or a batch."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef cnp.ndarray ta = self._like(qa, tau, self.nv, "tau")
        cdef double gbuf[3]
        cdef Call c
        memset(&c, 0, sizeof(Call))
        self._require_loops()
        fa = self._loads(&c, qa, f_ext, gravity, f_ext_frame, gbuf)
        cdef int mr = self.n_crows
        cdef cnp.npy_intp dims[1]
        dims[0] = self.nv
        a = self._output(None, qa, 1, dims)
        dims[0] = mr
        lam = self._output(None, qa, 1, dims)
        g = self._output(None, qa, 1, dims)
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.a = <double*>cnp.PyArray_DATA(ta)
        c.out = <double*>cnp.PyArray_DATA(a)
        c.out2 = <double*>cnp.PyArray_DATA(lam) if mr else NULL
        c.out3 = <double*>cnp.PyArray_DATA(g) if mr else NULL
        c.k1 = k1
        c.k2 = k2
        c.rcond = rcond
        c.sq = self.nq
        c.sv = self.nv
        c.sa = self.nv
        c.so = self.nv
        c.so2 = mr
        c.so3 = mr
        self._dispatch(_k_constrained_fd, &c, self._batch(qa), None, -1,
                       "v̇ or λ")
        return a, lam, g

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

    def _retract(self, q, psi, int local=LOCAL_EXP):
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

    def _difference(self, q0, q1):
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

    def _local_rates(self, psi, v, int local=LOCAL_EXP):
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

    def _config_rate(self, q, v):
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

    cdef int _check_quaternions_named(self, cnp.ndarray qa, str name) except -1:
        """_check_unit_quaternions with the argument's name in the message."""
        try:
            self._check_unit_quaternions(qa, name)
        except InputError as exc:
            text = str(exc)
            raise InputError(name + text[1:] if text.startswith("q") else text) from None
        return 0

    cdef tuple _jacobian_pair(self, cnp.ndarray qa, object out, Call* c, tuple names):
        """Two (nv, nv) outputs (or (N, nv, nv)) from out = None or a pair of arrays."""
        cdef cnp.npy_intp dims[2]
        dims[0] = self.nv; dims[1] = self.nv
        r1, r2 = self._outputs(out, qa, 2, dims, names)
        c.out = <double*>cnp.PyArray_DATA(r1)
        c.out2 = <double*>cnp.PyArray_DATA(r2)
        c.so = c.so2 = <Py_ssize_t>self.nv * self.nv
        return r1, r2

    def _integrate_jacobians(self, q, v, double dt=1.0, int local=LOCAL_EXP, data=None,
                             out=None):
        """(Jq, Jv) of q ⊕ v dt (lie_jacobians.pxi); see Model.integrate_jacobians."""
        cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef Call c
        memset(&c, 0, sizeof(Call))
        self._check_unit_quaternions(qa, "q")
        res = self._jacobian_pair(qa, out, &c, ("Jq", "Jv"))
        c.q = <double*>cnp.PyArray_DATA(qa)
        c.v = <double*>cnp.PyArray_DATA(va)
        c.sq = self.nq
        c.sv = self.nv
        c.k1 = dt
        c.rep = local
        self._dispatch(_k_integrate_jacobians, &c, self._batch(qa), data, -1,
                       "integrate_jacobians: Jq or Jv")
        return res

    def _difference_jacobians(self, q0, q1, data=None, out=None):
        """(J0, J1) of difference(q0, q1) (lie_jacobians.pxi); see
        Model.difference_jacobians."""
        cdef cnp.ndarray a0 = _as_states(q0, self.nq, "q0")
        cdef cnp.ndarray a1 = self._like(a0, q1, self.nq, "q1")
        cdef Call c
        memset(&c, 0, sizeof(Call))
        self._check_quaternions_named(a0, "q0")
        self._check_quaternions_named(a1, "q1")
        res = self._jacobian_pair(a0, out, &c, ("J0", "J1"))
        c.q = <double*>cnp.PyArray_DATA(a0)
        c.a = <double*>cnp.PyArray_DATA(a1)
        c.sq = self.nq
        c.sa = self.nq
        self._dispatch(_k_difference_jacobians, &c, self._batch(a0), data, -1,
                       "difference_jacobians: J0 or J1")
        return res

    def _run(self, q0, v0, double t0, double h, Py_ssize_t nsteps, int scheme, A, b, c, bhat,
             int local, controller, tau0, f_ext, f_ext_frame, gravity, progress=None,
             Py_ssize_t chunk=0, bint constrained=False, double k1=0.0, double k2=0.0,
             bint project=False, double tol=1e-12, int max_iter=20):
        """Integrate nsteps fixed steps (or one step with an error estimate when bhat
        is given and nsteps == 1).  Returns (Q (nsteps+1, nq), V (nsteps+1, nv), err).

        ``constrained``: the stages solve the index-1 equations of the loop closures
        (loops.pxi, Baumgarte gains k1 = 2α/Δt, k2 = (β/Δt)²); with ``project`` the
        initial state and every step are projected onto the constraints
        (project_kernel: positions to ``tol`` in at most ``max_iter`` Gauss–Newton
        steps, then velocities).  Then returns (Q, V, err, R), R (nsteps+1,) the
        max |g| of every configuration."""
        cdef cnp.ndarray qa = self._states(q0, self.nq, "q0")
        cdef cnp.ndarray va = self._like(qa, v0, self.nv, "v0")
        if cnp.PyArray_NDIM(qa) != 1:
            raise InputError("q0: one initial state expected, shape (nq,)")
        self._check_unit_quaternions(qa, "q0")
        cdef int nq = self.nq, nv = self.nv, nb = self.nb
        cdef double[:, ::1] Ab = np.ascontiguousarray(A, dtype=np.float64)
        cdef double[::1] bb = np.ascontiguousarray(b, dtype=np.float64)
        cdef double[::1] cb_ = np.ascontiguousarray(c, dtype=np.float64)
        cdef double[::1] bh
        cdef int s = bb.shape[0]
        cdef double* bhp = NULL
        if bhat is not None:
            bh = np.ascontiguousarray(bhat, dtype=np.float64)
            bhp = &bh[0]
        cdef double[::1] tau_c
        if tau0 is None:
            tau_c = np.zeros(nv)
        else:
            tarr = self._states(tau0, nv, "tau")
            if cnp.PyArray_NDIM(tarr) != 1:
                raise InputError(f"tau: constant torques of shape ({nv},) expected")
            tau_c = tarr
        cdef ConstTorque ct
        ct.nv = nv
        ct.tau = &tau_c[0] if nv else NULL
        cdef _Controller pyc = _Controller(controller, nq, nv, np.asarray(tau_c))
        cdef stage_torque_fn fn = constant_torque if controller is None else python_torque
        cdef void* ctx = <void*>&ct if controller is None else <void*>pyc
        cdef double gbuf[3]
        cdef const double* gp = self._gravity_ptr(gravity, gbuf)
        cdef cnp.ndarray fa = None
        cdef const double* fp = NULL
        cdef int fframe = 0
        if f_ext is not None:
            fframe = self._wrench_frame(f_ext_frame)
            fa = self._wrenches(qa, f_ext)
            fp = <double*>cnp.PyArray_DATA(fa)
        Q = np.empty((nsteps + 1, nq))
        V = np.empty((nsteps + 1, nv))
        err = np.zeros(2 * nv)
        Q[0] = qa
        V[0] = va
        cdef double[:, ::1] Qv = Q, Vv = V
        cdef double[::1] ev = err
        cdef double[::1] work = np.empty(step_ws_size(nb, nq, nv, s))
        cdef Data data = Data(self)     # this run's own Data: runs may go on in parallel
        cdef Py_ssize_t k, k0 = 0, kend
        cdef int code = 0
        cdef int piter = max_iter if project else 0
        cdef bint stop = False          # a non-finite q (overflow): reported by the caller
        # with loops, project_kernel runs on every step's q before the step (with
        # piter = 0 it only evaluates the rows): its joint steps and factors serve
        # the step's first stage (rk_step joints_ready, loops.pxi _factors_cached)
        R = np.zeros(nsteps + 1)
        cdef double[::1] Rv = R
        if constrained:
            self._require_loops()
            code = project_kernel(self, &data.c, &Qv[0, 0], &Vv[0, 0] if (nv and project) else NULL,
                                  tol, piter, 1e-10, &Rv[0])
        if chunk <= 0:
            chunk = nsteps if nsteps > 0 else 1
        while k0 < nsteps and code == 0 and not stop:
            kend = min(nsteps, k0 + chunk)
            if controller is None:
                with nogil:
                    for k in range(k0, kend):
                        code = rk_step(self, &data.c, scheme, s, &Ab[0, 0], &bb[0], &cb_[0], bhp, local,
                                       t0 + k * h, h, &Qv[k, 0], &Vv[k, 0] if nv else NULL,
                                       fn, ctx, gp, fp, fframe, &work[0], &Qv[k + 1, 0],
                                       &Vv[k + 1, 0] if nv else NULL,
                                       &ev[0] if nv else NULL, constrained, k1, k2, constrained)
                        if code == 0 and constrained:
                            if not _finite_bits(&Qv[k + 1, 0], nq):
                                stop = True     # the rows (and the rest) left for the
                                break           # caller's check of the run
                            code = project_kernel(self, &data.c, &Qv[k + 1, 0],
                                                  &Vv[k + 1, 0] if (nv and project) else NULL,
                                                  tol, piter, 1e-10, &Rv[k + 1])
                        if code:
                            break
            else:
                for k in range(k0, kend):
                    code = rk_step(self, &data.c, scheme, s, &Ab[0, 0], &bb[0], &cb_[0], bhp, local,
                                   t0 + k * h, h, &Qv[k, 0], &Vv[k, 0] if nv else NULL,
                                   fn, ctx, gp, fp, fframe, &work[0], &Qv[k + 1, 0],
                                   &Vv[k + 1, 0] if nv else NULL, &ev[0] if nv else NULL,
                                   constrained, k1, k2, constrained)
                    if code == 0 and constrained:
                        if not _finite_bits(&Qv[k + 1, 0], nq):
                            stop = True
                            break
                        code = project_kernel(self, &data.c, &Qv[k + 1, 0],
                                              &Vv[k + 1, 0] if (nv and project) else NULL,
                                              tol, piter, 1e-10, &Rv[k + 1])
                    if code:
                        break
            if progress is not None and code == 0:
                progress(kend - k0)
            k0 = kend
        if stop:                        # never hand back uninitialized rows
            Q[k + 2:] = np.nan
            V[k + 2:] = np.nan
        if code == STEP_CONTROLLER_ERROR:
            raise pyc.error
        if code == STEP_DIVERGED:
            raise InputError(f"the simulation diverged (non-finite state) in the step "
                             f"starting at t = {t0 + k * h:.6g} s: reduce dt or use a "
                             f"higher-order method")
        if code == CODE_MASS_NOT_PD:
            raise SingularModelError("simulate: the mass matrix is not positive definite "
                                     "(massless subtree without armature?)")
        if code > 0:
            self._raise_bad_quaternion(code - 1, -1)
        if code < 0:
            self._raise_singular(-code - 1)
        if constrained:
            return Q, V, err, R
        return Q, V, err



cdef cnp.ndarray _as_states(object x, int width, str name):
    """x as a C-contiguous float64 array of shape (width,) or (N, width); finite."""
    cdef cnp.ndarray arr
    cdef int nd
    if cnp.PyArray_Check(x) and cnp.PyArray_TYPE(<cnp.ndarray>x) == cnp.NPY_DOUBLE \
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>x) \
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>x):
        arr = <cnp.ndarray>x
    else:
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


cdef bint _all_finite(const double* x, Py_ssize_t n) noexcept nogil:
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


cdef extern from *:
    """
    /* The instruction set this module was compiled for, and whether the CPU runs
       AVX2 code (cpuid and the OS's saving of the AVX registers, by the compiler's
       runtime check). */
    #if defined(__AVX2__)
    #define TD_ISA "avx2"
    #else
    #define TD_ISA "baseline"
    #endif
    #if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    static int td_cpu_has_avx2(void) { __builtin_cpu_init(); return __builtin_cpu_supports("avx2"); }
    #else
    static int td_cpu_has_avx2(void) { return 0; }
    #endif
    """
    const char* TD_ISA
    int td_cpu_has_avx2() noexcept nogil

#: the instruction set this build of the kernels was compiled for: "baseline"
#: (the platform's default, SSE2 on x86-64) or "avx2" (treedyn._kernels_avx2)
ISA = TD_ISA.decode()


def _cpu_has_avx2():
    """Whether this CPU (and OS) can run the AVX2 build of the kernels."""
    return bool(td_cpu_has_avx2())
