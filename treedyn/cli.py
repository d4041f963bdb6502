"""The ``treedyn`` command line.

``treedyn info FILE`` · ``treedyn simulate FILE`` · ``treedyn convert IN OUT`` ·
``treedyn bench [FILE]`` · ``treedyn view FILE [--traj RUN.npz]`` · ``treedyn animate
FILE RUN.npz --out RUN.mp4`` — ``treedyn COMMAND --help`` for the options.  Exit
codes: 0 success, 1 a treedyn error (bad robot file, bad state, out of memory,
...), 2 bad command-line arguments (checked before any work: numbers out of
range, a plot format matplotlib cannot write, an output file that cannot be
written), 130 interrupted.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import timeit

import numpy as np

from . import __version__
from .errors import TreedynError
from .graph import WORLD
from .viewer import ENVIRONMENTS, MESH_DETAIL

DEFAULT_ROBOT = "panda.urdf"


class _UsageError(TreedynError):
    """A command-line argument found unusable before any work: reported in argparse's
    style (usage line, exit code 2)."""


def _number(kind, minimum, strict, unit=""):
    """An argparse ``type``: a finite number of ``kind`` (int or float) >= minimum
    (> minimum if ``strict``)."""
    what = (f"{'an integer' if kind is int else 'a finite number'} "
            f"{'>' if strict else '>='} {minimum:g}{unit}")

    def parse(text):
        try:
            x = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(x) or x < minimum or (strict and x == minimum):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return x
    parse.__name__ = what
    return parse


def _fraction(text):
    """An argparse ``type``: a number in (0, 1]."""
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not 0 < x <= 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1], got {text!r}")
    return x


def _check_output(path, option):
    """Refuse an output file that cannot be written, before any work (the file is
    opened for appending if it exists, else created and removed: nothing is left
    behind and nothing is changed)."""
    if os.path.isdir(path):
        raise _UsageError(f"{option} {path}: is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise _UsageError(f"{option} {path}: {parent} "
                          f"{'is not a directory' if os.path.exists(parent) else 'does not exist'}")
    try:
        if os.path.exists(path):
            with open(path, "a"):
                pass
        else:
            with open(path, "x"):
                pass
            os.remove(path)
    except (OSError, ValueError) as exc:           # ValueError: an embedded NUL byte
        raise _UsageError(f"{option} {path}: cannot be written: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


def _plot_formats_text():
    """The plot file extensions, for --help (matplotlib imported only then)."""
    try:
        from .plotting import plot_formats
        return ", ".join(f".{ext}" for ext in sorted(plot_formats()))
    except TreedynError:
        return "any matplotlib format; matplotlib is not installed"


_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan)$",
                              re.IGNORECASE)


class _HelpFormatter(argparse.HelpFormatter):
    """Fills ``{plot_formats}`` in help texts when the help is printed."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action) or ""
        return text.replace("{plot_formats}", _plot_formats_text())


def _resolve(path):
    """A path, or the shipped robot of that name (``panda``, ``four_bar.toml``)."""
    from . import robots
    if "\0" in path:
        raise _UsageError(f"{path!r}: a file name cannot contain a NUL byte")
    if os.path.exists(path):
        return path
    try:
        return robots.path(path)
    except FileNotFoundError:
        return path                       # load() reports the missing file


def _load(args):
    from .io import load
    return load(_resolve(args.file), floating_base=getattr(args, "floating_base", False),
                free_group=getattr(args, "free_group", None),
                strict_inertia=not getattr(args, "lenient_inertia", False))


#: Levels of indentation drawn in full by ``treedyn info``; deeper lines show the
#: last ``_MAX_DRAWN_DEPTH`` levels after "… " (a long chain would otherwise print
#: quadratically long lines).
_MAX_DRAWN_DEPTH = 32


