"""Build the Cython kernels of treedyn.

All kernels compile into one extension module, ``treedyn._kernels``, from
``cysrc/_kernels.pyx``, which includes one ``.pxi`` file per algorithm and
cimports the inline SE(3) primitives of ``cysrc/se3.pxd``.  Flags: ``-O3``
(never ``-march=native``: wheels must run on any x86-64/aarch64 machine) and
OpenMP for the batch loops.
"""
import os
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))

if sys.platform == "win32":
    compile_args = ["/O2", "/openmp"]
    link_args = []
else:
    compile_args = ["-O3", "-fopenmp", "-fno-math-errno"]
    link_args = ["-fopenmp"]

extensions = [
    Extension(
        "treedyn._kernels",
        sources=["cysrc/_kernels.pyx"],
        include_dirs=[np.get_include(), "cysrc"],
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"), ("_GNU_SOURCE", None)],
    )
]

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
    package_data={"treedyn.robots": ["*.urdf", "*.toml", "*.sdf", "*.md"]},
)
