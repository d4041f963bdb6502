# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled kernels of treedyn.

``ModelCore`` holds the flat, read-only arrays of a compiled model that the
kernels read (topological order, parent[i] < i) and exposes the per-state entry
points; ``treedyn.model.Model`` subclasses it.  Each algorithm lives in its own
``.pxi`` file included below; the inline SE(3) primitives are in ``se3.pxd``.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
cimport openmp
from libc.math cimport isfinite, sin, cos, fmax, fabs, sqrt

from se3 cimport *
from kinds cimport *

from treedyn.errors import InputError, SingularModelError

cnp.import_array()

# the joint kinds for the Python layer (one definition: kinds.pxd)
globals().update(KIND_SCREWS=KIND_SCREWS, KIND_SPHERICAL=KIND_SPHERICAL,
                 KIND_FREE_SE3=KIND_FREE_SE3, KIND_FREE_SO3R3=KIND_FREE_SO3R3)

include "joints.pxi"
include "fk.pxi"
include "rnea_common.pxi"
include "rnea_body.pxi"
include "rnea_spatial.pxi"
include "rnea_hybrid.pxi"
include "kinematics.pxi"
include "crba.pxi"
include "aba.pxi"
include "lie_groups.pxi"
include "integrators.pxi"

ctypedef int (*rnea_fn)(ModelCore, const double*, const double*, const double*, const double*,
                        const double*, int, double*, double*) noexcept nogil

cdef dict _REPRESENTATIONS = {"body": 0, "spatial": 1, "hybrid": 2}
cdef dict _WRENCH_FRAMES = {"world": 0, "body": 1, "hybrid": 2}


