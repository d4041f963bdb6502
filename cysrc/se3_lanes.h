/* The products of se3.pxd, element-generic (lanes.h): the same expressions, for
   one state or lanes of states.  Their multiply-adds are parameters the includer
   defines (and undefines after): TD_MADD(a, b, c) = a b + c, TD_MSUB(a, b, c) =
   a b − c, TD_NMADD(a, b, c) = c − a b, TD_MUL0(a, b) = a b as the first term of a
   sum; and TD_PR(name) names the functions of that flavour.  Plain (a product, then
   a sum: lanes.h's TD_FN names; the bits of se3.pxd) or fused (TD_FMA: lanes.h's
   TD_PR(name##_fused) for the spatial RNEA, crba.pxi's td_crba_* for the CRBA): the
   same terms in the same order, so the plain flavour's results are those of the
   expressions written out, and the fused one rounds each multiply-add once. */

/* a0 x0 + a1 x1 + a2 x2, summed left to right */
#define TD_ROW3(a0, a1, a2, x0, x1, x2) TD_MADD(a2, x2, TD_MADD(a1, x1, (a0) * (x0)))

static inline void TD_PR(cross)(const T_* a, const T_* b, T_* c)
{
    c[0] = TD_MSUB(a[1], b[2], a[2] * b[1]);
    c[1] = TD_MSUB(a[2], b[0], a[0] * b[2]);
    c[2] = TD_MSUB(a[0], b[1], a[1] * b[0]);
}

static inline T_ TD_PR(dot3)(const T_* a, const T_* b)
{
    return TD_MADD(a[2], b[2], TD_MADD(a[1], b[1], a[0] * b[0]));
}

static inline T_ TD_PR(dot6)(const T_* a, const T_* b)
{
    T_ s = a[0] * b[0];
    for (int n = 1; n < 6; n++)
        s = TD_MADD(a[n], b[n], s);
    return s;
}

/* y = R x; with a constant (model) R (_cR) or x (_cx) */
#define TD_ROT_VEC(R, x, y) do {                                  \
        (y)[0] = TD_ROW3((R)[0], (R)[1], (R)[2], (x)[0], (x)[1], (x)[2]); \
        (y)[1] = TD_ROW3((R)[3], (R)[4], (R)[5], (x)[0], (x)[1], (x)[2]); \
        (y)[2] = TD_ROW3((R)[6], (R)[7], (R)[8], (x)[0], (x)[1], (x)[2]); \
    } while (0)
static inline void TD_PR(rot_vec)(const T_* R, const T_* x, T_* y) { TD_ROT_VEC(R, x, y); }
static inline void TD_PR(rot_vec_cR)(const double* R, const T_* x, T_* y) { TD_ROT_VEC(R, x, y); }
static inline void TD_PR(rot_vec_cx)(const T_* R, const double* x, T_* y) { TD_ROT_VEC(R, x, y); }
#undef TD_ROT_VEC

static inline void TD_PR(rotT_vec)(const T_* R, const T_* x, T_* y)
{
    y[0] = TD_ROW3(R[0], R[3], R[6], x[0], x[1], x[2]);
    y[1] = TD_ROW3(R[1], R[4], R[7], x[0], x[1], x[2]);
    y[2] = TD_ROW3(R[2], R[5], R[8], x[0], x[1], x[2]);
}

