/* The products of se3.pxd, element-generic (lanes.h): the same expressions, for
   one state or lanes of states. */

static inline void TD_FN(cross)(const T_* a, const T_* b, T_* c)
{
    c[0] = a[1] * b[2] - a[2] * b[1];
    c[1] = a[2] * b[0] - a[0] * b[2];
    c[2] = a[0] * b[1] - a[1] * b[0];
}

static inline T_ TD_FN(dot3)(const T_* a, const T_* b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

static inline T_ TD_FN(dot6)(const T_* a, const T_* b)
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5];
}

/* y = R x; with a constant (model) R (_cR) or x (_cx) */
#define TD_ROT_VEC(R, x, y) do {                                  \
        (y)[0] = (R)[0] * (x)[0] + (R)[1] * (x)[1] + (R)[2] * (x)[2]; \
        (y)[1] = (R)[3] * (x)[0] + (R)[4] * (x)[1] + (R)[5] * (x)[2]; \
        (y)[2] = (R)[6] * (x)[0] + (R)[7] * (x)[1] + (R)[8] * (x)[2]; \
    } while (0)
static inline void TD_FN(rot_vec)(const T_* R, const T_* x, T_* y) { TD_ROT_VEC(R, x, y); }
static inline void TD_FN(rot_vec_cR)(const double* R, const T_* x, T_* y) { TD_ROT_VEC(R, x, y); }
static inline void TD_FN(rot_vec_cx)(const T_* R, const double* x, T_* y) { TD_ROT_VEC(R, x, y); }
#undef TD_ROT_VEC

static inline void TD_FN(rotT_vec)(const T_* R, const T_* x, T_* y)
{
    y[0] = R[0] * x[0] + R[3] * x[1] + R[6] * x[2];
    y[1] = R[1] * x[0] + R[4] * x[1] + R[7] * x[2];
    y[2] = R[2] * x[0] + R[5] * x[1] + R[8] * x[2];
}

