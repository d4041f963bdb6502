"""Shared helpers of the treedyn benchmarks: timing, fresh-process medians, tables.

Timing rules (docs: /work/shared/docs/PERFORMANCE.md):

* time a *statement string* with ``timeit`` and ``globals=``, never a ``lambda``
  (a lambda adds ≈ 0.05 µs per call and noise);
* within one process take the median of several repeats, each long enough
  (≥ 0.2 s by default) to average out timer resolution;
* process-to-process spread on this machine is 10–40 %: run every benchmark in
  several fresh interpreters and report the median across them.

A benchmark script defines a *worker* function that returns a flat dict
``{key: number or str}``; :func:`run_in_processes` runs it in K fresh
subprocesses and returns, per key, the median across processes (strings are
taken from the first process) plus the relative spread.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import timeit

__all__ = ["bench_main", "time_call", "time_calls", "run_in_processes", "run_sections", "use_snapshot",
           "default_env", "LoadMonitor", "busy_cores", "wait_for_idle", "Table", "fmt", "mark",
           "machine_info", "print_header", "ROBOTS", "QUICK_ROBOTS", "robot_label",
           "random_chain_links", "chain_urdf", "chain_treedyn", "chain_rnea_oracle", "median"]

_MARKER = "@@BENCH-RESULT@@"

# The robots, the treedyn <-> Pinocchio layout conversions and the comparison
# helpers are shared with the tests: they live in tests/oracles.py, which the
# benchmark scripts import as ``oracles`` (this puts tests/ on the path).
_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if _TESTS not in sys.path:
    sys.path.append(_TESTS)


# --------------------------------------------------------------------------- timing
def _autorange(timer, min_time):
    """Smallest loop count (growing geometrically) whose run takes >= min_time s."""
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= min_time:
            return number
        # aim 20 % above min_time, grow at least 2x and at most 100x per step
        grow = 1.2 * min_time / t if t > 0 else 100.0
        number = int(number * min(max(grow, 2.0), 100.0)) + 1


def time_call(stmt, globals, number=None, repeat=7, min_time=0.2, setup="pass"):
    """Median time of one execution of ``stmt``, in µs.

    ``stmt`` is a statement string evaluated with ``globals`` (a dict), e.g.
    ``time_call("m.inverse_dynamics(q, v, a)", {"m": m, "q": q, "v": v, "a": a})``.
    ``number`` (loops per repeat) is chosen so that one repeat takes at least
    ``min_time`` seconds if not given; the result is the median over ``repeat``
    repeats of (repeat time / number).
    """
    timer = timeit.Timer(stmt, setup=setup, globals=globals)
    if number is None:
        number = _autorange(timer, min_time)
    times = timer.repeat(repeat=repeat, number=number)
    return statistics.median(times) / number * 1e6


def time_calls(stmts, globals, repeat=7, min_time=0.2):
    """Like :func:`time_call` for several competing statements, interleaved.

    ``stmts`` maps labels to statement strings.  Each statement gets its own loop
    count (>= ``min_time`` s per repeat); the repeats are then run round-robin
    (A B C A B C ...) so that slow drifts of the machine (frequency, other
    processes) affect all candidates alike.  Returns {label: median µs per call}.
    """
    timers = {k: timeit.Timer(s, globals=globals) for k, s in stmts.items()}
    numbers = {k: _autorange(t, min_time) for k, t in timers.items()}
    times = {k: [] for k in stmts}
    for _ in range(repeat):
        for k, t in timers.items():
            times[k].append(t.timeit(numbers[k]) / numbers[k])
    return {k: statistics.median(v) * 1e6 for k, v in times.items()}


# ----------------------------------------------------------------- fresh processes
_WORKER_CODE = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")
path, func, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
spec = importlib.util.spec_from_file_location("_bench_worker_module", path)
mod = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mod
spec.loader.exec_module(mod)
result = getattr(mod, func)(**kwargs)
import treedyn
result["_treedyn_file"] = treedyn.__file__
sys.stdout.write("\n" + MARKER + json.dumps(result) + "\n")
""".replace("MARKER", repr(_MARKER))


