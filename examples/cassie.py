"""Cassie (Agility Robotics) read from SDFormat: closed loops and gearboxes.

example-robot-data ships Cassie as SDFormat files only.  ``cassie_v2.sdf`` has
two closed loops per leg (the achilles rod from the hip to the heel spring and
the plantar rod from the foot crank to the foot), each closed by a ball joint;
``cassie.sdf`` adds the motor rotors, coupled to the joints they drive by
``gearbox`` joints (read as mimic couplings) and a knee spring on a prismatic
loop.  The script loads the robot with a free-floating pelvis, assembles its
standing configuration (the file's zero pose: pelvis 1.01 m above the feet),
then simulates it without contact, first without gravity, then in free fall,
and prints the loop closure residual, the energy drift and the speed.  The
file's joint damping and springs (``<axis><dynamics>``) are switched off
(``passive=False``) so that the energy is conserved and its drift measures the
integration.

It does so twice.  In the file as shipped, the right plantar four-bar (tarsus →
foot crank → plantar rod → foot, closed at the foot) has revolute axes parallel
only to 7.4e-8 rad: the tarsus-crank axis is (-3.579e-6, -1, -8.26e-7) in the
model frame, the two others (-3.595e-6, -1, -7.54e-7) (rounded link angles).  A
planar four-bar whose axes are not parallel closes exactly only at the pose it
was built in, so as the crank turns the residual grows (to ~3e-9 m in 1 s) in
the one direction the projection cannot correct (singular value of G ~2e-12:
treated as redundant; correcting it would take joint motions ~|g|/2e-12).  The
second run turns that one axis by the 7.4e-8 rad onto the others
(:func:`align_plantar_axes`, an edit of the joint graph before compiling): then
the residual stays at round-off.

    python examples/cassie.py [--quick] [--model cassie.sdf] [--time 1.0] [--plot cassie.png]

The constrained steps run in the kernels (docs/constraints.md): the default 1 s
at dt = 1e-4 is 10 000 steps per run.

Measured (cassie_v2.sdf, 1 s, dt = 1e-4, this machine): as shipped, max |g(q)|
3.4e-9, relative energy drift 2e-14 (no gravity) / 1e-10 (free fall), ~5 000
steps/s (the projection needs Gauss–Newton iterations); axes aligned, max |g(q)|
2e-15, the same drifts, ~16 000 steps/s.
"""
import argparse
import importlib.metadata
import time
import warnings

import numpy as np

import treedyn as td

CASSIE_DIR = "example-robot-data/robots/cassie_description/robots/"


def cassie_path(name="cassie_v2.sdf"):
    """Path of a Cassie SDFormat file of the installed example-robot-data package."""
    try:
        files = importlib.metadata.files("example-robot-data") or []
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError("example-robot-data is not installed") from None
    for f in files:
        if str(f).endswith(CASSIE_DIR + name):
            return str(f.locate())
    raise FileNotFoundError(f"example-robot-data has no {CASSIE_DIR}{name}")