cdef class ModelCore:
    """Kernel-side arrays of a compiled model (see ``treedyn.model.Model``)."""

    cdef readonly int nb, nq, nv
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
    cdef const int[::1] root           # the body of each subtree that hangs from the world

    cdef const double[:, ::1] inert    # (nb, 22): m, COM (3), Θ_COM (9), Θ_origin (9)
    cdef const double[::1] armature    # (nv,)
    cdef const double[::1] grav        # (3,)
    cdef double[::1] ws                # single-call workspace
    cdef const int[::1] fbody          # owning body of each named frame (-1: world)
    cdef const double[:, ::1] foff     # (n_frames, 12): pose of each frame in its body
    cdef const unsigned char[:, ::1] supp   # (nb, nv): freedoms on the path world -> body

    def _init_core(self, dict arr):
        """Set the kernel arrays from the compiler's dict (called once per model)."""
        cdef int nb = arr["parent"].shape[0]
        cdef int nv = int(arr["nvj"].sum())
        B = np.asarray(arr["B"], dtype=np.float64).reshape(nb, 4, 4)
        Bref = np.empty((nb, 12))
        Bref[:, :9] = B[:, :3, :3].reshape(nb, 9)
        Bref[:, 9:] = B[:, :3, 3]
        inert = np.zeros((nb, 22))
        inert[:, 0] = arr["mass"]
        inert[:, 1:4] = arr["com"]
        inert[:, 4:13] = np.asarray(arr["inertia"]).reshape(nb, 9)
        inert[:, 13:22] = np.asarray(arr["spatial_inertia"]).reshape(nb, 6, 6)[:, :3, :3].reshape(nb, 9)
        self.nb = nb
        self.nq = int(arr["nqj"].sum())
        self.nv = nv
        self.parent = np.ascontiguousarray(arr["parent"], dtype=np.int32)
        self.kind = np.ascontiguousarray(arr["kind"], dtype=np.int32)
        self.qoff = np.ascontiguousarray(arr["qoff"], dtype=np.int32)
        self.voff = np.ascontiguousarray(arr["voff"], dtype=np.int32)
        self.nqj = np.ascontiguousarray(arr["nqj"], dtype=np.int32)
        self.nvj = np.ascontiguousarray(arr["nvj"], dtype=np.int32)
        self.Bref = Bref
        # keep one dummy row when nv == 0 so that &X[0, 0] stays a valid address
        self.X = np.ascontiguousarray(arr["X"], dtype=np.float64).reshape(nv, 6) if nv > 0 else np.zeros((1, 6))
        self.center = np.ascontiguousarray(arr["center"], dtype=np.float64).reshape(nb, 3)
        self.inert = inert
        self.armature = np.ascontiguousarray(arr["armature"], dtype=np.float64) if nv > 0 else np.zeros(1)
        self.grav = np.ascontiguousarray(arr["gravity"], dtype=np.float64)
        self.ws = np.zeros(max(rnea_ws_size(nb, nv), crba_ws_size(nb, nv), aba_ws_size(nb, nv)))
        self.fast = _fast_codes(self.kind, self.nvj, self.voff, self.X)
        root = np.arange(nb, dtype=np.int32)
        for i in range(nb):                 # parents precede children
            if arr["parent"][i] >= 0:
                root[i] = root[arr["parent"][i]]
        self.root = root
        fo = np.asarray(arr["frame_offset"], dtype=np.float64).reshape(-1, 4, 4)
        foff = np.empty((fo.shape[0], 12))
        foff[:, :9] = fo[:, :3, :3].reshape(-1, 9)
        foff[:, 9:] = fo[:, :3, 3]
        self.fbody = np.ascontiguousarray(arr["frame_body"], dtype=np.int32)
        self.supp = np.ascontiguousarray(arr["support"], dtype=np.uint8).reshape(nb, nv) \
            if nv > 0 and nb > 0 else np.zeros((1, 1), dtype=np.uint8)
        self.foff = foff

    # ------------------------------------------------------------------ input checks
    cdef cnp.ndarray _states(self, object x, int width, str name):
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
                raise InputError(f"{name}: expected real numbers, got dtype {arr.dtype}")
            arr = np.ascontiguousarray(arr, dtype=np.float64)
        nd = cnp.PyArray_NDIM(arr)
        if (nd != 1 and nd != 2) or cnp.PyArray_DIMS(arr)[nd - 1] != width:
            raise InputError(
                f"{name}: expected shape ({width},) or (N, {width}), got {np.shape(arr)}")
        if not _all_finite(<double*>cnp.PyArray_DATA(arr), cnp.PyArray_SIZE(arr)):
            raise InputError(f"{name}: contains NaN or infinity")
        return arr

    cdef cnp.ndarray _like(self, cnp.ndarray ref, object x, int width, str name):
        """x checked like _states and with the same batch shape as ref."""
        cdef cnp.ndarray arr = self._states(x, width, name)
        cdef int nd = cnp.PyArray_NDIM(arr)
        if nd != cnp.PyArray_NDIM(ref) or (nd == 2 and cnp.PyArray_DIMS(arr)[0] != cnp.PyArray_DIMS(ref)[0]):
            raise InputError(f"{name}: shape {np.shape(arr)} does not match q's batch shape "
                             f"{np.shape(ref)}")
        return arr

    cdef _raise_bad_quaternion(self, int body, int sample):
        raise InputError(self._bad_quaternion_message(body, sample))

    def _bad_quaternion_message(self, body, sample):
        return f"q: quaternion of joint #{body} is not unit (|Q| - 1 > 1e-6)"

    # ------------------------------------------------------------------ kinematics
    def forward_kinematics(self, q):
        """Poses of all bodies in the world frame.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
            Joint configuration(s), layout in docs/CONVENTIONS.md.

        Returns
        -------
        ndarray, shape (nb, 4, 4) or (N, nb, 4, 4)
            Homogeneous transforms C_i (body frame -> world), in ``body_names`` order.
        """
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray out
        cdef Py_ssize_t N, s
        cdef int bad = 0
        cdef double* qp
        cdef double* op
        cdef int[::1] errs
        if qa.ndim == 1:
            out = np.empty((self.nb, 4, 4))
            bad = fk_kernel(self, <double*>cnp.PyArray_DATA(qa), <double*>cnp.PyArray_DATA(out))
            if bad:
                self._raise_bad_quaternion(bad - 1, -1)
            return out
        N = qa.shape[0]
        out = np.empty((N, self.nb, 4, 4))
        qp = <double*>cnp.PyArray_DATA(qa)
        op = <double*>cnp.PyArray_DATA(out)
        errs = np.zeros(N, dtype=np.int32)
        with nogil:
            for s in prange(N, schedule="dynamic", chunksize=16):
                errs[s] = fk_kernel(self, &qp[s * self.nq], &op[s * 16 * self.nb])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s)
        return out


    def _jacobian1(self, q, int body, int frame, int rep):
        """Jacobian (6, nv) of body ``body``, or of named frame ``frame`` ≥ 0 (pose
        C_body · offset) on it, for one state; rep 0 body, 1 spatial, 2 hybrid,
        3 mixed (see treedyn.kinematics)."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        if cnp.PyArray_NDIM(qa) != 1:
            raise InputError("q: one state expected")
        cdef int nb = self.nb, nv = self.nv, k, bad
        cdef cnp.ndarray out = np.zeros((6, nv))
        if nv == 0:
            return out
        cdef double* Ov = <double*>cnp.PyArray_DATA(out)
        # the model's workspace holds aba_ws_size ≥ rnea_ws_size + 12 nb + 6 nv doubles
        cdef double* work = &self.ws[0]
        cdef double* Cp = &work[rnea_ws_size(nb, nv)]
        cdef double* Jp = &Cp[12 * nb]
        cdef double R[9]
        cdef double r[3]
        cdef double w[3]
        cdef double v[3]
        cdef double t[3]
        cdef double u[3]
        bad = spatial_screws_kernel(self, <double*>cnp.PyArray_DATA(qa), work, Cp, Jp)
        if bad:
            self._raise_bad_quaternion(bad - 1, -1)
        for k in range(9):
            R[k] = Cp[12 * body + k]
        for k in range(3):
            r[k] = Cp[12 * body + 9 + k]
        if frame >= 0:                      # frame pose C_body · offset
            pose_mul(&Cp[12 * body], &Cp[12 * body + 9], &self.foff[frame, 0],
                     &self.foff[frame, 9], R, r)
        with nogil:
            for k in range(nv):
                if not self.supp[body, k]:
                    continue
                w[0] = Jp[6 * k]; w[1] = Jp[6 * k + 1]; w[2] = Jp[6 * k + 2]
                v[0] = Jp[6 * k + 3]; v[1] = Jp[6 * k + 4]; v[2] = Jp[6 * k + 5]
                if rep == 1:
                    Ov[0 * nv + k] = w[0]; Ov[1 * nv + k] = w[1]; Ov[2 * nv + k] = w[2]
                    Ov[3 * nv + k] = v[0]; Ov[4 * nv + k] = v[1]; Ov[5 * nv + k] = v[2]
                    continue
                cross(r, w, t)                      # r × ω
                if rep == 2 or rep == 3:            # ṙ = v + ω × r = v − r × ω
                    Ov[3 * nv + k] = v[0] - t[0]; Ov[4 * nv + k] = v[1] - t[1]; Ov[5 * nv + k] = v[2] - t[2]
                    if rep == 2:
                        Ov[0 * nv + k] = w[0]; Ov[1 * nv + k] = w[1]; Ov[2 * nv + k] = w[2]
                    else:
                        rotT_vec(R, w, u)
                        Ov[0 * nv + k] = u[0]; Ov[1 * nv + k] = u[1]; Ov[2 * nv + k] = u[2]
                    continue
                rotT_vec(R, w, u)                   # body: (Rᵀω, Rᵀ(v − r × ω))
                Ov[0 * nv + k] = u[0]; Ov[1 * nv + k] = u[1]; Ov[2 * nv + k] = u[2]
                v[0] -= t[0]; v[1] -= t[1]; v[2] -= t[2]
                rotT_vec(R, v, u)
                Ov[3 * nv + k] = u[0]; Ov[4 * nv + k] = u[1]; Ov[5 * nv + k] = u[2]
        return out

    def frame_poses(self, q):
        """World poses of all named frames, shape (n_frames, 4, 4) (or (N, n_frames, 4, 4)),
        in ``frame_names`` order: the world, every link (moving or merged), extra frames."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray C
        cdef cnp.ndarray out
        cdef Py_ssize_t N = 1, s
        cdef int nf = self.fbody.shape[0], f, b, r, bad
        cdef double* Cv
        cdef double* Ov
        if cnp.PyArray_NDIM(qa) == 1:
            # one state: body poses in the model's workspace, no intermediate array
            out = np.empty((nf, 4, 4))
            Cv = &self.ws[0]            # ws holds ≥ 16 nb doubles (rnea_ws_size)
            bad = fk_kernel(self, <double*>cnp.PyArray_DATA(qa), Cv)
            if bad:
                self._raise_bad_quaternion(bad - 1, -1)
        else:
            C = self.forward_kinematics(qa)
            N = cnp.PyArray_DIMS(qa)[0]
            out = np.empty((N, nf, 4, 4))
            Cv = <double*>cnp.PyArray_DATA(C)
        Ov = <double*>cnp.PyArray_DATA(out)
        cdef double R[9]
        cdef double p[3]
        cdef double Rf[9]
        cdef double pf[3]
        cdef double* o
        cdef const double* c
        with nogil:
            for s in range(N):
                for f in range(nf):
                    b = self.fbody[f]
                    o = &Ov[(s * nf + f) * 16]
                    if b < 0:
                        for r in range(9):
                            Rf[r] = self.foff[f, r]
                        pf[0] = self.foff[f, 9]; pf[1] = self.foff[f, 10]; pf[2] = self.foff[f, 11]
                    else:
                        c = &Cv[(s * self.nb + b) * 16]
                        for r in range(3):
                            R[3 * r] = c[4 * r]; R[3 * r + 1] = c[4 * r + 1]
                            R[3 * r + 2] = c[4 * r + 2]; p[r] = c[4 * r + 3]
                        pose_mul(R, p, &self.foff[f, 0], &self.foff[f, 9], Rf, pf)
                    for r in range(3):
                        o[4 * r] = Rf[3 * r]; o[4 * r + 1] = Rf[3 * r + 1]
                        o[4 * r + 2] = Rf[3 * r + 2]; o[4 * r + 3] = pf[r]
                    o[12] = 0.0; o[13] = 0.0; o[14] = 0.0; o[15] = 1.0
        return out

    # ------------------------------------------------------------------ dynamics
    def inverse_dynamics(self, q, v, a, representation="body", f_ext=None, gravity=None,
                         f_ext_frame="world"):
        """Joint forces τ = M(q) a + C(q, v) v + g(q) − Σ Jᵀ f_ext by the O(n) recursive
        Newton–Euler algorithm.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        v, a : array_like, shape (nv,) or (N, nv)
            Velocities and accelerations (layout in docs/CONVENTIONS.md).
        representation : {"body", "spatial", "hybrid"}
            Which recursion computes τ (Müller 2018, eqs. 66-67, 70-71, 75-76).
            All three give the same τ; they differ in the frames of the
            intermediate twists and wrenches.
        f_ext : array_like, shape (nb, 6) or (N, nb, 6), optional
            External wrench (torque, force) acting on each body, in ``f_ext_frame``.
        gravity : array_like, shape (3,), optional
            World-frame gravity in m/s² (default: ``model.gravity``).
        f_ext_frame : {"world", "body", "hybrid"}
            "world": about the world origin, world axes; "body": about the body
            origin, body axes; "hybrid": about the body origin, world axes.

        Returns
        -------
        ndarray, shape (nv,) or (N, nv)
            Joint forces/torques (N, N·m; free joints: the wrench in the
            joint's velocity coordinates).
        """
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef cnp.ndarray aa = self._like(qa, a, self.nv, "a")
        cdef cnp.ndarray fa = None
        cdef cnp.ndarray out
        cdef rnea_fn fn
        cdef int rep, fframe = 0, bad = 0
        cdef const double* gp = &self.grav[0]
        cdef double gbuf[3]
        cdef const double* fp = NULL
        cdef cnp.npy_intp dims[2]
        if representation == "body":
            fn = rnea_body_kernel
        elif representation == "spatial":
            fn = rnea_spatial_kernel
        elif representation == "hybrid":
            fn = rnea_hybrid_kernel
        else:
            raise InputError(f"representation must be 'body', 'spatial' or 'hybrid', "
                             f"got {representation!r}")
        gp = self._gravity_ptr(gravity, gbuf)
        if f_ext is not None:
            fframe = self._wrench_frame(f_ext_frame)
            fa = self._wrenches(qa, f_ext)
            fp = <double*>cnp.PyArray_DATA(fa)
        if cnp.PyArray_NDIM(qa) == 1:
            dims[0] = self.nv
            out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_DOUBLE, 0)
            bad = fn(self, <double*>cnp.PyArray_DATA(qa), <double*>cnp.PyArray_DATA(va),
                     <double*>cnp.PyArray_DATA(aa), gp, fp, fframe, &self.ws[0],
                     <double*>cnp.PyArray_DATA(out))
            if bad:
                self._raise_bad_quaternion(bad - 1, -1)
            return out
        return self._rnea_batch(fn, qa, va, aa, gp, fp, fframe)

    cdef const double* _gravity_ptr(self, object gravity, double* gbuf) except NULL:
        """Pointer to the gravity to use: the model's, or ``gravity`` copied into gbuf."""
        cdef cnp.ndarray garr
        cdef int k
        if gravity is None:
            return &self.grav[0]
        garr = self._states(gravity, 3, "gravity")
        if cnp.PyArray_NDIM(garr) != 1:
            raise InputError("gravity: expected shape (3,)")
        for k in range(3):
            gbuf[k] = (<double*>cnp.PyArray_DATA(garr))[k]
        return gbuf

    cdef int _wrench_frame(self, object f_ext_frame) except -1:
        if f_ext_frame not in _WRENCH_FRAMES:
            raise InputError(f"f_ext_frame must be 'world', 'body' or 'hybrid', "
                             f"got {f_ext_frame!r}")
        return _WRENCH_FRAMES[f_ext_frame]

    cdef cnp.ndarray _wrenches(self, cnp.ndarray qa, object f_ext):
        cdef cnp.ndarray fa
        try:
            fa = np.ascontiguousarray(f_ext, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"f_ext: cannot be read as real numbers: {exc}") from None
        cdef tuple want
        if cnp.PyArray_NDIM(qa) == 1:
            want = (self.nb, 6)
        else:
            want = (int(cnp.PyArray_DIMS(qa)[0]), self.nb, 6)
        if np.shape(fa) != want:
            raise InputError(f"f_ext: expected shape {want} (one wrench per body), "
                             f"got {np.shape(fa)}")
        if not _all_finite(<double*>cnp.PyArray_DATA(fa), cnp.PyArray_SIZE(fa)):
            raise InputError("f_ext: contains NaN or infinity")
        return fa

    cdef cnp.ndarray _rnea_batch(self, rnea_fn fn, cnp.ndarray qa, cnp.ndarray va,
                                 cnp.ndarray aa, const double* gp, const double* fp,
                                 int fframe):
        cdef Py_ssize_t N = cnp.PyArray_DIMS(qa)[0], s
        cdef int nq = self.nq, nv = self.nv, nb = self.nb, nth = _num_threads()
        cdef Py_ssize_t wsz = rnea_ws_size(nb, nv)
        cdef cnp.ndarray out = np.empty((N, nv))
        cdef double[:, ::1] work = _thread_workspaces(nth, wsz)
        cdef int[::1] errs = np.zeros(N, dtype=np.int32)
        cdef double* qp = <double*>cnp.PyArray_DATA(qa)
        cdef double* vp = <double*>cnp.PyArray_DATA(va)
        cdef double* ap = <double*>cnp.PyArray_DATA(aa)
        cdef double* op = <double*>cnp.PyArray_DATA(out)
        with nogil:
            for s in prange(N, schedule="dynamic", chunksize=16, num_threads=nth):
                errs[s] = fn(self, &qp[s * nq], &vp[s * nv], &ap[s * nv], gp,
                             NULL if fp == NULL else &fp[s * 6 * nb], fframe,
                             &work[threadid(), 0], &op[s * nv])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s)
        return out


    # ------------------------------------------------------------------ motion
    def _body_motion(self, q, v=None, a=None):
        """World poses (…, nb, 12) and body-fixed twists and twist derivatives
        (…, nb, 6) of all bodies (gravity not included); None where not asked."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray va = None, aa = None
        cdef Py_ssize_t N = 1, s
        cdef int nb = self.nb, nq = self.nq, nv = self.nv, nth = _num_threads()
        cdef int[::1] errs
        cdef double[:, ::1] work
        cdef double* qp
        cdef double* vp = NULL
        cdef double* ap = NULL
        cdef double* Cp
        cdef double* Vp = NULL
        cdef double* Ap = NULL
        if v is not None:
            va = self._like(qa, v, self.nv, "v")
            vp = <double*>cnp.PyArray_DATA(va)
        if a is not None:
            if v is None:
                raise InputError("a: accelerations need velocities v")
            aa = self._like(qa, a, self.nv, "a")
            ap = <double*>cnp.PyArray_DATA(aa)
        lead = () if cnp.PyArray_NDIM(qa) == 1 else (int(cnp.PyArray_DIMS(qa)[0]),)
        if lead:
            N = lead[0]
        C = np.empty(lead + (nb, 12))
        V = np.empty(lead + (nb, 6)) if v is not None else None
        A = np.empty(lead + (nb, 6)) if a is not None else None
        qp = <double*>cnp.PyArray_DATA(qa)
        Cp = <double*>cnp.PyArray_DATA(C)
        if V is not None:
            Vp = <double*>cnp.PyArray_DATA(V)
        if A is not None:
            Ap = <double*>cnp.PyArray_DATA(A)
        errs = np.zeros(N, dtype=np.int32)
        if not lead:
            nth = 1          # one state: no thread team (its start-up would dominate)
        work = _thread_workspaces(nth, rnea_ws_size(nb, nv))
        with nogil:
            for s in prange(N, schedule="dynamic", chunksize=16, num_threads=nth):
                errs[s] = body_motion_kernel(
                    self, &qp[s * nq], NULL if vp == NULL else &vp[s * nv],
                    NULL if ap == NULL else &ap[s * nv], &work[threadid(), 0],
                    &Cp[s * 12 * nb], NULL if Vp == NULL else &Vp[s * 6 * nb],
                    NULL if Ap == NULL else &Ap[s * 6 * nb])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s if lead else -1)
        return C, V, A

    def _spatial_screws(self, q):
        """World poses (…, nb, 12) and spatial screws of every freedom (…, nv, 6)."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef Py_ssize_t N = 1, s
        cdef int nb = self.nb, nq = self.nq, nv = self.nv, nth = _num_threads()
        cdef int[::1] errs
        cdef double[:, ::1] work
        cdef double* qp = <double*>cnp.PyArray_DATA(qa)
        cdef double* Cp
        cdef double* Jp
        lead = () if cnp.PyArray_NDIM(qa) == 1 else (int(cnp.PyArray_DIMS(qa)[0]),)
        if lead:
            N = lead[0]
        C = np.empty(lead + (nb, 12))
        J = np.empty(lead + (nv, 6))
        Cp = <double*>cnp.PyArray_DATA(C)
        Jp = <double*>cnp.PyArray_DATA(J)
        errs = np.zeros(N, dtype=np.int32)
        if not lead:
            nth = 1
        work = _thread_workspaces(nth, rnea_ws_size(nb, nv))
        with nogil:
            for s in prange(N, schedule="dynamic", chunksize=16, num_threads=nth):
                errs[s] = spatial_screws_kernel(self, &qp[s * nq], &work[threadid(), 0],
                                                &Cp[s * 12 * nb], &Jp[s * 6 * nv])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s if lead else -1)
        return C, J


    def mass_matrix(self, q):
        """Joint-space mass matrix M(q) by the composite-rigid-body algorithm.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)

        Returns
        -------
        ndarray, shape (nv, nv) or (N, nv, nv)
            Symmetric, both triangles filled; armature on the diagonal.
            Units: kg, kg·m, kg·m² by the coordinates involved.
        """
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef Py_ssize_t N = 1, s
        cdef int nb = self.nb, nq = self.nq, nv = self.nv, nth = _num_threads(), bad
        cdef int[::1] errs
        cdef double[:, ::1] work
        cdef double* qp = <double*>cnp.PyArray_DATA(qa)
        cdef double* op
        cdef cnp.ndarray out
        cdef cnp.npy_intp dims[2]
        if cnp.PyArray_NDIM(qa) == 1:
            dims[0] = nv
            dims[1] = nv
            out = cnp.PyArray_EMPTY(2, dims, cnp.NPY_DOUBLE, 0)
            bad = crba_kernel(self, qp, &self.ws[0], <double*>cnp.PyArray_DATA(out))
            if bad:
                self._raise_bad_quaternion(bad - 1, -1)
            return out
        N = cnp.PyArray_DIMS(qa)[0]
        out = np.empty((N, nv, nv))
        op = <double*>cnp.PyArray_DATA(out)
        errs = np.zeros(N, dtype=np.int32)
        work = _thread_workspaces(nth, crba_ws_size(nb, nv))
        with nogil:
            for s in prange(N, schedule="dynamic", chunksize=16, num_threads=nth):
                errs[s] = crba_kernel(self, &qp[s * nq], &work[threadid(), 0], &op[s * nv * nv])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s)
        return out

    def forward_dynamics(self, q, v, tau, f_ext=None, gravity=None, f_ext_frame="world",
                         method="aba"):
        """Joint accelerations q̈ = M⁻¹ (τ − h(q, v) + Σ Jᵀ f_ext).

        Parameters
        ----------
        q, v, tau : array_like, shapes (nq,), (nv,), (nv,) or with a leading batch axis
        f_ext, gravity, f_ext_frame : as in :meth:`inverse_dynamics`
        method : {"aba", "cholesky"}
            "aba": the O(n) articulated-body kernel (default); "cholesky": M from
            the CRBA kernel and h from inverse dynamics, solved by a Cholesky
            factorization (LAPACK).

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
                return self._forward_dynamics_cholesky(q, v, tau, f_ext, gravity, f_ext_frame)
            raise InputError(f"method must be 'aba' or 'cholesky', got {method!r}")
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        cdef cnp.ndarray ta = self._like(qa, tau, self.nv, "tau")
        cdef cnp.ndarray fa = None
        cdef cnp.ndarray out
        cdef Py_ssize_t N = 1, s
        cdef int nb = self.nb, nq = self.nq, nv = self.nv, nth, fframe = 0
        cdef int[::1] errs
        cdef double[:, ::1] work
        cdef const double* gp = &self.grav[0]
        cdef double gbuf[3]
        cdef double* fp = NULL
        cdef double* qp = <double*>cnp.PyArray_DATA(qa)
        cdef double* vp = <double*>cnp.PyArray_DATA(va)
        cdef double* tp = <double*>cnp.PyArray_DATA(ta)
        cdef double* op
        gp = self._gravity_ptr(gravity, gbuf)
        if f_ext is not None:
            fframe = self._wrench_frame(f_ext_frame)
            fa = self._wrenches(qa, f_ext)
            fp = <double*>cnp.PyArray_DATA(fa)
        if cnp.PyArray_NDIM(qa) == 2:
            N = cnp.PyArray_DIMS(qa)[0]
            out = np.empty((N, nv))
        else:
            out = np.empty(nv)
        op = <double*>cnp.PyArray_DATA(out)
        cdef int bad
        if cnp.PyArray_NDIM(qa) == 1:
            bad = aba_kernel(self, qp, vp, tp, gp, fp, fframe, &self.ws[0], op)
            if bad > 0:
                self._raise_bad_quaternion(bad - 1, -1)
            if bad < 0:
                self._raise_singular(-bad - 1)
            return out
        else:
            nth = _num_threads()
            errs = np.zeros(N, dtype=np.int32)
            work = _thread_workspaces(nth, aba_ws_size(nb, nv))
            with nogil:
                for s in prange(N, schedule="dynamic", chunksize=16, num_threads=nth):
                    errs[s] = aba_kernel(self, &qp[s * nq], &vp[s * nv], &tp[s * nv], gp,
                                         NULL if fp == NULL else &fp[s * 6 * nb], fframe,
                                         &work[threadid(), 0], &op[s * nv])
        for s in range(N):
            if errs[s] > 0:
                self._raise_bad_quaternion(errs[s] - 1, s if cnp.PyArray_NDIM(qa) == 2 else -1)
            if errs[s] < 0:
                self._raise_singular(-errs[s] - 1)
        return out

    def _raise_singular(self, body):
        raise SingularModelError(f"the articulated inertia seen by joint #{body} is singular "
                                 f"(massless subtree without armature?)")

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
        cdef cnp.ndarray pa = self._states(psi, self.nv, "dq")
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

    def _run(self, q0, v0, double t0, double h, Py_ssize_t nsteps, int scheme, A, b, c, bhat,
             int local, controller, tau0, f_ext, f_ext_frame, gravity, progress=None,
             Py_ssize_t chunk=0):
        """Integrate nsteps fixed steps (or one step with an error estimate when bhat
        is given and nsteps == 1).  Returns (Q (nsteps+1, nq), V (nsteps+1, nv), err)."""
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
        cdef Py_ssize_t k, k0 = 0, k1
        cdef int code = 0
        if chunk <= 0:
            chunk = nsteps if nsteps > 0 else 1
        while k0 < nsteps and code == 0:
            k1 = min(nsteps, k0 + chunk)
            if controller is None:
                with nogil:
                    for k in range(k0, k1):
                        code = rk_step(self, scheme, s, &Ab[0, 0], &bb[0], &cb_[0], bhp, local,
                                       t0 + k * h, h, &Qv[k, 0], &Vv[k, 0] if nv else NULL,
                                       fn, ctx, gp, fp, fframe, &work[0], &Qv[k + 1, 0],
                                       &Vv[k + 1, 0] if nv else NULL,
                                       &ev[0] if nv else NULL)
                        if code:
                            break
            else:
                for k in range(k0, k1):
                    code = rk_step(self, scheme, s, &Ab[0, 0], &bb[0], &cb_[0], bhp, local,
                                   t0 + k * h, h, &Qv[k, 0], &Vv[k, 0] if nv else NULL,
                                   fn, ctx, gp, fp, fframe, &work[0], &Qv[k + 1, 0],
                                   &Vv[k + 1, 0] if nv else NULL, &ev[0] if nv else NULL)
                    if code:
                        break
            if progress is not None and code == 0:
                progress(k1 - k0)
            k0 = k1
        if code == STEP_CONTROLLER_ERROR:
            raise pyc.error
        if code == STEP_DIVERGED:
            raise InputError(f"the simulation diverged (non-finite velocity) in the step "
                             f"starting at t = {t0 + k * h:.6g} s: reduce dt or use a "
                             f"higher-order method")
        if code > 0:
            self._raise_bad_quaternion(code - 1, -1)
        if code < 0:
            self._raise_singular(-code - 1)
        return Q, V, err

    def _spatial_screw_rates(self, q, v):
        """World poses (nb, 12), spatial screws J (nv, 6) and their rates J̇ (nv, 6)
        for one state (used by the closed-form Coriolis matrix)."""
        cdef cnp.ndarray qa = self._states(q, self.nq, "q")
        cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
        if cnp.PyArray_NDIM(qa) != 1:
            raise InputError("q: one state expected here, shape (nq,)")
        C = np.empty((self.nb, 12))
        J = np.empty((self.nv, 6))
        Jd = np.empty((self.nv, 6))
        work = np.empty(rnea_ws_size(self.nb, self.nv) + 6 * self.nv)
        cdef double[::1] w = work
        cdef double[:, ::1] Cv = C, Jv = J, Jdv = Jd
        bad = spatial_screw_rates_kernel(self, <double*>cnp.PyArray_DATA(qa),
                                         <double*>cnp.PyArray_DATA(va), &w[0], &Cv[0, 0],
                                         &Jv[0, 0] if self.nv else NULL,
                                         &Jdv[0, 0] if self.nv else NULL)
        if bad:
            self._raise_bad_quaternion(bad - 1, -1)
        return C, J, Jd


def _fast_codes(kind, nvj, voff, X):
    """Per-body 1-dof fast-path code (FAST_* in joints.pxi)."""
    codes = np.zeros(len(kind), dtype=np.int32)
    X = np.asarray(X)
    for i in range(len(kind)):
        if kind[i] != KIND_SCREWS or nvj[i] != 1:
            continue
        x = X[voff[i]]
        codes[i] = FAST_SCREW
        if np.all(x[3:] == 0.0):
            for k in range(3):
                if abs(x[k]) == 1.0 and np.count_nonzero(x[:3]) == 1:
                    codes[i] = FAST_REV_X + k
    return codes


def _thread_workspaces(int nth, Py_ssize_t size):
    """One workspace row per thread, each row padded to whole 64-byte cache lines
    plus one spare line, so that threads never write to a shared cache line."""
    cdef Py_ssize_t padded = ((size + 7) // 8 + 1) * 8
    return np.empty((nth, padded))


cdef int _num_threads():
    return max(1, openmp.omp_get_max_threads())


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
