# Loop closures and mimic couplings as constraint rows, and constrained forward
# dynamics (docs/constraints.md).
#
# Rows: each closing joint is two frames, one on each side's body (P: parent
# side, C: child side), coincident at q = 0.  Points and directions fixed to a
# side are "moving vectors": value x, rate ẋ, second derivative at v̇ = 0 (ẍ₀)
# and the Jacobian ∂ẋ/∂v (3 × nv), from the body's world pose, world angular
# velocity ω, origin velocity ṙ and their derivatives at v̇ = 0:
#     point:      ẋ = ṙ + ω × d,  ẍ₀ = r̈₀ + α₀ × d + ω × (ω × d),  d = x − r
#     direction:  ė = ω × e,      ë₀ = α₀ × e + ω × ė
# Every row is a dot or cross product of such vectors, or a rotation error; the
# row order and formulas are those of treedyn/constraints.py, which keeps them in
# NumPy as the test oracle.
#
# Dynamics (index 1, [Müller & Terze 2013] eq. 3):
#     M v̇ + h = τ + Gᵀλ,   G v̇ = −Ġv (− Baumgarte terms)
# M by CRBA and h by RNEA, M = Lᵀ L along the tree (ltl.pxi), Y = L⁻ᵀ Gᵀ,
# K = G M⁻¹ Gᵀ = Yᵀ Y.
# A row is redundant when it lies within √rcond of the span of the others in the
# M⁻¹ metric (its pivot below rcond · K_jj).  Redundant rows make K singular:
# K = F Fᵀ by Cholesky with diagonal pivoting, redundant rows dropped (rank r), and
# λ = K⁺ c, the
# minimal-norm multipliers, as F (FᵀF)⁻² Fᵀ c.  Cost O(n + nv³ + m nv² + m³),
# dominated for small robots by the two sweeps (CRBA, RNEA) and the row kinematics.

cdef enum:
    LOOP_SPHERICAL = 0
    LOOP_REVOLUTE = 1
    LOOP_HELICAL = 2
    LOOP_PRISMATIC = 3
    LOOP_CYLINDRICAL = 4
    LOOP_UNIVERSAL = 5
    LOOP_PLANAR = 6
    LOOP_FIXED = 7
    LOOP_FREE = 8
    # cl_geo columns (one closure per row of the array)
    G_OFFP = 0       # pose of frame P in body P (12)
    G_OFFC = 12      # pose of frame C in body C (12)
    G_POINT = 24     # joint point, frame coordinates (3)
    G_AXIS = 27      # joint axis (3)
    G_U1 = 30        # u1, u2 ⟂ axis (3 + 3)
    G_U2 = 33
    G_A1 = 36        # universal axes (3 + 3), a1·a2 at q = 0
    G_A2 = 39
    G_C12 = 42
    G_PITCH = 43
    G_WIDTH = 44
    # cl_body columns (treedyn/tables.py closure_body_geometry): the same geometry in the bodies'
    # own coordinates, so that a row needs only the bodies' poses and motions
    B_PNT_P = 0      # joint point in body P, body C (3 + 3)
    B_PNT_C = 3
    B_ORG_P = 6      # origin of frame P in body P, of frame C in body C (3 + 3)
    B_ORG_C = 9
    B_AX_P = 12      # joint axis in body P, body C (3 + 3)
    B_AX_C = 15
    B_U1_P = 18      # u1, u2 in body P (3 + 3)
    B_U2_P = 21
    B_A1_P = 24      # universal axes: a1 in body P, a2 in body C (3 + 3)
    B_A2_C = 27
    B_WIDTH = 30
    CODE_MASS_NOT_PD = (1 << 30) + 1


cdef extern from *:
    """
    /* K (m, m) = Yᵀ Y for Y (n, m) row-major, both triangles: row i of K summed
       over Y's rows in order, K_ik = Σ_j y_ji y_jk (so K_ik and K_ki are the same
       products in the same order, bitwise equal).  The row length m is a
       compile-time constant for m ≤ 12 (one case each): a row's m sums stay in
       vector registers across the n rows of Y, no store and reload of K per row. */
    #define TD_GRAM_ROWS(M) \
        for (long i = 0; i < (M); i++) { \
            double acc[(M)]; \
            for (long k = 0; k < (M); k++) \
                acc[k] = 0.0; \
            for (long j = 0; j < n; j++) { \
                const double* y = Y + j * (M); \
                const double yi = y[i]; \
                for (long k = 0; k < (M); k++) \
                    acc[k] += yi * y[k]; \
            } \
            for (long k = 0; k < (M); k++) \
                K[i * (M) + k] = acc[k]; \
        }
    static inline void td_gram(long n, long m, const double* __restrict__ Y,
                               double* __restrict__ K)
    {
        switch (m) {
            case 1: TD_GRAM_ROWS(1) break;    case 2: TD_GRAM_ROWS(2) break;
            case 3: TD_GRAM_ROWS(3) break;    case 4: TD_GRAM_ROWS(4) break;
            case 5: TD_GRAM_ROWS(5) break;    case 6: TD_GRAM_ROWS(6) break;
            case 7: TD_GRAM_ROWS(7) break;    case 8: TD_GRAM_ROWS(8) break;
            case 9: TD_GRAM_ROWS(9) break;    case 10: TD_GRAM_ROWS(10) break;
            case 11: TD_GRAM_ROWS(11) break;  case 12: TD_GRAM_ROWS(12) break;
            default:
                for (long i = 0; i < m; i++)
                    for (long k = 0; k < m; k++) {
                        double s = 0.0;
                        for (long j = 0; j < n; j++)
                            s += Y[j * m + i] * Y[j * m + k];
                        K[i * m + k] = s;
                    }
        }
    }
    """
    void td_gram(long n, long m, const double* Y, double* K) noexcept nogil