def default_env():
    """Environment of the worker processes.

    OpenBLAS (behind NumPy) starts its own thread pool; with only 2 cores its
    spinning threads disturb both single-call timings and treedyn's OpenMP
    batch, so workers get ``OPENBLAS_NUM_THREADS=1`` unless the caller set it.
    """
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    if _SNAPSHOT is not None:         # the private copy first (the worker's cwd too)
        env["PYTHONPATH"] = os.pathsep.join([_SNAPSHOT] + [x for x in env.get(
            "PYTHONPATH", "").split(os.pathsep) if x])
    return env


def busy_cores(window=2.0):
    """Average number of busy cores (all processes, /proc/stat) over ``window`` s; None if
    unavailable."""
    import time
    try:
        b0 = LoadMonitor._ticks()[0]
        time.sleep(window)
        b1 = LoadMonitor._ticks()[0]
    except (OSError, ValueError):
        return None
    return (b1 - b0) / os.sysconf("SC_CLK_TCK") / window


def wait_for_idle(max_wait, threshold=0.15, window=2.0, verbose=True):
    """Wait (at most ``max_wait`` s) until the machine is idle: fewer than ``threshold``
    busy cores over ``window`` s.  Returns the last measured load."""
    import time
    t0 = time.perf_counter()
    while True:
        load = busy_cores(window)
        if load is None or load < threshold or time.perf_counter() - t0 >= max_wait:
            return load
        if verbose:
            print(f"  machine busy ({load:.2f} cores used by other processes), waiting ...",
                  file=sys.stderr, flush=True)


_SNAPSHOT = None        # directory holding a private copy of the treedyn package


def use_snapshot():
    """Copy the installed treedyn package (Python files and compiled kernels) to a
    temporary directory and make the worker processes import that copy.

    On a machine where treedyn is installed editable and being rebuilt while the
    benchmark runs, this keeps every worker on the same code.  Returns the
    package directory that was copied.
    """
    global _SNAPSHOT
    import importlib.util
    import shutil
    import tempfile
    src = os.path.dirname(importlib.util.find_spec("treedyn").origin)
    import atexit
    _SNAPSHOT = tempfile.mkdtemp(prefix="treedyn-bench-")
    atexit.register(shutil.rmtree, _SNAPSHOT, True)
    shutil.copytree(src, os.path.join(_SNAPSHOT, "treedyn"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    return src


def kernels_stamp():
    """Modification time of treedyn's compiled kernels (to detect a rebuild mid-run)."""
    import glob
    import importlib.util
    try:
        if _SNAPSHOT is not None:
            pkg = os.path.join(_SNAPSHOT, "treedyn")
        else:
            pkg = os.path.dirname(importlib.util.find_spec("treedyn").origin)
        files = glob.glob(os.path.join(pkg, "_kernels*"))
        files = [f for f in files if f.endswith((".so", ".pyd"))]
        return datetime.datetime.fromtimestamp(max(os.path.getmtime(f) for f in files)
                                               ).isoformat(timespec="seconds")
    except (AttributeError, TypeError, ValueError, OSError):
        return "?"


def _run_worker(script, func, kwargs, env, k):
    stamp = kernels_stamp()
    with LoadMonitor() as mon:
        proc = subprocess.run([sys.executable, "-c", _WORKER_CODE, os.path.abspath(script),
                               func, json.dumps(kwargs)],
                              capture_output=True, text=True, env=env, cwd=_SNAPSHOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + "\n" + proc.stderr[-8000:] + "\n")
        raise RuntimeError(f"benchmark worker {func} failed in process {k + 1} "
                           f"(exit code {proc.returncode})")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARKER)][-1]
    res = json.loads(line[len(_MARKER):])
    if mon.result is not None:       # cores used by other processes meanwhile
        res["_foreign_load"] = mon.result["foreign"] + mon.result["steal"]
    res["_kernels"] = stamp if stamp == kernels_stamp() else "rebuilt while running"
    return res