def _tree_lines(model):
    """The joint tree drawn as text, one body per line (an explicit stack, not
    recursion: chains of any depth)."""
    children = {-1: []}
    for i in range(model.n_bodies):
        children.setdefault(int(model.parent[i]), []).append(i)
    lines = [WORLD]
    stack = [(i, k == len(children[-1]) - 1, "") for k, i in
             reversed(list(enumerate(children[-1])))]
    while stack:
        i, last, prefix = stack.pop()
        t = model.joint_types[i]
        extra = f", {model.free_groups[model.joint_names[i]]}" if t == "free" else ""
        shown = (prefix if len(prefix) <= 4 * _MAX_DRAWN_DEPTH
                 else "… " + prefix[len(prefix) - 4 * _MAX_DRAWN_DEPTH:])
        lines.append(f"{shown}{'└── ' if last else '├── '}{model.body_names[i]}  "
                     f"[{model.joint_names[i]}: {t}{extra}, q{model.qoff[i]}, "
                     f"v{model.voff[i]}]  {model.mass[i]:.4g} kg")
        kids = children.get(i, [])
        inner = prefix + ("    " if last else "│   ")
        for k in range(len(kids) - 1, -1, -1):
            stack.append((kids[k], k == len(kids) - 1, inner))
    return lines


def cmd_info(args, out):
    m = _load(args)
    print(f"{m.name}: {m.n_bodies} bodies, {len(m.joint_names)} joints, nq = {m.nq}, nv = {m.nv}",
          file=out)
    print(f"total mass {m.mass.sum():.6g} kg, gravity "
          f"({', '.join(f'{g:g}' for g in m.gravity)}) m/s²", file=out)
    print("", file=out)
    for line in _tree_lines(m):
        print(line, file=out)
    merged = [f for f, b in zip(m.frame_names, m.frame_body)
              if f != WORLD and f not in m.body_names]
    print("", file=out)
    print(f"frames: {len(m.frame_names)} ({len(merged)} merged links or extra frames"
          + (f": {', '.join(merged[:8])}{', ...' if len(merged) > 8 else ''}" if merged else "")
          + ")", file=out)
    if m.loop_closures:
        print(f"loop closures ({len(m.loop_closures)}):", file=out)
        for lc in m.loop_closures:
            print(f"  {lc.name}: {lc.type} {lc.parent_link} -> {lc.child_link}", file=out)
    if m.mimic:
        print(f"mimic couplings ({len(m.mimic)}):", file=out)
        for mm in m.mimic:
            print(f"  {mm['joint']} = {mm['multiplier']} * {mm['leader']} + {mm['offset']}",
                  file=out)
    return 0


def _vector(text, n, name):
    if text is None:
        return None
    try:
        vals = np.array([float(x) for x in text.replace(",", " ").split()])
    except ValueError:
        raise TreedynError(f"--{name}: not a list of numbers: {text!r}") from None
    if vals.shape != (n,):
        raise TreedynError(f"--{name}: expected {n} numbers, got {vals.size}")
    return vals


def _check_simulate_outputs(args):
    """--out and --plot: writable, distinct, and a plot format matplotlib writes."""
    if args.out and args.plot and os.path.abspath(args.out) == os.path.abspath(args.plot):
        raise _UsageError(f"--out and --plot name the same file {args.out}")
    if args.plot:
        from .errors import InputError
        from .plotting import check_plot_path
        try:
            check_plot_path(args.plot, "--plot")
        except InputError as exc:
            raise _UsageError(str(exc)) from None
        _check_output(args.plot, "--plot")
    if args.out:
        _check_output(args.out, "--out")


def cmd_simulate(args, out):
    from .simulate import simulate
    _check_simulate_outputs(args)
    m = _load(args)
    q0 = _vector(args.q0, m.nq, "q0")
    v0 = _vector(args.v0, m.nv, "v0")
    if q0 is None:
        q0 = m.neutral()
        if m.loop_closures:
            q0 = m.assemble(q0)
    if v0 is None:
        v0 = np.zeros(m.nv)
    if m.loop_closures or m.mimic:
        v0 = m.project_velocity(q0, v0)
    tr = simulate(m, q0, v0, args.t_final, args.dt, method=args.method,
                  local_map=args.local_map, progress=None if args.progress else False,
                  passive=not args.no_passive)
    e = tr.energy
    print(f"{m.name}: {len(tr) - 1} steps of {args.method}, t = 0 … {tr.t[-1]:g} s; energy "
          f"{e[0]:.6g} J -> {e[-1]:.6g} J (max drift {np.abs(e - e[0]).max():.3g} J)", file=out)
    if "constraint_residual" in tr.extra:
        print(f"max constraint residual {tr.extra['constraint_residual'].max():.3g}", file=out)
    if args.out:
        (tr.to_npz if args.out.endswith(".npz") else tr.to_csv)(args.out)
        print(f"wrote {args.out}", file=out)
    if args.plot:
        from .plotting import plot_trajectory
        plot_trajectory(tr, args.plot)
        print(f"wrote {args.plot}", file=out)
    return 0


