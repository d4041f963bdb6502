"""The faster paths of task m27 (issue 27's MJCF speed targets), each against the path
it replaces.

* Spatial joint steps of rotating one-freedom screws that are not about a body axis
  through the origin (offset hinges, oblique hinges, helical joints: dm_control's
  dog has 43): their sines come from the angle prepass (angle_prepass, four at a time)
  in every kernel.  Oracle: the same poses, bit for bit, from the Jacobian's path
  sweep, which evaluates each joint's sine on the spot (td_sincos one at a time); the
  kernels' poses against each other; M against inverse-dynamics columns and τ against
  the body form at tight tolerances, on random trees of every joint kind.
* Mesh inertia from STL files by axis (treedyn.io.mjcf): against the previous
  triangle-major computation, kept here as the oracle, for binary and ASCII files,
  refpos / refquat / scale / mirroring scales, legacy and exact inertia.
"""
import numpy as np
import pytest

import treedyn as td
from treedyn import lie
from oracles import random_tree


def screw_tree(rng, n=14):
    """A random tree whose one-freedom joints are mostly rotating screws that take
    the prepass sines: hinges about a body axis through an offset point (screw_rev),
    oblique hinges and helical joints, mixed with axis hinges through the body origin,
    prismatic, spherical and free joints."""
    g = td.JointGraph("screws", gravity=(0.2, -0.4, -9.81))
    names = ["world"]
    kinds = ["offset", "oblique", "helical", "axis", "offset", "prismatic", "oblique",
             "spherical", "free"]
    for i in range(n):
        R = lie.so3_exp(rng.normal(size=3))
        moments = np.sort(rng.uniform(0.05, 0.5, 3))
        moments[2] = min(moments[2], 0.99 * (moments[0] + moments[1]))
        kind = kinds[i % len(kinds)]
        frame = np.eye(4)
        frame[:3, 3] = rng.normal(size=3)
        if kind not in ("offset", "axis"):
            frame[:3, :3] = lie.so3_exp(rng.normal(size=3))
        name = f"b{i}"
        massless = i % 5 == 3                  # MJCF's chain bodies: no mass of their own
        g.add_body(name, mass=0.0 if massless else rng.uniform(0.5, 3.0),
                   com=rng.normal(scale=0.3, size=3),
                   inertia=np.zeros((3, 3)) if massless else R @ np.diag(moments) @ R.T,
                   frame=frame)
        parent = names[rng.integers(len(names))]
        point = rng.normal(size=3)
        arm = dict(armature=rng.uniform(0.01, 0.1))   # massless leaves stay regular
        e = np.eye(3)[rng.integers(3)] * rng.choice([-1.0, 1.0])
        if kind == "offset":          # body axis direction through a point off the origin
            g.add_joint(f"j{i}", "revolute", parent, name, axis=e, point=frame[:3, 3] + point, **arm)
        elif kind == "axis":
            g.add_joint(f"j{i}", "revolute", parent, name, axis=e, point=frame[:3, 3], **arm)
        elif kind == "oblique":
            g.add_joint(f"j{i}", "revolute", parent, name, axis=rng.normal(size=3),
                        point=point, **arm)
        elif kind == "helical":
            g.add_joint(f"j{i}", "helical", parent, name, axis=rng.normal(size=3),
                        point=point, pitch=rng.uniform(-0.2, 0.2), **arm)
        elif kind == "prismatic":
            g.add_joint(f"j{i}", "prismatic", parent, name, axis=rng.normal(size=3), **arm)
        elif kind == "spherical":
            g.add_joint(f"j{i}", "spherical", parent, name, point=point, **arm)
        else:
            g.add_joint(f"j{i}", "free", parent, name, **arm)
        names.append(name)
    return g.compile()


def _fast_codes(model):
    return model._tables["fast"], model._tables["screw_rev"]


@pytest.mark.parametrize("seed", range(4))
def test_screw_tree_has_every_joint_step(seed):
    """The trees below do reach the paths under test (offset and oblique screws)."""
    model = screw_tree(np.random.default_rng(seed))
    fast, screw_rev = _fast_codes(model)
    assert np.any((fast == 4) & (screw_rev > 0))        # FAST_SCREW about a body axis
    assert np.any((fast == 4) & (screw_rev == 0))       # FAST_SCREW, oblique or helical
    assert np.any((fast >= 1) & (fast <= 3))            # FAST_REV_*


