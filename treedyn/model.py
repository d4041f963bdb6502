"""The compiled model: flat, read-only arrays in topological order.

:func:`treedyn.compiler.compile_model` turns a :class:`treedyn.graph.JointGraph`
into a :class:`Model`.  The model holds no per-call state: every kernel writes
into a :class:`treedyn.Data` (``model.create_data()``), see docs/algorithms.md.

Conventions (docs/conventions.md): screws angular first ``(ω, v)``; body i's
pose ``C_i = C_parent B_i J_i(q_i)`` with ``B_i = A_parent⁻¹ A_i`` the relative
reference pose and ``A_i`` the pose at q = 0; body-fixed joint screws
``X_i = Ad_{A_i}⁻¹ Y_i``, ``Y_i`` the spatial screws at q = 0.
"""
from __future__ import annotations

import copy
import types
import warnings
from math import isfinite as _isfinite

import numpy as np

from . import dynamics as _dyn
from . import integrators as _integ
from . import kinematics as _kin
from ._ext import KIND_FREE_SE3, KIND_FREE_SO3R3, KIND_SCREWS, KIND_SPHERICAL, ModelCore
from ._ext import _ZERO, kernels as _kernels
from .errors import InputError, SingularModelError
from .tables import closure_tables, frozen
from .validation import (array_of_shape, finite_result, finite_results, name as _name, number,
                         real_array, vectors)

__all__ = ["Model", "LoopClosure"]


def _compile(graph):
    """Model of a graph (pickling: a model travels as its source description)."""
    return graph.compile()


def _index(i, n, argument, where="support"):
    """A body index 0 <= i < n (int, not bool), or InputError."""
    if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
        raise InputError(f"{where}: {argument}: expected a body index (int) or name (str), "
                         f"got {type(i).__name__} {i!r:.60}")
    if not 0 <= i < n:
        raise InputError(f"{where}: {argument}: body index {i} out of range 0..{n - 1}")
    return int(i)


class Actuators:
    """The actuation map of a model: controls u (nu,) give the generalized forces
    ``tau = B clip(u, ctrlrange)`` (nv,), ``B[v_k, i] = gear_i`` for actuator i on the
    joint of velocity coordinate v_k (MJCF ``<motor>``, ``<general>`` with a plain
    gain; :meth:`treedyn.JointGraph.add_actuator`).  Immutable.

    Attributes
    ----------
    names, joints : tuple of str
    gear : ndarray (nu,)
    ctrlrange : ndarray (nu, 2)
        Lower and upper control bounds (±inf: unbounded).
    B : ndarray (nv, nu)
    """

    def __init__(self, specs, idx_v, nv):
        d = self.__dict__
        d["names"] = tuple(a["name"] for a in specs)
        d["joints"] = tuple(a["joint"] for a in specs)
        d["gear"] = frozen(np.array([a["gear"] for a in specs], dtype=float))
        d["ctrlrange"] = frozen(np.array([a["ctrlrange"] for a in specs],
                                         dtype=float).reshape(-1, 2))
        B = np.zeros((nv, len(specs)))
        for i, a in enumerate(specs):
            B[idx_v[a["joint"]], i] = a["gear"]
        d["B"] = frozen(B)

    def __setattr__(self, key, value):
        raise AttributeError(f"Actuators are immutable (cannot set '{key}')")

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        return f"<treedyn.Actuators: {len(self)} on joints {list(self.joints)}>"

    def torques(self, u, where="actuators.torques"):
        """Generalized forces B clip(u, ctrlrange) of controls u (..., nu): shape (..., nv)."""
        nu = len(self)
        arr = real_array(u, "u", where)
        if arr.ndim == 0 or arr.shape[-1] != nu:
            raise InputError(f"{where}: u: expected shape (..., {nu}) (one control per "
                             f"actuator), got {arr.shape}")
        arr = np.clip(arr, self.ctrlrange[:, 0], self.ctrlrange[:, 1])
        return arr @ self.B.T


class LoopClosure:
    """A loop-closing joint, kept for the constraint layer.

    Attributes
    ----------
    name, type : str
    parent_link, child_link : str
        Links named in the file (``"world"`` allowed).
    parent_body, child_body : int
        Model body indices owning those links (-1 = world).
    parent_offset, child_offset : ndarray (4, 4)
        Pose of the link frames in their owning body frames.
    Y : ndarray (k, 6)
        Spatial screws of the joint at q = 0 (world frame), one per freedom.
    point : ndarray (3,)
        Joint point (world frame at q = 0).
    data : dict
        The joint's full description from the graph.
    """

    __slots__ = ("name", "type", "parent_link", "child_link", "parent_body", "child_body",
                 "parent_offset", "child_offset", "Y", "point", "data")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)

    def __repr__(self):
        return (f"LoopClosure({self.name!r}, {self.type}, {self.parent_link!r} -> "
                f"{self.child_link!r})")