def run_in_processes(script, func, kwargs=None, processes=3, env=None, verbose=True,
                     wait_idle=0.0, max_attempts=3, idle_threshold=0.15):
    """Run ``func(**kwargs)`` of the file ``script`` in ``processes`` fresh interpreters.

    ``func`` must return a flat JSON-serialisable dict ``{key: float | int | str}``.
    Returns ``(median, spread, runs)``: ``median[key]`` is the median across
    processes (strings and other non-numbers: the first process's value),
    ``spread[key]`` = (max − min) / median for numeric keys, ``runs`` the raw dicts.
    ``wait_idle`` > 0 (shared machines): before each process wait up to that many
    seconds for an idle machine (see :func:`wait_for_idle`), and rerun a process
    during which other processes used ≥ ``idle_threshold`` cores, up to
    ``max_attempts`` times, keeping the least disturbed attempt.
    """
    kwargs = kwargs or {}
    env = default_env() if env is None else env
    runs = []
    for k in range(processes):
        best = None
        for attempt in range(max_attempts if wait_idle > 0 else 1):
            if wait_idle > 0:
                wait_for_idle(wait_idle, threshold=idle_threshold, verbose=verbose)
            if verbose:
                print(f"  [{func}] process {k + 1}/{processes}"
                      + (f", attempt {attempt + 1}" if attempt else "") + " ...",
                      file=sys.stderr, flush=True)
            res = _run_worker(script, func, kwargs, env, k)
            if best is None or res.get("_foreign_load", 0.0) < best.get("_foreign_load", 0.0):
                best = res
            if best.get("_foreign_load", 0.0) < idle_threshold:
                break
            if verbose and wait_idle > 0:
                print(f"  process disturbed ({res.get('_foreign_load', 0.0):.2f} cores used by "
                      f"other processes meanwhile)", file=sys.stderr, flush=True)
        runs.append(best)
    median, spread = {}, {}
    for key, first in runs[0].items():
        vals = [r.get(key) for r in runs]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in vals):
            med = statistics.median(vals)
            median[key] = med
            spread[key] = (max(vals) - min(vals)) / med if med else 0.0
        else:
            median[key] = first
    return median, spread, runs


class LoadMonitor:
    """CPU time used by *other* processes while benchmarks run (Linux /proc/stat).

    ``with LoadMonitor() as mon: ...`` then ``mon.result`` = {"foreign": average
    number of cores busy with processes that are not our children, "steal":
    average cores stolen by the hypervisor}; None where /proc/stat is missing.
    """

    @staticmethod
    def _ticks():
        with open("/proc/stat") as f:
            x = [int(t) for t in f.readline().split()[1:]]
        busy = x[0] + x[1] + x[2] + x[5] + x[6]          # user nice system irq softirq
        return busy, (x[7] if len(x) > 7 else 0)

    @staticmethod
    def _children_cpu():
        import resource
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    def __enter__(self):
        import time
        self.result = None
        try:
            self._t0, self._b0, self._c0 = time.perf_counter(), self._ticks(), self._children_cpu()
        except (OSError, ValueError, ImportError):
            self._t0 = None
        return self

    def __exit__(self, *exc):
        import time
        if self._t0 is None:
            return False
        hz = os.sysconf("SC_CLK_TCK")
        wall = time.perf_counter() - self._t0
        (b1, s1), c1 = self._ticks(), self._children_cpu()
        busy = (b1 - self._b0[0]) / hz
        ours = c1 - self._c0
        self.result = {"foreign": max(0.0, (busy - ours) / wall),
                       "steal": (s1 - self._b0[1]) / hz / wall}
        return False


# ------------------------------------------------------------------------- tables
class Table:
    """A Markdown table printed with aligned columns.

    >>> t = Table(["robot", "µs"]); t.add("panda", 1.23); print(t)
    """

    def __init__(self, headers, floatfmt="{:.3g}"):
        self.headers = [str(h) for h in headers]
        self.rows = []
        self.floatfmt = floatfmt

    def _fmt(self, x):
        if x is None:
            return "–"
        if isinstance(x, float):
            if x != x:       # NaN
                return "–"
            return self.floatfmt.format(x)
        return str(x)

    def add(self, *cells):
        if len(cells) != len(self.headers):
            raise ValueError(f"expected {len(self.headers)} cells, got {len(cells)}")
        self.rows.append([self._fmt(c) for c in cells])

    def __str__(self):
        cols = [self.headers] + self.rows
        width = [max(len(r[i]) for r in cols) for i in range(len(self.headers))]
        def line(r):
            return "| " + " | ".join(c.ljust(w) for c, w in zip(r, width)) + " |"
        sep = "|" + "|".join("-" * (w + 2) for w in width) + "|"
        return "\n".join([line(self.headers), sep] + [line(r) for r in self.rows])


def fmt(x, spec=".3g"):
    return "–" if x is None else format(x, spec)


