"""Build the Cython kernels of treedyn.

All kernels compile into one extension module, ``treedyn._kernels``, from
``cysrc/_kernels.pyx``, which includes one ``.pxi`` file per algorithm and
cimports the inline SE(3) primitives of ``cysrc/se3.pxd``.  Flags: ``-O3``
(never ``-march=native``: wheels must run on any x86-64/aarch64 machine),
``-ffp-contract=off`` (the compiler fuses no multiply-add by itself: the one-state
kernels and their vector-lane twins must round alike) and OpenMP for the batch
loops.  On x86-64 (GCC or Clang) the same source is also built as
``treedyn._kernels_avx2`` with ``-mavx2 -mfma``; ``treedyn/_ext.py`` picks it at
import on CPUs with AVX2 and FMA.  That build rounds the multiply-adds the kernels
state as fused (``td_fma`` in cysrc/simd.h: the ABA's per-body arithmetic) once,
so its results differ from the baseline build's in the last bits; each build is
deterministic, and within each the vector lanes equal the one-state kernels bit
for bit.
"""
import os
import glob
import platform
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))

if sys.platform == "win32":
    compile_args = ["/O2", "/openmp"]
    link_args = []
else:
    compile_args = ["-O3", "-fopenmp", "-fno-math-errno", "-ffp-contract=off"]
    link_args = ["-fopenmp"]



def kernels_extension(name, extra=()):
    return Extension(
        f"treedyn.{name}",
        sources=[f"cysrc/{name}.pyx"],
        include_dirs=[np.get_include(), "cysrc"],
        depends=sorted(glob.glob("cysrc/*.h")),     # C headers the kernels include
        extra_compile_args=compile_args + list(extra),
        extra_link_args=link_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("_GNU_SOURCE", None)],
    )


extensions = [kernels_extension("_kernels")]
# the same kernels for AVX2 + FMA CPUs, picked at import by treedyn/_ext.py: the
# explicit fused multiply-adds (simd.h td_fma) round once there, so the last bits
# differ from the baseline build's
if sys.platform != "win32" and platform.machine().lower() in ("x86_64", "amd64"):
    extensions.append(kernels_extension("_kernels_avx2", ["-mavx2", "-mfma"]))

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["cysrc"],
        compiler_directives={
            "language_level": "3",
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
            "nonecheck": False,
            "embedsignature": True,
        },
    ),
    packages=["treedyn", "treedyn.io", "treedyn.robots"],
    package_dir={"treedyn.robots": "robots"},
    package_data={"treedyn.robots": ["*.urdf", "*.toml", "*.sdf", "*.xml", "*.md"]},
)
