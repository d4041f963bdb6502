# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled kernels of treedyn.

``ModelCore`` holds the flat, read-only arrays of a compiled model that the
kernels read (topological order, parent[i] < i) and exposes the per-state entry
points; ``treedyn.model.Model`` subclasses it.  Each algorithm lives in its own
``.pxi`` file included below; the inline SE(3) primitives are in ``se3.pxd``.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport isfinite

from se3 cimport *

from treedyn.errors import InputError

cnp.import_array()

include "joints.pxi"
include "fk.pxi"


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
    cdef const int[::1] quat_joint     # bodies whose joint carries a quaternion

    def _init_core(self, int nq, int nv, parent, kind, qoff, voff, nqj, nvj,
                   B, X, center):
        """Set the kernel arrays (called once by the model compiler)."""
        cdef int nb = parent.shape[0]
        B = np.asarray(B, dtype=np.float64)
        Bref = np.empty((nb, 12))
        Bref[:, :9] = B[:, :3, :3].reshape(nb, 9)
        Bref[:, 9:] = B[:, :3, 3]
        self.nb = nb
        self.nq = nq
        self.nv = nv
        self.parent = np.ascontiguousarray(parent, dtype=np.int32)
        self.kind = np.ascontiguousarray(kind, dtype=np.int32)
        self.qoff = np.ascontiguousarray(qoff, dtype=np.int32)
        self.voff = np.ascontiguousarray(voff, dtype=np.int32)
        self.nqj = np.ascontiguousarray(nqj, dtype=np.int32)
        self.nvj = np.ascontiguousarray(nvj, dtype=np.int32)
        self.Bref = Bref
        # keep one dummy row when nv == 0 so that &X[0, 0] stays a valid address
        self.X = np.ascontiguousarray(X, dtype=np.float64).reshape(nv, 6) if nv > 0 else np.zeros((1, 6))
        self.center = np.ascontiguousarray(center, dtype=np.float64).reshape(nb, 3)

    # ------------------------------------------------------------------ input checks
    cdef cnp.ndarray _states(self, object x, int width, str name):
        """x as a C-contiguous float64 array of shape (width,) or (N, width); finite."""
        cdef cnp.ndarray arr
        if isinstance(x, np.ndarray) and (<cnp.ndarray>x).dtype == np.float64:
            arr = <cnp.ndarray>x
        else:
            try:
                arr = np.asarray(x)
            except Exception as exc:
                raise InputError(f"{name}: cannot be read as an array: {exc}") from None
            if arr.dtype.kind not in "fiu" or arr.dtype == np.bool_:
                raise InputError(f"{name}: expected real numbers, got dtype {arr.dtype}")
            arr = arr.astype(np.float64)
        if arr.ndim not in (1, 2) or arr.shape[arr.ndim - 1] != width:
            raise InputError(
                f"{name}: expected shape ({width},) or (N, {width}), got {np.shape(arr)}")
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        if not _all_finite(<double*>cnp.PyArray_DATA(arr), arr.size):
            raise InputError(f"{name}: contains NaN or infinity")
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
            for s in prange(N, schedule="static"):
                errs[s] = fk_kernel(self, &qp[s * self.nq], &op[s * 16 * self.nb])
        for s in range(N):
            if errs[s]:
                self._raise_bad_quaternion(errs[s] - 1, s)
        return out


cdef bint _all_finite(const double* x, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(n):
        if not isfinite(x[k]):
            return False
    return True
