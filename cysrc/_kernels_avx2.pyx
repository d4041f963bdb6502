# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# The kernels of _kernels.pyx compiled for AVX2 (setup.py: -mavx2, no FMA, so that
# every result is bitwise the baseline build's); treedyn._ext picks this module
# where the CPU has AVX2.
include "_kernels.pyx"