cdef extern from *:
    """
    /* The metric's small dense algebra with the row count m a compile-time
       constant for m ≤ 12 (one case each, as td_gram): the short loops unroll into
       straight-line code with no loop exits to predict.  Each is the arithmetic of
       the Cython routine it replaces, in the same order (bitwise equal results). */
    #define TD_SMALL_CASES(CALL) \
        case 1: CALL(1); break;  case 2: CALL(2); break;  case 3: CALL(3); break; \
        case 4: CALL(4); break;  case 5: CALL(5); break;  case 6: CALL(6); break; \
        case 7: CALL(7); break;  case 8: CALL(8); break;  case 9: CALL(9); break; \
        case 10: CALL(10); break; case 11: CALL(11); break; case 12: CALL(12); break;

    /* _cholesky with ref and dinv given: A (n, n) = F Fᵀ in place (lower triangle),
       1/F_jj into dinv; 0 at the first pivot not above rcond · ref[j]. */
    static inline __attribute__((always_inline)) int td_chol_n(
            double* A, const long n, double rcond, const double* ref, double* dinv,
            double* z)
    {
        for (long j = 0; j < n; j++) {
            double* Aj = A + j * n;
            double s = Aj[j];
            for (long k = 0; k < j; k++)
                s -= Aj[k] * Aj[k];
            if (!(s > rcond * ref[j]))
                return 0;
            s = sqrt(s);
            const double inv = 1.0 / s;
            Aj[j] = s;
            dinv[j] = inv;
            if (z != NULL) {
                /* z = F⁻¹ z alongside: row j of F is complete once F_jj is */
                double t = z[j];
                for (long k = 0; k < j; k++)
                    t -= Aj[k] * z[k];
                z[j] = t * inv;
            }
            for (long i = j + 1; i < n; i++) {
                double* Ai = A + i * n;
                double t = Ai[j];
                for (long k = 0; k < j; k++)
                    t -= Ai[k] * Aj[k];
                Ai[j] = t * inv;
            }
        }
        return 1;
    }
    static int td_chol(double* A, long n, double rcond, const double* ref, double* dinv)
    {
        #define TD_CHOL(M) return td_chol_n(A, (M), rcond, ref, dinv, NULL)
        switch (n) {
            TD_SMALL_CASES(TD_CHOL) default: return td_chol_n(A, n, rcond, ref, dinv, NULL);
        }
        #undef TD_CHOL
    }
    /* td_chol and, on success, z = F⁻¹ z (the forward solve of td_chol_solve, the
       same operations in the same order), overlapping the factorization. */
    static int td_chol_fwd(double* A, long n, double rcond, const double* ref, double* dinv,
                           double* z)
    {
        #define TD_CHOLF(M) return td_chol_n(A, (M), rcond, ref, dinv, z)
        switch (n) {
            TD_SMALL_CASES(TD_CHOLF) default: return td_chol_n(A, n, rcond, ref, dinv, z);
        }
        #undef TD_CHOLF
    }

    /* x = F⁻¹ x then x = F⁻ᵀ x (_solve_L, _solve_Lt with dinv, row stride n). */
    static inline __attribute__((always_inline)) void td_chol_solve_n(
            const double* L, const long n, const double* dinv, double* x, const int fwd)
    {
        for (long i = 0; fwd && i < n; i++) {
            double s = x[i];
            for (long k = 0; k < i; k++)
                s -= L[i * n + k] * x[k];
            x[i] = s * dinv[i];
        }
        for (long i = n - 1; i >= 0; i--) {
            double s = x[i];
            for (long k = i + 1; k < n; k++)
                s -= L[k * n + i] * x[k];
            x[i] = s * dinv[i];
        }
    }
    static void td_chol_solve(const double* L, long n, const double* dinv, double* x)
    {
        #define TD_CS(M) td_chol_solve_n(L, (M), dinv, x, 1)
        switch (n) { TD_SMALL_CASES(TD_CS) default: td_chol_solve_n(L, n, dinv, x, 1); }
        #undef TD_CS
    }
    /* the back substitution alone (x = F⁻ᵀ x; the forward one came with td_chol_fwd) */
    static void td_chol_back(const double* L, long n, const double* dinv, double* x)
    {
        #define TD_CB(M) td_chol_solve_n(L, (M), dinv, x, 0)
        switch (n) { TD_SMALL_CASES(TD_CB) default: td_chol_solve_n(L, n, dinv, x, 0); }
        #undef TD_CB
    }

    /* Y = L⁻ᵀ Gᵀ (n, p) of the p rows nz of G (m, n): _solve_Lt_tree_cols on Y's rows
       copied from G, the same operations in the same order, but a row of Y is
       first written where it is first used (G's entries times the pivot, or minus
       the first push from a descendant), as whole rows: no narrow stores of a
       transposed copy are read back by the wide loads of the solve. */
    static inline __attribute__((always_inline)) void td_metric_y_n(
            const double* G, const int* nz, const double* L, long n, const int* lam,
            double* X, const long p)
    {
        unsigned char seen[n > 0 ? n : 1];
        for (long k = 0; k < n; k++)
            seen[k] = 0;
        for (long k = n - 1; k >= 0; k--) {
            double* Xk = X + k * p;
            const double a = L[k * n + k];
            if (seen[k]) {
                for (long c = 0; c < p; c++)
                    Xk[c] *= a;
            } else {
                double t[p > 0 ? p : 1];
                for (long c = 0; c < p; c++)
                    t[c] = G[(long)nz[c] * n + k] * a;
                for (long c = 0; c < p; c++)
                    Xk[c] = t[c];
            }
            for (long i = lam[k]; i >= 0; i = lam[i]) {
                const double l = L[k * n + i];
                if (l != 0.0) {
                    double* Xi = X + i * p;
                    if (seen[i]) {
                        for (long c = 0; c < p; c++)
                            Xi[c] -= l * Xk[c];
                    } else {
                        double t[p > 0 ? p : 1];
                        for (long c = 0; c < p; c++)
                            t[c] = G[(long)nz[c] * n + i] - l * Xk[c];
                        for (long c = 0; c < p; c++)
                            Xi[c] = t[c];
                        seen[i] = 1;
                    }
                }
            }
        }
    }
    static void td_metric_y(const double* G, const int* nz, const double* L, long n,
                            const int* lam, double* X, long p)
    {
        #define TD_MY(M) td_metric_y_n(G, nz, L, n, lam, X, (M))
        switch (p) { TD_SMALL_CASES(TD_MY) default: td_metric_y_n(G, nz, L, n, lam, X, p); }
        #undef TD_MY
    }

    /* out (nv) = Y w for Y (nv, m) row-major (each entry summed over k in order). */
    static inline __attribute__((always_inline)) void td_y_times_n(
            long nv, const long m, const double* Y, const double* w, double* out)
    {
        for (long j = 0; j < nv; j++) {
            const double* Yj = Y + j * m;
            double s = 0.0;
            for (long k = 0; k < m; k++)
                s += Yj[k] * w[k];
            out[j] = s;
        }
    }
    static void td_y_times(long nv, long m, const double* Y, const double* w, double* out)
    {
        #define TD_YT(M) td_y_times_n(nv, (M), Y, w, out)
        switch (m) { TD_SMALL_CASES(TD_YT) default: td_y_times_n(nv, m, Y, w, out); }
        #undef TD_YT
    }

    /* acc (m) = Yᵀ z for Y (nv, m) row-major (each entry summed over j in order,
       the m sums in registers). */
    static inline __attribute__((always_inline)) void td_yt_times_n(
            long nv, const long m, const double* Y, const double* z, double* acc)
    {
        double a[m > 0 ? m : 1];
        for (long t = 0; t < m; t++)
            a[t] = 0.0;
        for (long j = 0; j < nv; j++) {
            const double* Yj = Y + j * m;
            const double zj = z[j];
            for (long t = 0; t < m; t++)
                a[t] += Yj[t] * zj;
        }
        for (long t = 0; t < m; t++)
            acc[t] = a[t];
    }
    static void td_yt_times(long nv, long m, const double* Y, const double* z, double* acc)
    {
        #define TD_YTT(M) td_yt_times_n(nv, (M), Y, z, acc)
        switch (m) { TD_SMALL_CASES(TD_YTT) default: td_yt_times_n(nv, m, Y, z, acc); }
        #undef TD_YTT
    }
    """
    bint td_chol(double* A, long n, double rcond, const double* ref, double* dinv) noexcept nogil
    bint td_chol_fwd(double* A, long n, double rcond, const double* ref, double* dinv,
                     double* z) noexcept nogil
    void td_chol_solve(const double* L, long n, const double* dinv, double* x) noexcept nogil
    void td_chol_back(const double* L, long n, const double* dinv, double* x) noexcept nogil
    void td_metric_y(const double* G, const int* nz, const double* L, long n, const int* lam,
                     double* X, long p) noexcept nogil
    void td_y_times(long nv, long m, const double* Y, const double* w, double* out) noexcept nogil
    void td_yt_times(long nv, long m, const double* Y, const double* z, double* acc) noexcept nogil


cdef struct MovVec:
    double x[3]
    double xd[3]
    double xdd[3]


cdef struct Side:
    int body
    double R[9]        # the body's world pose (identity for the world)
    double r[3]
    double w[3]        # angular velocity (world)
    double rd[3]       # velocity of the body origin
    double al[3]       # angular acceleration at v̇ = 0
    double rdd[3]      # acceleration of the body origin at v̇ = 0


cdef struct Rows:
    int k              # next row
    int k0             # first row of the current closure
    double* g
    double* gam
    double* W          # per row of the closure: row wrenches w_P (6), w_C (6)


cdef inline void _cross_add(const double* a, const double* b, double s, double* c) noexcept nogil:
    """c += s (a × b)."""
    c[0] += s * (a[1] * b[2] - a[2] * b[1])
    c[1] += s * (a[2] * b[0] - a[0] * b[2])
    c[2] += s * (a[0] * b[1] - a[1] * b[0])


