/* Portability shims for the treedyn kernels. */
#ifndef TREEDYN_COMPAT_H
#define TREEDYN_COMPAT_H
#include <math.h>
#if defined(__GLIBC__)
#define td_sincos sincos              /* GNU extension (_GNU_SOURCE, see setup.py) */
#elif defined(__APPLE__)
#define td_sincos __sincos
#else
static inline void td_sincos(double x, double *s, double *c) { *s = sin(x); *c = cos(x); }
#endif
#endif
