"""The compiled kernels in use: ``treedyn._kernels`` (the platform's baseline
instruction set) or, where the CPU has AVX2 and it was built (x86-64 with GCC or
Clang), ``treedyn._kernels_avx2``: the same source compiled with ``-mavx2``, whose
wider vectors speed up the derivative products and the per-pair loops.  FMA
contraction is not enabled, so both give bitwise the same results
(tests/test_kernel_builds.py).

The environment variable ``TREEDYN_KERNELS`` ("auto", "baseline" or "avx2"), read
at import, overrides the choice.
"""
import os

from . import _kernels as _baseline


def _select():
    choice = os.environ.get("TREEDYN_KERNELS", "auto").strip().lower() or "auto"
    if choice not in ("auto", "baseline", "avx2"):
        raise ImportError(f"TREEDYN_KERNELS={choice!r}: expected 'auto', 'baseline' or "
                          f"'avx2'")
    if choice == "baseline":
        return _baseline
    if not _baseline._cpu_has_avx2():
        if choice == "avx2":
            raise ImportError("TREEDYN_KERNELS='avx2': this CPU (or OS) does not run AVX2 "
                              "code")
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
