"""Shapes read from robot files: URDF and SDFormat ``<visual>``/``<collision>``,
TOML ``[[body.shape]]`` (both ways), and mesh paths resolved to files.

Each reader calls one function of this module with its own reader object, so the
geometry lives apart from the kinematics.  Shapes are attached with
:meth:`treedyn.JointGraph.add_shape` (kinds and sizes: :mod:`treedyn.geometry`).

Mesh paths: ``package://pkg/rest`` (ROS) and ``model://pkg/rest`` (SDFormat) are
looked up as ``<root>/pkg/rest`` for each root on ``$ROS_PACKAGE_PATH`` (resp.
``$GAZEBO_MODEL_PATH``, ``$SDF_PATH``, ``$GZ_SIM_RESOURCE_PATH``) and each
directory above the robot file (the directory named ``pkg`` itself included); ``file://`` and relative paths against
the robot file's directory.  A path whose file is found is stored absolute;
otherwise it is kept as written (the viewer warns and draws the stick figure).
"""
from __future__ import annotations

import os

import numpy as np

from .. import lie
from ..errors import ModelError
from ..graph import WORLD

__all__ = ["resolve_mesh", "urdf_shapes", "sdf_shapes", "toml_shapes", "shapes_to_toml"]


def resolve_mesh(uri, base_dir):
    """The absolute path of mesh ``uri`` if its file is found, else ``uri`` unchanged."""
    text = uri.strip()
    candidates = []
    scheme = text.partition("://")[0] if "://" in text else ""
    if scheme in ("package", "model"):
        rest = text[len(scheme) + 3:]
        pkg, _, sub = rest.partition("/")
        env = ("ROS_PACKAGE_PATH",) if scheme == "package" else ("GAZEBO_MODEL_PATH",
                                                                 "SDF_PATH", "GZ_SIM_RESOURCE_PATH")
        roots = [r for key in env for r in os.environ.get(key, "").split(os.pathsep) if r]
        d = os.path.abspath(base_dir)
        while True:
            roots.append(d)
            if os.path.basename(d) == pkg:
                candidates.append(os.path.join(d, sub))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        candidates += [os.path.join(r, pkg, sub) for r in roots]
    elif text.startswith("file://"):
        candidates.append(text[len("file://"):])
    else:
        candidates.append(text if os.path.isabs(text) else os.path.join(base_dir, text))
    for c in candidates:
        if os.path.isfile(c):
            return os.path.abspath(c)
    return text


def _shape_where(lname, role, name, k):
    """How an error names the k-th <visual>/<collision> element of a link (``name``
    its name attribute, or None)."""
    return f'<link name="{lname}"><{role}' + (f' name="{name}">' if name else f"> #{k}")


def _base_dir(file):
    return os.path.dirname(os.path.abspath(file)) if file and not file.startswith("<") else \
        os.getcwd()


def _add(reader, g, link, kind, size, pose, mesh, rgba, name, role, where):
    try:
        g.add_shape(link, kind, size, pose=pose, mesh=mesh, rgba=rgba, name=name, role=role,
                    source=(reader.file, where))
    except ModelError as exc:
        reader.fail(str(exc), where)


# ------------------------------------------------------------------------- URDF
def urdf_shapes(reader, g, root, links):
    """Add the ``<visual>`` and ``<collision>`` shapes of every link (URDF reader)."""
    base = _base_dir(reader.file)
    materials = {}
    for mat in root.findall("material"):
        rgba = _urdf_color(reader, mat, f'<material name="{mat.get("name")}">')
        if mat.get("name") and rgba is not None:
            materials[mat.get("name")] = rgba
    for lname, el in links.items():
        for role in ("visual", "collision"):
            for k, vis in enumerate(el.findall(role)):
                name = vis.get("name")
                where = _shape_where(lname, role, name, k)
                geo = vis.find("geometry")
                if geo is None or not len(geo):
                    reader.fail("missing <geometry> (box, cylinder, sphere or mesh)", where,
                                "geometry")
                shape = geo[0]
                where_g = f"{where}<geometry><{shape.tag}>"
                pose = reader.origin(vis, where)
                mesh = None
                if shape.tag == "box":
                    kind, size = "box", reader.floats(shape, "size", 3, where_g)
                elif shape.tag == "sphere":
                    kind, size = "sphere", reader.floats(shape, "radius", 1, where_g)
                elif shape.tag in ("cylinder", "capsule"):
                    kind = shape.tag
                    size = [reader.floats(shape, "radius", 1, where_g)[0],
                            reader.floats(shape, "length", 1, where_g)[0]]
                elif shape.tag == "mesh":
                    kind = "mesh"
                    size = reader.floats(shape, "scale", 3, where_g, (1.0, 1.0, 1.0))
                    uri = shape.get("filename")
                    if not uri or not uri.strip():
                        reader.fail("missing attribute 'filename'", where_g, "filename")
                    mesh = resolve_mesh(uri, base)
                else:
                    reader.skip(where_g, "geometry kinds URDF does not define")
                    continue
                rgba = None
                mat = vis.find("material") if role == "visual" else None
                if mat is not None:
                    rgba = _urdf_color(reader, mat, where + "<material>")
                    if rgba is None:
                        rgba = materials.get(mat.get("name"))
                link = WORLD if lname == WORLD else lname
                _add(reader, g, link, kind, size, pose, mesh, rgba, name, role, where)


def _urdf_color(reader, mat, where):
    col = mat.find("color")
    if col is None or col.get("rgba") is None:
        return None
    return np.clip(reader.floats(col, "rgba", 4, where + "<color>"), 0.0, 1.0)


