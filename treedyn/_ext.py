"""The compiled kernels in use: ``treedyn._kernels`` (the platform's baseline
instruction set) or, where the CPU has AVX2 and FMA and it was built (x86-64 with
GCC or Clang), ``treedyn._kernels_avx2``: the same source compiled with ``-mavx2
-mfma``, whose wider vectors speed up the derivative products and the per-pair
loops, and whose fused multiply-adds the ABA's per-body arithmetic.  The fused
operations are explicit (cysrc/simd.h ``td_fma``; the compiler contracts nothing),
so each build is deterministic and its vector lanes equal its one-state kernels
bit for bit, but the two builds differ in the last bits where a fused operation
is used (tests/test_kernel_builds.py).

The environment variable ``TREEDYN_KERNELS`` ("auto", "baseline" or "avx2"), read
at import, overrides the choice.
"""
import os

from . import _kernels as _baseline


def _cpu_runs_avx2_build():
    """Whether this CPU (and OS) runs the AVX2 build: AVX2 and FMA3 (a few CPUs,
    e.g. some VIA and early Intel models, have one without the other)."""
    return _baseline._cpu_has_avx2() and _baseline._cpu_has_fma()


def _select():
    choice = os.environ.get("TREEDYN_KERNELS", "auto").strip().lower() or "auto"
    if choice not in ("auto", "baseline", "avx2"):
        raise ImportError(f"TREEDYN_KERNELS={choice!r}: expected 'auto', 'baseline' or "
                          f"'avx2'")
    if choice == "baseline":
        return _baseline
    if not _cpu_runs_avx2_build():
        if choice == "avx2":
            raise ImportError("TREEDYN_KERNELS='avx2': this CPU (or OS) does not run AVX2 "
                              "and FMA code")
        return _baseline
    try:
        from . import _kernels_avx2
    except ImportError:
        if choice == "avx2":
            raise ImportError("TREEDYN_KERNELS='avx2': treedyn was built without the AVX2 "
                              "kernels (x86-64 with GCC or Clang only)") from None
        return _baseline
    return _kernels_avx2


kernels = _select()

ModelCore = kernels.ModelCore
Data = kernels.Data
batch_threads = kernels.batch_threads
KIND_SCREWS = kernels.KIND_SCREWS
KIND_SPHERICAL = kernels.KIND_SPHERICAL
KIND_FREE_SE3 = kernels.KIND_FREE_SE3
KIND_FREE_SO3R3 = kernels.KIND_FREE_SO3R3
_ZERO = kernels._ZERO
KERNEL_CODES = kernels.KERNEL_CODES
ISA = kernels.ISA