def mark(ok):
    """PASS / FAIL / n/a (ok is None: not measured in this run)."""
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


# ------------------------------------------------------------------ machine info
def machine_info():
    """Dict: date, CPU model name (lscpu), cores, Python, versions of treedyn and pin."""
    cpu, cores = platform.processor() or "?", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for ln in out.splitlines():
            key, _, val = ln.partition(":")
            if key.strip() == "Model name":
                cpu = val.strip()
    except (OSError, subprocess.CalledProcessError):
        pass

    def version(dist, module=None):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "?"

    try:
        import treedyn
        from treedyn import _ext
        td_version = f"{treedyn.__version__}, {_ext.ISA} kernels"
    except ImportError:
        td_version = "?"
    try:
        import pinocchio
        pin_version = pinocchio.__version__
    except ImportError:
        pin_version = "not installed"
    try:
        rev = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)),
                              "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip() or "?"
    except OSError:
        rev = "?"
    return {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu,
        "cores": cores,
        "python": platform.python_version(),
        "numpy": version("numpy"),
        "treedyn": f"{td_version} (git {rev})",
        "pinocchio": pin_version,
        "OPENBLAS_NUM_THREADS": default_env().get("OPENBLAS_NUM_THREADS"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
        "loadavg": os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"),
    }


def print_header(title, info, processes, quick):
    print(f"# {title}")
    print()
    print(f"{info['date']} · {info['cpu']}, {info['cores']} cores · Python {info['python']} · "
          f"NumPy {info['numpy']} · treedyn {info['treedyn']} · Pinocchio {info['pinocchio']} · "
          f"OPENBLAS_NUM_THREADS={info['OPENBLAS_NUM_THREADS']} · "
          f"OMP_NUM_THREADS={info['OMP_NUM_THREADS']}")
    print(f"median over {processes} fresh process(es)" + (" · QUICK mode (indicative only)"
                                                         if quick else ""))
    if info.get("snapshot"):
        print(f"workers import a snapshot of {info['snapshot']} taken at the start "
              f"(imported: {info.get('treedyn_file', '?')})")
    stamps = info.get("kernels")
    if stamps:
        print(f"treedyn kernels built {stamps}")
        if "," in stamps or "rebuilt" in stamps:
            print("WARNING: treedyn's kernels were rebuilt during the run: the processes "
                  "did not all time the same code. Rerun.")
    load = info.get("foreign_load")          # {section: [cores per worker process]}
    if load:
        print("CPU used by other processes while the workers ran (cores, per process): "
              + "; ".join(f"{sec} " + ", ".join(f"{x:.2f}" for x in xs)
                          for sec, xs in load.items()))
        if max(max(xs) for xs in load.values()) >= 0.15:
            print(f"WARNING: other processes competed for the {info['cores']} cores during "
                  f"the run: per-call numbers are inflated and OpenMP batches (which wait for "
                  f"their slowest thread) can be several times slower. Rerun on an idle "
                  f"machine (--wait-idle helps on shared machines).")
    print()


def sectioned_report(title, reports, sections):
    """A ``report`` for :func:`bench_main` that prints the header, then each
    section's table (``reports[section](results, checks)``, which appends
    (target, measured, ok) rows to ``checks``), then a summary of the checks."""
    def report(r, spread, info, quick, processes):
        print_header(title, info, processes, quick)
        checks = []
        for sec in sections:
            reports[sec](r, checks)
        print("\n## Summary\n")
        t = Table(["target", "measured", "result"])
        for label, meas, ok in checks:
            t.add(label, meas, mark(ok))
        print(t)
    return report


def run_sections(script, sections, kwargs, processes, wait_idle=0.0):
    """:func:`run_in_processes` once per section (shorter workers are less likely to
    be disturbed on a shared machine); merged (median, spread, foreign load)."""
    median, spread, load, stamps = {}, {}, {}, set()
    for sec in sections:
        m, s, runs = run_in_processes(script, "worker", dict(kwargs, sections=[sec]),
                                      processes, wait_idle=wait_idle)
        median.update(m)
        spread.update(s)
        load[sec] = [x["_foreign_load"] for x in runs if "_foreign_load" in x]
        stamps.update(x.get("_kernels", "?") for x in runs)
    median["_kernels"] = ", ".join(sorted(stamps))
    return median, spread, load


# ------------------------------------------------------- robots and Pinocchio layout
#: (name, floating base) of the robots of the per-call comparisons
ROBOTS = [("ur5", False), ("panda", False), ("solo12", True), ("talos_reduced", True),
          ("talos_full_v2", True)]
QUICK_ROBOTS = [("ur5", False), ("panda", False), ("solo12", True)]


def robot_label(name, floating):
    return name + (" + FF" if floating else "")


# ------------------------------------------------------------------ random chains
def _rpy_matrix(r, p, y):
    """URDF roll-pitch-yaw: R = Rz(y) Ry(p) Rx(r)."""
    import numpy as np
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _random_rotation(rng):
    import numpy as np
    qt = rng.normal(size=4)
    w, x, y, z = qt / np.linalg.norm(qt)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def random_chain_links(n, seed=0):
    """Data of a serial chain of n revolute joints, as URDF-style per-link records.

    Link i is attached to link i−1 (link −1: the world) by a joint whose frame
    has origin ``xyz`` (a 5–15 cm offset in a random direction) and orientation
    ``rpy`` (random) in the parent link frame; the joint axis is a random unit
    vector through that origin, in the joint (= link) frame.  Each link is a
    box of 0.5–2 kg with side lengths 3–15 cm, COM a few cm off the link origin,
    principal axes randomly rotated: physically valid, realistic inertias.
    """
    import numpy as np
    rng = np.random.default_rng(seed)
    links = []
    for _ in range(n):
        d = rng.normal(size=3)
        xyz = d / np.linalg.norm(d) * rng.uniform(0.05, 0.15)
        rpy = rng.uniform(-np.pi, np.pi, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        mass = rng.uniform(0.5, 2.0)
        com = rng.uniform(-0.04, 0.04, 3)
        a, b, c = rng.uniform(0.03, 0.15, 3)
        Rc = _random_rotation(rng)
        inertia = Rc @ np.diag([mass / 12 * (b * b + c * c), mass / 12 * (a * a + c * c),
                                mass / 12 * (a * a + b * b)]) @ Rc.T
        links.append(dict(xyz=xyz, rpy=rpy, axis=axis, mass=mass, com=com,
                          inertia=0.5 * (inertia + inertia.T)))
    return links


def chain_urdf(links, parents=None):
    """URDF text of the chain (for pin.buildModelFromXML); with ``parents`` (link
    i's parent index, −1 the base) the same links form that tree instead."""
    def f(x):                     # shortest round-trip decimal of a float
        return repr(float(x))

    out = ['<?xml version="1.0"?>', '<robot name="chain">', '  <link name="base"/>']
    parent = "base"
    for i, L in enumerate(links):
        I = L["inertia"]
        out.append(
            f'  <link name="link{i}"><inertial><origin xyz="{f(L["com"][0])} {f(L["com"][1])} '
            f'{f(L["com"][2])}" rpy="0 0 0"/><mass value="{f(L["mass"])}"/>'
            f'<inertia ixx="{f(I[0, 0])}" ixy="{f(I[0, 1])}" ixz="{f(I[0, 2])}" '
            f'iyy="{f(I[1, 1])}" iyz="{f(I[1, 2])}" izz="{f(I[2, 2])}"/></inertial></link>')
        x, r, a = L["xyz"], L["rpy"], L["axis"]
        out.append(
            f'  <joint name="joint{i}" type="revolute"><parent link="{parent}"/>'
            f'<child link="link{i}"/><origin xyz="{f(x[0])} {f(x[1])} {f(x[2])}" '
            f'rpy="{f(r[0])} {f(r[1])} {f(r[2])}"/><axis xyz="{f(a[0])} {f(a[1])} {f(a[2])}"/>'
            f'<limit lower="-10" upper="10" effort="1000" velocity="100"/></joint>')
        parent = f"link{i}" if parents is None or i + 1 >= len(parents) else (
            "base" if parents[i + 1] < 0 else f"link{parents[i + 1]}")
    out.append("</robot>")
    return "\n".join(out)


def chain_treedyn(links):
    """The same chain built with treedyn's JointGraph (POE: geometry in the world at q = 0)."""
    import numpy as np
    import treedyn as td
    g = td.JointGraph("chain")
    F = np.eye(4)
    parent = "world"
    for i, L in enumerate(links):
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = _rpy_matrix(*L["rpy"]), L["xyz"]
        F = F @ T
        g.add_body(f"link{i}", mass=L["mass"], com=L["com"], inertia=L["inertia"], frame=F)
        g.add_joint(f"joint{i}", "revolute", parent, f"link{i}", axis=F[:3, :3] @ L["axis"],
                    point=F[:3, 3])
        parent = f"link{i}"
    return g.compile()


def chain_rnea_oracle(links, q, v, a, gravity=(0.0, 0.0, -9.81)):
    """Plain NumPy body-frame RNEA on the URDF data (independent of both libraries;
    used where Pinocchio's Data would not fit in memory)."""
    import numpy as np

    def hat(x):
        return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])

    def rot(axis, t):
        K = hat(axis)
        return np.eye(3) + np.sin(t) * K + (1 - np.cos(t)) * K @ K

    n = len(links)
    Vp, Ap = np.zeros(6), np.concatenate([np.zeros(3), -np.asarray(gravity)])
    Xinv, S, F = [], [], []
    for i, L in enumerate(links):
        R = _rpy_matrix(*L["rpy"]) @ rot(L["axis"], q[i])
        p = L["xyz"]
        X = np.zeros((6, 6))                       # Ad_{T^-1}, T = (R, p) child -> parent
        X[:3, :3] = X[3:, 3:] = R.T
        X[3:, :3] = -R.T @ hat(p)
        s = np.concatenate([L["axis"], np.zeros(3)])
        V = X @ Vp + s * v[i]
        adV = np.zeros((6, 6))
        adV[:3, :3] = adV[3:, 3:] = hat(V[:3])
        adV[3:, :3] = hat(V[3:])
        A = X @ Ap + s * a[i] + adV @ s * v[i]
        m, d = L["mass"], L["com"]
        M = np.zeros((6, 6))
        M[:3, :3] = L["inertia"] - m * hat(d) @ hat(d)
        M[:3, 3:] = m * hat(d)
        M[3:, :3] = m * hat(d).T
        M[3:, 3:] = m * np.eye(3)
        F.append(M @ A - adV.T @ M @ V)
        Xinv.append(X)
        S.append(s)
        Vp, Ap = V, A
    tau = np.zeros(n)
    for i in range(n - 1, -1, -1):
        tau[i] = S[i] @ F[i]
        if i > 0:
            F[i - 1] = F[i - 1] + Xinv[i].T @ F[i]
    return tau