cdef void _side(ModelCore m, DataC* d, int body, Side* s, bint at_rest=False) noexcept nogil:
    """World pose and motion of the body (world: identity, at rest), from d.oMi, d.v,
    d.a (body motion at v̇ = 0); ``at_rest``: d.v and d.a are zero (the motion is not
    read)."""
    cdef int k
    cdef double t[3]
    cdef const double* V
    cdef const double* A
    s.body = body
    if body < 0 or at_rest:
        for k in range(3):
            s.w[k] = 0.0; s.rd[k] = 0.0; s.al[k] = 0.0; s.rdd[k] = 0.0
    if body < 0:
        for k in range(9):
            s.R[k] = 1.0 if k % 4 == 0 else 0.0
        for k in range(3):
            s.r[k] = 0.0
        return
    for k in range(9):
        s.R[k] = d.oMi[12 * body + k]
    for k in range(3):
        s.r[k] = d.oMi[12 * body + 9 + k]
    if at_rest:
        return
    V = &d.v[6 * body]
    A = &d.a[6 * body]
    rot_vec(s.R, V, s.w)
    rot_vec(s.R, &V[3], s.rd)
    rot_vec(s.R, A, s.al)
    cross(V, &V[3], t)                  # origin acceleration: R (a_v + ω × v), body frame
    t[0] += A[3]; t[1] += A[4]; t[2] += A[5]
    rot_vec(s.R, t, s.rdd)


cdef void _point(const Side* s, const double* xb, MovVec* p) noexcept nogil:
    """The point with body coordinates xb."""
    cdef double dd[3]
    cdef double t[3]
    cdef int k
    rot_vec(s.R, xb, dd)
    for k in range(3):
        p.x[k] = dd[k] + s.r[k]
        p.xd[k] = s.rd[k]
        p.xdd[k] = s.rdd[k]
    _cross_add(s.w, dd, 1.0, p.xd)
    _cross_add(s.al, dd, 1.0, p.xdd)
    cross(s.w, dd, t)
    _cross_add(s.w, t, 1.0, p.xdd)


cdef void _direction(const Side* s, const double* eb, MovVec* e) noexcept nogil:
    """The direction with body coordinates eb."""
    rot_vec(s.R, eb, e.x)
    cross(s.w, e.x, e.xd)
    cross(s.al, e.x, e.xdd)
    _cross_add(s.w, e.xd, 1.0, e.xdd)


cdef void _mv_difference(const MovVec* a, const MovVec* b, MovVec* out) noexcept nogil:
    """out = b − a."""
    cdef int k
    for k in range(3):
        out.x[k] = b.x[k] - a.x[k]
        out.xd[k] = b.xd[k] - a.xd[k]
        out.xdd[k] = b.xdd[k] - a.xdd[k]


cdef void _cross_mv(const MovVec* a, const MovVec* b, MovVec* out) noexcept nogil:
    """out = a × b."""
    cross(a.x, b.x, out.x)
    cross(a.xd, b.x, out.xd)
    _cross_add(a.x, b.xd, 1.0, out.xd)
    cross(a.xdd, b.x, out.xdd)
    _cross_add(a.xd, b.xd, 2.0, out.xdd)
    _cross_add(a.x, b.xdd, 1.0, out.xdd)


# Row wrenches.  A row's rate is ġ = Σ_j (w_P · oJ_j) v_j over the freedoms j on
# the path world → P plus Σ_j (w_C · oJ_j) v_j over the path world → C (a freedom
# on both paths gets both), oJ_j = (ω_j, v0_j) the world screw about the world
# origin (torque first, like a wrench).  For a point x moving with side S,
# ẋ = Σ (v0_j + ω_j × x), so e · ẋ = Σ (x × e, e) · oJ_j; for a direction a,
# ȧ = Σ ω_j × a, so b · ȧ = Σ (a × b, 0) · oJ_j.

cdef inline double* _row(Rows* rows, double gval, double gamval) noexcept nogil:
    """Start a row (value, Ġv term); returns its wrench pair, zeroed (NULL when no
    wrenches are wanted: rows.W NULL)."""
    cdef double* w
    cdef int n
    rows.g[rows.k] = gval
    rows.gam[rows.k] = gamval
    rows.k += 1
    if rows.W == NULL:
        return NULL
    w = &rows.W[12 * (rows.k - 1 - rows.k0)]
    for n in range(12):
        w[n] = 0.0
    return w


cdef inline double _dot_gam(const MovVec* a, const MovVec* b) noexcept nogil:
    """Ġv term of a·b: ä·b + 2 ȧ·ḃ + a·b̈ (at v̇ = 0)."""
    return dot3(a.xdd, b.x) + 2.0 * dot3(a.xd, b.xd) + dot3(a.x, b.xdd)


cdef void _emit_point_difference(Rows* rows, const MovVec* xP, const MovVec* xC,
                                 const MovVec* dl) noexcept nogil:
    """Rows dl = x_C − x_P, one per world axis e_c: w_P = −(x_P × e_c, e_c),
    w_C = (x_C × e_c, e_c)."""
    cdef int c
    cdef double* w
    for c in range(3):
        w = _row(rows, dl.x[c], dl.xdd[c])
        if w == NULL:
            continue
        # x × e_c: component a is ε_{a b c} x_b
        w[(c + 1) % 3] = -xP.x[(c + 2) % 3]
        w[(c + 2) % 3] = xP.x[(c + 1) % 3]
        w[3 + c] = -1.0
        w[6 + (c + 1) % 3] = xC.x[(c + 2) % 3]
        w[6 + (c + 2) % 3] = -xC.x[(c + 1) % 3]
        w[9 + c] = 1.0


cdef void _emit_dir_dot_difference(Rows* rows, const MovVec* u, const MovVec* xP,
                                   const MovVec* xC, const MovVec* dl) noexcept nogil:
    """Row u · dl, u a direction of P, dl = x_C − x_P: w_P = (u × dl − x_P × u, −u),
    w_C = (x_C × u, u)."""
    cdef double* w = _row(rows, dot3(u.x, dl.x), _dot_gam(u, dl))
    cdef double t[3]
    cdef int n
    if w == NULL:
        return
    cross(u.x, dl.x, w)
    cross(xP.x, u.x, t)
    cross(xC.x, u.x, &w[6])
    for n in range(3):
        w[n] -= t[n]
        w[3 + n] = -u.x[n]
        w[9 + n] = u.x[n]


cdef void _emit_dir_dot_dir(Rows* rows, const MovVec* a, const MovVec* b,
                            double shift) noexcept nogil:
    """Row a · b − shift, a a direction of P, b of C: w_P = (a × b, 0),
    w_C = (b × a, 0)."""
    cdef double* w = _row(rows, dot3(a.x, b.x) - shift, _dot_gam(a, b))
    cdef int n
    if w == NULL:
        return
    cross(a.x, b.x, w)
    for n in range(3):
        w[6 + n] = -w[n]


cdef void _emit_axis_alignment(Rows* rows, const MovVec* u, const MovVec* eP,
                               const MovVec* eC, const MovVec* c) noexcept nogil:
    """Row u · c, c = e_P × e_C, u and e_P directions of P, e_C of C:
    w_P = (u × c + e_P × (e_C × u), 0), w_C = (e_C × (u × e_P), 0)."""
    cdef double* w = _row(rows, dot3(u.x, c.x), _dot_gam(u, c))
    cdef double t[3]
    if w == NULL:
        return
    cross(eC.x, u.x, t)
    cross(eP.x, t, w)
    _cross_add(u.x, c.x, 1.0, w)
    cross(u.x, eP.x, t)
    cross(eC.x, t, &w[6])


cdef void _closure_jacobian(ModelCore m, DataC* d, const Side* P, const Side* C,
                            const double* W, int k0, int nrows, const double* xP,
                            const double* xC, double* G, int zero_rows=0) noexcept nogil:
    """Rows k0 .. k0 + nrows of G (m, nv) from the closure's row wrenches W and the
    world screws d.oJ of the freedoms on the two paths.  xP, xC not NULL: the first
    three rows are the point difference x_C − x_P (_emit_point_difference), whose
    entries are the points' velocities per unit rate, ±(v0_j + ω_j × x), one cross
    product for the three rows instead of three wrench products.  zero_rows: bit r
    set for a row k0 + r that is zero for every q (a planar loop's axis alignment,
    zero wrenches): left at zero, no products."""
    cdef int nv = m.nv, r, i, j, side, r0 = 0 if xP == NULL else 3
    cdef const double* oJ = d.oJ
    cdef const double* oj
    cdef const double* w
    cdef const double* x
    cdef double* Gk = &G[k0 * nv]
    cdef double u[3]
    memset(Gk, 0, nrows * nv * sizeof(double))
    for side in range(2):
        # side P subtracts (the sign −1 of its product: the same bits)
        i = P.body if side == 0 else C.body
        x = xP if side == 0 else xC
        while i >= 0:
            for j in range(m.voff[i], m.voff[i] + m.nvj[i]):
                oj = &oJ[6 * j]
                if r0:
                    cross(oj, x, u)
                    if side == 0:
                        for r in range(3):
                            Gk[r * nv + j] -= oj[3 + r] + u[r]
                    else:
                        for r in range(3):
                            Gk[r * nv + j] += oj[3 + r] + u[r]
                for r in range(r0, nrows):
                    if zero_rows & (1 << r):
                        continue
                    w = &W[12 * r + 6 * side]
                    Gk[r * nv + j] += dot6(w, oj)
            i = m.parent[i]


