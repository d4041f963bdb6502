"""td.rollout on the vector lanes (cysrc/integrators_lanes.pxi, aba_sweeps.h): groups of
TD_VL samples of a tree model step in lock-step, their stage accelerations from one
ABA on the lanes.  Oracles: the same rollout with the lanes off (the one-sample path,
``_kernels._set_lanes(False)``) and td.simulate of each sample, compared bit for bit;
and the other kernel build."""
import copy
import functools
import os
import subprocess
import warnings

import numpy as np
import pytest

import treedyn as td
from treedyn import _ext
from treedyn.errors import SingularModelError
from treedyn.rollout import sample_model

from oracles import assert_rollouts_equal as assert_same
from oracles import massless_leaf_model, outputs_of_both_builds, rollout_states as states

HERE = os.path.dirname(os.path.abspath(__file__))
K = _ext.kernels
VL = K._lanes()[0]
METHODS = ("euler", "semi_euler", "rkmk2", "rkmk4", "cg4", "rk4_vector")

pytestmark = pytest.mark.skipif(VL < 2, reason="this build has no vector lanes")


def _damped(model, d):
    g = copy.deepcopy(model.graph)
    for _, _, _, j in g.graph.edges(keys=True, data=True):
        n = len(j["armature"])
        j["damping"] = np.full(n, d)
        if j["type"] not in ("free", "spherical", "fixed"):
            j["stiffness"], j["spring_reference"] = np.full(n, 0.5), np.full(n, 0.1)
    return g.compile()


def _small_free_tree():
    """A free-flying base with a spherical shoulder, a universal-like pair of
    revolutes and a prismatic tip: multi-freedom joints of several kinds."""
    g = td.JointGraph("flyer")
    g.add_body("base", mass=3.0, com=[0.01, 0.02, -0.03], inertia=np.diag([0.1, 0.12, 0.09]))
    g.add_body("upper", mass=1.0, com=[0.0, 0.0, -0.2], inertia=np.diag([0.02, 0.02, 0.004]))
    g.add_body("fore", mass=0.6, com=[0.05, 0.0, -0.1], inertia=np.diag([0.01, 0.012, 0.003]))
    g.add_body("tip", mass=0.2, com=[0.0, 0.01, 0.0], inertia=np.diag([1e-3, 2e-3, 1e-3]))
    g.add_joint("root", "free", "world", "base")
    g.add_joint("shoulder", "spherical", "base", "upper", point=[0.1, 0.0, 0.0])
    g.add_joint("elbow", "revolute", "upper", "fore", axis=[0, 1, 0], point=[0.1, 0, -0.4])
    g.add_joint("slide", "prismatic", "fore", "tip", axis=[0.6, 0, 0.8], point=[0.1, 0, -0.6])
    return g.compile()


MODELS = {
    "ur5": lambda: td.load(td.robots.path("ur5.urdf")),
    "humanoid": lambda: td.load(td.robots.path("humanoid.urdf"), floating_base=True),
    "humanoid_damped": lambda: _damped(td.load(td.robots.path("humanoid.urdf"),
                                               floating_base=True), 0.02),
    "flyer": _small_free_tree,
}


@functools.cache
def model(name):
    return MODELS[name]()


def rollout_both(m, q0, v0, *args, **kw):
    """(lanes on, lanes off) of the same rollout; asserts the lanes ran."""
    groups = K._lanes()[1]
    on = td.rollout(m, q0, v0, *args, **kw)
    assert K._lanes()[1] > groups or len(q0) < VL
    old = K._set_lanes(False)
    try:
        groups = K._lanes()[1]
        off = td.rollout(m, q0, v0, *args, **kw)
        assert K._lanes()[1] == groups
    finally:
        K._set_lanes(old)
    return on, off


