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

Imports run one way: ``io → graph → compiler → model``; nothing below imports upward.
"""
from __future__ import annotations

import copy
import warnings

import numpy as np

from . import lie
from ._kernels import KIND_FREE_SE3, KIND_FREE_SO3R3, KIND_SCREWS, KIND_SPHERICAL
from .errors import ModelError
from .graph import JOINT_TYPES, WORLD
from .model import LoopClosure, Model

__all__ = ["compile_model", "joint_screws", "planar_directions", "spatial_inertia"]


def _unit(v):
    return np.asarray(v, dtype=float) / np.linalg.norm(v)


def planar_directions(j):
    """Unit normal n and in-plane directions (u, n × u) of a planar joint."""
    n = _unit(j["axis"])
    if j["x_axis"] is None:
        trial = np.eye(3)[np.argmin(np.abs(n))]
    else:
        trial = np.asarray(j["x_axis"], dtype=float)
    u = _unit(trial - n * (n @ trial))
    return n, u, np.cross(n, u)


def joint_screws(j):
    """Spatial unit screws (k, 6) at q = 0 of a joint described by dict ``j``
    (world frame): Y = (e, p × e + h e) for an axis e through p with pitch h,
    Y = (0, e) for a translation.  Spherical: three rotations about the world
    axes through the centre; free and fixed: none here."""
    t, p = j["type"], j["point"]
    if t in ("revolute", "continuous", "helical"):
        e = _unit(j["axis"])
        return np.array([np.r_[e, np.cross(p, e) + j["pitch"] * e]])
    if t == "prismatic":
        return np.array([np.r_[np.zeros(3), _unit(j["axis"])]])
    if t == "cylindrical":
        e = _unit(j["axis"])
        return np.array([np.r_[e, np.cross(p, e)], np.r_[np.zeros(3), e]])
    if t == "universal":
        return np.array([np.r_[a, np.cross(p, a)] for a in map(_unit, j["axes"])])
    if t == "planar":
        n, u, w = planar_directions(j)
        return np.array([np.r_[np.zeros(3), u], np.r_[np.zeros(3), w], np.r_[n, np.cross(p, n)]])
    if t == "spherical":
        return np.array([np.r_[e, np.cross(p, e)] for e in np.eye(3)])
    return np.zeros((0, 6))


def _lump(parts):
    """Combine (mass, com, inertia-about-com) triples given in one frame."""
    m = sum(p[0] for p in parts)
    if m <= 0:
        return 0.0, np.zeros(3), sum((p[2] for p in parts), np.zeros((3, 3)))
    c = sum(p[0] * p[1] for p in parts) / m
    inertia = np.zeros((3, 3))
    for mk, ck, Ik in parts:
        d = ck - c
        inertia += Ik + mk * (d @ d * np.eye(3) - np.outer(d, d))
    return m, c, inertia


def spatial_inertia(mass, com, inertia):
    """Body-frame spatial inertia ``[[Θc − m d̂², m d̂], [m d̂ᵀ, m I]]`` (6, 6)."""
    d = lie.hat3(com)
    M = np.empty((6, 6))
    M[:3, :3] = inertia - mass * d @ d
    M[:3, 3:] = mass * d
    M[3:, :3] = mass * d.T
    M[3:, 3:] = mass * np.eye(3)
    return M


def compile_model(graph):
    """Compile a :class:`~treedyn.graph.JointGraph` into a :class:`Model`.

    The model keeps a private copy of the graph: later edits of ``graph`` do not
    change the model (nor what pickling or ``treedyn.save`` reproduce)."""
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
    # lump inertias of merged links into their owners (owner-frame coordinates)
    parts = {i: [] for i in range(nb)}
    for link in order:
        k = owner[link]
        if k < 0:
            continue
        nd = graph.body(link)
        T = lie.se3_inv(A[k]) @ nd["frame"]
        R, r = T[:3, :3], T[:3, 3]
        parts[k].append((nd["mass"], R @ nd["com"] + r, R @ nd["inertia"] @ R.T))
    mass, com, inertia = np.zeros(nb), np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    for i in range(nb):
        mass[i], com[i], inertia[i] = _lump(parts[i])

    parent = np.empty(nb, dtype=np.int32)
    kind = np.empty(nb, dtype=np.int32)
    nqj = np.empty(nb, dtype=np.int32)
    nvj = np.empty(nb, dtype=np.int32)
    B = np.empty((nb, 4, 4))
    center = np.zeros((nb, 3))
    X, Y, armature = [], [], []
    lower, upper, vel, eff = [], [], [], []
    joint_names, joint_types, free_groups = [], [], {}
    for i, b in enumerate(moving):
        j = parent_joint[b]
        t = j["type"]
        parent[i] = owner[j["parent"]]
        B[i] = lie.se3_inv(owner_frame(j["parent"])) @ A[i]
        nqj[i], nvj[i] = JOINT_TYPES[t]
        Ad_A, Ad_Ainv = lie.Ad(A[i]), lie.Ad(lie.se3_inv(A[i]))
        if t == "spherical":
            kind[i] = KIND_SPHERICAL
            c = (lie.se3_inv(A[i]) @ np.r_[j["point"], 1.0])[:3]
            center[i] = c
            Xi = np.array([np.r_[e, np.cross(c, e)] for e in np.eye(3)])
            Yi = Xi @ Ad_A.T
        elif t == "free":
            kind[i] = KIND_FREE_SE3 if j["group"] == "SE3" else KIND_FREE_SO3R3
            free_groups[j["name"]] = j["group"]
            Xi = np.eye(6)
            Yi = Xi @ Ad_A.T
        else:
            kind[i] = KIND_SCREWS
            Yi = joint_screws(j)
            Xi = Yi @ Ad_Ainv.T
        X.append(Xi)
        Y.append(Yi)
        armature.append(j["armature"])
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

    qoff = np.concatenate([[0], np.cumsum(nqj)[:-1]]).astype(np.int32) if nb else np.zeros(0, np.int32)
    voff = np.concatenate([[0], np.cumsum(nvj)[:-1]]).astype(np.int32) if nb else np.zeros(0, np.int32)
    nq, nv = int(nqj.sum()), int(nvj.sum())

    # frames: every link (moving or merged), the world, and extra frames
    frame_names, frame_body, frame_offset = [WORLD], [-1], [np.eye(4)]
    for link in order:
        frame_names.append(link)
        frame_body.append(owner[link])
        frame_offset.append(lie.se3_inv(owner_frame(link)) @ frame_of(link))
    for name, (link, pose) in graph.frames.items():
        frame_names.append(name)
        frame_body.append(owner[link])
        frame_offset.append(lie.se3_inv(owner_frame(link)) @ frame_of(link) @ pose)

    closures = []
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
        A=A, B=B, X=np.concatenate(X) if X else np.zeros((0, 6)),
        Y=np.concatenate(Y) if Y else np.zeros((0, 6)), center=center,
        mass=mass, com=com, inertia=inertia,
        spatial_inertia=np.array([spatial_inertia(mass[i], com[i], inertia[i])
                                  for i in range(nb)]).reshape(nb, 6, 6),
        armature=np.concatenate(armature) if armature else np.zeros(0),
        lower_limit=np.array(lower, dtype=float), upper_limit=np.array(upper, dtype=float),
        velocity_limit=np.array(vel, dtype=float), effort_limit=np.array(eff, dtype=float),
        frame_body=np.array(frame_body, dtype=np.int32),
        frame_offset=np.array(frame_offset).reshape(-1, 4, 4),
        gravity=graph.gravity.copy(),
    )
    names = dict(name=graph.name, body_names=list(moving), joint_names=joint_names,
                 joint_types=joint_types, frame_names=frame_names,
                 free_groups=free_groups)
    return Model(graph, arrays, names, closures, mimic)
