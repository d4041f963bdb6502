# The mass matrix factored along the tree, M = Lᵀ L, and solves with the factor
# (Featherstone, Rigid Body Dynamics Algorithms, 2008, §6.5): with the freedoms in
# topological order, L_kj ≠ 0 only for j = k or j an ancestor freedom of k (the
# dof_parent chain), so factoring costs Σ depth² instead of nv³/6 and a solve
# Σ depth (used by the constrained dynamics, loops.pxi).  The factor keeps the
# reciprocals 1/L_kk on its diagonal, so that the solves multiply where they
# would divide (a division in a triangular solve's dependency chain costs a
# dozen cycles or more).

cdef enum:
    LTL_PATH = 256      # ancestor chains up to this long are walked once per freedom


cdef bint _ltl(double* M, int n, const int* lam) noexcept nogil:
    """M (n, n) row-major = Lᵀ L in place (L's off-diagonal entries in the lower
    triangle along the ancestor chains, 1/L_kk on the diagonal); False unless
    positive definite.  The ancestors of freedom k are listed once (path), so
    that the rank-one update of the chain's triangle, M_ij −= L_ki L_kj for i on
    the chain and j = i or an ancestor of i, reads indices from the list instead
    of chasing lam for every entry (the same products and differences, entry by
    entry, as the walk along lam)."""
    cdef int k, i, j, b, c, depth
    cdef double a, lki
    cdef int path[LTL_PATH]
    cdef double* Lk
    cdef double* Mi
    for k in range(n - 1, -1, -1):
        Lk = &M[k * n]
        if not Lk[k] > 0.0:
            return False
        a = 1.0 / sqrt(Lk[k])
        Lk[k] = a
        depth = 0
        i = lam[k]
        while i >= 0:
            Lk[i] *= a
            if depth < LTL_PATH:
                path[depth] = i
            depth += 1
            i = lam[i]
        if depth <= LTL_PATH:
            for b in range(depth):
                i = path[b]
                lki = Lk[i]
                Mi = &M[i * n]
                for c in range(b, depth):
                    j = path[c]
                    Mi[j] -= lki * Lk[j]
            continue
        i = lam[k]                          # deeper chains: along lam
        while i >= 0:
            j = i
            while j >= 0:
                M[i * n + j] -= Lk[i] * Lk[j]
                j = lam[j]
            i = lam[i]
    return True


cdef inline void _solve_Lt_tree(const double* L, int n, const int* lam,
                                double* x) noexcept nogil:
    """x = L⁻ᵀ x (L from _ltl): _solve_Lt_tree_cols with one right-hand side (the same
    operations, without the loops over the columns)."""
    cdef int k, i
    cdef double l, xk
    for k in range(n - 1, -1, -1):
        xk = x[k] * L[k * n + k]
        x[k] = xk
        i = lam[k]
        while i >= 0:
            l = L[k * n + i]
            if l != 0.0:
                x[i] -= l * xk
            i = lam[i]


cdef void _solve_L_tree(const double* L, int n, const int* lam, double* x) noexcept nogil:
    """x = L⁻¹ x (L from _ltl)."""
    cdef int k, i
    cdef double s
    for k in range(n):
        s = x[k]
        i = lam[k]
        while i >= 0:
            s -= L[k * n + i] * x[i]
            i = lam[i]
        x[k] = s * L[k * n + k]


cdef void _solve_Lt_tree_cols(const double* L, int n, const int* lam, double* X,
                              int p) noexcept nogil:
    """X = L⁻ᵀ X for X (n, p) row-major: p right-hand sides in one pass along the
    ancestor chains (contiguous inner loops over the columns)."""
    cdef int k, i, c
    cdef double a, l
    cdef double* Xk
    cdef double* Xi
    for k in range(n - 1, -1, -1):
        Xk = &X[k * p]
        a = L[k * n + k]
        for c in range(p):
            Xk[c] *= a
        i = lam[k]
        while i >= 0:
            l = L[k * n + i]
            if l != 0.0:
                Xi = &X[i * p]
                for c in range(p):
                    Xi[c] -= l * Xk[c]
            i = lam[i]