cdef void _wrench_maps(DataC* d, const Side* C, const double* W, int k0, int nrows,
                       double* D) noexcept nogil:
    """Rows k0 .. k0 + nrows of the wrench maps from the child-side row wrenches."""
    cdef int r, n
    cdef double c[3]
    cdef const double* w
    for n in range(3):
        c[n] = d.oMi[12 * C.body + 9 + n] if C.body >= 0 else 0.0
    for r in range(nrows):
        w = &W[12 * r + 6]
        cross(c, &w[3], &D[6 * (k0 + r)])
        for n in range(3):
            D[6 * (k0 + r) + n] = w[n] - D[6 * (k0 + r) + n]
            D[6 * (k0 + r) + 3 + n] = w[3 + n]


cdef void rot_log(const double* R, double* phi) noexcept nogil:
    """phi with exp(φ̂) = R, |φ| ≤ π (via the unit quaternion of R, Shepperd's
    choice of the largest of 1 + trace, 1 + 2 R_kk − trace)."""
    cdef double Q[4]
    cdef double tr = R[0] + R[4] + R[8], s
    if tr >= R[0] and tr >= R[4] and tr >= R[8]:
        s = 2.0 * sqrt(1.0 + tr)
        Q[0] = 0.25 * s
        Q[1] = (R[7] - R[5]) / s; Q[2] = (R[2] - R[6]) / s; Q[3] = (R[3] - R[1]) / s
    elif R[0] >= R[4] and R[0] >= R[8]:
        s = 2.0 * sqrt(1.0 + 2.0 * R[0] - tr)
        Q[0] = (R[7] - R[5]) / s; Q[1] = 0.25 * s
        Q[2] = (R[1] + R[3]) / s; Q[3] = (R[2] + R[6]) / s
    elif R[4] >= R[8]:
        s = 2.0 * sqrt(1.0 + 2.0 * R[4] - tr)
        Q[0] = (R[2] - R[6]) / s; Q[1] = (R[1] + R[3]) / s
        Q[2] = 0.25 * s; Q[3] = (R[5] + R[7]) / s
    else:
        s = 2.0 * sqrt(1.0 + 2.0 * R[8] - tr)
        Q[0] = (R[3] - R[1]) / s; Q[1] = (R[2] + R[6]) / s
        Q[2] = (R[5] + R[7]) / s; Q[3] = 0.25 * s
    quat_to_rotvec(Q, phi)


cdef void _relative_rotation(const double* RP, const double* RC, double* phi) noexcept nogil:
    """log(R_Pᵀ R_C) of the two frames' world rotations."""
    cdef double Rrel[9]
    cdef int a, b, k
    for a in range(3):
        for b in range(3):
            Rrel[3 * a + b] = 0.0
            for k in range(3):
                Rrel[3 * a + b] += RP[3 * k + a] * RC[3 * k + b]
    rot_log(Rrel, phi)


cdef void _orientation_rows(Rows* rows, const Side* P, const Side* C, const double* RP,
                            const double* RC) noexcept nogil:
    """log(R_Pᵀ R_C) (3 rows), R_P, R_C the frames' world rotations; rate
    R_Pᵀ(ω_C − ω_P), so row c has w_C = (R_P e_c, 0) = −w_P; Ġv term
    R_Pᵀ(α_C − α_P) − (R_Pᵀ ω_P) × R_Pᵀ(ω_C − ω_P) (exact on the manifold)."""
    cdef int c, n
    cdef double phi[3]
    cdef double dw[3]
    cdef double dwl[3]
    cdef double wPl[3]
    cdef double dal[3]
    cdef double t[3]
    cdef double* w
    _relative_rotation(RP, RC, phi)
    for c in range(3):
        dw[c] = C.w[c] - P.w[c]
        t[c] = C.al[c] - P.al[c]
    rotT_vec(RP, dw, dwl)
    rotT_vec(RP, P.w, wPl)
    rotT_vec(RP, t, dal)
    cross(wPl, dwl, t)
    for c in range(3):
        w = _row(rows, phi[c], dal[c] - t[c])
        if w == NULL:
            continue
        for n in range(3):
            w[6 + n] = RP[3 * n + c]
            w[n] = -RP[3 * n + c]