def median(xs):
    return statistics.median(xs)


if __name__ == "__main__":          # smoke test of the timer
    print(f"{time_call('x + 1', {'x': 1.0}):.4f} µs for x + 1", file=sys.stdout)


# ------------------------------------------------------------------ command line
def bench_main(script, report, doc, argv=None, sections=("robots", "chain", "batch")):
    """Command line shared by the benchmark scripts: parse the options, run the
    sections in fresh processes and print the report."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="few robots, small chains, short repeats (< 20 s; numbers indicative)")
    ap.add_argument("--processes", type=int, default=None,
                    help="fresh processes per benchmark (default 5, --quick 1)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="before each process, wait up to SECONDS for other processes to "
                         "leave the CPU idle (shared machines)")
    ap.add_argument("--snapshot", action="store_true",
                    help="workers import a private copy of the installed treedyn taken at "
                         "the start (treedyn being rebuilt while the benchmark runs)")
    args = ap.parse_args(argv)
    processes = args.processes or (1 if args.quick else 5)
    kwargs = (dict(quick=True, min_time=0.02, repeat=3) if args.quick
              else dict(quick=False, min_time=0.2, repeat=5))
    info = machine_info()
    if args.snapshot:
        info["snapshot"] = use_snapshot()
    r, spread, info["foreign_load"] = run_sections(script, sections, kwargs, processes,
                                                   args.wait_idle)
    info["kernels"] = r["_kernels"]
    info["treedyn_file"] = r.get("_treedyn_file")
    report(r, spread, info, args.quick, processes)
    return 0


def aligned_cassie():
    """(model, assembled q) of examples/cassie.py's Cassie with its plantar axes
    aligned, or None when example-robot-data has no Cassie."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "cassie.py")
    spec = importlib.util.spec_from_file_location("_cassie_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        m, _ = mod.load(align=True)
    except FileNotFoundError:
        return None
    return m, m.assemble(m.neutral())
