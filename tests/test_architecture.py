"""The package's structure (docs/architecture.md):

* imports flow one way — io → graph → compiler → model → dynamics / constraints /
  derivatives / simulate → cli — with no circle, counting the imports inside
  functions too (read with ``ast`` from every module of the package);
* the compiled layer (cysrc/) imports nothing of the package but treedyn.errors;
* the public names of ``Model``, ``Data`` and ``treedyn`` are exactly the names
  docs/api.md documents (every public name documented, nothing else public)."""
import ast
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import treedyn as td

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "treedyn")


# ---------------------------------------------------------------------- imports
def _modules(package_dir, package="treedyn"):
    """{dotted module name: path} of every .py file of the package."""
    mods = {}
    for dirpath, _, files in os.walk(package_dir):
        rel = os.path.relpath(dirpath, package_dir)
        parts = [package] + ([] if rel == "." else rel.split(os.sep))
        for f in files:
            if f.endswith(".py"):
                name = parts if f == "__init__.py" else parts + [f[:-3]]
                mods[".".join(name)] = os.path.join(dirpath, f)
    return mods


def import_graph(package_dir, package="treedyn"):
    """{module: {(imported module, line)}} of the package's own modules, from every
    import statement anywhere in each file (top level and inside functions)."""
    mods = _modules(package_dir, package)
    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.endswith("__init__.py")
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        here = mod.split(".") if is_pkg else mod.split(".")[:-1]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here[:len(here) - node.level + 1] if node.level else []
                stem = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{stem}.{a.name}" for a in node.names]
                if node.module:
                    targets = [stem] + subs
                else:       # from . import a: submodule a, else a name of the package
                    folder = os.path.dirname(mods.get(stem, path))
                    targets = [t if t in mods else stem for t in subs
                               if t in mods or not any(f.startswith(t.rsplit(".", 1)[1] + ".")
                                                       for f in os.listdir(folder))]
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]          # a name inside a module
                if t in mods and t != mod:
                    graph[mod].add((t, node.lineno))
    return graph


def find_cycle(graph):
    """A list of modules [m0, m1, …, m0] that import each other in a circle, or None."""
    edges = {m: sorted({t for t, _ in targets}) for m, targets in graph.items()}
    state = {}
    stack = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in edges.get(m, ()):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state:
                found = visit(t)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(edges):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_find_cycle_finds_circles_through_function_level_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("import os\n")
    (pkg / "c.py").write_text("from .a import x\n")
    assert find_cycle(import_graph(str(pkg), "pkg")) is None
    (pkg / "b.py").write_text("def f():\n    from .c import y\n    return y\n")
    assert find_cycle(import_graph(str(pkg), "pkg")) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


def test_the_package_imports_flow_one_way():
    graph = import_graph(PACKAGE)
    cycle = find_cycle(graph)
    if cycle:
        where = [f"{a} imports {b} (line "
                 f"{min(n for t, n in graph[a] if t == b)})" for a, b in zip(cycle, cycle[1:])]
        pytest.fail("import circle: " + "; ".join(where))


# the layers, upstream first: a module imports only modules of its own or an
# earlier layer (docs/architecture.md).  Read in the import direction, the issue's
# chain io → graph → compiler → model → algorithms: io imports graph, graph imports
# compiler (JointGraph.compile), compiler imports model, model the algorithms.
LAYERS = [
    {"treedyn.errors", "treedyn.validation", "treedyn.linalg", "treedyn.joint_types",
     "treedyn.lie", "treedyn.geometry", "treedyn._ext"},
    {"treedyn.tables", "treedyn.integrators", "treedyn.kinematics", "treedyn.dynamics",
     "treedyn.constraints", "treedyn.derivatives", "treedyn.plotting", "treedyn.io.xmlfile",
     "treedyn.io.files", "treedyn.identification", "treedyn.sensitivity"},  # (io/files: issue 25, read by the readers)
    {"treedyn.model"},
    {"treedyn.compiler"},
    {"treedyn.graph"},
    {"treedyn.io.urdf", "treedyn.io.sdf", "treedyn.io.toml", "treedyn.io.mjcf", "treedyn.io.visuals"},
    {"treedyn.io", "treedyn.simulate", "treedyn.rollout", "treedyn.viewer"},
    {"treedyn", "treedyn.cli"},
]


def test_every_module_has_a_layer_and_imports_only_upstream():
    graph = import_graph(PACKAGE)
    layer = {m: k for k, group in enumerate(LAYERS) for m in group}
    missing = sorted(set(graph) - set(layer))
    assert not missing, f"modules without a layer (add them to LAYERS and docs/architecture.md): {missing}"
    bad = [f"{m} (layer {layer[m]}) imports {t} (layer {layer[t]}, line {n})"
           for m, targets in graph.items() for t, n in sorted(targets) if layer[t] > layer[m]]
    assert not bad, bad


def test_the_compiled_layer_imports_only_treedyn_errors():
    cysrc = os.path.join(ROOT, "cysrc")
    found = []
    for f in sorted(os.listdir(cysrc)):
        if f.endswith((".pyx", ".pxi", ".pxd")):
            with open(os.path.join(cysrc, f), encoding="utf-8") as fh:
                for k, line in enumerate(fh, 1):
                    m = re.match(r"\s*(?:from|import|cimport)\s+(treedyn[\w.]*)", line)
                    if m:
                        found.append((f, k, m.group(1)))
    assert found and all(mod == "treedyn.errors" for _, _, mod in found), found


# ---------------------------------------------------------------------- namespace
API = os.path.join(ROOT, "docs", "api.md")


def documented(path=API):
    """{section: set of names} of docs/api.md: each ``- `name` …`` line under a
    ``## section`` heading."""
    out = {}
    section = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            h = re.match(r"##\s+`?([\w.]+)`?", line)
            if h:
                section = h.group(1)
                out.setdefault(section, set())
                continue
            m = re.match(r"-\s+`([\w.]+)", line)
            if m and section:
                out[section].add(m.group(1))
    return out


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


@pytest.fixture(scope="module")
def names():
    model = td.load(td.robots.path("delta.toml"))
    # the package's names after a plain ``import treedyn`` (in this process other
    # tests may have imported more submodules), and the submodules it leaves out
    fresh = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, treedyn; print(json.dumps("
         "[n for n in dir(treedyn) if not n.startswith('_')]))"],
        capture_output=True, text=True, check=True, timeout=120).stdout)
    submodules = {m.split(".")[1] for m in _modules(PACKAGE) if m.count(".") == 1}
    return {"Model": public(model), "Data": public(model.create_data()),
            "treedyn": set(fresh),
            "on_demand": {m for m in submodules if not m.startswith("_")} - set(fresh)}


@pytest.mark.parametrize("section", ["Model", "Data", "treedyn", "on_demand"])
def test_the_public_names_are_the_documented_names(names, section):
    doc = documented()[section]
    assert not names[section] - doc, f"public but not in docs/api.md: {sorted(names[section] - doc)}"
    assert not doc - names[section], f"in docs/api.md but not public: {sorted(doc - names[section])}"


def test_the_documented_model_arrays_are_read_only(names):
    model = td.load(td.robots.path("panda.urdf"))
    for n in names["Model"] - {"nb"}:                       # (nb: deprecated, warns)
        val = getattr(model, n)
        if isinstance(val, np.ndarray):
            assert not val.flags.writeable, n