cdef int loop_rows(ModelCore m, DataC* d, double* g, double* G, double* gam,
                   double* D=NULL, bint at_rest=False) noexcept nogil:
    """Rows g (m), G (m, nv), Ġv (m) of every closure and mimic coupling from
    d.oMi, d.v, d.a (body_motion_kernel at v̇ = 0) and d.oJ (world screws).  G NULL:
    g and Ġv only (no world screws needed).  D (m, 6), if given: the wrench maps,
    per row (w_C,ang − c × w_C,lin, w_C,lin) with c the child-side body's origin, so
    that the row's rate from a twist (ω, ṙ_c) of that body alone is D·(ω, ṙ_c) and
    the closure's wrench on it is Dᵀλ (zero rows for mimic couplings).  ``at_rest``:
    d.v and d.a are zero (loop_rows_kernel without v), their rotations are skipped."""
    cdef int nv = m.nv, c, t, k, j, zero_rows
    cdef Rows rows
    cdef Side P, C
    cdef MovVec mv[8]
    cdef const double* geo
    cdef const double* bgeo
    cdef double W[72]
    cdef double RP[9]
    cdef double RC[9]
    cdef double th_acc, pitch
    cdef double phi[3]
    cdef double* w
    rows.k = 0
    rows.g = g
    rows.gam = gam
    rows.W = W if (G != NULL or D != NULL) else NULL     # row wrenches only if wanted
    for c in range(m.cl_int.shape[0]):
        t = m.cl_int[c, 0]
        geo = &m.cl_geo[c, 0]
        bgeo = &m.cl_body[c, 0]
        rows.k0 = rows.k
        if t == LOOP_FREE:
            continue
        _side(m, d, m.cl_int[c, 1], &P, at_rest)
        _side(m, d, m.cl_int[c, 2], &C, at_rest)
        if t == LOOP_PRISMATIC or t == LOOP_FIXED or t == LOOP_HELICAL:
            rot_mul(P.R, &geo[G_OFFP], RP)             # the frames' world rotations
            rot_mul(C.R, &geo[G_OFFC], RC)
        # mv[0], mv[1]: the joint point seen from P and C; mv[2]: their difference
        _point(&P, &bgeo[B_PNT_P], &mv[0])
        _point(&C, &bgeo[B_PNT_C], &mv[1])
        _mv_difference(&mv[0], &mv[1], &mv[2])
        if t == LOOP_SPHERICAL or t == LOOP_REVOLUTE or t == LOOP_UNIVERSAL:
            _emit_point_difference(&rows, &mv[0], &mv[1], &mv[2])
        zero_rows = 0
        if ((t == LOOP_REVOLUTE or t == LOOP_HELICAL or t == LOOP_CYLINDRICAL
                or t == LOOP_PLANAR) and m.cl_parallel[c]):
            zero_rows = 3 << (rows.k - rows.k0)
            _row(&rows, 0.0, 0.0)               # planar loop: e_P ∥ e_C for every q
            _row(&rows, 0.0, 0.0)
        elif (t == LOOP_REVOLUTE or t == LOOP_HELICAL or t == LOOP_CYLINDRICAL
                or t == LOOP_PLANAR):
            # axis alignment u_k · (e_P × e_C), u_k ⟂ e carried by P
            _direction(&P, &bgeo[B_AX_P], &mv[3])
            _direction(&C, &bgeo[B_AX_C], &mv[4])
            _cross_mv(&mv[3], &mv[4], &mv[5])
            _direction(&P, &bgeo[B_U1_P], &mv[6])
            _direction(&P, &bgeo[B_U2_P], &mv[7])
            _emit_axis_alignment(&rows, &mv[6], &mv[3], &mv[4], &mv[5])
            _emit_axis_alignment(&rows, &mv[7], &mv[3], &mv[4], &mv[5])
        if t == LOOP_HELICAL or t == LOOP_CYLINDRICAL or t == LOOP_PRISMATIC:
            _direction(&P, &bgeo[B_U1_P], &mv[6])
            _direction(&P, &bgeo[B_U2_P], &mv[7])
            _emit_dir_dot_difference(&rows, &mv[6], &mv[0], &mv[1], &mv[2])
            _emit_dir_dot_difference(&rows, &mv[7], &mv[0], &mv[1], &mv[2])
        if t == LOOP_PLANAR:
            _direction(&P, &bgeo[B_AX_P], &mv[3])
            _emit_dir_dot_difference(&rows, &mv[3], &mv[0], &mv[1], &mv[2])
        if t == LOOP_UNIVERSAL:
            _direction(&P, &bgeo[B_A1_P], &mv[3])
            _direction(&C, &bgeo[B_A2_C], &mv[4])
            _emit_dir_dot_dir(&rows, &mv[3], &mv[4], geo[G_C12])
        if t == LOOP_PRISMATIC or t == LOOP_FIXED:
            _orientation_rows(&rows, &P, &C, RP, RC)
        if t == LOOP_FIXED:
            _point(&P, &bgeo[B_ORG_P], &mv[0])
            _point(&C, &bgeo[B_ORG_C], &mv[1])
            _mv_difference(&mv[0], &mv[1], &mv[2])
            _emit_point_difference(&rows, &mv[0], &mv[1], &mv[2])
        if t == LOOP_HELICAL:
            # e_P·(x_C − x_P) − h θ, θ = e·log(R_Pᵀ R_C); θ̇ = e_P·(ω_C − ω_P)
            pitch = geo[G_PITCH]
            _direction(&P, &bgeo[B_AX_P], &mv[3])
            _emit_dir_dot_difference(&rows, &mv[3], &mv[0], &mv[1], &mv[2])
            k = rows.k - 1
            _relative_rotation(RP, RC, phi)
            g[k] -= pitch * dot3(phi, &geo[G_AXIS])
            th_acc = 0.0
            for j in range(3):
                th_acc += (mv[3].xd[j] * (C.w[j] - P.w[j])
                           + mv[3].x[j] * (C.al[j] - P.al[j]))
            gam[k] -= pitch * th_acc
            if rows.W != NULL:
                w = &W[12 * (k - rows.k0)]
                for j in range(3):
                    w[j] += pitch * mv[3].x[j]
                    w[6 + j] -= pitch * mv[3].x[j]
        if G != NULL and (t == LOOP_SPHERICAL or t == LOOP_REVOLUTE
                          or t == LOOP_UNIVERSAL):   # rows 0-2: the point difference
            _closure_jacobian(m, d, &P, &C, W, rows.k0, rows.k - rows.k0, mv[0].x,
                              mv[1].x, G, zero_rows)
        elif G != NULL:
            _closure_jacobian(m, d, &P, &C, W, rows.k0, rows.k - rows.k0, NULL, NULL, G,
                              zero_rows)
        if D != NULL:
            _wrench_maps(d, &C, W, rows.k0, rows.k - rows.k0, D)
    # mimic couplings: q_f − m q_l − offset, rate row e_f − m e_l
    for c in range(m.mm_int.shape[0]):
        k = rows.k
        g[k] = (d.q_loop[m.mm_int[c, 2]] - m.mm_dbl[c, 0] * d.q_loop[m.mm_int[c, 3]]
                - m.mm_dbl[c, 1])
        gam[k] = 0.0
        if G != NULL:
            for j in range(nv):
                G[k * nv + j] = 0.0
            G[k * nv + m.mm_int[c, 0]] += 1.0
            G[k * nv + m.mm_int[c, 1]] -= m.mm_dbl[c, 0]
        if D != NULL:
            for j in range(6):
                D[6 * k + j] = 0.0
        rows.k = k + 1
    return rows.k


cdef void _motion_from_rnea(ModelCore m, DataC* d, const double* g,
                            bint screws=True) noexcept nogil:
    """After rnea_body_kernel at v̇ = 0: the world poses d.oMi, the twist derivatives
    without gravity d.a = d.a_gf + (0, R_iᵀ g) (gravity entered the body RNEA as the
    base acceleration (0, −g), which reaches body i as (0, −R_iᵀ g)) and the world
    screws d.oJ — what loop_rows needs, without a second sweep."""
    cdef int i, par, n
    cdef double t[3]
    for i in range(m.nb):
        par = m.parent[i]
        world_pose(NULL if par < 0 else &d.oMi[12 * par], &d.liMi[12 * i], &d.oMi[12 * i])
        rotT_vec(&d.oMi[12 * i], g, t)
        for n in range(3):
            d.a[6 * i + n] = d.a_gf[6 * i + n]
            d.a[6 * i + 3 + n] = d.a_gf[6 * i + 3 + n] + t[n]
    if screws:
        world_screws(m, d, d.oJ)


cdef int loop_rows_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                          double* g, double* G, double* gam) noexcept nogil:
    """Constraint rows at (q, v) (v = 0 if qd is NULL): g (m), G (m, nv), Ġv (m).
    Fills d.oMi, d.v, d.a, d.S, d.oJ.  Returns 0 or i + 1 (non-unit quaternion)."""
    cdef int bad
    if qd == NULL:                                      # at rest: poses only
        bad = body_motion_kernel(m, d, q, NULL, NULL)
        memset(d.v, 0, 6 * m.nb * sizeof(double))
        memset(d.a, 0, 6 * m.nb * sizeof(double))
    else:
        bad = body_motion_kernel(m, d, q, qd, d.zero_v)
    world_screws(m, d, d.oJ)
    d.q_loop = q
    loop_rows(m, d, g, G, gam, NULL, qd == NULL)
    return bad


# ------------------------------------------------------------------ small dense algebra
cdef double _half_norm2(const double* g, int n) noexcept nogil:
    cdef double s = 0.0
    cdef int k
    for k in range(n):
        s += g[k] * g[k]
    return 0.5 * s


cdef double _max_abs(const double* g, int n) noexcept nogil:
    cdef double s = 0.0
    cdef int k
    for k in range(n):
        if fabs(g[k]) > s:
            s = fabs(g[k])
    return s


cdef bint _cholesky(double* A, int n, double rcond, const double* ref,
                    double* dinv) noexcept nogil:
    """A (n, n) symmetric, row-major = F Fᵀ in place, F lower triangular in the
    given order (left-looking: contiguous dot products over the rows), 1/F_ii into
    dinv if not NULL.  False at the first pivot F_ii² not above rcond · ref[i]
    (ref NULL: not above 0, i.e. A not positive definite).  Reads and writes only
    the diagonal and the lower triangle (the upper one still holds A afterwards)."""
    cdef int i, j, k
    cdef double s, t, inv
    cdef double* Aj
    cdef double* Ai
    for j in range(n):
        Aj = &A[j * n]
        s = Aj[j]
        for k in range(j):
            s -= Aj[k] * Aj[k]
        if not s > (rcond * ref[j] if ref != NULL else 0.0):
            return False
        s = sqrt(s)
        inv = 1.0 / s
        Aj[j] = s
        if dinv != NULL:
            dinv[j] = inv
        for i in range(j + 1, n):
            Ai = &A[i * n]
            t = Ai[j]
            for k in range(j):
                t -= Ai[k] * Aj[k]
            Ai[j] = t * inv
    return True


cdef inline void _solve_L(const double* L, int n, int ld, const double* dinv,
                          double* x) noexcept nogil:
    """x = L⁻¹ x, L (n, n) lower triangular with row stride ld; with dinv (1/L_ii)
    the solve multiplies instead of dividing (dinv NULL: divides)."""
    cdef int i, k
    cdef double s
    for i in range(n):
        s = x[i]
        for k in range(i):
            s -= L[i * ld + k] * x[k]
        x[i] = s * dinv[i] if dinv != NULL else s / L[i * ld + i]