class Model(ModelCore):
    """An immutable, picklable compiled model.

    Every array is read-only on immutable memory (``setflags(write=True)`` fails).
    The compiled entries (``inverse_dynamics``, ``mass_matrix``, ...) are defined
    with their docstrings in the ``cysrc/`` file of their algorithm and bound
    below by one line each (docs/architecture.md); all public names: docs/api.md.

    Attributes (read-only)
    ----------------------
    nq, nv : int
        Sizes of the configuration and velocity vectors.
    n_bodies : int
        Number of moving bodies (``len(body_names)``).
    body_names, joint_names, joint_types : list of str
        Body ``i`` is moved by joint ``i`` relative to body ``parent[i]`` (-1: world).
    idx_q, idx_v : dict
        Joint name -> start offset in q and v.
    parent, qoff, voff, nqj, nvj : ndarray of int32
    A, B : ndarray (nb, 4, 4)
        Body poses at q = 0 (world) and relative reference poses ``A_parent⁻¹ A_i``.
    X, Y : ndarray (nv, 6)
        Body-fixed and spatial joint screws at q = 0, one row per velocity coordinate.
    mass, com, inertia, spatial_inertia
        Lumped body inertial data in body frames (kg, m, kg·m²).
    frame_names, frame_body, frame_offset
        Named frames (every link of the file, merged ones included, plus extra
        frames): owning body and pose in its frame.
    shapes : tuple of treedyn.geometry.Shape
        Visual and collision shapes kept from the file (never read by the
        kernels), each on its compiled body with its pose in that body's frame.
    loop_closures : list of LoopClosure
    mimic : list of dict (joint, leader, multiplier, offset)
    gravity : ndarray (3,)
        World-frame gravity, m/s².
    graph : JointGraph
        The source description (used by ``treedyn.save``).
    """

    # The compiled entries: each is defined, with its docstring, in the cysrc/ file
    # of its algorithm (docs/architecture.md) and bound here as a method.
    forward_kinematics = _kernels.forward_kinematics                        # fk.pxi
    frame_poses = _kernels.frame_poses                                      # fk.pxi
    jacobian = _kernels.jacobian                                            # jacobian.pxi
    inverse_dynamics = _kernels.inverse_dynamics                            # rnea_common.pxi
    mass_matrix = _kernels.mass_matrix                                      # crba.pxi
    forward_dynamics = _kernels.forward_dynamics                            # aba.pxi
    inverse_mass_matrix = _kernels.inverse_mass_matrix                      # minverse.pxi
    inverse_dynamics_derivatives = _kernels.inverse_dynamics_derivatives    # rnea_derivatives.pxi
    inverse_dynamics_rates = _kernels.inverse_dynamics_rates                # rnea_rates.pxi
    inverse_dynamics_regressor = _kernels.inverse_dynamics_regressor        # regressor.pxi
    geometric_sensitivity = _kernels.geometric_sensitivity      # geometric_sensitivity.pxi
    forward_dynamics_derivatives = _kernels.forward_dynamics_derivatives    # aba_derivatives.pxi
    jacobian_derivatives = _kernels.jacobian_derivatives            # kinematic_derivatives.pxi
    body_jerks = _kernels.body_jerks                                # kinematic_derivatives.pxi
    _frame_acceleration_derivatives = _kernels._frame_acceleration_derivatives   # (same)
    _body_motion = _kernels._body_motion                                    # kinematics.pxi
    _spatial_screws = _kernels._spatial_screws                              # kinematics.pxi
    _spatial_screw_rates = _kernels._spatial_screw_rates                    # kinematics.pxi
    _retract = _kernels._retract                                            # lie_groups.pxi
    _difference = _kernels._difference                                      # lie_groups.pxi
    _local_rates = _kernels._local_rates                                    # lie_groups.pxi
    _config_rate = _kernels._config_rate                                    # lie_groups.pxi
    _integrate_jacobians = _kernels._integrate_jacobians                    # lie_jacobians.pxi
    _difference_jacobians = _kernels._difference_jacobians                  # lie_jacobians.pxi
    _project = _kernels._project                                            # loops.pxi
    _loop_rows = _kernels._loop_rows                                        # loops.pxi
    _constrained_forward_dynamics = _kernels._constrained_forward_dynamics  # loops.pxi
    _assemble = _kernels._assemble                                          # closed_loop_id.pxi
    _closed_loop_inverse_dynamics = _kernels._closed_loop_inverse_dynamics  # closed_loop_id.pxi
    _run = _kernels._run                                                    # integrators.pxi
    _rollout = _kernels._rollout                                            # rollout.pxi

    def __init__(self, graph, arrays, names, closures, mimic, tables):
        """Called by :func:`treedyn.compiler.compile_model` with the compiler's
        arrays and the kernel tables (``treedyn.tables.core_tables``)."""
        d = self.__dict__
        for key, val in arrays.items():
            d[key] = frozen(val)        # read-only on immutable memory (never writable)
        for key, val in names.items():
            d[key] = tuple(val) if isinstance(val, list) else val
        d["free_groups"] = types.MappingProxyType(dict(names["free_groups"]))
        d["graph"] = graph
        d["loop_closures"] = tuple(closures)
        d["mimic"] = tuple(mimic)
        d["idx_q"] = types.MappingProxyType(
            {n: int(arrays["qoff"][k]) for k, n in enumerate(names["joint_names"])})
        d["idx_v"] = types.MappingProxyType(
            {n: int(arrays["voff"][k]) for k, n in enumerate(names["joint_names"])})
        d["actuators"] = Actuators(getattr(graph, "actuators", ()), d["idx_v"],
                                   int(np.sum(arrays["nvj"])))
        d["_frame_index"] = types.MappingProxyType({n: k for k, n in enumerate(names["frame_names"])})
        d["_body_index"] = types.MappingProxyType({n: k for k, n in enumerate(names["body_names"])})
        self._init_core(tables, names)
        if closures or mimic:
            from .constraints import ConstraintSet
            cs = ConstraintSet(self)
            d["_constraints"] = cs
            self._init_loops(closure_tables(tables, cs.packed(), arrays["A"], arrays["Y"]))

    # immutability and pickling ----------------------------------------------------
    def __setattr__(self, key, value):
        raise AttributeError(f"Model is immutable (cannot set '{key}')")

    def __delattr__(self, key):
        raise AttributeError(f"Model is immutable (cannot delete '{key}')")


    def __reduce__(self):
        return (_compile, (self.graph,))

    def __repr__(self):
        return (f"<treedyn.Model '{self.name}': {self.n_bodies} bodies, nq={self.nq}, nv={self.nv}, "
                f"{len(self.loop_closures)} loop closures>")

    def with_armature(self, armature):
        """A copy of the model with new rotor inertias (armature), kg·m² or kg per
        velocity coordinate: ``armature`` is an array (nv,) or a dict
        ``{joint_name: value or per-freedom values}`` (other joints keep theirs).
        The model itself is immutable."""
        graph = copy.deepcopy(self.graph)
        if isinstance(armature, dict):
            items = armature.items()
        else:
            arr = array_of_shape(armature, (self.nv,), "armature", "with_armature")
            items = [(n, arr[self.voff[i]:self.voff[i] + self.nvj[i]])
                     for i, n in enumerate(self.joint_names)]
        for name, value in items:
            _name(name, "armature", "with_armature", self.idx_v, "moving joint")
            parent, child = graph._joint_edges[name]
            data = graph.graph.edges[parent, child, name]
            nv = len(data["armature"])
            val = real_array(value, f"armature[{name!r}]", "with_armature")
            if val.shape not in ((), (1,), (nv,)):
                raise InputError(f"with_armature: armature[{name!r}]: expected a number or "
                                 f"shape ({nv},), got shape {val.shape}")
            val = np.broadcast_to(val, (nv,)).copy()
            if np.any(val < 0):
                raise InputError(f"with_armature: armature[{name!r}]: expected values >= 0, "
                                 f"got {val}")
            data["armature"] = val
        return graph.compile()

    def inertial_parameters(self):
        """The 10 standard inertial parameters of every body, (n_bodies, 10):
        ``(m, m c_x, m c_y, m c_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz)``, m in kg,
        c the COM (m) and I the inertia about the **body origin** (kg·m²,
        I = Θ_c + m (|c|² 1 − c cᵀ)), in body axes: the order of Pinocchio's
        ``Inertia.toDynamicParameters()``.  Merged (fixed-joint) links are lumped
        into their body.  Inverse: :meth:`with_inertial_parameters`."""
        m = np.asarray(self.mass)
        I = np.asarray(self.spatial_inertia)[:, :3, :3]
        mc = m[:, None] * np.asarray(self.com)
        return np.column_stack([m, mc, I[:, 0, 0], I[:, 0, 1], I[:, 1, 1], I[:, 0, 2],
                                I[:, 1, 2], I[:, 2, 2]])

    def with_inertial_parameters(self, pi):
        """A new model with the inertial parameters ``pi`` (n_bodies, 10) in the
        order of :meth:`inertial_parameters`.  Each body's own link gets them;
        links merged into it become massless (the model's graph changes
        accordingly, so the new model pickles and saves with these parameters).
        The model itself is immutable.  Raises InputError for a negative mass, a
        massless body with a first moment, or an inertia about the COM that is not
        positive semi-definite."""
        nb = self.n_bodies
        pi = array_of_shape(pi, (nb, 10), "pi", "with_inertial_parameters")
        graph = copy.deepcopy(self.graph)
        owned = set(self.body_names)
        for k, (fname, body) in enumerate(zip(self.frame_names, self.frame_body)):
            if body >= 0 and fname not in owned and fname in graph.graph.nodes:
                node = graph.body(fname)
                node["mass"], node["com"], node["inertia"] = 0.0, np.zeros(3), np.zeros((3, 3))
        names = self.body_names
        m, c, Ic = _dyn.com_inertias(
            pi, lambda i: f"with_inertial_parameters: pi[{i[0]}] (body '{names[i[0]]}')")
        for i, name in enumerate(names):
            node = graph.body(name)
            node["mass"], node["com"] = float(m[i]), c[i]
            node["inertia"] = 0.5 * Ic[i] + 0.5 * Ic[i].T
        return graph.compile()

    @property
    def n_bodies(self):
        """Number of moving bodies."""
        return self._nb

    @property
    def nb(self):
        """Deprecated alias of :attr:`n_bodies`."""
        # (a property, not __getattr__: a class with __getattr__ pays for it on every
        # attribute lookup, about 50 ns per call of any entry)
        warnings.warn("Model.nb is deprecated: use Model.n_bodies", DeprecationWarning,
                      stacklevel=2)
        return self._nb

    # configurations ---------------------------------------------------------------
    def neutral(self):
        """The reference configuration q = 0 (unit quaternions (1, 0, 0, 0)), shape (nq,)."""
        q = np.zeros(self.nq)
        for i, k in enumerate(self.kind):
            if k == KIND_SPHERICAL:
                q[self.qoff[i]] = 1.0
            elif k in (KIND_FREE_SE3, KIND_FREE_SO3R3):
                q[self.qoff[i] + 3] = 1.0
        return q

    def random_configuration(self, rng=None):
        """A random configuration, shape (nq,).

        1-dof coordinates are uniform within finite joint limits; without
        limits, angles are uniform in [-π, π] and distances in [-1, 1] m;
        quaternions are uniform on SO(3); free-joint positions uniform in [-1, 1]³ m.
        """
        try:
            rng = np.random.default_rng(rng)
        except (TypeError, ValueError) as exc:   # NumPy's own words, named here
            raise InputError(f"random_configuration: rng: expected None, a non-negative int "
                             f"seed (or a sequence of them) or a numpy.random Generator, "
                             f"BitGenerator or SeedSequence, got {type(rng).__name__} "
                             f"{rng!r:.60} ({exc})") from None
        q = np.empty(self.nq)
        for i, k in enumerate(self.kind):
            o, n = self.qoff[i], self.nqj[i]
            if k == KIND_SCREWS:
                lo, hi = self.lower_limit[o:o + n], self.upper_limit[o:o + n]
                prism = np.all(self.X[self.voff[i]:self.voff[i] + n, :3] == 0, axis=1)
                span = np.where(prism, 1.0, np.pi)
                lo = np.where(np.isfinite(lo), lo, -span)
                hi = np.where(np.isfinite(hi), hi, span)
                q[o:o + n] = rng.uniform(lo, hi)
            else:
                quat = rng.normal(size=4)
                quat /= np.linalg.norm(quat)
                if k == KIND_SPHERICAL:
                    q[o:o + 4] = quat
                else:
                    q[o:o + 3] = rng.uniform(-1.0, 1.0, 3)
                    q[o + 3:o + 7] = quat
        return q

    def _bad_quaternion_message(self, body, sample):
        where = f" (sample {sample})" if sample >= 0 else ""
        return (f"q{where}: the quaternion of joint '{self.joint_names[body]}' "
                f"(q[{self.qoff[body]}:{self.qoff[body] + self.nqj[body]}]) is not unit "
                f"(| |Q| - 1 | > 1e-6)")

    # dynamics ---------------------------------------------------------------------
    def bias_forces(self, q, v, gravity=None, data=None, out=None):
        """h(q, v) = C(q, v) v + g(q): inverse dynamics at zero acceleration, (nv,) or
        (N, nv); ``data`` / ``out`` as in :meth:`inverse_dynamics`."""
        return self.inverse_dynamics(q, v, _ZERO, gravity=gravity, data=data, out=out)

    def gravity_forces(self, q, gravity=None, data=None, out=None):
        """g(q): generalized gravity forces, (nv,) or (N, nv); ``data`` / ``out`` as in
        :meth:`inverse_dynamics`."""
        return self.inverse_dynamics(q, _ZERO, _ZERO, gravity=gravity, data=data, out=out)

    def gravity_derivatives(self, q, gravity=None, data=None):
        """∂g/∂q (nv, nv) (or (N, nv, nv)): derivative of the generalized gravity
        forces along the joints' groups (inverse-dynamics derivatives at v = a = 0)."""
        return self.inverse_dynamics_derivatives(q, _ZERO, _ZERO, gravity=gravity, data=data)[0]

    def _forward_dynamics_cholesky(self, q, v, tau, f_ext, gravity, f_ext_frame):
        """forward_dynamics(method="cholesky"): M (CRBA) and h (RNEA), Cholesky solve."""
        h = self.inverse_dynamics(q, v, _ZERO, f_ext=f_ext, gravity=gravity,
                                  f_ext_frame=f_ext_frame)
        tau_a = array_of_shape(tau, h.shape, "tau", "forward_dynamics")
        M = self.mass_matrix(q)
        try:
            L = np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            raise SingularModelError(f"{self.name}: the mass matrix is not positive definite "
                                     f"(massless subtree without armature?)") from None
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.linalg.solve(L, (tau_a - h)[..., None])
            vdot = np.linalg.solve(np.swapaxes(L, -1, -2), y)[..., 0]
        return finite_result(vdot, "forward dynamics: v̇", "q, v, τ", "forward_dynamics")

    def linearize(self, q, v, tau, f_ext=None, gravity=None, f_ext_frame="world",
                  reduced=False, rcond=1e-10, passive=True):
        """(A, B) of the linearized equations of motion in tangent coordinates; with
        loop closures, of the constrained dynamics; ``reduced``: (Tᵀ A T, Tᵀ B, T)
        on the tangent space of the loops' state manifold; ``passive``: with the
        joint damping and springs (:func:`treedyn.derivatives.linearize`)."""
        from .derivatives import linearize
        return linearize(self, q, v, tau, f_ext=f_ext, gravity=gravity, f_ext_frame=f_ext_frame,
                         reduced=reduced, rcond=rcond, passive=passive)

    def passive_forces(self, q, v):
        """Joint damping and spring forces −D v − K (q − q_ref) (nv,) or (N, nv)
        (:func:`treedyn.dynamics.passive_forces`)."""
        return _dyn.passive_forces(self, q, v)

    def mass_matrix_factors(self, q):
        """(S, L, H) with M(q) = Sᵀ Lᵀ H L S + diag(armature) ([Park & Kim 2000]): S block-diagonal
        joint motion subspaces, L block lower-triangular adjoints, H body inertias."""
        return _dyn.mass_matrix_factors(self, q)

    def coriolis_matrix(self, q, v):
        """C(q, v) (nv, nv) in closed form (Müller 2018, eq. 84): C v = h − g and
        Ṁ − 2C is skew-symmetric; equals Σ_k Γ_ijk v_k where Γ exists."""
        return _dyn.coriolis_matrix(self, q, v)

    def coriolis_matrix_derivatives(self, q, v):
        """(∂C/∂q, ∂C/∂v), each [i, j, k] = ∂C_ij/∂(q|v)_k (nv, nv, nv), from the
        compiled inverse-dynamics derivatives; models without spherical or free
        joints (see :func:`treedyn.dynamics.coriolis_matrix_derivatives`)."""
        return _dyn.coriolis_matrix_derivatives(self, q, v)

    def christoffel(self, q):
        """Christoffel symbols of the first kind Γ[i, j, k] (nv, nv, nv) (eq. 86), for
        models whose velocities are coordinate rates (no spherical or free joints)."""
        return _dyn.christoffel(self, q)

    def kinetic_energy(self, q, v):
        """Kinetic energy ½ vᵀ M v in J (armature included); (N,) for batches."""
        return _dyn.kinetic_energy(self, q, v)

    def potential_energy(self, q, gravity=None):
        """Gravitational potential energy −Σ mᵢ gᵀ cᵢ in J, zero at the world origin."""
        return _dyn.potential_energy(self, q, gravity)

    def kinetic_energy_regressor(self, q, v):
        """Row y (10 n_bodies,) with the bodies' kinetic energy y @ π (armature aside);
        see :func:`treedyn.identification.kinetic_energy_regressor`."""
        from .identification import kinetic_energy_regressor
        return kinetic_energy_regressor(self, q, v)

    def potential_energy_regressor(self, q, gravity=None):
        """Row y (10 n_bodies,) with potential_energy(q) = y @ π; see
        :func:`treedyn.identification.potential_energy_regressor`."""
        from .identification import potential_energy_regressor
        return potential_energy_regressor(self, q, gravity)

    def base_parameters(self, n_samples=None, tol=1e-8, rng=None):
        """The identifiable parameter combinations π_base = P π (QR with pivoting of
        stacked regressors); see :func:`treedyn.identification.base_parameters`."""
        from .identification import base_parameters
        return base_parameters(self, n_samples, tol, rng)

    def closed_loop_regressor(self, actuated, q_ind, v_ind, a_ind, q_guess=None,
                              gravity=None):
        """Regressor of closed_loop_inverse_dynamics' actuator forces; see
        :func:`treedyn.identification.closed_loop_regressor`."""
        from .identification import closed_loop_regressor
        return closed_loop_regressor(self, actuated, q_ind, v_ind, a_ind, q_guess, gravity)

    def with_reference_offsets(self, offsets):
        """A model with joint reference poses B_i exp(π̂_i), offsets (n_bodies, 6); see
        :func:`treedyn.sensitivity.with_reference_offsets`."""
        from .sensitivity import with_reference_offsets
        return with_reference_offsets(self, offsets)

    def momentum(self, q, v):
        """Spatial momentum (6,) in the world frame about the world origin, angular first."""
        return _dyn.momentum(self, q, v)

    def center_of_mass(self, q):
        """World position (3,) of the centre of mass, m."""
        return _dyn.center_of_mass(self, q)

    def _raise_singular(self, body):
        raise SingularModelError(
            f"{self.name}: the articulated inertia seen by joint '{self.joint_names[body]}' "
            f"is singular: the subtree it moves has no inertia along its axis and the joint "
            f"has no armature (add mass or armature)")

    # constraints ------------------------------------------------------------------
    @property
    def constraints(self):
        """The :class:`treedyn.constraints.ConstraintSet` of the loop closures and mimic
        couplings (built on first use)."""
        cs = self.__dict__.get("_constraints")
        if cs is None:
            from .constraints import ConstraintSet
            cs = ConstraintSet(self)
            self.__dict__["_constraints"] = cs
        return cs

    def constraint_residual(self, q):
        """Residuals g(q) (m,) of all loop closures and mimic couplings (rows as in
        treedyn.constraints): zero when every loop is closed."""
        return self.constraints.evaluate(q)[0]

    def constraint_jacobian(self, q):
        """Constraint Jacobian G(q) (m, nv): ġ = G v."""
        return self.constraints.evaluate(q)[1]

    def constrained_forward_dynamics(self, q, v, tau, f_ext=None, gravity=None,
                                     f_ext_frame="world", baumgarte=None):
        """(q̈, λ) of M q̈ + h = τ + Gᵀλ, G q̈ = −Ġv (redundant rows allowed: λ is the
        minimal-norm choice); Gᵀλ are the generalized constraint forces."""
        if baumgarte is not None or not (self.loop_closures or self.mimic):
            from .constraints import constrained_forward_dynamics
            a, lam, _ = constrained_forward_dynamics(self, self.constraints, q, v, tau, f_ext,
                                                     gravity, f_ext_frame, baumgarte)
            return a, lam
        # the compiled kernel checks its arguments (cysrc/loops.pxi); one state or a batch
        try:
            a, lam, _ = self._constrained_forward_dynamics(q, v, tau, f_ext, gravity,
                                                           f_ext_frame)
        except InputError as exc:
            text = f"constrained_forward_dynamics: {exc}"
            if "overflow" in text:
                from .constraints import _sizes
                text += f" ({_sizes((('q', q), ('v', v), ('tau', tau), ('f_ext', f_ext)))})"
            raise InputError(text) from None
        return a, lam

    def constrained_forward_dynamics_derivatives(self, q, v, tau, f_ext=None, gravity=None,
                                                 f_ext_frame="world"):
        """(∂v̇/∂q, ∂v̇/∂v, ∂v̇/∂τ), each (nv, nv), of the v̇ of
        :meth:`constrained_forward_dynamics` (no Baumgarte terms), q along the groups;
        one state.  The second derivatives of the closure rows are central finite
        differences: see :func:`treedyn.derivatives.constrained_forward_dynamics_derivatives`."""
        from .derivatives import constrained_forward_dynamics_derivatives
        return constrained_forward_dynamics_derivatives(self, q, v, tau, f_ext=f_ext,
                                                        gravity=gravity,
                                                        f_ext_frame=f_ext_frame)

    def constraint_wrenches(self, q, lam):
        """Per loop closure, the wrench (torque, force) (6,) the closing joint applies to
        its child-side link, about that link's origin in world axes, from multipliers λ."""
        from .constraints import constraint_wrenches
        return constraint_wrenches(self, self.constraints, q, lam)

    def assemble(self, q_guess, fixed=None, tol=1e-12, max_iter=200):
        """A configuration closing every loop, near ``q_guess``, with the joints in
        ``fixed`` ({name: value}) held (damped Gauss–Newton / Levenberg–Marquardt)."""
        from .constraints import assemble
        return assemble(self, self.constraints, q_guess, fixed, tol, max_iter)

    def closed_loop_inverse_dynamics(self, actuated, q_ind, v_ind, a_ind, q_guess=None,
                                     gravity=None):
        """Actuator forces (and constraint wrenches) of a closed-loop mechanism for a
        desired motion of its actuated joints; see
        :func:`treedyn.constraints.closed_loop_inverse_dynamics`."""
        from .constraints import closed_loop_inverse_dynamics
        return closed_loop_inverse_dynamics(self, self.constraints, actuated, q_ind, v_ind,
                                            a_ind, q_guess, gravity)

    def project_velocity(self, q, v):
        """The velocity nearest to v in the kinetic-energy metric satisfying G v = 0
        (one state; compiled, the same projection as the time steps')."""
        where = "project_velocity"
        if self._n_crows == 0:
            vectors(q, self.nq, "q", where, batch=False)
            return vectors(v, self.nv, "v", where, batch=False).copy()
        try:
            out = self._project(q, v, max_iter=0)[1]   # checks q and v, naming them
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
        if not np.isfinite(out).all():
            from .constraints import _finite_result
            _finite_result(where, "the projected velocity", (out,), (("q", q), ("v", v)))
        return out

    def project_position(self, q, tol=1e-12, max_iter=20):
        """A configuration near q with max |g| ≤ tol: Gauss–Newton steps in the
        kinetic-energy metric (M at q), at most ``max_iter`` (small corrections, as
        after a time step; for large ones use :meth:`assemble`).  Returns (q, max |g|)."""
        where = "project_position"
        q = vectors(q, self.nq, "q", where, batch=False)
        tol = number(tol, "tol", where, minimum=0.0, strict=True)
        max_iter = number(max_iter, "max_iter", where, minimum=1.0)
        if max_iter != int(max_iter) or max_iter > 2 ** 30:
            raise InputError(f"{where}: max_iter: expected an integer ≥ 1, got {max_iter:g}")
        if self._n_crows == 0:
            return q.copy(), 0.0
        out, _, res = self._project(q, None, tol, int(max_iter))
        if not np.isfinite(out).all():
            from .constraints import _finite_result
            _finite_result(where, "the projected q", (out,), (("q", q),))
        return out, res

    # group operations -------------------------------------------------------------
    def integrate(self, q, v, dt=1.0, local_map="exp"):
        """q ⊕ (v dt): move every joint on its own group by τ(v dt), τ = exp or the
        Cayley map; quaternions stay unit by construction.  (nq,) or (N, nq)."""
        code = _integ.local_map_code(local_map)
        dt = number(dt, "dt", "integrate")
        v = vectors(v, self.nv, "v", "integrate")
        with np.errstate(over="ignore", invalid="ignore"):
            dq = finite_result(v * dt, "v·dt", "v, dt", "integrate")
        return finite_result(self._retract(q, dq, code), "q ⊕ v·dt", "q, v, dt", "integrate")

    @finite_results("ψ", "q0, q1")
    def difference(self, q0, q1):
        """Exponential coordinates ψ (nv,) with q1 = q0 ⊕ ψ (the inverse of integrate)."""
        return self._difference(q0, q1)

    @finite_results("ψ̇", "psi, v")
    def local_coordinate_rates(self, psi, v, local_map="exp"):
        """ψ̇ = dτ⁻¹_{−ψ} v: rates of the local coordinates of q0 ⊕ ψ(t) moving with
        body velocity v (dexp⁻¹ or dcay⁻¹ per joint; [Müller & Terze 2013] eq. 37)."""
        return self._local_rates(psi, v, _integ.local_map_code(local_map))

    def integrate_jacobians(self, q, v, dt=1.0, local_map="exp", data=None, out=None):
        """Derivatives (Jq, Jv) of ``q1 = integrate(q, v, dt, local_map)``.

        Tangent vectors are taken along each joint's group (docs/conventions.md,
        "Derivatives and tangent spaces"): a direction δ (nv,) at q is the curve
        ``integrate(q, ε δ)``, and the change of q1 is measured in the same local
        coordinates at q1 (``difference(q1, ·)``, body-fixed like v)::

            Jq δ = d/dε difference(q1, integrate(integrate(q, ε δ), v, dt))
            Jv δ = d/dε difference(q1, integrate(q, v + ε δ, dt))      at ε = 0

        Per joint, with ξ = v dt and τ the local map: screw chains Jq = I,
        Jv = dt I; spherical (SO(3)) Jq = τ(ξ)ᵀ, Jv = dt dτ_{−ξ} (for exp the
        right Jacobian of SO(3)); free SE(3) Jq = Ad_{τ(ξ)⁻¹}, Jv = dt dτ_{−ξ}
        (6 × 6, angular first); free SO(3)×R³ the SO(3) blocks for ω and I, dt I
        for the position (no coupling).  Equal to Pinocchio's
        ``dIntegrate(model, q, v dt, ARG0)`` and ``dt · dIntegrate(…, ARG1)`` after
        the velocity permutation of free flyers ((v, ω) there, (ω, v) here).

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
            Configurations (unit quaternions, scalar first).
        v : array_like, shape (nv,) or (N, nv)
            Velocities (the layout of docs/conventions.md).
        dt : float
            Time step, s (the derivative with respect to v carries the factor dt).
        local_map : {"exp", "cayley"}
            The local map τ of :meth:`integrate`.
        data : Data, optional
            Single state: the Data to run in (not otherwise used).
        out : pair of ndarray, optional
            (Jq, Jv) output arrays, each (nv, nv) or (N, nv, nv), float64,
            C-contiguous.

        Returns
        -------
        (Jq, Jv) : ndarray, shape (nv, nv) or (N, nv, nv) each
            Block diagonal, one block per joint; dimensionless (Jq) and s (Jv).
        """
        if type(dt) is not float or not _isfinite(dt):     # the full check costs ~1 µs
            dt = number(dt, "dt", "integrate_jacobians")
        return self._integrate_jacobians(q, v, dt, _integ.local_map_code(local_map), data, out)

    def difference_jacobians(self, q0, q1, data=None, out=None):
        """Derivatives (J0, J1) of ``ψ = difference(q0, q1)`` (exponential coordinates).

        With the tangent vectors of docs/conventions.md ("Derivatives and tangent
        spaces")::

            J0 δ = d/dε difference(integrate(q0, ε δ), q1)
            J1 δ = d/dε difference(q0, integrate(q1, ε δ))      at ε = 0

        Per joint: screw chains J0 = −I, J1 = I; spherical and free SE(3)
        J1 = dexp⁻¹_{−ψ} (the inverse right Jacobian) and J0 = −dexp⁻¹_{ψ}
        (3 × 3 or 6 × 6, angular first); free SO(3)×R³ the SO(3) blocks for ω and
        −I, I for the position.  Pinocchio's ``dDifference(model, q0, q1, ARG0 /
        ARG1)`` after the free flyers' velocity permutation.

        Parameters
        ----------
        q0, q1 : array_like, shape (nq,) or (N, nq)
            Configurations (unit quaternions, scalar first), same batch shape.
        data, out : as in :meth:`integrate_jacobians` (``out`` a pair (J0, J1))

        Returns
        -------
        (J0, J1) : ndarray, shape (nv, nv) or (N, nv, nv) each
            Block diagonal, one block per joint.  The blocks are singular only
            where ψ of a rotation reaches |ψ| = 2π, which difference never
            returns (|ψ| ≤ π).
        """
        return self._difference_jacobians(q0, q1, data, out)

    # kinematics -------------------------------------------------------------------
    def body_velocities(self, q, v, representation="body"):
        """Twists of all bodies, shape (nb, 6) (or (N, nb, 6)), angular first.

        ``representation``: "body" (body frame), "spatial" (world frame at the
        world origin), "hybrid" (world axes at the body origin: (ω, ṙ)) or
        "mixed" (ω in body axes, ṙ in world axes).  See treedyn.kinematics.
        """
        return _kin.body_velocities(self, q, v, representation)

    def body_accelerations(self, q, v, a, representation="body"):
        """Time derivatives of the twists of all bodies in the given representation,
        shape (nb, 6) (or (N, nb, 6)); gravity not included ("hybrid"/"mixed":
        the linear part is the classical acceleration r̈)."""
        return _kin.body_accelerations(self, q, v, a, representation)

    def frame_velocity(self, q, v, frame, representation="body"):
        """Twist (6,) of a body or named frame (merged links included)."""
        return _kin.frame_motion(self, q, v, None, frame, representation)[1]

    def frame_acceleration(self, q, v, a, frame, representation="body"):
        """Twist derivative (6,) of a body or named frame (gravity not included)."""
        _kin._required(a, "a")
        return _kin.frame_motion(self, q, v, a, frame, representation)[2]

    def jacobian_dot_v(self, q, v, frame, representation="body"):
        """J̇(q, v) v (6,): the frame's twist derivative at zero joint acceleration."""
        v = vectors(v, self.nv, "v", "jacobian_dot_v")
        return _kin.frame_motion(self, q, v, np.zeros_like(v), frame, representation)[2]

    def frame_velocity_derivatives(self, q, v, frame, representation="body", data=None,
                                   out=None):
        """(∂V/∂q, ∂V/∂v), each (6, nv) (or (N, 6, nv)), of the twist V = J(q) v of a
        body or named frame in ``representation``; ∂/∂q along each joint's group
        (as in :meth:`jacobian_derivatives`): ∂V/∂q_k = Σ_j ∂J_j/∂q_k v_j, ∂V/∂v = J.
        Pinocchio's ``getFrameVelocityDerivatives`` (LOCAL, WORLD,
        LOCAL_WORLD_ALIGNED = body, spatial, hybrid).  Compiled: ∂V/∂q_m =
        [x_m, Σ_j T(m, j) v_j x_j] about the frame origin plus the terms of the
        moving frame (cysrc/kinematic_derivatives.pxi), O(d²) in the freedoms d on
        the path.  ``data``: a Data (single state); ``out``: (dV_dq, dV_dv) to write
        into."""
        return self._frame_acceleration_derivatives(q, v, None, frame, representation, data,
                                                    out, velocity=True)

    def frame_acceleration_derivatives(self, q, v, a, frame, representation="body", data=None,
                                       out=None):
        """Partial derivatives of :meth:`frame_acceleration` (gravity not included).

        ``A(q, v, a) = J a + J̇ v`` is the time derivative of the frame's twist in
        ``representation``: "body" V̇ᵇ, "spatial" d/dt (Ad_C Vᵇ) (both Pinocchio's
        spatial acceleration, LOCAL and WORLD), "hybrid" (ω̇ in world axes, r̈) and
        "mixed" (ω̇ᵇ, r̈) with the classical acceleration r̈ of the frame's origin
        (Pinocchio's LOCAL_WORLD_ALIGNED acceleration is the spatial one,
        R V̇ᵇ, whose linear part lacks ω × ṙ).  ∂/∂q is taken along each joint's
        group: ``dA_dq @ δ = d/dε A(integrate(q, ε δ), v, a)`` at ε = 0.  Closed form
        from nested Lie brackets of the Jacobian columns, compiled
        (cysrc/kinematic_derivatives.pxi; docs/algorithms.md, "Kinematic
        derivatives"); O(d²) in the number d of freedoms on the path world → frame.

        Parameters
        ----------
        q : array_like, shape (nq,) or (N, nq)
        v, a : array_like, shape (nv,) or (N, nv)
            Velocities and accelerations (the batch shape of q).
        frame : str or int
            A body name, a named frame or a body index (as in :meth:`jacobian`).
        representation : {"body", "spatial", "hybrid", "mixed"}
        data : Data, optional (single state)
        out : tuple of three ndarrays, optional
            (dA_dq, dA_dv, dA_da) to write into, each (6, nv) or (N, 6, nv).

        Returns
        -------
        dA_dq, dA_dv, dA_da : ndarray, shape (6, nv) or (N, 6, nv)
            Angular rows first (rad/s², m/s² per unit of q, v, a); dA_da is the
            Jacobian.  Columns of freedoms off the path world → frame are zero.
        """
        return self._frame_acceleration_derivatives(q, v, a, frame, representation, data, out)

    # frames -----------------------------------------------------------------------
    def body_index(self, name):
        """Index of a moving body in ``body_names``."""
        return self._body_index[_name(name, "name", "body_index", self._body_index, "body")]

    def support(self, body):
        """bool (nv,): the freedoms on the path world → ``body`` (index or name), the
        columns its Jacobian can have nonzero.  O(depth) from ``parent``; the model
        stores no (nb, nv) table."""
        i = self.body_index(body) if isinstance(body, str) else _index(body, self.n_bodies, "body")
        mask = np.zeros(self.nv, dtype=bool)
        while i >= 0:
            mask[self.voff[i]:self.voff[i] + self.nvj[i]] = True
            i = int(self.parent[i])
        return mask

    def frame_pose(self, q, name):
        """World pose (4, 4) (or (N, 4, 4)) of the named frame (any link name, merged
        links included)."""
        k = self._frame_index[_name(name, "name", "frame_pose", self._frame_index, "frame")]
        C = self.forward_kinematics(q)
        b = self.frame_body[k]
        base = np.broadcast_to(np.eye(4), C.shape[:-3] + (4, 4)) if b < 0 else C[..., b, :, :]
        return base @ self.frame_offset[k]
