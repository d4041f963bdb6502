# The mass matrix factored along the tree, M = Lᵀ L, and solves with the factor
# (Featherstone, Rigid Body Dynamics Algorithms, 2008, §6.5): with the freedoms in
# topological order, L_kj ≠ 0 only for j = k or j an ancestor freedom of k (the
# dof_parent chain), so factoring costs Σ depth² instead of nv³/6 and a solve
# Σ depth (used by the constrained dynamics, loops.pxi).  The factor keeps the
# reciprocals 1/L_kk on its diagonal, so that the solves multiply where they
# would divide (a division in a triangular solve's dependency chain costs a
# dozen cycles or more).

cdef bint _ltl(double* M, int n, const int* lam) noexcept nogil:
    """M (n, n) row-major = Lᵀ L in place (L's off-diagonal entries in the lower
    triangle along the ancestor chains, 1/L_kk on the diagonal); False unless
    positive definite."""
    cdef int k, i, j
    cdef double a
    for k in range(n - 1, -1, -1):
        if not M[k * n + k] > 0.0:
            return False
        a = 1.0 / sqrt(M[k * n + k])
        M[k * n + k] = a
        i = lam[k]
        while i >= 0:
            M[k * n + i] *= a
            i = lam[i]
        i = lam[k]
        while i >= 0:
            j = i
            while j >= 0:
                M[i * n + j] -= M[k * n + i] * M[k * n + j]
                j = lam[j]
            i = lam[i]
    return True


cdef inline void _solve_Lt_tree(const double* L, int n, const int* lam,
                                double* x) noexcept nogil:
    """x = L⁻ᵀ x (L from _ltl): one right-hand side of _solve_Lt_tree_cols."""
    _solve_Lt_tree_cols(L, n, lam, x, 1)


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