cdef inline void _solve_Lt(const double* L, int n, int ld, const double* dinv,
                           double* x) noexcept nogil:
    """x = L⁻ᵀ x (L and dinv as for _solve_L)."""
    cdef int i, k
    cdef double s
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= L[k * ld + i] * x[k]
        x[i] = s * dinv[i] if dinv != NULL else s / L[i * ld + i]


cdef int _pivoted_cholesky(double* A, int n, double rcond, const double* ref, int* perm,
                           double* dinv) noexcept nogil:
    """A (n, n) symmetric positive semidefinite, row-major, in place: P A Pᵀ = F Fᵀ
    by Cholesky with diagonal pivoting (rows and columns swapped as LAPACK's
    dpstrf does).  Pivot: the row keeping the largest fraction of its own weight
    ref[i] (A's diagonal before factoring) outside the span of the rows already
    taken; stop when no row keeps more than rcond of it (the rule _metric_factor
    gives _cholesky, so that scaling a row changes nothing).  Reads and writes
    only the diagonal and the lower triangle (the swaps are those of the symmetric
    A, kept at entries i ≥ j).  Returns the rank r;
    F (n, r) is the lower trapezoid of A's first r columns (entries above the
    diagonal are not part of it), perm[i] the row of A moved to i, dinv[i] =
    1 / F_ii for i < r."""
    cdef int i, j, k, r, p, tmp
    cdef double best, s, f
    cdef double* Ai
    for i in range(n):
        perm[i] = i
    for r in range(n):
        p = -1
        best = rcond
        for i in range(r, n):
            if A[i * n + i] > best * ref[perm[i]]:
                best = A[i * n + i] / ref[perm[i]]
                p = i
        if p < 0:
            return r
        if p != r:
            # rows and columns r and p swapped in the lower triangle (the entry
            # (i, j) of the symmetric matrix kept at i ≥ j, as dpstrf's lower form)
            tmp = perm[r]; perm[r] = perm[p]; perm[p] = tmp
            for k in range(r):
                s = A[r * n + k]; A[r * n + k] = A[p * n + k]; A[p * n + k] = s
            s = A[r * n + r]; A[r * n + r] = A[p * n + p]; A[p * n + p] = s
            for k in range(r + 1, p):
                s = A[k * n + r]; A[k * n + r] = A[p * n + k]; A[p * n + k] = s
            for k in range(p + 1, n):
                s = A[k * n + r]; A[k * n + r] = A[k * n + p]; A[k * n + p] = s
        s = sqrt(A[r * n + r])
        A[r * n + r] = s
        s = 1.0 / s
        dinv[r] = s
        for i in range(r + 1, n):
            A[i * n + r] *= s
        for i in range(r + 1, n):                       # trailing block, lower triangle
            f = A[i * n + r]
            if f != 0.0:
                Ai = &A[i * n]
                for j in range(r + 1, i + 1):
                    Ai[j] -= f * A[j * n + r]
    return n


cdef int constrained_fd_kernel(ModelCore m, DataC* d, const double* q, const double* qd,
                               const double* tau, const double* grav, const double* fext,
                               int fframe, double k1, double k2, double rcond,
                               double* qdd, double* lam, double* gres,
                               bint joints_ready=False) noexcept nogil:
    """v̇ (nv), λ (m) and g (m) of the index-1 equations at (q, v, τ); Baumgarte
    terms −k1 G v − k2 g on the right-hand side of the rows (k1 = 2α/Δt,
    k2 = (β/Δt)²; zero for none).  λ is the minimal-norm solution; with lam NULL
    (the integrators' stages) any λ is used, as v̇ is the same for all.
    ``joints_ready``: d's joint steps are this q's (project_kernel just ran on q).
    Where the factors of this q are cached (_factors_cached), CRBA, both
    factorizations and the rows' Jacobian are skipped.  Returns 0, i + 1 for a
    non-unit quaternion, CODE_MASS_NOT_PD."""
    cdef int nv = m.nv, mr = m.n_crows, i, j, bad
    cdef double* G = d.cG
    cdef double* gam = d.cgam
    cdef double* M = d.cM
    cdef double* c = d.cb
    cdef double s
    cdef bint cached = _factors_cached(m, d, q, rcond), fused = False
    bad = rnea_body_kernel(m, d, q, qd, d.zero_v, grav, fext, fframe, qdd,   # qdd = h
                           joints_ready)
    if bad:
        return bad
    # the rows reuse RNEA's sweep; their poses and screws come from the same
    # arithmetic whether the factors are cached or not (and as in project_kernel),
    # so that a call's result never depends on what the Data held before
    _motion_from_rnea(m, d, grav, not cached)
    if not cached:
        # the factor first: the rows' arithmetic, independent of it, then fills the
        # latency of its chain of square roots and divisions
        d.cfac = False
        crba_kernel(m, d, q, M, True, True, True)       # RNEA's joint steps, rows' poses
        if not _ltl(M, nv, &m.dof_parent[0]):
            return CODE_MASS_NOT_PD
    d.q_loop = q
    loop_rows(m, d, gres, NULL if cached else G, gam)   # cached: d.cG is G at this q
    for j in range(nv):
        qdd[j] = tau[j] - qdd[j]
    _solve_Lt_tree(M, nv, &m.dof_parent[0], qdd)         # z = L⁻ᵀ (τ − h)
    if mr == 0:
        _solve_L_tree(M, nv, &m.dof_parent[0], qdd)     # v̇ = L⁻¹ z = M⁻¹ (τ − h)
        return 0
    if not cached:
        _metric_gram(m, d)
    # c = −Ġv − G v̇_u − stabilization, with G v̇_u = G L⁻¹ z = Yᵀ z (rows that are
    # not in d.cnz are zero), so that v̇ = L⁻¹ (z + Y λ) needs one solve with L
    for i in range(mr):
        c[i] = -gam[i] - k2 * gres[i]
    if k1 != 0.0:
        for i in range(mr):
            s = 0.0
            for j in range(nv):
                s += G[i * nv + j] * qd[j]
            c[i] -= k1 * s
    _metric_times_Yt(d, nv, qdd, c)
    if not cached:                      # K's factor with c's forward solve alongside
        fused = _metric_cholesky(m, d, rcond, c)
        _factors_done(m, d, q, rcond)
    _metric_solve(m, d, c, lam != NULL, False, fused, lam != NULL)
    if lam != NULL:
        for i in range(mr):
            lam[i] = c[i]
    for j in range(nv):
        qdd[j] += d.cw2[j]
    _solve_L_tree(M, nv, &m.dof_parent[0], qdd)
    return 0


cdef inline void _metric_times_Yt(DataC* d, int nv, const double* z, double* c) noexcept nogil:
    """c[nz_t] −= (Yᵀ z)_t for the rows t of Y = L⁻ᵀ Gᵀ (d.cY, nv × mz)."""
    cdef int mz = d.cmz, t
    cdef double* acc = d.cw
    td_yt_times(nv, mz, d.cY, z, acc)
    for t in range(mz):
        c[d.cnz[t]] -= acc[t]


cdef inline bint _factors_cached(ModelCore m, DataC* d, const double* q,
                                 double rcond) noexcept nogil:
    """True if d.cM, d.cY, d.cK hold the factors at exactly this q (bit for bit) and
    rcond: the first stage of a time step starts where the previous step's
    projection factored, so it skips CRBA and both factorizations."""
    # invariant: while d.cfac holds, d.cG is G at d.cfq (the two kernels that write
    # d.cG, constrained_fd_kernel and project_kernel, clear d.cfac before they do)
    cdef uint64_t a, b
    cdef int k
    if not (d.cfac and d.cfrcond == rcond):
        return False
    for k in range(m.nq):               # memcmp's answer, a word at a time, no call
        memcpy(&a, &q[k], sizeof(uint64_t))         # (the bits, without type punning)
        memcpy(&b, &d.cfq[k], sizeof(uint64_t))
        if a != b:
            return False
    return True


