# cython: language_level=3
"""Inline SE(3) primitives for the treedyn kernels.

Conventions (docs/conventions.md): a rotation is 9 doubles, row-major; a
position 3 doubles; a screw 6 doubles (angular first, (w, v)).  A pose (R, p)
maps body coordinates to the parent: x_parent = R x_body + p.  Quaternions are
scalar first (w, x, y, z).  No allocation, no Python objects: all functions are
``nogil`` and write into caller-owned buffers (outputs must not alias inputs
unless stated).
"""
from libc.math cimport sin, cos, sqrt, fabs, atan2

cdef extern from "compat.h" nogil:
    void sincos "td_sincos"(double x, double* s, double* c)   # sin and cos in one call
    unsigned long long td_bits_above(const double* x, long n, unsigned long long lim,
                                     unsigned long long acc)
    unsigned long long TD_BITS_DBL_MAX
    unsigned long long TD_BITS_1E90


cdef inline void cross_add_axis(int k, double s, const double* x, double* out) noexcept nogil:
    """out += s (x × e_k) for the unit axis e_k, k = 0, 1, 2."""
    if k == 0:
        out[1] += s * x[2]; out[2] -= s * x[1]
    elif k == 1:
        out[0] -= s * x[2]; out[2] += s * x[0]
    else:
        out[0] += s * x[1]; out[1] -= s * x[0]

cdef inline void rot_identity(double* R) noexcept nogil:
    R[0] = 1.0; R[1] = 0.0; R[2] = 0.0
    R[3] = 0.0; R[4] = 1.0; R[5] = 0.0
    R[6] = 0.0; R[7] = 0.0; R[8] = 1.0

cdef inline void rot_mul(const double* A, const double* B, double* C) noexcept nogil:
    """C = A B (3x3, row-major)."""
    cdef int r
    for r in range(3):
        C[3*r + 0] = A[3*r] * B[0] + A[3*r + 1] * B[3] + A[3*r + 2] * B[6]
        C[3*r + 1] = A[3*r] * B[1] + A[3*r + 1] * B[4] + A[3*r + 2] * B[7]
        C[3*r + 2] = A[3*r] * B[2] + A[3*r + 1] * B[5] + A[3*r + 2] * B[8]

cdef inline void rot_vec(const double* R, const double* x, double* y) noexcept nogil:
    """y = R x."""
    y[0] = R[0] * x[0] + R[1] * x[1] + R[2] * x[2]
    y[1] = R[3] * x[0] + R[4] * x[1] + R[5] * x[2]
    y[2] = R[6] * x[0] + R[7] * x[1] + R[8] * x[2]

cdef inline void rotT_vec(const double* R, const double* x, double* y) noexcept nogil:
    """y = R^T x."""
    y[0] = R[0] * x[0] + R[3] * x[1] + R[6] * x[2]
    y[1] = R[1] * x[0] + R[4] * x[1] + R[7] * x[2]
    y[2] = R[2] * x[0] + R[5] * x[1] + R[8] * x[2]

cdef inline void cross(const double* a, const double* b, double* c) noexcept nogil:
    """c = a x b (c must not alias a or b)."""
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]

cdef inline double dot3(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]

cdef inline void pose_mul(const double* R1, const double* p1,
                          const double* R2, const double* p2,
                          double* R, double* p) noexcept nogil:
    """(R, p) = (R1, p1)(R2, p2): R = R1 R2, p = R1 p2 + p1."""
    rot_mul(R1, R2, R)
    rot_vec(R1, p2, p)
    p[0] += p1[0]; p[1] += p1[1]; p[2] += p1[2]

cdef inline void rot_axis_sc(const double* e, double s, double c, double* R) noexcept nogil:
    """Rodrigues' formula for a unit axis e, given s = sin t and c = cos t:
    R = I + s ê + (1 - c) ê²."""
    cdef double x = e[0], y = e[1], z = e[2]
    c = 1.0 - c
    R[0] = 1.0 - c * (y * y + z * z)
    R[1] = -s * z + c * x * y
    R[2] = s * y + c * x * z
    R[3] = s * z + c * x * y
    R[4] = 1.0 - c * (x * x + z * z)
    R[5] = -s * x + c * y * z
    R[6] = -s * y + c * x * z
    R[7] = s * x + c * y * z
    R[8] = 1.0 - c * (x * x + y * y)

