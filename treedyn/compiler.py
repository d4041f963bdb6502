"""Graph → model compiler: a :class:`~treedyn.graph.JointGraph` becomes a flat
:class:`~treedyn.model.Model`.

Bodies are numbered so that ``parent[i] < i`` (``-1`` is the world); every moving
body has exactly one tree joint, the joint that connects it to its parent.  Fixed
joints are merged: the child's inertia is lumped into the nearest moving ancestor
(expressed in that body's frame) and the merged link stays available as a named
frame.

Conventions (docs/conventions.md): screws angular first ``(ω, v)``; body i's pose
``C_i = C_parent B_i J_i(q_i)`` with ``B_i = A_parent⁻¹ A_i`` the relative reference
pose and ``A_i`` the pose at q = 0; body-fixed joint screws ``X_i = Ad_{A_i}⁻¹ Y_i``,
``Y_i`` the spatial screws at q = 0.

Imports run one way: ``io → graph → compiler → model`` (docs/architecture.md);
nothing below imports upward.  The kernel tables come from :mod:`treedyn.tables`.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np

from . import lie
from ._ext import KIND_FREE_SE3, KIND_FREE_SO3R3, KIND_SCREWS, KIND_SPHERICAL
from .errors import ModelError
from .joint_types import JOINT_TYPES, WORLD
from .linalg import unit_vector
from .model import LoopClosure, Model
from .tables import core_tables

__all__ = ["compile_model", "joint_screws", "planar_directions", "spatial_inertia"]

#: the per-freedom passive-force coefficients copied from the joints to the model
_PASSIVE_KEYS = ("damping", "stiffness", "spring_reference", "friction")


def planar_directions(j):
    """Unit normal n and in-plane directions (u, n × u) of a planar joint."""
    n = unit_vector(j["axis"])
    if j["x_axis"] is None:
        trial = np.eye(3)[np.argmin(np.abs(n))]
    else:
        trial = np.asarray(j["x_axis"], dtype=float)
    u = unit_vector(trial - n * (n @ trial))
    return n, u, np.cross(n, u)


def joint_screws(j):
    """Spatial unit screws (k, 6) at q = 0 of a joint described by dict ``j``
    (world frame): Y = (e, p × e + h e) for an axis e through p with pitch h,
    Y = (0, e) for a translation.  Spherical: three rotations about the world
    axes through the centre; free and fixed: none here."""
    t, p = j["type"], j["point"]
    zero = np.zeros(3)
    if t in ("revolute", "continuous", "helical"):
        e = unit_vector(j["axis"])
        return np.concatenate([e, lie.cross(p, e) + j["pitch"] * e])[None]
    if t == "prismatic":
        return np.concatenate([zero, unit_vector(j["axis"])])[None]
    if t == "cylindrical":
        e = unit_vector(j["axis"])
        return np.array([np.concatenate([e, lie.cross(p, e)]), np.concatenate([zero, e])])
    if t == "universal":
        return np.array([np.concatenate([a, lie.cross(p, a)]) for a in map(unit_vector, j["axes"])])
    if t == "planar":
        n, u, w = planar_directions(j)
        return np.array([np.concatenate([zero, u]), np.concatenate([zero, w]),
                         np.concatenate([n, lie.cross(p, n)])])
    if t == "spherical":
        return np.array([np.concatenate([e, lie.cross(p, e)]) for e in np.eye(3)])
    return np.zeros((0, 6))


def _lump(owner, m, c, inertia, nb):
    """Mass (nb,), COM (nb, 3) and inertia about the COM (nb, 3, 3) of each owner
    from the (mass, COM, inertia about the COM) of its links, all in the owner's
    frame (parallel-axis theorem).  A massless owner gets COM 0 and the sum of
    its links' inertias."""
    mass = np.bincount(owner, weights=m, minlength=nb)
    mc = np.zeros((nb, 3))
    np.add.at(mc, owner, m[:, None] * c)
    heavy = mass > 0
    com = np.zeros((nb, 3))
    com[heavy] = mc[heavy] / mass[heavy, None]
    d = np.where(heavy[owner, None], c - com[owner], 0.0)
    shift = m[:, None, None] * ((d * d).sum(-1)[:, None, None] * np.eye(3)
                                - d[:, :, None] * d[:, None, :])
    total = np.zeros((nb, 3, 3))
    np.add.at(total, owner, inertia + shift)
    return mass, com, total


