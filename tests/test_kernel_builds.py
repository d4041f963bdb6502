"""The two builds of the kernels (treedyn/_ext.py): ``treedyn._kernels`` for the
platform's baseline instruction set and, on x86-64, ``treedyn._kernels_avx2``
(``-mavx2 -mfma``), picked at import where the CPU has AVX2 and FMA or forced by
``TREEDYN_KERNELS``.  Each build runs the same calls in its own process (the
choice is made at import): the AVX2 build rounds the fused multiply-adds
(cysrc/simd.h td_fma) of the ABA, the CRBA, the spatial RNEA and the body-form
τ̇/τ̈ (rnea_rates_body.h) once, so what goes through them differs from the
baseline's in the last bits only, and everything else is bitwise the same."""
import os
import subprocess
import sys

import numpy as np
import pytest

import treedyn as td
from treedyn import _ext

HERE = os.path.dirname(os.path.abspath(__file__))

# every kernel family on a floating-base humanoid, a random tree with every joint
# kind (external wrenches in the three frames) and the closed-loop Delta robot
DUMP = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import treedyn as td
from treedyn import _ext
from oracles import random_tree
out = {"isa": np.array(_ext.ISA)}


def _recursive(f, *args):
    old = _ext.kernels._set_fd_products(2)
    try:
        return f(*args)
    finally:
        _ext.kernels._set_fd_products(old)


rng = np.random.default_rng(7)
models = {"humanoid": td.load(td.robots.path("humanoid.urdf"), floating_base=True),
          "tree": random_tree(np.random.default_rng(3), n=20)}
for name, m in models.items():
    N = 4
    q = np.array([m.random_configuration(rng) for _ in range(N)])
    v, a = rng.normal(size=(2, N, m.nv))
    f = rng.normal(size=(N, m.n_bodies, 6))
    r = {"fk": m.forward_kinematics(q), "M": m.mass_matrix(q),
         "Minv": m.inverse_mass_matrix(q), "jac": m.jacobian(q, m.body_names[-1]),
         "aba": m.forward_dynamics(q, v, a), "idd": m.inverse_dynamics_derivatives(q, v, a),
         "fdd": m.forward_dynamics_derivatives(q, v, a),
         "fdd_recursion": _recursive(m.forward_dynamics_derivatives, q, v, a),
         "jerk": m.body_jerks(q[0], v[0], a[0], a[0]),
         "rates": m.inverse_dynamics_rates(q, v, a, a, v, f_ext=f, f_ext_dot=f)}
    for rep in ("body", "spatial", "hybrid"):
        r["id_" + rep] = m.inverse_dynamics(q, v, a, representation=rep)
    for frame in ("world", "body", "hybrid"):
        r["idf_" + frame] = m.inverse_dynamics_derivatives(q, v, a, f_ext=f, f_ext_frame=frame)
        r["fdf_" + frame] = m.forward_dynamics_derivatives(q, v, a, f_ext=f, f_ext_frame=frame)
    for k, x in r.items():
        for i, y in enumerate(x if isinstance(x, tuple) else (x,)):
            out[f"{name}.{k}.{i}"] = np.asarray(y)
delta = td.load(td.robots.path("delta.toml"))
q = delta.assemble(delta.neutral())
v = delta.project_velocity(q, rng.normal(size=delta.nv))
tau = rng.normal(size=delta.nv)
for i, y in enumerate(delta.constrained_forward_dynamics(q, v, tau)):
    out[f"delta.cfd.{i}"] = y
# td.Simulator (simulator.pxi) with the passive forces (integrators.pxi) and a loop
import copy
g = copy.deepcopy(models["humanoid"].graph)
for _, _, _, j in g.graph.edges(keys=True, data=True):
    n = len(j["armature"])
    j["damping"] = np.full(n, 0.02)
    if j["type"] not in ("free", "spherical", "fixed"):
        j["stiffness"], j["spring_reference"] = np.full(n, 0.5), np.full(n, 0.1)