@pytest.mark.parametrize("seed", range(4))
def test_prepass_poses_are_the_one_at_a_time_sines_bit_for_bit(seed):
    """Oracle: the world poses oMi of the Jacobian's path sweep (each sine evaluated on
    the spot) — forward kinematics' prepass sines must give the same bits; the CRBA,
    the spatial RNEA and the ABA give the same poses sMi, liMi and screws sJ as each
    other, also when one Data goes from one state to another (stale sines)."""
    rng = np.random.default_rng(seed)
    model = screw_tree(rng)
    d_crba, d_rnea, d_aba, d_fk, d_jac = (model.create_data() for _ in range(5))
    parents = np.asarray(model._tables["parent"])
    leaves = [i for i in range(model.nb) if i not in set(parents.tolist())]
    for _ in range(3):
        q = model.random_configuration(rng)
        v, a = rng.standard_normal((2, model.nv))
        model.forward_kinematics(q, data=d_fk)
        for leaf in leaves:
            model.jacobian(q, model.body_names[leaf], data=d_jac)
            i = leaf
            while i >= 0:                                # the leaf's path to its root
                assert np.array_equal(d_jac.oMi[i], d_fk.oMi[i])
                i = parents[i]
        model.mass_matrix(q, data=d_crba)
        model.inverse_dynamics(q, v, a, representation="spatial", data=d_rnea)
        model.forward_dynamics(q, v, a, data=d_aba)
        for d in (d_crba, d_rnea):
            assert np.array_equal(d.sMi, d_aba.sMi)
            assert np.array_equal(d.liMi, d_aba.liMi)
            assert np.array_equal(d.sJ, d_aba.sJ)


@pytest.mark.parametrize("maker,seed", [(screw_tree, 0), (screw_tree, 1), (screw_tree, 2),
                                        (random_tree, 3), (random_tree, 4)])
def test_mass_matrix_and_spatial_rnea_against_the_body_form(maker, seed):
    """M equals the columns of the body-form RNEA (τ(e_k) − τ(0) at zero velocity and
    gravity), τ spatial equals τ body, at 1e-12 relative; single and batch agree."""
    rng = np.random.default_rng(seed)
    model = maker(rng)
    for _ in range(2):
        q = model.random_configuration(rng)
        v, a = rng.standard_normal((2, model.nv))
        M = model.mass_matrix(q)
        zero, g0 = np.zeros(model.nv), np.zeros(3)
        h = model.inverse_dynamics(q, zero, zero, gravity=g0)
        cols = np.array([model.inverse_dynamics(q, zero, e, gravity=g0) - h
                         for e in np.eye(model.nv)]).T
        scale = np.abs(M).max()
        assert np.abs(M - cols).max() <= 1e-12 * scale
        assert np.array_equal(M, M.T)
        tb = model.inverse_dynamics(q, v, a)
        ts = model.inverse_dynamics(q, v, a, representation="spatial")
        assert np.abs(ts - tb).max() <= 1e-12 * max(1.0, np.abs(tb).max())
        Q = np.array([q, model.random_configuration(rng)])
        assert np.array_equal(model.mass_matrix(Q)[0], M)


# ---------------------------------------------------------------- mesh inertia