def _inverse_poses(A):
    """C⁻¹ = [[Rᵀ, −Rᵀ r], [0, 1]] of every pose of A (n, 4, 4)."""
    inv = np.zeros_like(A)
    RT = np.swapaxes(A[:, :3, :3], 1, 2)
    inv[:, :3, :3] = RT
    inv[:, :3, 3] = -np.einsum("kij,kj->ki", RT, A[:, :3, 3])
    inv[:, 3, 3] = 1.0
    return inv


def _adjoints_of(C):
    """lie.Ad of every pose of C (n, 4, 4): (n, 6, 6)."""
    return lie.Ad_batch(C[:, :3, :3], C[:, :3, 3])


def _body_screws(kind, A, Ainv, center, Y):
    """Body-fixed screws X (nv, 6) and spatial screws at q = 0 Y (nv, 6) of all
    freedoms: screw joints have Y from their description and X = Ad_{A⁻¹} Y;
    spherical joints rotate about the body axes through their centre, free joints
    move along the body axes (X fixed, Y = Ad_A X)."""
    rows_X, rows_Y, owner_rows = [], [], []
    for i, (k, Yi) in enumerate(zip(kind, Y)):
        if k == KIND_SCREWS:
            rows_Y.append(Yi)
            rows_X.append(np.full((len(Yi), 6), np.nan))
        elif k == KIND_SPHERICAL:
            c = center[i]
            Xi = np.hstack([np.eye(3), np.cross(c, np.eye(3))])
            rows_X.append(Xi)
            rows_Y.append(np.full((3, 6), np.nan))
        else:
            rows_X.append(np.eye(6))
            rows_Y.append(np.full((6, 6), np.nan))
        owner_rows.append(np.full(len(rows_X[-1]), i))
    if not rows_X:
        return np.zeros((0, 6)), np.zeros((0, 6))
    X, Y = np.concatenate(rows_X), np.concatenate(rows_Y)
    body = np.concatenate(owner_rows)
    screw = kind[body] == KIND_SCREWS
    X[screw] = np.einsum("kij,kj->ki", _adjoints_of(Ainv[body[screw]]), Y[screw])
    Y[~screw] = np.einsum("kij,kj->ki", _adjoints_of(A[body[~screw]]), X[~screw])
    return X, Y


def spatial_inertia(mass, com, inertia):
    """Body-frame spatial inertia ``[[Θc − m d̂², m d̂], [m d̂ᵀ, m I]]`` (6, 6) of mass
    m (kg), COM d (m) and inertia about the COM Θc (kg·m²); vectorized: mass (n,),
    com (n, 3), inertia (n, 3, 3) give (n, 6, 6)."""
    mass = np.asarray(mass, dtype=float)
    d = lie.hat3_batch(np.asarray(com, dtype=float))
    md = mass[..., None, None] * d
    M = np.empty(mass.shape + (6, 6))
    M[..., :3, :3] = inertia - md @ d
    M[..., :3, 3:] = md
    M[..., 3:, :3] = np.swapaxes(md, -1, -2)
    M[..., 3:, 3:] = mass[..., None, None] * np.eye(3)
    return M