for name, m in (("humanoid_damped", g.compile()), ("delta", delta)):
    sim = td.Simulator(m, dt=1e-4, method="rkmk4")
    sim.step(rng.normal(size=(20, m.nv)), 20)
    out[f"sim.{name}.q"], out[f"sim.{name}.v"] = sim.q, sim.v
np.savez(sys.argv[1], **out)
"""


def _run(tmp_path, isa):
    path = tmp_path / f"{isa}.npz"
    env = dict(os.environ, TREEDYN_KERNELS=isa, OMP_NUM_THREADS="2")
    subprocess.run([sys.executable, "-c", DUMP, str(path), HERE], env=env, check=True,
                   timeout=300)
    return dict(np.load(path))


def test_the_build_in_use_is_the_widest_this_cpu_runs():
    has = _ext._baseline._cpu_has_avx2() and _ext._baseline._cpu_has_fma()
    try:
        import treedyn._kernels_avx2  # noqa: F401
        built = True
    except ImportError:
        built = False
    env = os.environ.get("TREEDYN_KERNELS", "auto")
    if env == "auto":
        assert _ext.ISA == ("avx2" if has and built else "baseline")
    assert td.Model.__mro__[1] is _ext.kernels.ModelCore


# the outputs computed by the kernels whose arithmetic has the fused multiply-adds
# (docs/algorithms.md): the ABA (forward dynamics, td.Simulator's stages), the CRBA
# (M; the q-derivatives of forward dynamics, the first output of
# forward_dynamics_derivatives; the closed loops' constrained dynamics), the
# spatial RNEA and the body-form inverse-dynamics rates
_MODELS = ("humanoid.", "tree.")
FUSED_BY = {"aba": ("humanoid.aba.", "tree.aba.", "sim.humanoid_damped."),
            "crba": tuple(n + k for n in _MODELS
                          for k in ("M.", "fdd.0", "fdd_recursion.0", "fdf_world.0",
                                    "fdf_body.0", "fdf_hybrid.0"))
            + ("delta.cfd.", "sim.delta."),
            "rnea_spatial": ("humanoid.id_spatial.", "tree.id_spatial."),
            "rnea_rates_body": ("humanoid.rates.", "tree.rates.")}
FUSED = sum(FUSED_BY.values(), ())


@pytest.mark.skipif(not _ext._cpu_runs_avx2_build(), reason="this CPU has no AVX2 and FMA")
def test_avx2_build_differs_from_the_baseline_only_in_the_fused_last_bits(tmp_path):
    pytest.importorskip("treedyn._kernels_avx2")
    base = _run(tmp_path, "baseline")
    wide = _run(tmp_path, "avx2")
    assert str(base.pop("isa")) == "baseline" and str(wide.pop("isa")) == "avx2"
    assert base.keys() == wide.keys() and len(base) > 60
    assert all(np.all(np.isfinite(x)) for x in base.values())
    fused = [k for k in base if k.startswith(FUSED)]
    assert len(fused) == 26
    differ = [k for k in base if k not in fused and not np.array_equal(base[k], wide[k])]
    assert not differ, differ
    for k in fused:
        scale = np.abs(base[k]).max()
        assert np.abs(base[k] - wide[k]).max() <= 1e-12 * scale, k
    # the AVX2 build does fuse, in each of these kernels: one rounding instead of two
    # changes some last bits
    for kernel in ("aba", "crba", "rnea_spatial", "rnea_rates_body"):
        ks = [k for k in fused if k.startswith(FUSED_BY[kernel])]
        assert not all(np.array_equal(base[k], wide[k]) for k in ks), kernel


def test_unknown_choice_is_refused():
    env = dict(os.environ, TREEDYN_KERNELS="sse9")
    r = subprocess.run([sys.executable, "-c", "import treedyn"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "TREEDYN_KERNELS='sse9'" in r.stderr and "'baseline'" in r.stderr