def _old_mesh_inertia(tri, mode):
    """The triangle-major computation that treedyn.io.mjcf used before (oracle)."""
    D, E, F = tri[:, 0], tri[:, 1], tri[:, 2]
    a, b = E - D, F - D
    cr = np.empty_like(a)
    cr[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    cr[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    cr[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    area2 = np.sqrt(np.einsum("ij,ij->i", cr, cr))
    S = D + E + F
    facecen = area2 @ S / (3 * area2.sum())
    vol = np.einsum("ij,ij->i", S / 3 - facecen, cr) / 6
    if mode == "legacy":
        vol = np.abs(vol)
    total = vol.sum()
    com = (vol @ (0.25 * S) + 0.25 * total * facecen) / total
    X = tri - com
    S = S - 3 * com
    vol = np.einsum("ij,ij->i", S, cr) / 18
    if mode == "legacy":
        vol = np.abs(vol)
    w = vol / 20
    Xw = (X * w[:, None, None]).reshape(-1, 3)
    P = Xw.T @ X.reshape(-1, 3) + (S * w[:, None]).T @ S
    return vol.sum(), com, (np.trace(P) * np.eye(3) - P) / vol.sum()


def _qmat(q):
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _blob(rng, n=400):
    """A closed, outward-oriented, irregular star-shaped polyhedron of 2 n triangles
    (a fan of a perturbed sphere), shifted off the origin."""
    k = n // 2
    th = np.linspace(0, 2 * np.pi, k, endpoint=False)
    ring = lambda z, r: np.c_[r * np.cos(th), r * np.sin(th), np.full(k, z)]   # noqa: E731
    lo, hi = ring(-0.3, 0.5), ring(0.4, 0.35)
    lo *= rng.uniform(0.9, 1.1, (k, 1))
    bot, top = np.array([0.0, 0.0, -0.7]), np.array([0.05, 0.0, 0.8])
    tris = []
    for i in range(k):
        j = (i + 1) % k
        tris += [(bot, lo[j], lo[i]), (top, hi[i], hi[j]),
                 (lo[i], lo[j], hi[j]), (lo[i], hi[j], hi[i])]
    return np.array(tris) + [0.3, -0.2, 0.1]


def _write_stl(path, tri, ascii):
    tri = np.asarray(tri, dtype=np.float32)
    if ascii:
        body = "".join("facet normal 0 0 0\nouter loop\n" + "".join(
            f"vertex {x!r} {y!r} {z!r}\n" for x, y, z in t.tolist()) + "endloop\nendfacet\n"
            for t in tri)
        path.write_text(f"solid t\n{body}endsolid t\n")
        return
    rec = np.zeros(len(tri), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = tri
    rec["n"] = 7.0                       # nonzero normals and attributes are skipped
    rec["a"] = 513
    path.write_bytes(b"\0" * 80 + np.uint32(len(tri)).tobytes() + rec.tobytes())


@pytest.mark.parametrize("ascii", [False, True])
def test_read_stl_by_axis_is_the_same_values(tmp_path, ascii):
    from treedyn.io.mjcf import _read_stl
    tri = _blob(np.random.default_rng(0), 40)
    _write_stl(tmp_path / "b.stl", tri, ascii)
    data = (tmp_path / "b.stl").read_bytes()
    T = _read_stl(data)
    assert T.dtype == np.float64 and T.shape == (len(tri), 3, 3)
    assert np.array_equal(T, tri.astype(np.float32).astype(np.float64))
    A = _read_stl(data, by_axis=True)
    assert A.flags.c_contiguous and np.array_equal(A, T.transpose(1, 2, 0))


@pytest.mark.parametrize("mode,ascii,refpos,refquat,scale", [
    ("legacy", False, None, None, None),
    ("exact", True, None, None, None),
    ("legacy", False, "0.1 -0.2 0.05", None, "1.5 0.7 2"),
    ("exact", False, None, "0.9 0.1 -0.3 0.2", None),
    ("legacy", True, "0.02 0 0", "0.7 0.2 0.1 0.6", "-1 1 1"),   # mirrored: flipped order
    ("exact", False, None, None, "2 -0.5 1.25"),
])
def test_mesh_inertia_by_axis_equals_the_triangle_major_computation(
        tmp_path, mode, ascii, refpos, refquat, scale):
    """Oracle: _old_mesh_inertia on the same float32 vertices, moved as MuJoCo's mesh
    compiler does (vertices − refpos, rotated by refquat⁻¹, scaled; a mirroring
    scale flips the triangles).  Mass, COM and inertia to 1e-13 relative."""
    from treedyn.io.mjcf import _read_stl
    rng = np.random.default_rng(5)
    _write_stl(tmp_path / "b.stl", _blob(rng), ascii)
    attrs = "".join(f' {k}="{v}"' for k, v in (("refpos", refpos), ("refquat", refquat),
                                               ("scale", scale)) if v is not None)
    (tmp_path / "m.xml").write_text(
        f'<mujoco><asset><mesh name="m" file="b.stl" inertia="{mode}"{attrs}/></asset>'
        f'<worldbody><body name="a"><joint/><geom type="mesh" mesh="m" density="900"/>'
        f'</body></worldbody></mujoco>')
    model = td.load(tmp_path / "m.xml")
    tri = _read_stl((tmp_path / "b.stl").read_bytes())
    if refpos is not None:
        tri = tri - np.array(refpos.split(), dtype=float)
    if refquat is not None:
        qv = np.array(refquat.split(), dtype=float)
        tri = tri @ _qmat(qv / np.linalg.norm(qv))
    if scale is not None:
        s = np.array(scale.split(), dtype=float)
        tri = tri * s
        if np.prod(s) < 0:
            tri = tri[:, [0, 2, 1]]
    vol, com, I_unit = _old_mesh_inertia(tri, mode)
    mass = 900 * vol
    assert model.mass[0] == pytest.approx(mass, rel=1e-13)
    np.testing.assert_allclose(model.com[0], com, rtol=0, atol=1e-13 * np.abs(com).max())
    I = mass * I_unit
    np.testing.assert_allclose(model.inertia[0], I, rtol=0, atol=1e-13 * np.abs(I).max())