def cmd_convert(args, out):
    from .io import load_graph, save
    if not args.output.endswith(".toml"):
        raise TreedynError(f"{args.output}: treedyn writes the TOML format only (.toml)")
    if os.path.exists(args.output) and not os.path.isfile(args.output) \
            and not os.path.isdir(args.output):
        # a FIFO would block the check below; save() refuses it anyway
        raise _UsageError(f"output {args.output}: not a regular file (treedyn writes regular "
                          f"files)")
    _check_output(args.output, "output")
    graph = load_graph(_resolve(args.input), floating_base=args.floating_base,
                       strict_inertia=not args.lenient_inertia)
    graph.compile()                               # validate before writing
    save(graph, args.output)
    print(f"wrote {args.output}", file=out)
    return 0


def cmd_bench(args, out):
    m = _load(args)
    rng = np.random.default_rng(0)
    q = m.random_configuration(rng)
    v, a = rng.normal(size=m.nv), rng.normal(size=m.nv)
    env = dict(m=m, q=q, v=v, a=a)
    rows = [("inverse_dynamics (body)", "m.inverse_dynamics(q, v, a)"),
            ("inverse_dynamics (spatial)", "m.inverse_dynamics(q, v, a, 'spatial')"),
            ("inverse_dynamics (hybrid)", "m.inverse_dynamics(q, v, a, 'hybrid')"),
            ("mass_matrix", "m.mass_matrix(q)"),
            ("forward_dynamics", "m.forward_dynamics(q, v, a)"),
            ("forward_kinematics", "m.forward_kinematics(q)")]
    pin_rows = {}
    try:
        pin = _pinocchio_pair(args, m, q, v, a, env)
    except Exception as exc:                      # noqa: BLE001 - optional comparison
        pin = None
        print(f"(no Pinocchio comparison: {exc})", file=out)
    if pin is not None:
        pin_rows = {"inverse_dynamics (body)": "pin.rnea(pm, pd, qp, vp, ap)",
                    "inverse_dynamics (spatial)": "pin.rnea(pm, pd, qp, vp, ap)",
                    "inverse_dynamics (hybrid)": "pin.rnea(pm, pd, qp, vp, ap)",
                    "mass_matrix": "pin.crba(pm, pd, qp)",
                    "forward_dynamics": "pin.aba(pm, pd, qp, vp, ap)",
                    "forward_kinematics": "pin.forwardKinematics(pm, pd, qp)"}
    print(f"{m.name}: nv = {m.nv}, median µs per call" + (" (treedyn / Pinocchio)"
                                                          if pin is not None else ""), file=out)
    for label, stmt in rows:
        t = _median_us(stmt, env, args.repeat)
        line = f"  {label:28s} {t:8.3f}"
        if label in pin_rows:
            tp = _median_us(pin_rows[label], env, args.repeat)
            line += f"   pin {tp:8.3f}   ratio {t / tp:5.2f}"
        print(line, file=out)
    return 0


def _median_us(stmt, env, repeat):
    timer = timeit.Timer(stmt, globals=env)
    number = max(1, int(0.05 / max(timer.timeit(1), 1e-7)))
    return float(np.median(timer.repeat(repeat, number)) / number * 1e6)


