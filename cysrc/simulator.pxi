# The compiled half of treedyn.Simulator: one state (q, v, t) stepped in place by
# step_project (integrators.pxi), the step of treedyn.simulate's _run, with the same
# stage torques (constant, plus the passive forces) and, for loops and mimic
# couplings, the same projection after every step.  Everything is validated by
# the Python half (treedyn/simulate.py) at construction and in reset; step()
# checks only the shape, dtype and finiteness of tau.

cdef class _Simulator:
    """Compiled state of :class:`treedyn.Simulator` (see there)."""
    cdef ModelCore m
    cdef Data data
    cdef int nq, nv, s, scheme, local, max_iter, cur
    cdef double h, t0, k1, k2, tol
    cdef Py_ssize_t k
    cdef bint constrained, project
    cdef double[:, ::1] A
    cdef double[::1] b, c, work, acc, tau0, rbuf
    cdef double[:, ::1] Q, V
    cdef double gbuf[3]
    cdef const double* gp
    cdef ConstTorque ct
    cdef PassiveTorque pt
    cdef StepArgs sa
    cdef _PassiveArrays pas
    cdef stage_torque_fn fn
    cdef void* ctx

    def _setup(self, ModelCore model, double h, int scheme, A, b, c, int local, passive,
               gravity, bint constrained, double k1, double k2, bint project, double tol,
               int max_iter):
        """Buffers and constants (checked by the caller); then call _load."""
        self.m = model
        self.nq = model.nq
        self.nv = model.nv
        self.h = h
        self.scheme = scheme
        self.A = np.array(A, dtype=np.float64, order="C")
        self.b = np.array(b, dtype=np.float64)
        self.c = np.array(c, dtype=np.float64)
        self.s = self.b.shape[0]
        self.local = local
        self.constrained = constrained
        self.k1 = k1
        self.k2 = k2
        self.project = project
        self.tol = tol
        self.max_iter = max_iter
        if constrained:
            model._require_loops()
        self.data = Data(model)
        self.Q = np.zeros((2, self.nq + 1))
        self.V = np.zeros((2, self.nv + 1))
        self.acc = np.zeros(self.nv + 1)
        self.tau0 = np.zeros(self.nv + 1)
        self.rbuf = np.zeros(1)
        self.work = np.empty(step_ws_size(model.nb, self.nq, self.nv, self.s))
        cdef int n
        self.gp = model._gravity_ptr(gravity, self.gbuf)
        if self.gp != &self.gbuf[0]:
            for n in range(3):
                self.gbuf[n] = self.gp[n]
            self.gp = &self.gbuf[0]
        self.ct.nv = self.nv
        self.ct.tau = &self.tau0[0]
        self.pas = _PassiveArrays(passive, self.nv)
        self.pas.wrap(&self.pt, constant_torque, <void*>&self.ct, self.nv, &self.fn, &self.ctx)
        self.sa.scheme = scheme
        self.sa.s = self.s
        self.sa.local = local
        self.sa.A = &self.A[0, 0]
        self.sa.b = &self.b[0]
        self.sa.c = &self.c[0]
        self.sa.bhat = NULL
        self.sa.h = h
        self.sa.torque = self.fn
        self.sa.tctx = self.ctx
        self.sa.grav = self.gp
        self.sa.fext = NULL
        self.sa.fframe = 0
        self.sa.ws = &self.work[0]
        self.sa.err = NULL
        self.sa.check_q = True
        self.sa.constrained = constrained
        self.sa.project = project
        self.sa.k1 = k1
        self.sa.k2 = k2
        self.sa.tol = tol
        self.sa.max_iter = max_iter
        self.cur = 0
        self.k = 0
        self.t0 = 0.0

    cdef inline int _check(self) except -1:
        """InputError unless _setup ran (a subclass that skipped __init__)."""
        if self.data is None:
            raise InputError("Simulator: not initialized (Simulator.__init__ was not called)")
        return 0

    cdef int _ready(self, double* q, double* v, bint full) noexcept nogil:
        """For loops: project (q, v) as _run does (``full``: the initial
        projection; else with no iterations and no velocity: only the rows and
        the factors that rk_step's first stage reuses)."""
        cdef int piter = self.max_iter if (self.project and full) else 0
        return project_kernel(self.m, &self.data.c, q,
                              v if (self.nv and self.project and full) else NULL,
                              self.tol, piter, 1e-10, &self.rbuf[0])

    def _load(self, double[::1] q, double[::1] v, double t0, Py_ssize_t k=0, acc=None):
        """Make (q, v) at t0 + k h the state (checked by the caller; loops:
        projected first).  On an error the state is unchanged."""
        cdef int nxt = 1 - self.cur, code = 0, n
        self._check()
        if q.shape[0] != self.nq or v.shape[0] != self.nv:
            raise InputError(f"Simulator: q, v: expected shapes ({self.nq},), ({self.nv},)")
        if acc is None:
            self.m._check_unit_quaternions(np.asarray(q), "q")
        for n in range(self.nq):
            self.Q[nxt, n] = q[n]
        for n in range(self.nv):
            self.V[nxt, n] = v[n]
        if self.constrained:
            code = self._ready(&self.Q[nxt, 0], &self.V[nxt, 0], acc is None)
            if code:
                self._raise(code, "reset")
        self.cur = nxt
        self.t0 = t0
        self.k = k
        if acc is None:
            for n in range(self.nv):
                self.acc[n] = 0.0
        else:
            for n in range(self.nv):
                self.acc[n] = acc[n]

    cdef _raise(self, int code, str where):
        """The error of a kernel code (as _run reports it), naming the time."""
        cdef double t = self.t0 + self.k * self.h
        if code == STEP_DIVERGED:
            raise InputError(f"Simulator.{where}: the simulation diverged (non-finite state) "
                             f"in the step starting at t = {t:.6g} s: reduce dt or the "
                             f"torques, or use a higher-order method; the state is the one "
                             f"before that step")
        if code == CODE_MASS_NOT_PD:
            raise SingularModelError(f"Simulator.{where}: the mass matrix is not positive "
                                     f"definite (massless subtree without armature?)")
        if code > 0:
            self.m._raise_bad_quaternion(code - 1, -1)
        self.m._raise_singular(-code - 1)

    cdef int _one(self, const double* tau) noexcept nogil:
        """One step from Q[cur], V[cur] into the other row (step_project); commits it
        (cur, k, acc) if it succeeded; returns the kernel code."""
        cdef int nv = self.nv, nxt = 1 - self.cur, code
        cdef double* qi = &self.Q[self.cur, 0]
        cdef double* vi = &self.V[self.cur, 0]
        self.ct.tau = tau
        code = step_project(self.m, &self.data.c, &self.sa, self.t0 + self.k * self.h, qi,
                            vi if nv else NULL, &self.Q[nxt, 0],
                            &self.V[nxt, 0] if nv else NULL, &self.rbuf[0])
        if code:
            if self.constrained:    # the factors of the current state for the next try
                self._ready(qi, vi, False)
            return STEP_DIVERGED if code == STEP_Q_NONFINITE else code
        memcpy(&self.acc[0], &self.work[self.s * nv], nv * sizeof(double))
        self.cur = nxt
        self.k += 1
        return 0

    def step(self, tau=None, n=1):
        """Advance ``n`` steps (default 1) with joint torques ``tau``: (nv,)
        held over all n steps (and over every stage), or (n, nv) one row per
        step; None = zero.  N or N·m per velocity coordinate, the passive forces
        added.  The n steps run in one compiled loop.

        Checked here: the shape, dtype (real numbers) and finiteness of tau and
        n >= 1 (InputError, the state unchanged).  A step whose state overflows
        raises InputError naming its time; the steps before it are kept."""
        cdef cnp.ndarray arr
        cdef const double* tp
        cdef Py_ssize_t stride = 0, i, i0, iend, chunk = 1, total, ns
        cdef int code = 0, nv = self.nv
        cdef double tick
        if self.data is None:
            self._check()
        ns = 0
        if type(n) is int:          # without rich comparisons of Python ints
            try:
                ns = n
            except OverflowError:
                ns = 0
        if not 1 <= ns <= (<Py_ssize_t>1) << 62:
            if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
                raise InputError(f"Simulator.step: n: expected an integer >= 1, got "
                                 f"{type(n).__name__} {n!r:.60}")
            if not 1 <= n <= 1 << 62:
                raise InputError(f"Simulator.step: n: expected an integer >= 1, got {n}")
            ns = n
        if tau is None:
            tp = &self.tau0[0]
        else:
            if cnp.PyArray_CheckExact(tau) and cnp.PyArray_TYPE(<cnp.ndarray>tau) == cnp.NPY_DOUBLE \
                    and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>tau) \
                    and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>tau):
                arr = <cnp.ndarray>tau
            else:
                arr = self._tau_array(tau)
            if cnp.PyArray_NDIM(arr) == 1 and cnp.PyArray_DIMS(arr)[0] == nv:
                stride = 0
            elif (cnp.PyArray_NDIM(arr) == 2 and cnp.PyArray_DIMS(arr)[0] == ns
                  and cnp.PyArray_DIMS(arr)[1] == nv):
                stride = nv
            else:
                raise InputError(f"Simulator.step: tau: expected shape ({nv},) or "
                                 f"({n}, {nv}) (one row per step, n = {n}), got shape "
                                 f"{tuple(np.shape(arr))}")
            tp = <const double*>cnp.PyArray_DATA(arr)
            total = nv if stride == 0 else ns * nv
            for i in range(total):
                if not isfinite(tp[i]):
                    raise InputError(f"Simulator.step: tau: NaN or infinity at "
                                     + (f"index {i}" if stride == 0 else
                                        f"row {i // nv}, column {i % nv}")
                                     + "; the state is unchanged")
            if nv == 0:
                tp = &self.tau0[0]
        if ns == 1:
            code = self._one(tp)
            if code:
                self._raise(code, "step")
            return
        # long runs: chunks of 1–4 ms with Ctrl-C handled between them (as _run);
        # every finished step is kept
        from time import perf_counter
        i0 = 0
        while i0 < ns:
            iend = min(ns, i0 + chunk)
            tick = perf_counter()
            with nogil:
                for i in range(i0, iend):
                    code = self._one(tp + i * stride)
                    if code:
                        break
            if code:
                self._raise(code, "step")
            i0 = iend
            tick = perf_counter() - tick
            if tick < 1e-3:
                chunk *= 2
            elif tick > 4e-3 and chunk > 1:
                chunk //= 2
            PyErr_CheckSignals()

    cdef cnp.ndarray _tau_array(self, tau):
        """tau (not a C-contiguous float64 array) as one, or InputError: real
        numbers only (no bool, complex, str or object arrays)."""
        try:
            arr = np.asarray(tau)
        except Exception:
            arr = None
        if arr is None or arr.dtype.kind not in "fiu":
            raise InputError(f"Simulator.step: tau: expected real numbers of shape "
                             f"({self.nv},) or (n, {self.nv}), got {type(tau).__name__}"
                             + ("" if arr is None else f" of dtype {arr.dtype}"))
        return np.ascontiguousarray(arr, dtype=np.float64)

    def _forward(self, tau):
        """Accelerations (nv,) at the current state with torques tau (float64 (nv,)
        or None) plus the passive forces; also kept as ``a``."""
        cdef double[::1] tb = np.zeros(self.nv + 1)
        cdef double[::1] taub
        cdef int code, n
        cdef double* q
        cdef double* v
        cdef double* out
        self._check()
        q = &self.Q[self.cur, 0]
        v = &self.V[self.cur, 0]
        out = &self.work[self.s * self.nv]
        if tau is not None:
            taub = tau
            for n in range(self.nv):
                tb[n] = taub[n]
        self.ct.tau = &tb[0]
        code = self.fn(self.ctx, self.t0 + self.k * self.h, q, v, &self.work[0])
        self.ct.tau = &self.tau0[0]
        if code == 0:
            if self.constrained:
                code = constrained_fd_kernel(self.m, &self.data.c, q, v, &self.work[0],
                                             self.gp, NULL, 0, self.k1, self.k2, 1e-10,
                                             out, NULL, self.data.c.cg, False)
            else:
                code = aba_kernel(self.m, &self.data.c, q, v, &self.work[0], self.gp, NULL, 0,
                                  out)
        if self.constrained:
            self._ready(q, v, False)
        if code:
            self._raise(code, "forward")
        memcpy(&self.acc[0], out, self.nv * sizeof(double))
        return np.array(self.acc[:self.nv])

    # state, as copies --------------------------------------------------------------
    @property
    def q(self):
        """Configuration (nq,): a copy."""
        self._check()
        return np.array(self.Q[self.cur, :self.nq])

    @property
    def v(self):
        """Velocity (nv,): a copy."""
        self._check()
        return np.array(self.V[self.cur, :self.nv])

    @property
    def a(self):
        """Accelerations (nv,) of the last step's first stage: v̇ at the state that
        step started from (MuJoCo's qacc after mj_step), or of the last forward();
        zero after a reset.  A copy."""
        self._check()
        return np.array(self.acc[:self.nv])

    @property
    def t(self):
        """Time, s: t0 + k dt after k steps since the reset (no accumulated sum)."""
        self._check()
        return self.t0 + self.k * self.h

    @property
    def dt(self):
        """The step, s."""
        self._check()
        return self.h

    @property
    def steps(self):
        """Number of steps taken since the last reset."""
        return self.k

    def _snapshot(self):
        """(q, v, t0, k, a) copies of the state."""
        self._check()
        return (np.array(self.Q[self.cur, :self.nq]), np.array(self.V[self.cur, :self.nv]),
                self.t0, self.k, np.array(self.acc[:self.nv]))