static inline void TD_FN(twist_bracket)(const T_* x, const T_* y, T_* out)
{
    T_ t[3];
    TD_FN(cross)(x, y, out);
    TD_FN(cross)(x, &y[3], &out[3]);
    TD_FN(cross)(&x[3], y, t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}

static inline void TD_FN(subspace_times)(int k, const T_* S, const T_* x, T_* out)
{
    for (int n = 0; n < 6; n++)
        out[n] = TD_SPLAT(0.0);
    for (int c = 0; c < k; c++)
        for (int n = 0; n < 6; n++)
            out[n] += S[6 * c + n] * x[c];
}

static inline void TD_FN(com_wrench)(double m, const T_* R, const double* Thc, const T_* rho,
                                     const T_* w, const T_* al, const T_* acc, T_* out)
{
    T_ wb[3], ab[3], hb[3], nb[3], t[3];
    TD_FN(rotT_vec)(R, w, wb);
    TD_FN(rotT_vec)(R, al, ab);
    TD_FN(rot_vec_cR)(Thc, wb, hb);
    TD_FN(cross)(wb, hb, nb);
    TD_FN(rot_vec_cR)(Thc, ab, hb);
    nb[0] += hb[0]; nb[1] += hb[1]; nb[2] += hb[2];
    TD_FN(rot_vec)(R, nb, out);
    out[3] = m * acc[0]; out[4] = m * acc[1]; out[5] = m * acc[2];
    TD_FN(cross)(rho, &out[3], t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
}

/* Mˢ V̇ − ad_Vᵀ Mˢ V of body i (pose C, inertia inr = model.inert row, twist V and
   acceleration A in frame s) as Newton–Euler about its COM c = r + R d:
   ċ = v + ω × c, c̈ = v̇ + ω̇ × c + ω × ċ */
static inline void TD_FN(body_wrench)(const T_* C, const double* inr, const T_* V,
                                      const T_* A, T_* F)
{
    T_ cw[3], u[3], acc[3];
    TD_FN(rot_vec_cx)(C, &inr[1], cw);
    cw[0] += C[9]; cw[1] += C[10]; cw[2] += C[11];
    TD_FN(cross)(V, cw, u);
    u[0] += V[3]; u[1] += V[4]; u[2] += V[5];
    TD_FN(cross)(V, u, acc);
    TD_FN(cross)(A, cw, u);
    for (int n = 0; n < 3; n++)
        acc[n] += u[n] + A[3 + n];
    TD_FN(com_wrench)(inr[0], C, &inr[4], cw, V, A, acc, F);
}

static inline void TD_FN(rigid_apply_packed)(const T_* Ic, const T_* V, T_* out)
{
    const T_* h = &Ic[1];
    const T_* Io = &Ic[4];   /* (not "I": complex.h's macro) */
    const T_ m = Ic[0];
    out[0] = Io[0] * V[0] + Io[1] * V[1] + Io[2] * V[2] + h[1] * V[5] - h[2] * V[4];
    out[1] = Io[1] * V[0] + Io[3] * V[1] + Io[4] * V[2] + h[2] * V[3] - h[0] * V[5];
    out[2] = Io[2] * V[0] + Io[4] * V[1] + Io[5] * V[2] + h[0] * V[4] - h[1] * V[3];
    out[3] = m * V[3] - (h[1] * V[2] - h[2] * V[1]);
    out[4] = m * V[4] - (h[2] * V[0] - h[0] * V[2]);
    out[5] = m * V[5] - (h[0] * V[1] - h[1] * V[0]);
}

static inline void TD_FN(rigid_world_inertia)(const T_* R, const T_* r, const double* inr,
                                              T_* Ic)
{
    const double m = inr[0];
    const double* Th = &inr[4];
    T_ c[3], P[9], cc;
    TD_FN(rot_vec_cx)(R, &inr[1], c);
    c[0] += r[0]; c[1] += r[1]; c[2] += r[2];
    for (int k = 0; k < 3; k++) {            /* P = R Θ_c (se3.pxd rot_mul) */
        P[3 * k] = R[3 * k] * Th[0] + R[3 * k + 1] * Th[3] + R[3 * k + 2] * Th[6];
        P[3 * k + 1] = R[3 * k] * Th[1] + R[3 * k + 1] * Th[4] + R[3 * k + 2] * Th[7];
        P[3 * k + 2] = R[3 * k] * Th[2] + R[3 * k + 1] * Th[5] + R[3 * k + 2] * Th[8];
    }
    cc = TD_FN(dot3)(c, c);
    Ic[0] = TD_SPLAT(m);
    Ic[1] = m * c[0]; Ic[2] = m * c[1]; Ic[3] = m * c[2];
    Ic[4] = P[0] * R[0] + P[1] * R[1] + P[2] * R[2] + m * (cc - c[0] * c[0]);
    Ic[5] = P[0] * R[3] + P[1] * R[4] + P[2] * R[5] - m * c[0] * c[1];
    Ic[6] = P[0] * R[6] + P[1] * R[7] + P[2] * R[8] - m * c[0] * c[2];
    Ic[7] = P[3] * R[3] + P[4] * R[4] + P[5] * R[5] + m * (cc - c[1] * c[1]);
    Ic[8] = P[3] * R[6] + P[4] * R[7] + P[5] * R[8] - m * c[1] * c[2];
    Ic[9] = P[6] * R[6] + P[7] * R[7] + P[8] * R[8] + m * (cc - c[2] * c[2]);
}

static inline void TD_FN(add_gyroscopic)(const T_* V, const T_* h, T_* out)
{
    T_ t[3];
    TD_FN(cross)(V, h, t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
    TD_FN(cross)(&V[3], &h[3], t);
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2];
    TD_FN(cross)(V, &h[3], t);
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2];
}


/* (R, p) = (R1, p1)(R2, p2) */
static inline void TD_FN(pose_mul)(const T_* R1, const T_* p1, const T_* R2, const T_* p2,
                                   T_* R, T_* p)
{
    for (int r = 0; r < 3; r++) {
        R[3 * r + 0] = R1[3 * r] * R2[0] + R1[3 * r + 1] * R2[3] + R1[3 * r + 2] * R2[6];
        R[3 * r + 1] = R1[3 * r] * R2[1] + R1[3 * r + 1] * R2[4] + R1[3 * r + 2] * R2[7];
        R[3 * r + 2] = R1[3 * r] * R2[2] + R1[3 * r + 1] * R2[5] + R1[3 * r + 2] * R2[8];
    }
    TD_FN(rot_vec)(R1, p2, p);
    p[0] += p1[0]; p[1] += p1[1]; p[2] += p1[2];
}

/* out = Ad_{(R,p)} V = (Rω, p × Rω + Rv); with a constant (model) V (_cV) */
#define TD_TWIST_AD(ROT, R, p, V, out) do {                    \
        T_ t_[3];                                             \
        ROT(R, V, out);                                       \
        ROT(R, &(V)[3], &(out)[3]);                           \
        TD_FN(cross)(p, out, t_);                             \
        (out)[3] += t_[0]; (out)[4] += t_[1]; (out)[5] += t_[2]; \
    } while (0)
static inline void TD_FN(twist_Ad_cV)(const T_* R, const T_* p, const double* V, T_* out)
{
    TD_TWIST_AD(TD_FN(rot_vec_cx), R, p, V, out);
}
static inline void TD_FN(twist_Ad)(const T_* R, const T_* p, const T_* V, T_* out)
{
    TD_TWIST_AD(TD_FN(rot_vec), R, p, V, out);
}
#undef TD_TWIST_AD