def _pinocchio_pair(args, m, q, v, a, env):
    import pinocchio as pin
    path = _resolve(args.file)
    if not path.endswith(".urdf"):
        raise RuntimeError("Pinocchio compares URDF files only")
    pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if args.floating_base
          else pin.buildModelFromUrdf(path))
    if pm.nv != m.nv:
        raise RuntimeError("the Pinocchio model has a different number of freedoms")

    def to_pin_q(x):
        out = np.zeros(pm.nq)
        for j in range(1, pm.njoints):
            jm, o = pm.joints[j], m.idx_q[pm.names[j]]
            if jm.nq == 1:
                out[jm.idx_q] = x[o]
            elif jm.nq == 2:
                out[jm.idx_q:jm.idx_q + 2] = np.cos(x[o]), np.sin(x[o])
            else:
                out[jm.idx_q:jm.idx_q + 3] = x[o:o + 3]
                out[jm.idx_q + 3:jm.idx_q + 6] = x[o + 4:o + 7]
                out[jm.idx_q + 6] = x[o + 3]
        return out

    env.update(pin=pin, pm=pm, pd=pm.createData(), qp=to_pin_q(q), vp=v.copy(), ap=a.copy())
    return pin


def _assembled(m, Q):
    """Each configuration of Q assembled onto the loops; where a random one does not
    converge (e.g. Cassie's), the nearest point towards the assembled neutral
    configuration that does (fractions 1/3, 1/10, 1/30 of the way, then the neutral
    one itself)."""
    out, home = np.empty_like(Q), None
    for k, q in enumerate(Q):
        try:
            out[k] = m.assemble(q)
            continue
        except TreedynError:
            pass
        if home is None:
            try:
                home = m.assemble(m.neutral())
            except TreedynError as exc:
                raise TreedynError(f"rollout: cannot assemble the loops of {m.name} from a "
                                   f"random or the neutral configuration ({exc}); give "
                                   f"assembled states through td.rollout") from None
        for frac in (1 / 3, 0.1, 1 / 30):
            try:
                out[k] = m.assemble(m.integrate(home, frac * m.difference(home, q)))
                break
            except TreedynError:
                continue
        else:
            out[k] = home
    return out


def _connect(Client, address, timeout):
    """A Client of the scheduler at ``address``, or TreedynError within ``timeout`` s
    (a malformed address is a usage error)."""
    if "://" not in address and ":" not in address:
        raise _UsageError(f"--scheduler: expected an address like tcp://host:8786, got "
                          f"{address!r}")
    try:
        return Client(address, timeout=timeout)
    except ValueError as exc:                     # e.g. missing port, unknown protocol
        raise _UsageError(f"--scheduler {address}: {exc}") from None
    except (OSError, TimeoutError) as exc:
        raise TreedynError(f"--scheduler {address}: cannot reach the Dask scheduler within "
                           f"{timeout:g} s ({type(exc).__name__}: {exc}); is `dask scheduler` "
                           f"running there (and `dask worker {address}`)?") from None
    except Exception as exc:        # something else answers there (e.g. a MemoryError
        raise TreedynError(          # decoding its bytes as a Dask message)
            f"--scheduler {address}: no Dask scheduler answered there ({type(exc).__name__}: "
            f"{str(exc)[:200]})") from None