cdef inline void _factors_done(ModelCore m, DataC* d, const double* q,
                               double rcond) noexcept nogil:
    memcpy(d.cfq, q, m.nq * sizeof(double))
    d.cfrcond = rcond
    d.cfac = True


cdef void _metric_factor(ModelCore m, DataC* d, double rcond) noexcept nogil:
    """With G in d.cG and the tree factor M = Lᵀ L (_ltl) in d.cM: the rows of G that
    are not exactly zero (d.cnz, d.cmz of them: a planar mechanism closed by a
    spatial joint has rows that vanish identically, their multipliers are zero in
    every solution), Y = L⁻ᵀ Gᵀ of those rows (nv, mz) in d.cY, K = Yᵀ Y and its
    Cholesky factor F in d.cK, d.cperm (pivot order, positions in cnz), d.crank
    (full rank when no row lies within √rcond of the span of the rows before it in
    the M⁻¹ metric; else pivoted, the rows within √rcond of the span of those
    taken dropped: redundant rows).  _metric_gram then _metric_cholesky."""
    _metric_gram(m, d)
    _metric_cholesky(m, d, rcond, NULL)


cdef void _metric_gram(ModelCore m, DataC* d) noexcept nogil:
    """d.cnz, d.cmz, Y in d.cY and K = Yᵀ Y in d.cK (both triangles) of _metric_factor."""
    cdef int nv = m.nv, mr = m.n_crows, j, k, mz = 0
    cdef double* G = d.cG
    for k in range(mr):
        for j in range(nv):
            if G[k * nv + j] != 0.0:
                d.cnz[mz] = k
                mz += 1
                break
    d.cmz = mz
    # Y = L⁻ᵀ Gᵀ of the rows cnz (_solve_Lt_tree_cols on their transposed copy)
    td_metric_y(G, d.cnz, d.cM, nv, &m.dof_parent[0], d.cY, mz)
    td_gram(nv, mz, d.cY, d.cK)                         # K = Yᵀ Y


cdef bint _metric_cholesky(ModelCore m, DataC* d, double rcond,
                           const double* c) noexcept nogil:
    """The factor of K (d.cK from _metric_gram) as _metric_factor describes.  c (m)
    not NULL: its forward solve comes along where K has full rank, z = F⁻¹ c[cnz]
    in d.cS (the first mz entries); returns whether it did (then _metric_solve with
    ``fused`` does the back substitution only)."""
    cdef int mz = d.cmz, i, k
    cdef double* K = d.cK
    cdef bint ok
    # full rank (the common case): Cholesky in the rows' order, no pivot search and
    # no swaps, accepted when every row keeps more than rcond of its own weight K_jj
    # outside the span of the rows before it (pivot_j > rcond K_jj: the squared sine
    # of its angle to that span in the M⁻¹ metric; independent of how the rows are
    # scaled, so a gear ratio of 1000 between two rows is not taken for
    # redundancy).  Otherwise the pivoted factorization decides the rank.
    for i in range(mz):
        d.cw[i] = K[i * mz + i]
    if c != NULL:
        for i in range(mz):
            d.cS[i] = c[d.cnz[i]]
        ok = td_chol_fwd(K, mz, rcond, d.cw, d.cKd, d.cS)   # _cholesky, unrolled
    else:
        ok = td_chol(K, mz, rcond, d.cw, d.cKd)
    if ok:
        for i in range(mz):
            d.cperm[i] = i
        d.crank = mz
        return c != NULL
    for i in range(mz):                 # K back: the factorization only wrote the
        K[i * mz + i] = d.cw[i]         # diagonal and the lower triangle
        for k in range(i):
            K[i * mz + k] = K[k * mz + i]
    d.crank = _pivoted_cholesky(K, mz, rcond, d.cw, d.cperm, d.cKd)
    return False


cdef void _metric_solve(ModelCore m, DataC* d, double* c, bint minimal=True,
                        bint solve_L=True, bint fused=False,
                        bint want_c=True) noexcept nogil:
    """With the factors of _metric_factor: c ← λ and d.cw2 = M⁻¹ Gᵀ λ = L⁻¹ Y λ — the
    least change of v̇ (or v, or q) in the kinetic-energy metric that moves the rows
    by the original c.  Without ``minimal``: λ a basic solution of K λ = c (the r
    pivot rows solved exactly, the others zero: two triangular solves; for
    K = G M⁻¹ Gᵀ and c in its range every solution gives the same Gᵀ λ).  With
    ``minimal`` and redundant rows: λ = K⁺ c, the minimal-norm least-squares
    solution — c and the basic solution are both cleared of their parts in the null
    space of K, spanned by the orthonormalized (−F₁⁻ᵀ F₂ᵀ e_t, e_t) (F = [F₁; F₂]
    pivoted, F₁ r × r), which K⁺ = F (FᵀF)⁻² Fᵀ gives without squaring K's
    condition.  Without ``solve_L``: d.cw2 = Y λ (the caller solves with L).
    ``fused``: _metric_cholesky returned True for this c (full rank, F⁻¹ c in d.cS).
    Without ``want_c``: λ is not written to c (c is left undefined)."""
    cdef int nv = m.nv, mr = m.n_crows, mz = d.cmz, r = d.crank, i, k
    cdef bint ordered
    cdef const int* nz = d.cnz
    cdef const double* F = d.cK
    cdef const int* perm = d.cperm
    cdef double* w = d.cw
    cdef double* Y = d.cY
    cdef bint lsq = minimal and r < mz
    if fused:                                           # F z = w done, Fᵀ y = z
        for i in range(mz):
            w[i] = d.cS[i]
        td_chol_back(F, mz, d.cKd, w)
    else:
        for i in range(mz):
            w[i] = c[nz[perm[i]]]
    if lsq:
        _metric_null_space(d, mz, r)
        _remove_null_part(d.cS, mz, mz - r, w)
    if fused:
        pass
    elif r == mz:                                       # F z = w, Fᵀ y = z
        td_chol_solve(F, mz, d.cKd, w)
    else:                                               # F₁ z = w₁, F₁ᵀ y = z
        _solve_L(F, r, mz, d.cKd, w)
        _solve_Lt(F, r, mz, d.cKd, w)
    for i in range(r, mz):
        w[i] = 0.0
    if lsq:
        _remove_null_part(d.cS, mz, mz - r, w)
    ordered = True
    for i in range(mz):
        if perm[i] != i:
            ordered = False
    if want_c or not ordered:
        for i in range(mr):
            c[i] = 0.0
        for i in range(mz):
            c[nz[perm[i]]] = w[i]
    if not ordered:                     # w back in the rows' order (Y's columns)
        for k in range(mz):
            w[k] = c[nz[k]]
    td_y_times(nv, mz, Y, w, d.cw2)                     # M⁻¹ Gᵀ λ = L⁻¹ Y λ
    if solve_L:
        _solve_L_tree(d.cM, nv, &m.dof_parent[0], d.cw2)


cdef void _metric_null_space(DataC* d, int mz, int r) noexcept nogil:
    """An orthonormal basis of the null space of K = F Fᵀ (pivoted order) into d.cS,
    column t at d.cS[t mz]: (−F₁⁻ᵀ F₂ᵀ e_t, e_t) by Gram–Schmidt."""
    cdef const double* F = d.cK
    cdef double* N = d.cS
    cdef double* n
    cdef double s
    cdef int t, u, i, k
    for t in range(mz - r):
        n = &N[t * mz]
        for k in range(r):                              # F₁ᵀ x = F₂ᵀ e_t
            n[k] = F[(r + t) * mz + k]
        _solve_Lt(F, r, mz, d.cKd, n)
        for i in range(r):
            n[i] = -n[i]
        for i in range(r, mz):
            n[i] = 1.0 if i == r + t else 0.0
        for u in range(t):
            s = 0.0
            for i in range(mz):
                s += N[u * mz + i] * n[i]
            for i in range(mz):
                n[i] -= s * N[u * mz + i]
        s = 0.0
        for i in range(mz):
            s += n[i] * n[i]
        s = 1.0 / sqrt(s)
        for i in range(mz):
            n[i] *= s