def load(name="cassie_v2.sdf", align=False):
    """Cassie with a free-floating pelvis (``align``: with align_plantar_axes);
    cassie.sdf has one slightly non-physical rotor inertia (foot-reference: triangle
    inequality violated by 8 %), kept.  Returns (model, load time in s)."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if align:
            graph = td.load_graph(cassie_path(name), floating_base=True, strict_inertia=False)
            align_plantar_axes(graph)
            model = graph.compile()
        else:
            model = td.load(cassie_path(name), floating_base=True, strict_inertia=False)
    return model, time.perf_counter() - t0


def align_plantar_axes(graph, tol=1e-6):
    """Set each leg's tarsus-crank axis to its foot joint's axis where the two are
    parallel to within ``tol`` rad but not exactly (the file's rounding); returns the
    largest angle changed (rad).  Edits the joint graph's edge data in place."""
    edges = {k: d for _, _, k, d in graph.graph.edges(keys=True, data=True)}
    largest = 0.0
    for side in ("left", "right"):
        crank, foot = edges[f"{side}-tarsus-crank-joint"], edges[f"{side}-foot-op"]
        angle = float(np.linalg.norm(np.cross(crank["axis"], foot["axis"])))
        if 0.0 < angle <= tol:
            crank["axis"] = foot["axis"].copy()
            largest = max(largest, angle)
    return largest


def run(model, q0, v0, t_final, dt, gravity):
    t0 = time.perf_counter()
    # passive=False: the file's joint damping and springs off, so that the energy is
    # conserved and its drift measures the integration
    traj = td.simulate(model, q0, v0, t_final, dt, method="rkmk4", gravity=gravity,
                       progress=False, passive=False)
    wall = time.perf_counter() - t0
    e = traj.energy
    kinetic = model.kinetic_energy(q0, v0)
    return dict(traj=traj, steps=len(traj) - 1, steps_per_s=(len(traj) - 1) / wall,
                residual=float(traj.extra["constraint_residual"].max()),
                drift=float(np.ptp(e)), rel_drift=float(np.ptp(e) / kinetic))


def main(quick=False, name="cassie_v2.sdf", t_final=None, dt=1e-4, plot=None):
    model, load_time = load(name)
    print(f"{name}: loaded in {load_time * 1e3:.0f} ms: {model.n_bodies} bodies, nq = {model.nq}, "
          f"nv = {model.nv}, total mass {model.mass.sum():.3f} kg")
    print(f"  {len(model.loop_closures)} loop closures: "
          + ", ".join(f"{lc.name} ({lc.type})" for lc in model.loop_closures))
    if model.mimic:
        print(f"  {len(model.mimic)} gearboxes as mimic couplings, e.g. "
              f"{model.mimic[0]['joint']} = {model.mimic[0]['multiplier']:g} * "
              f"{model.mimic[0]['leader']}")
    graph = td.load_graph(cassie_path(name), floating_base=True, strict_inertia=False)
    angle = align_plantar_axes(graph)
    print(f"  largest plantar-loop axis misalignment in the file: {angle:.1e} rad")

    t_final = (0.01 if quick else 1.0) if t_final is None else t_final
    results = {}
    for variant, m in (("as shipped", model), ("axes aligned", load(name, align=True)[0])):
        # standing: the file's zero pose, where every loop is closed (assemble checks it)
        q0 = m.assemble(m.neutral())
        pelvis = m.forward_kinematics(q0)[m.body_names.index("pelvis")]
        print(f"  {variant}: standing at pelvis z = {pelvis[2, 3]:.3f} m, "
              f"max |g(q)| = {np.abs(m.constraint_residual(q0)).max():.1e}")
        rng = np.random.default_rng(1)
        v = np.zeros(m.nv)
        v[6:] = 0.5 * rng.standard_normal(m.nv - 6)          # joints only, rad/s
        v0 = m.project_velocity(q0, v)
        for label, gravity in (("no gravity", [0.0, 0.0, 0.0]), ("gravity", None)):
            res = run(m, q0, v0, t_final, dt, gravity)
            results[f"{variant}, {label}"] = res
            print(f"    {label:10s}: {res['steps']} rkmk4 steps of {dt:g} s, "
                  f"{res['steps_per_s']:.0f} steps/s, max |g(q)| {res['residual']:.1e}, "
                  f"energy drift {res['drift']:.1e} J ({res['rel_drift']:.1e} of the "
                  f"kinetic energy)")
    if plot:
        _plot(results, plot)
    return dict(model=model, load_time=load_time, misalignment=angle, results=results)


def _plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  matplotlib is not installed: no plot")
        return
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    for label, res in results.items():
        traj = res["traj"]
        ax1.semilogy(traj.t, np.maximum(traj.extra["constraint_residual"], 1e-17), label=label)
        ax2.plot(traj.t, traj.energy - traj.energy[0], label=label)
    ax1.set_ylabel("max |g(q)|")
    ax2.set_ylabel("E(t) - E(0) (J)")
    ax2.set_xlabel("t (s)")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"  plot written to {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="0.01 s runs (tests)")
    parser.add_argument("--model", default="cassie_v2.sdf",
                        help="cassie_v2.sdf (default) or cassie.sdf (gearboxes)")
    parser.add_argument("--time", type=float, default=None, help="simulated time, s")
    parser.add_argument("--plot", default=None, help="write a plot of residual and energy")
    args = parser.parse_args()
    main(args.quick, args.model, args.time, plot=args.plot)