# ---------------------------------------------------------------------- SDFormat
def sdf_shapes(reader, g):
    """Add the ``<visual>`` and ``<collision>`` shapes of every link (SDFormat reader;
    a shape's ``<pose>`` is in its link's frame unless ``relative_to`` names another)."""
    base = _base_dir(reader.file)
    for lname, (el, scope) in reader.links.items():
        T_link = reader.world_pose(("link", lname), f'<link name="{lname}">')
        for role in ("visual", "collision"):
            for k, vis in enumerate(el.findall(role)):
                name = vis.get("name")
                where = _shape_where(lname, role, name, k)
                pose_el = vis.find("pose")
                pose = reader.pose_value(pose_el, where)
                rel = reader.relative_to(pose_el, where)
                if rel is not None:
                    T_rel = reader.world_pose(reader.lookup(rel, scope, where, "relative_to"),
                                              where)
                    pose = lie.se3_inv(T_link) @ T_rel @ pose
                    pose[3] = (0.0, 0.0, 0.0, 1.0)
                geo = vis.find("geometry")
                if geo is None or not len(geo):
                    reader.fail("missing <geometry>", where, "geometry")
                shape = geo[0]
                wg = f"{where}<geometry>"
                tag = shape.tag
                mesh = None
                if tag == "box":
                    kind, size = "box", reader.values(shape.find("size"), 3, wg + "<box>", "size")
                elif tag == "sphere":
                    kind, size = "sphere", reader.values(shape.find("radius"), 1, wg + "<sphere>",
                                                         "radius")
                elif tag in ("cylinder", "capsule"):
                    kind = tag
                    size = [reader.number(shape.find("radius"), wg + f"<{tag}>", "radius"),
                            reader.number(shape.find("length"), wg + f"<{tag}>", "length")]
                elif tag == "ellipsoid":
                    kind, size = "ellipsoid", reader.values(shape.find("radii"), 3,
                                                            wg + "<ellipsoid>", "radii")
                elif tag == "mesh":
                    kind = "mesh"
                    size = reader.values(shape.find("scale"), 3, wg + "<mesh>", "scale",
                                         (1.0, 1.0, 1.0))
                    uri = (shape.findtext("uri") or "").strip()
                    if not uri:
                        reader.fail("missing <uri>", wg + "<mesh>", "uri")
                    mesh = resolve_mesh(uri, base)
                elif tag == "plane":
                    normal = reader.values(shape.find("normal"), 3, wg + "<plane>", "normal",
                                           (0.0, 0.0, 1.0))
                    size = reader.values(shape.find("size"), 2, wg + "<plane>", "size",
                                         (0.0, 0.0))
                    kind = "plane"
                    pose = pose.copy()
                    pose[:3, :3] = pose[:3, :3] @ _z_to(normal, reader, wg + "<plane>")
                else:
                    reader.skip(f"{wg}<{tag}>", "geometry kinds treedyn does not draw")
                    continue
                rgba = None
                mat = vis.find("material") if role == "visual" else None
                if mat is not None:
                    for tag_c in ("diffuse", "ambient"):
                        if mat.find(tag_c) is not None:
                            rgba = np.clip(reader.values(mat.find(tag_c), 4, where + "<material>",
                                                         tag_c), 0.0, 1.0)
                            break
                _add(reader, g, lname, kind, size, pose, mesh, rgba, name, role, where)


def _z_to(n, reader, where):
    """A rotation taking z to the unit vector along ``n``."""
    norm = np.linalg.norm(n)
    if not np.isfinite(norm) or norm == 0:
        reader.fail("the plane's normal is zero", where, "normal")
    z = n / norm
    x = np.cross([0.0, 1.0, 0.0] if abs(z[1]) < 0.9 else [1.0, 0.0, 0.0], z)
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


# -------------------------------------------------------------------------- TOML
SHAPE_KEYS = {"kind", "size", "origin", "rpy", "rotation", "mesh", "rgba", "name", "role"}


def toml_shapes(g, link, tables, file, element, pose_of, fail):
    """Add the ``[[body.shape]]`` tables of ``link`` (TOML reader); ``pose_of`` and
    ``fail`` are the reader's pose parser and error helper."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        fail("'shape' must be an array of tables ([[body.shape]])", file, element, "shape")
    base = _base_dir(file)
    for k, t in enumerate(tables):
        el = f"{element} shape #{k}"
        unknown = set(t) - SHAPE_KEYS
        if unknown:
            fail(f"unknown key(s) {sorted(unknown)} (allowed: {sorted(SHAPE_KEYS)})", file, el,
                 sorted(unknown)[0])
        for key in ("kind", "size"):
            if key not in t:
                fail("missing key", file, el, key)
        mesh = t.get("mesh")
        if isinstance(mesh, str):
            mesh = resolve_mesh(mesh, base)
        pose = pose_of({k2: t[k2] for k2 in ("origin", "rpy", "rotation") if k2 in t}, file, el)
        g.add_shape(link, t["kind"], t["size"], pose=pose, mesh=mesh, rgba=t.get("rgba"),
                    name=t.get("name"), role=t.get("role", "visual"), source=(file, el))


def shapes_to_toml(graph, floats):
    """{link: [shape tables]} of ``graph``'s shapes, for the TOML writer."""
    out = {}
    for s in graph.shapes:
        t = {"kind": s.kind, "size": floats(s.size)}
        if not np.array_equal(s.pose, np.eye(4)):
            t["origin"] = floats(s.pose[:3, 3])
            t["rotation"] = [floats(r) for r in s.pose[:3, :3]]
        if s.mesh is not None:
            t["mesh"] = s.mesh
        if s.rgba is not None:
            t["rgba"] = floats(s.rgba)
        if s.name is not None:
            t["name"] = s.name
        if s.role != "visual":
            t["role"] = s.role
        out.setdefault(s.link, []).append(t)
    return out
