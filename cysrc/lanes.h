/* Kernels written once for an element type and compiled twice (lanes.pxi):
 *   TD_T = double, TD_LANES = 1:  one state, the arrays as in DataC;
 *   TD_T = td_vec, TD_LANES = TD_VL:  TD_VL states at once, lane l of every element
 *       holding state l (element k of state l at double index k·TD_VL + l).  A batch's
 *       states side by side: the per-body arithmetic, three-vector products that do
 *       not fill vector registers within one state, and the short column loops of
 *       small models run on TD_VL states for the cost of one.
 * Every lane performs the scalar instantiation's operations in the same order (no
 * contraction by the compiler, no reassociation; the fused multiply-adds that the
 * code states, TD_FMA, TD_FMS, TD_FNMA (simd.h td_fma), fused alike in both;
 * comparisons and square roots lane by lane), so the lanes' results are bitwise
 * those of one state at a time.  TD_FN(name) names a function of this
 * instantiation; model constants (inertias, armature) stay plain doubles.  A value
 * test that would end a one-state kernel (a singular articulated inertia) yields a
 * mask of the failing lanes, which the lanes instantiation records and computes
 * past (the other lanes are not affected). */

#include "simd.h"

#define T_ TD_T

#if TD_LANES == 1
#define TD_SPLAT(x) (x)
#define TD_FMA(a, b, c) td_fma(a, b, c)
#define TD_FMS(a, b, c) td_fms(a, b, c)
#define TD_FNMA(a, b, c) td_fnma(a, b, c)
#define TD_PUT(P, idx, x) ((P)[0][idx] = (x))
#define TD_ADD1(P, idx, x) ((P)[0][idx] += (x))
#define TD_MASK int
#define TD_LE(a, b) ((a) <= (b))
#define TD_POS_OR(x, y) ((x) > 0.0 ? (x) : (y))
#define TD_SQRT(x) sqrt(x)
#else
#if TD_LANES == 4
#define TD_SPLAT(x) ((td_vec){(x), (x), (x), (x)})
#else
#define TD_SPLAT(x) ((td_vec){(x), (x)})
#endif
#define TD_FMA(a, b, c) td_fmav(a, b, c)
#define TD_FMS(a, b, c) td_fmsv(a, b, c)
#define TD_FNMA(a, b, c) td_fnmav(a, b, c)
#define TD_PUT(P, idx, x) do { const td_vec x_ = (x); \
    for (int l_ = 0; l_ < TD_VL; l_++) (P)[l_][idx] = x_[l_]; } while (0)
#define TD_ADD1(P, idx, x) do { for (int l_ = 0; l_ < TD_VL; l_++) (P)[l_][idx] += (x); } while (0)
#define TD_MASK td_ivec
#define TD_LE(a, b) ((a) <= (b))
#define TD_POS_OR(x, y) td_select((x) > TD_SPLAT(0.0), (x), TD_SPLAT(y))
#define TD_SQRT(x) td_sqrt_lanes(x)
static inline td_vec td_select(td_ivec m, td_vec a, td_vec b)
{
    return (td_vec)((m & (td_ivec)a) | (~m & (td_ivec)b));
}
static inline td_vec td_sqrt_lanes(td_vec x)
{
    td_vec r;
    for (int l = 0; l < TD_VL; l++)
        r[l] = sqrt(x[l]);
    return r;
}
#endif

/* se3_lanes.h twice: plain (TD_FN names), and fused (TD_FN(name##_fused)) for the
 * spatial RNEA; TD_TV makes a model constant (a double) an element of T_ for TD_FMA
 * (x 1: exact) */
#if TD_LANES == 1
#define TD_TV(x) (x)
#else
#define TD_TV(x) (TD_SPLAT(1.0) * (x))
#endif
#define TD_PR(name) TD_FN(name)
#define TD_MADD(a, b, c) ((a) * (b) + (c))
#define TD_MSUB(a, b, c) ((a) * (b) - (c))
#define TD_NMADD(a, b, c) ((c) - (a) * (b))
#define TD_MUL0(a, b) (TD_SPLAT(0.0) + (a) * (b))
#include "se3_lanes.h"
#undef TD_PR
#undef TD_MADD
#undef TD_MSUB
#undef TD_NMADD
#undef TD_MUL0
#define TD_PR(name) TD_FN(name##_fused)
#define TD_MADD(a, b, c) TD_FMA(TD_TV(a), TD_TV(b), TD_TV(c))
#define TD_MSUB(a, b, c) TD_FMS(TD_TV(a), TD_TV(b), TD_TV(c))
#define TD_NMADD(a, b, c) TD_FNMA(TD_TV(a), TD_TV(b), TD_TV(c))
#define TD_MUL0(a, b) ((a) * (b))
#include "se3_lanes.h"
#undef TD_PR
#undef TD_MADD
#undef TD_MSUB
#undef TD_NMADD
#undef TD_MUL0
#undef TD_TV
#include "rnea_spatial_sweeps.h"
#include "rnea_derivatives_sweeps.h"
#include "minverse_sweeps.h"
#include "poses_sweeps.h"
#include "aba_sweeps.h"

#undef T_
#undef TD_SPLAT
#undef TD_FMA
#undef TD_FMS
#undef TD_FNMA
#undef TD_PUT
#undef TD_ADD1
#undef TD_MASK
#undef TD_LE
#undef TD_POS_OR
#undef TD_SQRT