cdef inline void rot_axis_angle(const double* e, double t, double* R) noexcept nogil:
    """Rodrigues' formula for a unit axis e: R = I + sin t ê + (1 - cos t) ê²."""
    cdef double s, c
    sincos(t, &s, &c)
    rot_axis_sc(e, s, c, R)

cdef inline void screw_exp(const double* X, double t, double* R, double* p) noexcept nogil:
    """exp(X t) for a unit screw X = (e, v): |e| = 1 (revolute, helical) or e = 0
    (prismatic, |v| = 1).  p = (I - R)(e x v) + e (e.v) t  (Müller 2018, eq. 9)."""
    cdef double s, c
    if X[0] == 0.0 and X[1] == 0.0 and X[2] == 0.0:
        rot_identity(R)
        p[0] = X[3] * t; p[1] = X[4] * t; p[2] = X[5] * t
        return
    sincos(t, &s, &c)
    screw_exp_sc(X, t, s, c, R, p)

cdef inline void screw_exp_sc(const double* X, double t, double s, double c, double* R,
                              double* p) noexcept nogil:
    """screw_exp of a screw with |e| = 1, given s = sin t and c = cos t."""
    cdef double exv[3]
    cdef double ev
    rot_axis_sc(X, s, c, R)
    cross(X, &X[3], exv)
    ev = dot3(X, &X[3]) * t
    rot_vec(R, exv, p)
    p[0] = exv[0] - p[0] + X[0] * ev
    p[1] = exv[1] - p[1] + X[1] * ev
    p[2] = exv[2] - p[2] + X[2] * ev

cdef inline double quat_to_rot(const double* Q, double* R) noexcept nogil:
    """Rotation of the quaternion Q = (w, x, y, z); returns |Q|^2.  Uses s = 2/|Q|^2,
    so R is orthogonal for any non-zero Q (the norm itself is checked by the caller)."""
    cdef double w = Q[0], x = Q[1], y = Q[2], z = Q[3]
    cdef double n2 = w * w + x * x + y * y + z * z
    cdef double s
    if n2 == 0.0:
        rot_identity(R)
        return n2
    s = 2.0 / n2
    R[0] = 1.0 - s * (y * y + z * z)
    R[1] = s * (x * y - w * z)
    R[2] = s * (x * z + w * y)
    R[3] = s * (x * y + w * z)
    R[4] = 1.0 - s * (x * x + z * z)
    R[5] = s * (y * z - w * x)
    R[6] = s * (x * z - w * y)
    R[7] = s * (y * z + w * x)
    R[8] = 1.0 - s * (x * x + y * y)
    return n2


# ---------------------------------------------------------------- twists and wrenches
cdef inline void twist_bracket(const double* x, const double* y, double* out) noexcept nogil:
    """out = ad_x y = (ωx × ωy, ωx × vy + vx × ωy)  (docs/conventions.md, ad)."""
    cdef double t[3]
    cross(x, y, out)
    cross(x, &y[3], &out[3])
    cross(&x[3], y, t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]


cdef inline void twist_Ad_inv(const double* R, const double* p, const double* V,
                              double* out) noexcept nogil:
    """out = Ad_{(R,p)⁻¹} V = (Rᵀω, Rᵀ(v − p × ω))."""
    cdef double t[3]
    cross(p, V, t)
    t[0] = V[3] - t[0]; t[1] = V[4] - t[1]; t[2] = V[5] - t[2]
    rotT_vec(R, V, out)
    rotT_vec(R, t, &out[3])


cdef inline void twist_Ad(const double* R, const double* p, const double* V,
                          double* out) noexcept nogil:
    """out = Ad_{(R,p)} V = (Rω, p × Rω + Rv)."""
    cdef double t[3]
    rot_vec(R, V, out)
    rot_vec(R, &V[3], &out[3])
    cross(p, out, t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]


cdef inline void twist_add(double* x, const double* y) noexcept nogil:
    cdef int n
    for n in range(6):
        x[n] += y[n]


cdef inline void wrench_to_parent(const double* R, const double* p, const double* W,
                                  double* out) noexcept nogil:
    """out += Ad_{(R,p)⁻¹}ᵀ W = (R t + p × R f, R f): a child wrench in the parent frame,
    (R, p) the child pose in the parent."""
    cdef double f[3]
    cdef double t[3]
    cdef double pf[3]
    rot_vec(R, &W[3], f)
    rot_vec(R, W, t)
    cross(p, f, pf)
    out[0] += t[0] + pf[0]; out[1] += t[1] + pf[1]; out[2] += t[2] + pf[2]
    out[3] += f[0]; out[4] += f[1]; out[5] += f[2]