def cmd_rollout(args, out):
    import time
    from .rollout import rollout
    if args.out and not (args.out.endswith(".zarr") or args.out.endswith(".npz")):
        raise _UsageError(f"--out: expected a directory ending in .zarr or a .npz file, got "
                          f"{args.out}")
    if args.out and args.out.endswith(".npz"):
        _check_output(args.out, "--out")
    zarr_out = args.out if args.out and args.out.endswith(".zarr") else None
    if args.chunk is not None and not (args.scheduler or zarr_out):
        raise _UsageError("--chunk: only with --scheduler or --out *.zarr (the local run "
                          "has no chunks)")
    m = _load(args)
    # the step count and the result's size, checked before the states are drawn
    from .rollout import _check_memory
    from .simulate import _step_count
    nsteps = _step_count(args.t_final, args.dt, 10_000_000, "rollout")
    if not zarr_out:
        _check_memory(m, dict(nsteps=nsteps, h=args.t_final / nsteps,
                              save_every=min(args.save_every, nsteps or 1),
                              constrained=bool(m.loop_closures or m.mimic)), args.n)
    rng = np.random.default_rng(args.seed)
    q0 = np.array([m.random_configuration(rng) for _ in range(args.n)]).reshape(args.n, m.nq)
    v0 = rng.normal(size=(args.n, m.nv)) * args.v_scale
    if m.loop_closures or m.mimic:
        q0 = _assembled(m, q0)
        v0 = np.array([m.project_velocity(q, v) for q, v in zip(q0, v0)]).reshape(args.n, m.nv)
    client = None
    try:
        if args.scheduler or zarr_out:
            try:
                from distributed import Client
            except ImportError:
                raise TreedynError("--scheduler and --out *.zarr need the optional extra: "
                                   "pip install 'treedyn[distributed]'") from None
            client = (_connect(Client, args.scheduler, args.timeout) if args.scheduler else
                      Client(processes=False, n_workers=1, threads_per_worker=1,
                             dashboard_address=None))
        tick = time.perf_counter()
        r = rollout(m, q0, v0, args.t_final, args.dt, method=args.method,
                    save_every=args.save_every, passive=not args.no_passive, client=client,
                    chunk=args.chunk, out=zarr_out, progress=not args.no_progress)
        tick = time.perf_counter() - tick
    finally:
        if client is not None:
            client.close()
    steps = args.n * max(1, int(np.ceil(args.t_final / args.dt - 1e-9)))
    print(f"{m.name}: {args.n} samples × {len(r.t)} rows ({args.method}, dt = {r.dt:g} s): "
          f"{tick:.3g} s, {steps / tick:.4g} steps/s; {int(r.diverged.sum())} diverged",
          file=out)
    if args.out and args.out.endswith(".npz"):
        r.to_npz(args.out)
    if args.out:
        print(f"wrote {args.out}", file=out)
    return 0


def cmd_view(args, out):
    from .viewer import view
    m = _load(args)

    def serving(url):                     # printed before the meshes are read (see view)
        print(f"{m.name}: serving the viewer at {url} (Ctrl-C to stop)", file=out, flush=True)

    try:
        v = view(m, args.traj, host=args.host, port=args.port, samples=args.samples,
                 side_by_side=args.side_by_side, path_frame=args.path, play=args.play,
                 on_url=serving, environment=args.environment, shadows=args.shadows,
                 mesh_detail=1.0 if args.full_meshes else args.mesh_detail)
    except ImportError as exc:
        raise TreedynError(str(exc)) from None
    v.serve(args.seconds)
    return 0