static inline void TD_PR(twist_bracket)(const T_* x, const T_* y, T_* out)
{
    T_ t[3];
    TD_PR(cross)(x, y, out);
    TD_PR(cross)(x, &y[3], &out[3]);
    TD_PR(cross)(&x[3], y, t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}

static inline void TD_PR(subspace_times)(int k, const T_* S, const T_* x, T_* out)
{
    for (int n = 0; n < 6; n++)
        out[n] = k > 0 ? TD_MUL0(S[n], x[0]) : TD_SPLAT(0.0);
    for (int c = 1; c < k; c++)
        for (int n = 0; n < 6; n++)
            out[n] = TD_MADD(S[6 * c + n], x[c], out[n]);
}

static inline void TD_PR(com_wrench)(double m, const T_* R, const double* Thc, const T_* rho,
                                     const T_* w, const T_* al, const T_* acc, T_* out)
{
    T_ wb[3], ab[3], hb[3], nb[3], t[3];
    TD_PR(rotT_vec)(R, w, wb);
    TD_PR(rotT_vec)(R, al, ab);
    TD_PR(rot_vec_cR)(Thc, wb, hb);
    TD_PR(cross)(wb, hb, nb);
    TD_PR(rot_vec_cR)(Thc, ab, hb);
    nb[0] += hb[0]; nb[1] += hb[1]; nb[2] += hb[2];
    TD_PR(rot_vec)(R, nb, out);
    out[3] = m * acc[0]; out[4] = m * acc[1]; out[5] = m * acc[2];
    TD_PR(cross)(rho, &out[3], t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
}

/* Mˢ V̇ − ad_Vᵀ Mˢ V of body i (pose C, inertia inr = model.inert row, twist V and
   acceleration A in frame s) as Newton–Euler about its COM c = r + R d:
   ċ = v + ω × c, c̈ = v̇ + ω̇ × c + ω × ċ */
static inline void TD_PR(body_wrench)(const T_* C, const double* inr, const T_* V,
                                      const T_* A, T_* F)
{
    T_ cw[3], u[3], acc[3];
    TD_PR(rot_vec_cx)(C, &inr[1], cw);
    cw[0] += C[9]; cw[1] += C[10]; cw[2] += C[11];
    TD_PR(cross)(V, cw, u);
    u[0] += V[3]; u[1] += V[4]; u[2] += V[5];
    TD_PR(cross)(V, u, acc);
    TD_PR(cross)(A, cw, u);
    for (int n = 0; n < 3; n++)
        acc[n] += u[n] + A[3 + n];
    TD_PR(com_wrench)(inr[0], C, &inr[4], cw, V, A, acc, F);
}

static inline void TD_PR(rigid_apply_packed)(const T_* Ic, const T_* V, T_* out)
{
    const T_* h = &Ic[1];
    const T_* Io = &Ic[4];   /* (not "I": complex.h's macro) */
    const T_ m = Ic[0];
    out[0] = TD_NMADD(h[2], V[4], TD_MADD(h[1], V[5], TD_ROW3(Io[0], Io[1], Io[2], V[0], V[1], V[2])));
    out[1] = TD_NMADD(h[0], V[5], TD_MADD(h[2], V[3], TD_ROW3(Io[1], Io[3], Io[4], V[0], V[1], V[2])));
    out[2] = TD_NMADD(h[1], V[3], TD_MADD(h[0], V[4], TD_ROW3(Io[2], Io[4], Io[5], V[0], V[1], V[2])));
    out[3] = TD_MSUB(m, V[3], TD_MSUB(h[1], V[2], h[2] * V[1]));
    out[4] = TD_MSUB(m, V[4], TD_MSUB(h[2], V[0], h[0] * V[2]));
    out[5] = TD_MSUB(m, V[5], TD_MSUB(h[0], V[1], h[1] * V[0]));
}

static inline void TD_PR(rigid_world_inertia)(const T_* R, const T_* r, const double* inr,
                                              T_* Ic)
{
    const double m = inr[0];
    const double* Th = &inr[4];
    T_ c[3], P[9], cc;
    TD_PR(rot_vec_cx)(R, &inr[1], c);
    c[0] += r[0]; c[1] += r[1]; c[2] += r[2];
    for (int k = 0; k < 3; k++) {            /* P = R Θ_c (se3.pxd rot_mul) */
        P[3 * k] = TD_ROW3(R[3 * k], R[3 * k + 1], R[3 * k + 2], Th[0], Th[3], Th[6]);
        P[3 * k + 1] = TD_ROW3(R[3 * k], R[3 * k + 1], R[3 * k + 2], Th[1], Th[4], Th[7]);
        P[3 * k + 2] = TD_ROW3(R[3 * k], R[3 * k + 1], R[3 * k + 2], Th[2], Th[5], Th[8]);
    }
    cc = TD_PR(dot3)(c, c);
    Ic[0] = TD_SPLAT(m);
    Ic[1] = m * c[0]; Ic[2] = m * c[1]; Ic[3] = m * c[2];
    Ic[4] = TD_MADD(m, TD_NMADD(c[0], c[0], cc), TD_PR(dot3)(&P[0], &R[0]));
    Ic[5] = TD_NMADD(m * c[0], c[1], TD_PR(dot3)(&P[0], &R[3]));
    Ic[6] = TD_NMADD(m * c[0], c[2], TD_PR(dot3)(&P[0], &R[6]));
    Ic[7] = TD_MADD(m, TD_NMADD(c[1], c[1], cc), TD_PR(dot3)(&P[3], &R[3]));
    Ic[8] = TD_NMADD(m * c[1], c[2], TD_PR(dot3)(&P[3], &R[6]));
    Ic[9] = TD_MADD(m, TD_NMADD(c[2], c[2], cc), TD_PR(dot3)(&P[6], &R[6]));
}

static inline void TD_PR(add_gyroscopic)(const T_* V, const T_* h, T_* out)
{
    T_ t[3];
    TD_PR(cross)(V, h, t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
    TD_PR(cross)(&V[3], &h[3], t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
    TD_PR(cross)(V, &h[3], t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}


/* (R, p) = (R1, p1)(R2, p2) */
static inline void TD_PR(pose_mul)(const T_* R1, const T_* p1, const T_* R2, const T_* p2,
                                   T_* R, T_* p)
{
    for (int r = 0; r < 3; r++) {
        R[3 * r + 0] = TD_ROW3(R1[3 * r], R1[3 * r + 1], R1[3 * r + 2], R2[0], R2[3], R2[6]);
        R[3 * r + 1] = TD_ROW3(R1[3 * r], R1[3 * r + 1], R1[3 * r + 2], R2[1], R2[4], R2[7]);
        R[3 * r + 2] = TD_ROW3(R1[3 * r], R1[3 * r + 1], R1[3 * r + 2], R2[2], R2[5], R2[8]);
    }
    TD_PR(rot_vec)(R1, p2, p);
    p[0] += p1[0]; p[1] += p1[1]; p[2] += p1[2];
}

/* out = Ad_{(R,p)} V = (Rω, p × Rω + Rv); with a constant (model) V (_cV) */
#define TD_TWIST_AD(ROT, R, p, V, out) do {                    \
        T_ t_[3];                                             \
        ROT(R, V, out);                                       \
        ROT(R, &(V)[3], &(out)[3]);                           \
        TD_PR(cross)(p, out, t_);                             \
        (out)[3] += t_[0]; (out)[4] += t_[1]; (out)[5] += t_[2]; \
    } while (0)
static inline void TD_PR(twist_Ad_cV)(const T_* R, const T_* p, const double* V, T_* out)
{
    TD_TWIST_AD(TD_PR(rot_vec_cx), R, p, V, out);
}
static inline void TD_PR(twist_Ad)(const T_* R, const T_* p, const T_* V, T_* out)
{
    TD_TWIST_AD(TD_PR(rot_vec), R, p, V, out);
}
#undef TD_TWIST_AD
#undef TD_ROW3
