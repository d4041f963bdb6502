"""The ``treedyn`` command line.

``treedyn info FILE`` · ``treedyn simulate FILE`` · ``treedyn convert IN OUT`` ·
``treedyn bench [FILE]`` — ``treedyn COMMAND --help`` for the options.  Exit
codes: 0 success, 1 a treedyn error (bad robot file, bad state, ...), 2 bad
command-line arguments.
"""
from __future__ import annotations

import argparse
import sys
import timeit

import numpy as np

from . import __version__
from .errors import TreedynError
from .graph import WORLD

DEFAULT_ROBOT = "panda.urdf"


def _resolve(path):
    """A path, or the shipped robot of that name (``panda``, ``four_bar.toml``)."""
    import os
    from . import robots
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


def _tree_lines(model):
    """The joint tree drawn as text, one body per line."""
    children = {-1: []}
    for i in range(model.nb):
        children.setdefault(int(model.parent[i]), []).append(i)
    lines = [WORLD]

    def walk(node, prefix):
        kids = children.get(node, [])
        for k, i in enumerate(kids):
            last = k == len(kids) - 1
            t = model.joint_types[i]
            extra = f", {model.free_groups[model.joint_names[i]]}" if t == "free" else ""
            lines.append(f"{prefix}{'└── ' if last else '├── '}{model.body_names[i]}  "
                         f"[{model.joint_names[i]}: {t}{extra}, q{model.qoff[i]}, "
                         f"v{model.voff[i]}]  {model.mass[i]:.4g} kg")
            walk(i, prefix + ("    " if last else "│   "))

    walk(-1, "")
    return lines


def cmd_info(args, out):
    m = _load(args)
    print(f"{m.name}: {m.nb} bodies, {len(m.joint_names)} joints, nq = {m.nq}, nv = {m.nv}",
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


def cmd_simulate(args, out):
    from .simulate import simulate
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
                  local_map=args.local_map, progress=None if args.progress else False)
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


def build_parser():
    p = argparse.ArgumentParser(prog="treedyn", description="Robot and multibody dynamics "
                                "with screw and Lie group theory (treedyn " + __version__ + ").")
    p.add_argument("--version", action="version", version=f"treedyn {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def robot_args(sp, optional=False):
        if optional:
            sp.add_argument("file", nargs="?", default=DEFAULT_ROBOT,
                            help=f"robot file (.urdf/.toml) or shipped robot name "
                                 f"(default {DEFAULT_ROBOT})")
        else:
            sp.add_argument("file", help="robot file (.urdf or .toml) or shipped robot name")
        sp.add_argument("--floating-base", action="store_true",
                        help="URDF: attach the root link by a free joint")
        sp.add_argument("--free-group", choices=["SE3", "SO3xR3"], default=None,
                        help="configuration group of free joints")
        sp.add_argument("--lenient-inertia", action="store_true",
                        help="accept (with a warning) slightly non-physical inertias")

    sp = sub.add_parser("info", help="tree, dofs, masses, loops and frames of a robot file")
    robot_args(sp)
    sp.set_defaults(func=cmd_info)

    sp = sub.add_parser("simulate", help="simulate a robot file and write the trajectory")
    robot_args(sp, optional=True)
    sp.add_argument("--t-final", type=float, default=2.0, help="end time, s (default 2)")
    sp.add_argument("--dt", type=float, default=1e-3, help="time step, s (default 1e-3)")
    sp.add_argument("--method", default="rkmk4",
                    choices=["euler", "rkmk2", "rkmk4", "cg4", "rkmk45", "rk4_vector"])
    sp.add_argument("--local-map", default="exp", choices=["exp", "cayley"])
    sp.add_argument("--q0", help="initial configuration, nq numbers (default: neutral, "
                                 "assembled if the file has loops)")
    sp.add_argument("--v0", help="initial velocity, nv numbers (default: zero)")
    sp.add_argument("--out", help="write the trajectory (.csv or .npz)")
    sp.add_argument("--plot", help="write a plot of q, energy and constraint residual (.png)")
    sp.add_argument("--progress", action="store_true", help="show a progress bar")
    sp.set_defaults(func=cmd_simulate)

    sp = sub.add_parser("convert", help="convert a robot file (URDF or TOML) to TOML")
    sp.add_argument("input")
    sp.add_argument("output")
    sp.add_argument("--floating-base", action="store_true")
    sp.add_argument("--lenient-inertia", action="store_true")
    sp.set_defaults(func=cmd_convert)

    sp = sub.add_parser("bench", help="time treedyn (and Pinocchio, when installed)")
    robot_args(sp, optional=True)
    sp.add_argument("--repeat", type=int, default=5)
    sp.set_defaults(func=cmd_bench)
    return p


def main(argv=None, out=None):
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, out)
    except TreedynError as exc:
        print(f"treedyn: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"treedyn: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":      # pragma: no cover
    sys.exit(main())