def cmd_animate(args, out):
    import time
    from .viewer import animate
    if not args.out.lower().endswith((".mp4", ".gif")):
        raise _UsageError(f"--out: expected a .mp4 or .gif file, got {args.out}")
    _check_output(args.out, "--out")
    m = _load(args)
    tick = time.perf_counter()
    try:
        r = animate(m, args.traj, args.out, fps=args.fps, duration=args.duration,
                    follow=args.follow, size=(args.width, args.height))
    except ImportError as exc:
        raise TreedynError(str(exc)) from None
    print(f"wrote {r['path']}: {r['frames']} frames at {r['fps']:g} fps ({r['duration']:.3g} s "
          f"of motion) in {time.perf_counter() - tick:.3g} s", file=out)
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="treedyn", description="Robot and multibody dynamics "
                                "with screw and Lie group theory (treedyn " + __version__ + ").",
                                formatter_class=_HelpFormatter)
    p.add_argument("--version", action="version", version=f"treedyn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, func, help):
        sp = sub.add_parser(name, help=help, formatter_class=_HelpFormatter)
        sp.set_defaults(func=func, parser=sp)
        # values such as -1e-3 or -inf are numbers (for the range checks' messages),
        # not options: argparse's own pattern only knows -1 and -0.5
        sp._negative_number_matcher = _NEGATIVE_NUMBER
        return sp

    def robot_args(sp, optional=False):
        if optional:
            sp.add_argument("file", nargs="?", default=DEFAULT_ROBOT,
                            help=f"robot file (.urdf/.sdf/.xml/.toml) or shipped robot name "
                                 f"(default {DEFAULT_ROBOT})")
        else:
            sp.add_argument("file", help="robot file (.urdf, .sdf, .xml (MJCF) or .toml) or shipped robot name")
        sp.add_argument("--floating-base", action="store_true",
                        help="URDF: attach the root link by a free joint")
        sp.add_argument("--free-group", choices=["SE3", "SO3xR3"], default=None,
                        help="configuration group of free joints")
        sp.add_argument("--lenient-inertia", action="store_true",
                        help="accept (with a warning) slightly non-physical inertias")

    sp = command("info", cmd_info, "tree, dofs, masses, loops and frames of a robot file")
    robot_args(sp)

    sp = command("simulate", cmd_simulate, "simulate a robot file and write the trajectory")
    robot_args(sp, optional=True)
    sp.add_argument("--t-final", type=_number(float, 0.0, True, " s"), default=2.0,
                    help="end time, s, > 0 (default 2)")
    sp.add_argument("--dt", type=_number(float, 0.0, True, " s"), default=1e-3,
                    help="time step, s, > 0 (default 1e-3)")
    sp.add_argument("--method", default="rkmk4",
                    choices=["euler", "semi_euler", "rkmk2", "rkmk4", "cg4", "rkmk45",
                             "rk4_vector"])
    sp.add_argument("--local-map", default="exp", choices=["exp", "cayley"])
    sp.add_argument("--no-passive", action="store_true",
                    help="leave out the file's joint damping and springs")
    sp.add_argument("--q0", help="initial configuration, nq numbers (default: neutral, "
                                 "assembled if the file has loops)")
    sp.add_argument("--v0", help="initial velocity, nv numbers (default: zero)")
    sp.add_argument("--out", help="write the trajectory: .npz (NumPy archive), else CSV "
                                  "(.csv; .gz, .bz2, .xz compressed)")
    sp.add_argument("--plot", help="write a plot of q, energy and constraint residual; "
                                   "the extension gives the format: {plot_formats}")
    sp.add_argument("--progress", action="store_true", help="show a progress bar")

    sp = command("rollout", cmd_rollout, "simulate many random initial states at once "
                 "(locally, or on a Dask cluster with --scheduler)")
    robot_args(sp, optional=True)
    sp.add_argument("--n", type=_number(int, 1, False), default=1000,
                    help="number of samples (random configurations), >= 1 (default 1000)")
    sp.add_argument("--t-final", type=_number(float, 0.0, True, " s"), default=1.0,
                    help="end time, s, > 0 (default 1)")
    sp.add_argument("--dt", type=_number(float, 0.0, True, " s"), default=1e-3,
                    help="time step, s, > 0 (default 1e-3)")
    sp.add_argument("--method", default="rkmk4",
                    choices=["euler", "semi_euler", "rkmk2", "rkmk4", "cg4", "rk4_vector"])
    sp.add_argument("--save-every", type=_number(int, 1, False), default=1,
                    help="keep every k-th state, >= 1 (default 1)")
    sp.add_argument("--v-scale", type=_number(float, 0.0, False), default=0.0,
                    help="initial velocities normal with this standard deviation (default 0)")
    sp.add_argument("--seed", type=_number(int, 0, False), default=0,
                    help="seed of the random initial states (default 0)")
    sp.add_argument("--no-passive", action="store_true",
                    help="leave out the file's joint damping and springs")
    sp.add_argument("--out", help="write the runs: a directory ending in .zarr (Zarr "
                                  "shards, needs treedyn[distributed]) or a .npz file")
    sp.add_argument("--scheduler", help="address of a Dask scheduler (tcp://host:8786): run "
                                        "the chunks on its workers")
    sp.add_argument("--chunk", type=_number(int, 1, False), default=None,
                    help="samples per Dask chunk (default: N / (2 × workers))")
    sp.add_argument("--timeout", type=_number(float, 0.0, True, " s"), default=10.0,
                    help="seconds to wait for the --scheduler to answer (default 10)")
    sp.add_argument("--no-progress", action="store_true", help="no progress bar")

    sp = command("view", cmd_view, "show a robot (and a trajectory or rollout) in the browser; "
                 "serves until Ctrl-C (needs treedyn[viewer])")
    robot_args(sp)
    sp.add_argument("--traj", help="a .npz trajectory or rollout (treedyn simulate/rollout --out)")
    sp.add_argument("--host", default="127.0.0.1", help="address to serve on (default localhost)")
    sp.add_argument("--port", type=_number(int, 0, False), default=None,
                    help="port (default: a free one)")
    sp.add_argument("--samples", type=_number(int, 1, False), default=4,
                    help="rollout samples shown (default 4)")
    sp.add_argument("--side-by-side", action="store_true",
                    help="rollout samples side by side (default: overlaid)")
    sp.add_argument("--path", help="draw the path of this frame (a link name)")
    sp.add_argument("--play", action="store_true", help="start playing at once")
    sp.add_argument("--environment", choices=ENVIRONMENTS, default=None,
                    help="light the scene with this environment map (default: a hemisphere "
                         "light; a map takes seconds to appear in software WebGL)")
    sp.add_argument("--shadows", action="store_true", help="the main light casts shadows")
    detail = sp.add_mutually_exclusive_group()
    detail.add_argument("--mesh-detail", type=_fraction, default=MESH_DETAIL, metavar="F",
                        help=f"draw this fraction of each mesh's triangles (default "
                             f"{MESH_DETAIL:g}; meshes of up to 1000 triangles are drawn whole)")
    detail.add_argument("--full-meshes", action="store_true",
                        help="draw the meshes as read (same as --mesh-detail 1)")
    sp.add_argument("--seconds", type=_number(float, 0.0, False), default=None,
                    help="stop serving after this many seconds (default: until Ctrl-C)")

    sp = command("animate", cmd_animate, "write a video (MP4 or GIF) of a trajectory, without a "
                 "browser (needs treedyn[viewer])")
    robot_args(sp)
    sp.add_argument("traj", help="a .npz trajectory or rollout (treedyn simulate/rollout --out)")
    sp.add_argument("--out", required=True, help="the video: .mp4 or .gif")
    sp.add_argument("--fps", type=_number(float, 0.0, True), default=30.0,
                    help="frames per second (default 30)")
    sp.add_argument("--duration", type=_number(float, 0.0, False), default=None,
                    help="seconds of motion (default: all)")
    sp.add_argument("--follow", help="a body or frame the camera follows")
    sp.add_argument("--width", type=_number(int, 16, False), default=640, help="pixels")
    sp.add_argument("--height", type=_number(int, 16, False), default=480, help="pixels")

    sp = command("convert", cmd_convert, "convert a robot file (URDF, SDF, MJCF or TOML) to TOML")
    sp.add_argument("input")
    sp.add_argument("output")
    sp.add_argument("--floating-base", action="store_true")
    sp.add_argument("--lenient-inertia", action="store_true")

    sp = command("bench", cmd_bench, "time treedyn (and Pinocchio, when installed)")
    robot_args(sp, optional=True)
    sp.add_argument("--repeat", type=_number(int, 1, False), default=5,
                    help="timing repetitions (the median is printed), >= 1 (default 5)")
    return p


def main(argv=None, out=None):
    """Run the command line on ``argv`` (default ``sys.argv[1:]``), printing to ``out``
    (default stdout); returns the exit code.  Bad arguments raise ``SystemExit(2)``
    with argparse's usage message, as argparse itself does."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, out)
    except _UsageError as exc:
        args.parser.error(str(exc))                 # usage line, SystemExit(2)
    except BrokenPipeError:                         # e.g. treedyn info big.urdf | head
        if out is sys.stdout:
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            except (OSError, ValueError):
                pass
        return 1
    except (TreedynError, OSError) as exc:
        print(f"treedyn: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        hint = (" (a shorter --t-final or a larger --dt needs less)"
                if args.command == "simulate" else "")
        print(f"treedyn: error: out of memory{hint}", file=sys.stderr)
        return 1
    except RecursionError:
        print("treedyn: error: the robot is too deep for this command (maximum Python "
              "recursion depth exceeded)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("treedyn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":      # pragma: no cover
    sys.exit(main())