cdef inline void _remove_null_part(const double* N, int mz, int q, double* w) noexcept nogil:
    """w ← w − N Nᵀ w for the q orthonormal columns of N (mz each)."""
    cdef int t, i
    cdef double s
    for t in range(q):
        s = 0.0
        for i in range(mz):
            s += N[t * mz + i] * w[i]
        for i in range(mz):
            w[i] -= s * N[t * mz + i]


cdef int project_kernel(ModelCore m, DataC* d, double* q, double* v, double tol,
                        int max_iter, double rcond, double* residual) noexcept nogil:
    """Project (q, v) in place onto g(q) = 0, G(q) v = 0 in the kinetic-energy metric
    (docs/constraints.md): Gauss–Newton steps q ← q ⊕ (−M⁻¹Gᵀ (G M⁻¹ Gᵀ)⁺ g) with M
    at the first iterate, until max |g| ≤ tol (at most max_iter steps), then
    v ← v − M⁻¹Gᵀ (G M⁻¹ Gᵀ)⁺ G v with M at the projected q.  residual: max |g| of
    the returned q.  Returns 0, a quaternion code or CODE_MASS_NOT_PD."""
    cdef int nv = m.nv, nq = m.nq, mr = m.n_crows, it, k, j, bad
    cdef bint factored = False, fused
    cdef double err, s
    d.cfac = False
    for it in range(max_iter + 1):
        bad = loop_rows_kernel(m, d, q, NULL, d.cg, d.cG, d.cgam)
        if bad:
            return bad
        err = _max_abs(d.cg, mr)
        residual[0] = err
        if err <= tol or it == max_iter:
            break
        if not factored:
            crba_kernel(m, d, q, d.cM, True, True, True)  # loop_rows_kernel's joint steps
            if not _ltl(d.cM, nv, &m.dof_parent[0]):
                return CODE_MASS_NOT_PD
            factored = True
        for k in range(mr):
            d.cb[k] = d.cg[k]
        _metric_factor(m, d, rcond)
        _metric_solve(m, d, d.cb, False, True, False, False)
        for j in range(nv):
            d.cw2[j] = -d.cw2[j]
        config_retract(m, q, d.cw2, LOCAL_EXP, d.cq)
        for j in range(nq):
            q[j] = d.cq[j]
    if v == NULL or mr == 0:
        return 0
    # velocity: rows and joint steps at the projected q are those of the last
    # loop_rows_kernel call; the factors stay cached for the next step's first stage
    crba_kernel(m, d, q, d.cM, True, True, True)
    if not _ltl(d.cM, nv, &m.dof_parent[0]):
        return CODE_MASS_NOT_PD
    for k in range(mr):
        s = 0.0
        for j in range(nv):
            s += d.cG[k * nv + j] * v[j]
        d.cb[k] = s
    _metric_gram(m, d)
    fused = _metric_cholesky(m, d, rcond, d.cb)
    _factors_done(m, d, q, rcond)
    _metric_solve(m, d, d.cb, False, True, fused, False)
    for j in range(nv):
        v[j] -= d.cw2[j]
    return 0


# ---------------------------------------------------------------- adapters
# (Call -> the kernel's own arguments; ModelCore._dispatch runs them)
cdef int _k_loop_rows(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out g (m), out2 G (m, nv), out3 Ġv (m) at (q, v)."""
    return loop_rows_kernel(m, d, c.q, c.v, c.out, c.out2, c.out3)


cdef int _k_constrained_fd(ModelCore m, DataC* d, const Call* c) noexcept nogil:
    """out v̇ (nv), out2 λ (m), out3 g (m) at (q, v, τ = c.a)."""
    return constrained_fd_kernel(m, d, c.q, c.v, c.a, c.g, c.fext, c.fframe, c.k1, c.k2,
                                 c.rcond, c.out, c.out2, c.out3)


# ---------------------------------------------------------------- entry
# (bound in treedyn.model.Model by one line each; Python-visible)
def _project(ModelCore self, q, v=None, double tol=1e-12, int max_iter=20):
    """Compiled projection of one state onto the constraints (project_kernel):
    Gauss–Newton steps of q in the kinetic-energy metric (at most max_iter; 0
    leaves q alone), then v (if given) onto G v = 0.  Returns (q, v or None,
    max |g(q)|); inputs are checked by the caller (unit quaternions here)."""
    cdef cnp.ndarray qa = self._states(q, self.nq, "q")
    if cnp.PyArray_NDIM(qa) != 1:
        raise InputError(f"q: expected one state of shape ({self.nq},), got {np.shape(qa)}")
    self._check_unit_quaternions(qa, "q")
    self._require_loops()
    qo = np.array(qa, dtype=np.float64)
    vo = None if v is None else np.array(self._like(qa, v, self.nv, "v"), dtype=np.float64)
    cdef double[::1] qv = qo
    cdef double[::1] vv
    cdef double* vp = NULL
    cdef double res = 0.0
    cdef int code
    cdef Data data = self._data(None)
    if vo is not None and self.nv > 0:
        vv = vo
        vp = &vv[0]
    with nogil:
        code = project_kernel(self, &data.c, &qv[0], vp, tol, max_iter, 1e-10, &res)
    self._done(data, None)
    if code:
        self._raise_code(code, -1, "projection")
    return qo, vo, res


def _loop_rows(ModelCore self, q, v=None):
    """Constraint rows (docs/constraints.md) at q (nq,) or (N, nq) and v (zero if
    None): g (…, m), G (…, m, nv), Ġv (…, m)."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._zero_or_like(qa, _ZERO if v is None else v, "v")
    cdef Call c
    memset(&c, 0, sizeof(Call))
    self._require_loops()
    cdef int mr = self.n_crows
    cdef cnp.npy_intp dims[2]
    dims[0] = mr
    dims[1] = self.nv
    g = self._output(None, qa, 1, dims)
    G = self._output(None, qa, 2, dims)
    gam = self._output(None, qa, 1, dims)
    if mr == 0:
        return g, G, gam
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.out = <double*>cnp.PyArray_DATA(g)
    c.out2 = <double*>cnp.PyArray_DATA(G)
    c.out3 = <double*>cnp.PyArray_DATA(gam)
    c.sq = self.nq
    c.sv = self.nv
    c.so = mr
    c.so2 = mr * self.nv
    c.so3 = mr
    self._dispatch(_k_loop_rows, &c, self._batch(qa), None, -1,
                   "constraints: the residual g, Jacobian G or Ġv")
    return g, G, gam


def _constrained_forward_dynamics(ModelCore self, q, v, tau, f_ext=None, gravity=None,
                                  f_ext_frame="world", double k1=0.0, double k2=0.0,
                                  double rcond=1e-10):
    """(v̇, λ, g) of the index-1 equations (loops.pxi) for one state or a batch."""
    cdef cnp.ndarray qa = _as_states(q, self.nq, "q")
    cdef cnp.ndarray va = self._like(qa, v, self.nv, "v")
    cdef cnp.ndarray ta = self._like(qa, tau, self.nv, "tau")
    cdef double gbuf[3]
    cdef Call c
    memset(&c, 0, sizeof(Call))
    self._require_loops()
    fa = self._loads(&c, qa, f_ext, gravity, f_ext_frame, gbuf)
    cdef int mr = self.n_crows
    cdef cnp.npy_intp dims[1]
    dims[0] = self.nv
    a = self._output(None, qa, 1, dims)
    dims[0] = mr
    lam = self._output(None, qa, 1, dims)
    g = self._output(None, qa, 1, dims)
    c.q = <double*>cnp.PyArray_DATA(qa)
    c.v = <double*>cnp.PyArray_DATA(va)
    c.a = <double*>cnp.PyArray_DATA(ta)
    c.out = <double*>cnp.PyArray_DATA(a)
    c.out2 = <double*>cnp.PyArray_DATA(lam) if mr else NULL
    c.out3 = <double*>cnp.PyArray_DATA(g) if mr else NULL
    c.k1 = k1
    c.k2 = k2
    c.rcond = rcond
    c.sq = self.nq
    c.sv = self.nv
    c.sa = self.nv
    c.so = self.nv
    c.so2 = mr
    c.so3 = mr
    self._dispatch(_k_constrained_fd, &c, self._batch(qa), None, -1,
                   "v̇ or λ")
    return a, lam, g