def compile_model(graph, _private=False):
    """Compile a :class:`~treedyn.graph.JointGraph` into a :class:`Model`.

    The model keeps a private copy of the graph: later edits of ``graph`` do not
    change the model (nor what pickling or ``treedyn.save`` reproduce).  The
    loaders pass ``_private=True`` for a graph nobody else holds, which the model
    then keeps as is (a deep copy costs ~0.1 ms per link)."""
    if not _private:
        graph = copy.deepcopy(graph)
    order, parent_joint = graph.spanning_tree()
    moving = [b for b in order if parent_joint[b]["type"] != "fixed"]
    index = {b: i for i, b in enumerate(moving)}
    owner = {WORLD: -1}
    for b in order:
        owner[b] = index[b] if b in index else owner[parent_joint[b]["parent"]]

    def frame_of(link):
        return graph.body(link)["frame"]

    def owner_frame(link):
        k = owner[link]
        return np.eye(4) if k < 0 else frame_of(moving[k])

    nb = len(moving)
    A = np.array([frame_of(b) for b in moving]).reshape(nb, 4, 4)
    Ainv = _inverse_poses(A)
    # lump inertias of merged links into their owners (owner-frame coordinates)
    links = [link for link in order if owner[link] >= 0]
    own = np.array([owner[link] for link in links], dtype=np.intp)
    nodes = [graph.body(link) for link in links]
    T = Ainv[own] @ np.array([nd["frame"] for nd in nodes]).reshape(-1, 4, 4)
    R, r = T[:, :3, :3], T[:, :3, 3]
    m_k = np.array([nd["mass"] for nd in nodes], dtype=float)
    c_k = np.einsum("kij,kj->ki", R, np.array([nd["com"] for nd in nodes]).reshape(-1, 3)) + r
    I_k = R @ np.array([nd["inertia"] for nd in nodes]).reshape(-1, 3, 3) @ np.swapaxes(R, 1, 2)
    mass, com, inertia = _lump(own, m_k, c_k, I_k, nb)

    parent = np.array([owner[parent_joint[b]["parent"]] for b in moving], dtype=np.int32)
    kind = np.empty(nb, dtype=np.int32)
    nqj = np.empty(nb, dtype=np.int32)
    nvj = np.empty(nb, dtype=np.int32)
    B = np.where(parent[:, None, None] >= 0, Ainv[np.maximum(parent, 0)], np.eye(4)) @ A
    center = np.zeros((nb, 3))
    Y, armature = [], []
    passive = {key: [] for key in _PASSIVE_KEYS}
    lower, upper, vel, eff = [], [], [], []
    joint_names, joint_types, free_groups = [], [], {}
    for i, b in enumerate(moving):
        j = parent_joint[b]
        t = j["type"]
        nqj[i], nvj[i] = JOINT_TYPES[t]
        if t == "spherical":
            kind[i] = KIND_SPHERICAL
            center[i] = Ainv[i, :3, :3] @ j["point"] + Ainv[i, :3, 3]
            Y.append(None)                      # X and Y below
        elif t == "free":
            kind[i] = KIND_FREE_SE3 if j["group"] == "SE3" else KIND_FREE_SO3R3
            free_groups[j["name"]] = j["group"]
            Y.append(None)
        else:
            kind[i] = KIND_SCREWS
            Y.append(joint_screws(j))
        armature.append(j["armature"])
        for key in _PASSIVE_KEYS:
            passive[key].append(np.asarray(j.get(key, np.zeros(nvj[i])), dtype=float))
        lim = j["limits"]
        if t in ("spherical", "free"):
            lower += [-np.inf] * nqj[i]
            upper += [np.inf] * nqj[i]
        else:
            lower += [lim["lower"]] * nqj[i]
            upper += [lim["upper"]] * nqj[i]
        vel += [lim["velocity"]] * nvj[i]
        eff += [lim["effort"]] * nvj[i]
        joint_names.append(j["name"])
        joint_types.append(t)
    X, Y = _body_screws(kind, A, Ainv, center, Y)

    qoff = np.concatenate([[0], np.cumsum(nqj)[:-1]]).astype(np.int32) if nb else np.zeros(0, np.int32)
    voff = np.concatenate([[0], np.cumsum(nvj)[:-1]]).astype(np.int32) if nb else np.zeros(0, np.int32)
    # frames: every link (moving or merged), the world, and extra frames
    # (offset in the owner's frame = owner frame⁻¹ · link frame [· extra pose])
    extra = list(graph.frames.items())
    frame_names = [WORLD] + list(order) + [name for name, _ in extra]
    frame_links = list(order) + [link for _, (link, _) in extra]
    frame_body = np.array([-1] + [owner[link] for link in frame_links], dtype=np.int32)
    Ainv_w = np.concatenate([Ainv, np.eye(4)[None]])          # index -1: the world
    F = np.array([frame_of(link) for link in frame_links]).reshape(-1, 4, 4)
    if extra:
        F[len(order):] = F[len(order):] @ np.array([pose for _, (_, pose) in extra])
    frame_offset = np.concatenate([np.eye(4)[None], Ainv_w[frame_body[1:]] @ F])

    # shapes: pose in the owner's frame = owner frame⁻¹ · link frame · shape pose
    shapes = [sh.placed(owner[sh.link], Ainv_w[owner[sh.link]] @ frame_of(sh.link) @ sh.pose)
              for sh in graph.shapes]

    closures = []
    unapplied = [j["name"] for j in graph.joints(loop=True)
                 if any(np.any(j.get(key, 0.0) != 0) for key in _PASSIVE_KEYS)]
    if unapplied:
        warnings.warn(f"{graph.name}: the damping, springs and friction of the loop-closing "
                      f"joint(s) {unapplied} are not applied (a loop closure has no "
                      f"coordinates)", stacklevel=3)
    for j in graph.joints(loop=True):
        Yc = joint_screws(j)
        closures.append(LoopClosure(
            name=j["name"], type=j["type"], parent_link=j["parent"], child_link=j["child"],
            parent_body=owner[j["parent"]], child_body=owner[j["child"]],
            parent_offset=lie.se3_inv(owner_frame(j["parent"])) @ frame_of(j["parent"]),
            child_offset=lie.se3_inv(owner_frame(j["child"])) @ frame_of(j["child"]),
            Y=Yc, point=j["point"].copy(), data=j))

    jindex = {n: k for k, n in enumerate(joint_names)}
    mimic = []
    fixed_joints = {j["name"] for j in graph.joints(loop=False) if j["type"] == "fixed"}
    void = [mm["joint"] for mm in graph.mimic
            if mm["joint"] in fixed_joints or mm["leader"] in fixed_joints]
    if void:
        warnings.warn(f"{graph.name}: mimic couplings of the fixed joint(s) {void} have no "
                      f"effect and are not kept", stacklevel=3)
    for mm in graph.mimic:
        if mm["joint"] in void:
            continue
        for role in ("joint", "leader"):
            if mm[role] not in jindex:
                raise ModelError(f"mimic: {role} '{mm[role]}' is not a moving tree joint")
            if nvj[jindex[mm[role]]] != 1:
                raise ModelError(f"mimic: {role} '{mm[role]}' must have one degree of freedom")
        mimic.append({k: mm[k] for k in ("joint", "leader", "multiplier", "offset")})

    arrays = dict(
        parent=parent, kind=kind, nqj=nqj, nvj=nvj, qoff=qoff, voff=voff,
        A=A, B=B, X=X,
        Y=Y, center=center,
        mass=mass, com=com, inertia=inertia,
        spatial_inertia=spatial_inertia(mass, com, inertia),
        armature=np.concatenate(armature) if armature else np.zeros(0),
        **{key: np.concatenate(val) if val else np.zeros(0) for key, val in passive.items()},
        lower_limit=np.array(lower, dtype=float), upper_limit=np.array(upper, dtype=float),
        velocity_limit=np.array(vel, dtype=float), effort_limit=np.array(eff, dtype=float),
        frame_body=frame_body, frame_offset=frame_offset,
        gravity=graph.gravity.copy(),
    )
    names = dict(name=graph.name, body_names=list(moving), joint_names=joint_names,
                 joint_types=joint_types, frame_names=frame_names,
                 free_groups=free_groups, shapes=shapes)
    return Model(graph, arrays, names, closures, mimic, core_tables(arrays))
