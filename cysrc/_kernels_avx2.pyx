# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
# The kernels of _kernels.pyx compiled for AVX2 and FMA (setup.py: -mavx2 -mfma;
# the multiply-adds the kernels state as fused round once, so the last bits differ
# from the baseline build's); treedyn._ext picks this module where the CPU has both.
include "_kernels.pyx"