@pytest.mark.parametrize("name", ["ur5", "humanoid", "humanoid_damped", "flyer"])
@pytest.mark.parametrize("method", METHODS)
def test_lanes_are_bitwise_the_one_sample_path_and_simulate(name, method):
    m = model(name)
    rng = np.random.default_rng(hash((name, method)) % 2**32)
    N = 2 * VL + 3                          # two groups and a remainder of 3
    q0, v0 = states(m, N, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # coarse euler steps warn about energy
        on, off = rollout_both(m, q0, v0, 0.015, 1e-3, method=method, save_every=2)
        assert_same(on, off)
        assert not on.diverged.any()
        for k in (0, VL - 1, VL, 2 * VL + 1):   # in the first, second group, remainder
            tr = td.simulate(m, q0[k], v0[k], 0.015, 1e-3, method=method, save_every=2)
            assert np.array_equal(tr.q, on.q[k]) and np.array_equal(tr.v, on.v[k])


def test_threads_and_group_boundaries_do_not_change_the_result():
    m = model("humanoid_damped")
    rng = np.random.default_rng(3)
    q0, v0 = states(m, 4 * VL + 1, rng)
    one = td.rollout(m, q0, v0, 0.01, 1e-3, threads=1)
    two = td.rollout(m, q0, v0, 0.01, 1e-3, threads=2)
    assert_same(one, two)
    # the same sample in another lane of another group: the same bits
    perm = np.roll(np.arange(len(q0)), 3)
    moved = td.rollout(m, q0[perm], v0[perm], 0.01, 1e-3, threads=1)
    assert np.array_equal(moved.q, one.q[perm]) and np.array_equal(moved.v, one.v[perm])


def test_inputs_and_per_sample_parameters_on_lanes():
    """Open-loop torques per step, linear feedback, per-sample gravity, damping,
    armature and inertial parameters (one model per distinct set, each run on lanes),
    a Python controller: the lanes give the one-sample path's bits."""
    m = model("ur5")
    rng = np.random.default_rng(5)
    N, T = 3 * VL + 1, 12
    q0, v0 = states(m, N, rng)
    tau = rng.normal(size=(N, T, m.nv)) * 0.5
    on, off = rollout_both(m, q0, v0, T * 1e-3, 1e-3, tau=tau)
    assert_same(on, off)
    xref = np.concatenate([q0, np.zeros_like(v0)], axis=1)
    fb = td.LinearFeedback(np.hstack([10 * np.eye(m.nv), np.eye(m.nv)]), xref)
    on, off = rollout_both(m, q0, v0, T * 1e-3, 1e-3, controller=fb, tau=tau[:, 0])
    assert_same(on, off)
    pi = np.array(m.inertial_parameters())
    params = {
        "gravity": rng.normal(size=(N, 3)) * 3.0,
        "damping": np.abs(rng.normal(size=(N, m.nv))) * 0.1,
        "armature": np.repeat(np.abs(rng.normal(size=(2, m.nv))) * 0.01, [N - VL, VL], 0),
        "inertial_parameters": np.repeat(np.stack([pi, pi * 1.1]), [VL + 1, N - VL - 1], 0),
    }
    on, off = rollout_both(m, q0, v0, T * 1e-3, 1e-3, method="rkmk4", params=params)
    assert_same(on, off)
    for k in (0, N - 1):
        mk = _with_damping(sample_model(m, {
            "armature": params["armature"][k],
            "inertial_parameters": params["inertial_parameters"][k]}), params["damping"][k])
        tr = td.simulate(mk, q0[k], v0[k], T * 1e-3, 1e-3, gravity=params["gravity"][k])
        assert np.array_equal(tr.q, on.q[k]) and np.array_equal(tr.v, on.v[k])
    calls = []

    def ctrl(t, Q, V):
        calls.append(t)
        return -2.0 * V
    on, off = rollout_both(m, q0, v0, 5e-3, 1e-3, controller=ctrl)
    assert_same(on, off)


def _with_damping(m, D):
    """m with joint damping D (nv,) in its graph (test_rollout_params' oracle)."""
    g = copy.deepcopy(m.graph)
    for _, _, _, j in g.graph.edges(keys=True, data=True):
        if j["name"] in m.idx_v:
            o = m.idx_v[j["name"]]
            j["damping"] = D[o:o + len(j["armature"])].copy()
    return g.compile()


@pytest.mark.parametrize("lane", [0, 1, -1])
def test_a_diverging_lane_does_not_change_the_others(lane):
    m = model("humanoid")
    rng = np.random.default_rng(9)
    N = 2 * VL + 1
    q0, v0 = states(m, N, rng)
    ref = td.rollout(m, q0, v0, 0.02, 1e-3, save_every=3)
    bad = lane % VL                              # a lane of the first group
    v1 = v0.copy()
    v1[bad] = 1e150                              # overflows in the first stages
    on, off = rollout_both(m, q0, v1, 0.02, 1e-3, save_every=3)
    assert_same(on, off)
    assert on.diverged.tolist() == [k == bad for k in range(N)]
    assert on.failed_step[bad] == 0 and np.all(np.isnan(on.q[bad, 1:]))
    keep = np.arange(N) != bad
    assert np.array_equal(on.q[keep], ref.q[keep]) and np.array_equal(on.v[keep], ref.v[keep])
    # a lane that diverges later (a large but finite speed) stops at the same step
    v2 = v0.copy()
    v2[bad] = 3e3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on, off = rollout_both(m, q0, v2, 0.05, 1e-3, method="euler")
    assert_same(on, off)
    assert np.array_equal(on.q[keep], td.rollout(m, q0, v0, 0.05, 1e-3, method="euler").q[keep])


@pytest.mark.parametrize("tip", ["revolute", "spherical"])
def test_a_singular_articulated_inertia_on_lanes(tip):
    """Massless tips without armature: every lane reports the one-sample code (the
    joint named) at step 0, as simulate raises."""
    m = massless_leaf_model(tip=tip)
    rng = np.random.default_rng(0)
    q0, v0 = states(m, VL + 1, rng)
    on, off = rollout_both(m, q0, v0, 0.01, 1e-3, passive=False)
    assert_same(on, off)
    assert on.diverged.all() and np.all(on.failed_step == 0)
    assert np.all(on.status == on.status[0]) and on.status[0] != 0
    with pytest.raises(SingularModelError, match="wrist"):
        td.simulate(m, q0[0], v0[0], 0.01, 1e-3)


DUMP = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import treedyn as td
from treedyn import _ext
from test_rollout_lanes import model, states
K = _ext.kernels
out = {"isa": np.array(_ext.ISA), "vl": np.array(K._lanes()[0])}
rng = np.random.default_rng(17)
for name, method in (("humanoid_damped", "rkmk4"), ("flyer", "cg4"), ("ur5", "euler")):
    m = model(name)
    q0, v0 = states(m, 7, rng)
    tau = rng.normal(size=(7, m.nv)) * 0.1
    groups = K._lanes()[1]
    r = td.rollout(m, q0, v0, 0.02, 1e-3, method=method, tau=tau)
    assert K._lanes()[1] > groups
    old = K._set_lanes(False)
    s = td.rollout(m, q0, v0, 0.02, 1e-3, method=method, tau=tau)
    K._set_lanes(old)
    assert np.array_equal(r.q, s.q) and np.array_equal(r.v, s.v)
    out[name + ".q"], out[name + ".v"] = r.q, r.v
np.savez(sys.argv[1], **out)
"""


@pytest.mark.skipif(not _ext._cpu_runs_avx2_build(), reason="this CPU has no AVX2 and FMA")
def test_both_kernel_builds_give_the_same_lane_rollouts_to_the_last_bits(tmp_path):
    """The baseline build's lanes are 2 wide (SSE2), the AVX2 build's 4 wide: the same
    results but for the last bits of the AVX2 build's fused multiply-adds, and each
    bitwise the same with its lanes off."""
    pytest.importorskip("treedyn._kernels_avx2")
    res = outputs_of_both_builds(tmp_path, DUMP, HERE)
    assert (int(res["baseline"].pop("vl")), int(res["avx2"].pop("vl"))) == (2, 4)
    for k in res["baseline"]:
        # the AVX2 build fuses the ABA's multiply-adds (setup.py): the last bits differ
        b, w = res["baseline"][k], res["avx2"][k]
        assert np.abs(b - w).max() <= 1e-12 * np.abs(b).max(), k
        assert np.all(np.isfinite(res["baseline"][k]))


FALLBACK_C = r"""
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#ifdef SCALAR
#include "simd.h"
#undef TD_SIMD
#define TD_SIMD 0
#endif
#include "aba_simd.h"
int main(void)
{
    double C[12], inr[13], V[6], M[36], pA[6], U[6], Dinv = 0, u = 0, Ip[36] = {0},
        pAp[6] = {0}, J[6], c[6];
    srand(3);
    for (int t = 0; t < 2000; t++) {
        for (int k = 0; k < 12; k++) C[k] = rand() / (double)RAND_MAX - 0.5;
        for (int k = 0; k < 13; k++) inr[k] = rand() / (double)RAND_MAX;
        for (int k = 0; k < 6; k++) {
            V[k] = rand() / (double)RAND_MAX - 0.5;
            J[k] = rand() / (double)RAND_MAX - 0.5;
            c[k] = rand() / (double)RAND_MAX - 0.5;
        }
        td_aba_rigid6(C, inr, V, M, pA);
        int r = td_aba_back1(M, pA, J, c, 0.3, t % 7 ? 0.01 : -1e3, 1.0, U, &Dinv, &u, Ip, pAp);
        fwrite(M, 8, 36, stdout); fwrite(pA, 8, 6, stdout); fwrite(U, 8, 6, stdout);
        fwrite(&Dinv, 8, 1, stdout); fwrite(&u, 8, 1, stdout); fwrite(Ip, 8, 36, stdout);
        fwrite(pAp, 8, 6, stdout); fwrite(&r, 4, 1, stdout);
    }
    return 0;
}
"""


@pytest.mark.parametrize("isa", ["baseline", "avx2"])
def test_scalar_fallback_of_aba_simd_is_bitwise_the_vector_form(tmp_path, isa):
    """aba_simd.h without vector extensions (TD_SIMD 0) takes aba_sweeps.h's one-state
    td_aba_rigid6 / td_aba_back1, the lanes' source: compiled both ways with the C
    compiler, the same bits on random bodies (singular ones included); with the
    baseline flags and with the AVX2 build's (-mavx2 -mfma: fused multiply-adds)."""
    if isa == "avx2" and not _ext._cpu_runs_avx2_build():
        pytest.skip("this CPU has no AVX2 and FMA")
    import shutil
    import sysconfig
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    src = tmp_path / "fb.c"
    src.write_text(FALLBACK_C)
    inc = os.path.join(os.path.dirname(HERE), "cysrc")
    if not os.path.exists(os.path.join(inc, "aba_sweeps.h")):
        pytest.skip("no source tree")
    out = {}
    # setup.py's flags for the build
    isa_flags = ["-ffp-contract=off"] + (["-mavx2", "-mfma"] if isa == "avx2" else [])
    for kind, flags in (("vector", []), ("scalar", ["-DSCALAR"])):
        exe = tmp_path / kind
        r = subprocess.run([cc, "-O3", *isa_flags, "-I", inc, *flags, str(src), "-o",
                            str(exe), "-lm"], capture_output=True)
        if r.returncode != 0 and isa == "avx2":
            pytest.skip(f"{cc} does not take -mavx2 -mfma")
        assert r.returncode == 0, r.stderr
        out[kind] = subprocess.run([str(exe)], check=True, capture_output=True).stdout
    assert len(out["vector"]) > 100_000 and out["vector"] == out["scalar"]