cdef inline void com_wrench(double m, const double* R, const double* Thc, const double* rho,
                            const double* w, const double* al, const double* acc,
                            double* out) noexcept nogil:
    """Newton–Euler wrench of one body about a point o, in world axes:
    out = (Θ α + ω × Θ ω + ρ × f, f) with f = m acc, Θ = R Θ_c Rᵀ.
    R: body orientation; Thc: rotational inertia about the COM (body axes);
    rho: COM − o (world axes); w, al: angular velocity and acceleration (world);
    acc: COM acceleration (world).  This equals Mᵒ V̇ − ad_Vᵀ Mᵒ V for the spatial
    inertia Mᵒ about o, evaluated without forming Mᵒ; Θ is applied in body axes."""
    cdef double wb[3]
    cdef double ab[3]
    cdef double hb[3]
    cdef double nb[3]
    cdef double t[3]
    rotT_vec(R, w, wb)
    rotT_vec(R, al, ab)
    rot_vec(Thc, wb, hb)
    cross(wb, hb, nb)
    rot_vec(Thc, ab, hb)
    nb[0] += hb[0]; nb[1] += hb[1]; nb[2] += hb[2]
    rot_vec(R, nb, out)
    out[3] = m * acc[0]; out[4] = m * acc[1]; out[5] = m * acc[2]
    cross(rho, &out[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]


cdef inline void rigid_apply_packed(const double* Ic, const double* V,
                                    double* out) noexcept nogil:
    """out = M V for a rigid-body inertia Ic = (m, h (3), Io packed (6): xx xy xz
    yy yz zz) about the frame origin: (Io ω + h × v, m v − h × ω)."""
    cdef const double* h = &Ic[1]
    cdef const double* I = &Ic[4]
    cdef double m = Ic[0]
    out[0] = I[0] * V[0] + I[1] * V[1] + I[2] * V[2] + h[1] * V[5] - h[2] * V[4]
    out[1] = I[1] * V[0] + I[3] * V[1] + I[4] * V[2] + h[2] * V[3] - h[0] * V[5]
    out[2] = I[2] * V[0] + I[4] * V[1] + I[5] * V[2] + h[0] * V[4] - h[1] * V[3]
    out[3] = m * V[3] - (h[1] * V[2] - h[2] * V[1])
    out[4] = m * V[4] - (h[2] * V[0] - h[0] * V[2])
    out[5] = m * V[5] - (h[0] * V[1] - h[1] * V[0])


cdef inline void rigid_world_inertia(const double* R, const double* r, const double* inr,
                                     double* Ic) noexcept nogil:
    """Ic = (m, m c, Io) about the origin of the frame in which the body's pose (R, r) is
    given (world axes in the kernels), with
    inr = (m, COM (body), Θ_COM (body), ...):  c = r + R d,
    Io = R Θ_c Rᵀ + m (|c|² 1 − c cᵀ)."""
    cdef double m = inr[0]
    cdef double c[3]
    cdef double P[9]
    cdef double cc
    cdef int a
    rot_vec(R, &inr[1], c)
    c[0] += r[0]; c[1] += r[1]; c[2] += r[2]
    rot_mul(R, &inr[4], P)            # P = R Θ_c; Io = P Rᵀ (upper triangle)
    cc = dot3(c, c)
    Ic[0] = m
    Ic[1] = m * c[0]; Ic[2] = m * c[1]; Ic[3] = m * c[2]
    Ic[4] = P[0] * R[0] + P[1] * R[1] + P[2] * R[2] + m * (cc - c[0] * c[0])
    Ic[5] = P[0] * R[3] + P[1] * R[4] + P[2] * R[5] - m * c[0] * c[1]
    Ic[6] = P[0] * R[6] + P[1] * R[7] + P[2] * R[8] - m * c[0] * c[2]
    Ic[7] = P[3] * R[3] + P[4] * R[4] + P[5] * R[5] + m * (cc - c[1] * c[1])
    Ic[8] = P[3] * R[6] + P[4] * R[7] + P[5] * R[8] - m * c[1] * c[2]
    Ic[9] = P[6] * R[6] + P[7] * R[7] + P[8] * R[8] + m * (cc - c[2] * c[2])


cdef inline double dot6(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


cdef inline void add_gyroscopic(const double* V, const double* h, double* out) noexcept nogil:
    """out += −ad_Vᵀ h = (ω × h_t + v × h_f, ω × h_f)."""
    cdef double t[3]
    cross(V, h, t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]
    cross(&V[3], &h[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]
    cross(V, &h[3], t)
    out[3] += t[0]; out[4] += t[1]; out[5] += t[2]


cdef inline void wrench_to_world(int frame, const double* R, const double* r, const double* W,
                                 double* out) noexcept nogil:
    """World (spatial) wrench about the world origin from a wrench given in frame
    0 = world, 1 = body-fixed, 2 = hybrid (about the body origin r, world axes)."""
    cdef double t[3]
    cdef int n
    if frame == 0:
        for n in range(6):
            out[n] = W[n]
        return
    if frame == 1:
        rot_vec(R, &W[3], &out[3])
        rot_vec(R, W, out)
    else:
        out[0] = W[0]; out[1] = W[1]; out[2] = W[2]
        out[3] = W[3]; out[4] = W[4]; out[5] = W[5]
    cross(r, &out[3], t)
    out[0] += t[0]; out[1] += t[1]; out[2] += t[2]


cdef inline void wrench_from_world(int frame, const double* R, const double* r, const double* W,
                                   double* out) noexcept nogil:
    """Inverse of wrench_to_world: a world wrench expressed in frame 0/1/2."""
    cdef double t[3]
    cdef int n
    if frame == 0:
        for n in range(6):
            out[n] = W[n]
        return
    cross(r, &W[3], t)
    t[0] = W[0] - t[0]; t[1] = W[1] - t[1]; t[2] = W[2] - t[2]
    if frame == 1:
        rotT_vec(R, t, out)
        rotT_vec(R, &W[3], &out[3])
    else:
        out[0] = t[0]; out[1] = t[1]; out[2] = t[2]
        out[3] = W[3]; out[4] = W[4]; out[5] = W[5]



# ---------------------------------------------------------------- exp/log coefficients
# The small-angle series of the kernels, in one place (Taylor series of the closed
# forms; e.g. DLMF 4.19 for sin/cos).  φ = |x|.
#   al(φ) = sin φ / φ                  a(φ) = (1 − cos φ) / φ²
#   b(φ)  = (φ − sin φ) / φ³           d(φ) = (1 − α/β) / φ², β = 2a
#   ap(φ) = a′(φ)/φ                    bp(φ) = b′(φ)/φ

cdef inline void so3_coeffs(double phi, double* al, double* a, double* b,
                            double* d) noexcept nogil:
    cdef double p2 = phi * phi, s, c
    if phi < 1e-2:
        al[0] = 1.0 - p2 / 6.0 * (1.0 - p2 / 20.0 * (1.0 - p2 / 42.0))
        a[0] = 0.5 - p2 / 24.0 * (1.0 - p2 / 30.0 * (1.0 - p2 / 56.0))
        b[0] = 1.0 / 6.0 - p2 / 120.0 * (1.0 - p2 / 42.0 * (1.0 - p2 / 72.0))
        d[0] = 1.0 / 12.0 + p2 / 720.0 + p2 * p2 / 30240.0 + p2 * p2 * p2 / 1209600.0
        return
    sincos(phi, &s, &c)
    al[0] = s / phi
    a[0] = (1.0 - c) / p2
    b[0] = (phi - s) / (p2 * phi)
    d[0] = (1.0 - al[0] / (2.0 * a[0])) / p2


cdef inline void so3_dcoeffs(double phi, double* ap, double* bp) noexcept nogil:
    cdef double p2 = phi * phi, s, c
    if phi < 0.1:
        ap[0] = -1.0 / 12.0 + p2 / 180.0 - p2 * p2 / 6720.0 + p2 * p2 * p2 / 453600.0
        bp[0] = -1.0 / 60.0 + p2 / 1260.0 - p2 * p2 / 60480.0 + p2 * p2 * p2 / 4989600.0
        return
    sincos(phi, &s, &c)
    ap[0] = (phi * s - 2.0 + 2.0 * c) / (p2 * p2)
    bp[0] = (1.0 - c) / (p2 * p2) - 3.0 * (phi - s) / (p2 * p2 * phi)


cdef inline void so3_exp_vec(const double* x, double* R) noexcept nogil:
    """R = exp(x̂) = I + α x̂ + a x̂²·… (Rodrigues, any |x|)."""
    cdef double al, a, b, d
    cdef double phi = sqrt(dot3(x, x))
    so3_coeffs(phi, &al, &a, &b, &d)
    R[0] = 1.0 - a * (x[1] * x[1] + x[2] * x[2])
    R[4] = 1.0 - a * (x[0] * x[0] + x[2] * x[2])
    R[8] = 1.0 - a * (x[0] * x[0] + x[1] * x[1])
    R[1] = -al * x[2] + a * x[0] * x[1]
    R[3] = al * x[2] + a * x[0] * x[1]
    R[2] = al * x[1] + a * x[0] * x[2]
    R[6] = -al * x[1] + a * x[0] * x[2]
    R[5] = -al * x[0] + a * x[1] * x[2]
    R[7] = al * x[0] + a * x[1] * x[2]


cdef inline void so3_left_jac(const double* x, const double* y, int inverse,
                              double* out) noexcept nogil:
    """out = dexp_x y = y + a x×y + b x×(x×y), or dexp_x⁻¹ y = y − ½ x×y + d x×(x×y)
    (right-trivialized differential = left Jacobian; docs/conventions.md)."""
    cdef double al, a, b, d
    cdef double t1[3]
    cdef double t2[3]
    cdef int n
    so3_coeffs(sqrt(dot3(x, x)), &al, &a, &b, &d)
    cross(x, y, t1)
    cross(x, t1, t2)
    for n in range(3):
        if inverse:
            out[n] = y[n] - 0.5 * t1[n] + d * t2[n]
        else:
            out[n] = y[n] + a * t1[n] + b * t2[n]


cdef inline void se3_dexp_Q(const double* x, const double* u, const double* w,
                            double* out) noexcept nogil:
    """out = Q(x, u) w, the lower-left block of the SE(3) dexp at X = (x, u):
    Q = a û + b (x̂û + ûx̂) + (x·u)(a′/φ x̂ + b′/φ x̂²)."""
    cdef double al, a, b, d, ap, bp, xu
    cdef double phi = sqrt(dot3(x, x))
    cdef double t1[3]
    cdef double t2[3]
    cdef double t3[3]
    cdef int n
    so3_coeffs(phi, &al, &a, &b, &d)
    so3_dcoeffs(phi, &ap, &bp)
    xu = dot3(x, u)
    cross(u, w, t1)            # û w
    cross(x, t1, t2)           # x̂ û w
    for n in range(3):
        out[n] = a * t1[n] + b * t2[n]
    cross(x, w, t1)            # x̂ w
    cross(u, t1, t2)           # û x̂ w
    cross(x, t1, t3)           # x̂² w
    for n in range(3):
        out[n] += b * t2[n] + xu * (ap * t1[n] + bp * t3[n])


cdef inline void quat_mul_c(const double* p, const double* q, double* out) noexcept nogil:
    """Quaternion product (scalar first); out must not alias p or q."""
    out[0] = p[0] * q[0] - p[1] * q[1] - p[2] * q[2] - p[3] * q[3]
    out[1] = p[0] * q[1] + q[0] * p[1] + p[2] * q[3] - p[3] * q[2]
    out[2] = p[0] * q[2] + q[0] * p[2] + p[3] * q[1] - p[1] * q[3]
    out[3] = p[0] * q[3] + q[0] * p[3] + p[1] * q[2] - p[2] * q[1]


cdef inline void quat_of_rotvec(const double* x, double* Q) noexcept nogil:
    """Unit quaternion of exp(x̂): (cos φ/2, sin(φ/2)/φ x)."""
    cdef double phi = sqrt(dot3(x, x)), s, c, k
    if phi < 1e-4:
        k = 0.5 * (1.0 - phi * phi / 24.0)
        c = 1.0 - phi * phi / 8.0 + phi * phi * phi * phi / 384.0
    else:
        sincos(0.5 * phi, &s, &c)
        k = s / phi
    Q[0] = c
    Q[1] = k * x[0]; Q[2] = k * x[1]; Q[3] = k * x[2]


cdef inline void quat_to_rotvec(const double* Q, double* x) noexcept nogil:
    """x with exp(x̂) = R(Q), |x| ≤ π (Q and −Q give the same x)."""
    cdef double w = Q[0], s, k
    cdef double sgn = 1.0 if w >= 0.0 else -1.0
    s = sqrt(Q[1] * Q[1] + Q[2] * Q[2] + Q[3] * Q[3])
    w = sgn * w
    if s < 1e-8:
        k = 2.0 / w * (1.0 - s * s / (3.0 * w * w))
    else:
        k = 2.0 * atan2(s, w) / s
    x[0] = sgn * k * Q[1]; x[1] = sgn * k * Q[2]; x[2] = sgn * k * Q[3]
