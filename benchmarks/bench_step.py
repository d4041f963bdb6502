"""Stepping from Python: td.Simulator.step against MuJoCo's mj_step, per step.

    python benchmarks/bench_step.py [--quick] [--processes K] [--wait-idle S]

Panda from example-robot-data with its ``<visual>``, ``<collision>`` and
``<mimic>`` elements stripped (so that MuJoCo loads the URDF without mesh files,
and both libraries simulate the same 9-freedom tree: MuJoCo does not read the
fingers' mimic coupling), loaded by treedyn and by MuJoCo in the same process.
Both step at the same dt = 1 ms with the file's joint damping (treedyn: the
passive forces; MuJoCo: dof_damping) and constant joint torques (the gravity
compensation at the start pose, each library's own: treedyn passes tau to
every ``step`` call, MuJoCo holds it in ``qfrc_applied``); MuJoCo with ``mjDSBL_CONTACT |
mjDSBL_FRICTIONLOSS | mjDSBL_LIMIT`` (what treedyn does not model).

Timed, interleaved in one process (round-robin repeats), medians over K fresh
processes (default 5):

* a Python loop of 10 000 ``sim.step(tau)`` calls, for ``euler`` (Lie–Euler),
  ``semi_euler`` (MuJoCo's update) and ``rkmk4``, vs a loop of 10 000
  ``mujoco.mj_step(m, d)``: µs per step;
* ``sim.step(tau, n=1000)`` (one compiled loop) vs ``td.simulate`` of the same
  1 000 steps: µs per step;
* the same panda with its mimic coupling kept (treedyn projects every step);
* if ``pybullet`` is installed, PyBullet's loop (``setJointMotorControlArray`` +
  ``stepSimulation`` + ``getJointStates``) and ``stepSimulation`` alone.

Every timed loop starts from the held pose at rest (a reset per 10 000 or 1 000
steps, included in the time): with the gravity-compensating torques the arm
stays near it (the figures printed as "drift"), instead of tumbling with its
fingers sliding off their unlimited rails.

Before timing, the models are checked to agree: MuJoCo's ``qacc`` after
``mj_forward`` equals treedyn's forward dynamics with the passive forces.
"""
from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import Table, bench_main, print_header, time_calls  # noqa: E402
from oracles import erd_path  # noqa: E402

LOOP = 10_000
N_CALL = 1_000
DT = 1e-3


def stripped_panda(keep_mimic=False):
    """The example-robot-data panda URDF text without visual, collision (and mimic)."""
    text = open(erd_path("panda")).read()
    tags = ("visual", "collision") + (() if keep_mimic else ("mimic",))
    for tag in tags:
        text = re.sub(rf"<{tag}\b.*?</{tag}>", "", text, flags=re.S)
        text = re.sub(rf"<{tag}\b[^>]*/>", "", text)
    return text


def _models(tmpdir):
    import warnings

    import mujoco

    import treedyn as td
    path = os.path.join(tmpdir, "panda_stripped.urdf")
    with open(path, "w") as fh:
        fh.write(stripped_panda())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = td.load(path)
        mimic = os.path.join(tmpdir, "panda_mimic.urdf")
        with open(mimic, "w") as fh:
            fh.write(stripped_panda(keep_mimic=True))
        mm = td.load(mimic)
    mj = mujoco.MjModel.from_xml_path(path)
    return m, mm, mj


def _agreement(m, mj, q, tau):
    """max |qacc_MuJoCo − v̇_treedyn| after mj_forward at (q, v) (joint order by name)."""
    import mujoco
    import numpy as np
    d = mujoco.MjData(mj)
    names = [mj.joint(k).name for k in range(mj.njnt)]
    idx = np.array([m.idx_q[n] for n in names])
    v = np.linspace(-0.5, 0.5, m.nv)
    d.qpos[:] = q[idx]
    d.qvel[:] = v[idx]
    d.qfrc_applied[:] = tau[idx]
    mujoco.mj_forward(mj, d)
    a = m.forward_dynamics(q, v, tau + m.passive_forces(q, v))
    return float(np.abs(d.qacc - a[idx]).max())


def _pybullet(path, q0, tau, names):
    """(client, robot, joint indices in treedyn order) of PyBullet in DIRECT mode at
    dt, the default velocity motors released (torque control), or None if
    pybullet is not installed."""
    try:
        import pybullet as pb
    except ImportError:
        return None
    cid = pb.connect(pb.DIRECT)
    pb.setGravity(0, 0, -9.81, physicsClientId=cid)
    pb.setPhysicsEngineParameter(fixedTimeStep=DT, physicsClientId=cid)
    robot = pb.loadURDF(path, useFixedBase=True, physicsClientId=cid)
    index = {pb.getJointInfo(robot, k, physicsClientId=cid)[1].decode(): k
             for k in range(pb.getNumJoints(robot, physicsClientId=cid))}
    joints = [index[n] for n in names]
    for k, j in enumerate(joints):
        pb.resetJointState(robot, j, q0[k], 0.0, physicsClientId=cid)
    pb.setJointMotorControlArray(robot, joints, pb.VELOCITY_CONTROL, forces=[0.0] * len(joints),
                                 physicsClientId=cid)
    return pb, cid, robot, joints


def worker(quick=False, min_time=0.2, repeat=5, sections=("step",)):
    import tempfile

    import mujoco
    import numpy as np

    import treedyn as td
    out = {}
    tmp = tempfile.TemporaryDirectory()
    m, mm, mj = _models(tmp.name)
    mj.opt.timestep = DT
    mj.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONTACT
                            | mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
                            | mujoco.mjtDisableBit.mjDSBL_LIMIT)
    q0 = m.neutral() + 0.3
    q0[7:] = 0.02                                  # fingers half open
    tau = m.inverse_dynamics(q0, np.zeros(m.nv), np.zeros(m.nv))   # gravity compensation
    out["agreement"] = _agreement(m, mj, q0, tau)
    names = [mj.joint(k).name for k in range(mj.njnt)]
    idx = np.array([m.idx_q[n] for n in names])
    d = mujoco.MjData(mj)
    d.qpos[:] = q0[idx]
    # MuJoCo's own gravity compensation (its model's round-off, not treedyn's:
    # held to 1e-13 either way, but the pose is an unstable equilibrium)
    d.qacc[:] = 0.0
    mujoco.mj_inverse(mj, d)
    out["tau_difference"] = float(np.abs(d.qfrc_inverse - tau[idx]).max())
    d.qfrc_applied[:] = d.qfrc_inverse
    sims = {meth: td.Simulator(m, q0, dt=DT, method=meth)
            for meth in ("euler", "semi_euler", "rkmk4")}
    simm = td.Simulator(mm, q0, dt=DT, method="euler")
    loop = LOOP if not quick else 2_000
    g = dict(mujoco=mujoco, mj=mj, d=d, tau=tau, r=range(loop), td=td, m=m, q0=q0, np=np,
             v0=np.zeros(m.nv), T=N_CALL * DT, simm=simm, **{f"s_{k}": s for k, s in sims.items()})
    # every loop starts from the held pose q0 at rest (one reset per 10 000 steps):
    # the arm stays near it instead of tumbling for minutes of simulated time
    g.update(q0m=q0[idx].copy())
    stmts = {f"loop_{k}": f"s_{k}.reset(q0)\nfor _ in r: s_{k}.step(tau)" for k in sims}
    stmts["loop_mujoco"] = ("d.qpos[:] = q0m; d.qvel[:] = 0.0; d.time = 0.0\n"
                            "for _ in r: mujoco.mj_step(mj, d)")
    stmts["loop_euler_mimic"] = "simm.reset(q0)\nfor _ in r: simm.step(tau)"
    pyb = _pybullet(os.path.join(tmp.name, "panda_stripped.urdf"), q0, tau, m.joint_names)
    if pyb is not None:
        pb, cid, robot, joints = pyb
        g.update(pb=pb, cid=cid, robot=robot, joints=joints, tau_list=tau.tolist(),
                 q0_list=q0.tolist(), TORQUE=pb.TORQUE_CONTROL)
        reset = ("for k, j in enumerate(joints): pb.resetJointState(robot, j, q0_list[k], 0.0, "
                 "physicsClientId=cid)\n")
        stmts["loop_pybullet"] = (reset + "for _ in r:\n"
                                  "    pb.setJointMotorControlArray(robot, joints, TORQUE, "
                                  "forces=tau_list, physicsClientId=cid)\n"
                                  "    pb.stepSimulation(physicsClientId=cid)\n"
                                  "    pb.getJointStates(robot, joints, physicsClientId=cid)")
        stmts["loop_pybullet_step_only"] = (
            reset + "pb.setJointMotorControlArray(robot, joints, TORQUE, forces=tau_list, "
            "physicsClientId=cid)\nfor _ in r: pb.stepSimulation(physicsClientId=cid)")
        out["pybullet"] = "installed"
    per_loop = time_calls(stmts, g, repeat=repeat, min_time=min_time)
    for k, us in per_loop.items():
        out[k] = us / loop
    stmts = {}
    for k in ("euler", "rkmk4"):
        stmts[f"n_{k}"] = f"s_{k}.reset(q0); s_{k}.step(tau, {N_CALL})"
        stmts[f"simulate_{k}"] = f"td.simulate(m, q0, v0, T, {DT!r}, method={k!r}, tau=tau)"
    for k, us in time_calls(stmts, g, repeat=repeat, min_time=min_time).items():
        out[k] = us / N_CALL
    for k, s in sims.items():                      # how far the loops went from q0
        out[f"drift_{k}"] = float(np.abs(s.q - q0).max())
    mujoco.mj_step(mj, d)
    out["drift_mujoco"] = float(np.abs(d.qpos - q0[idx]).max())
    tmp.cleanup()
    out["nv"] = m.nv
    out["mujoco"] = mujoco.__version__
    return out


def report(r, spread, info, quick, processes):
    print_header("Stepping from Python: td.Simulator.step vs mujoco.mj_step (panda)", info,
                 processes, quick)
    print(f"MuJoCo {r['mujoco']} · panda (example-robot-data; visual, collision, mimic "
          f"stripped), nv = {r['nv']}, dt = {DT * 1e3:g} ms · "
          f"max |qacc difference| at a test state {r['agreement']:.1e} rad/s² · drift from "
          f"the start pose after a loop: treedyn euler {r['drift_euler']:.1e}, rkmk4 "
          f"{r['drift_rkmk4']:.1e}, MuJoCo {r['drift_mujoco']:.1e} rad or m\n")
    mj = r["loop_mujoco"]
    t = Table(["Python loop of step calls", "µs / step", "× mj_step", "spread"])
    for k, label in (("mujoco", "mujoco.mj_step(m, d)"), ("euler", "sim.step(tau), euler"),
                     ("semi_euler", "sim.step(tau), semi_euler"),
                     ("rkmk4", "sim.step(tau), rkmk4"),
                     ("euler_mimic", "sim.step(tau), euler, mimic kept (projection)")):
        us = r[f"loop_{k}"]
        t.add(label, f"{us:.3f}", f"{us / mj:.2f}", f"{100 * spread[f'loop_{k}']:.0f} %")
    if "loop_pybullet" in r:
        for k, label in (("pybullet", "PyBullet: setJointMotorControlArray + stepSimulation + "
                                      "getJointStates"),
                         ("pybullet_step_only", "PyBullet: stepSimulation only (torques set once)")):
            us = r[f"loop_{k}"]
            t.add(label, f"{us:.3f}", f"{us / mj:.2f}", f"{100 * spread[f'loop_{k}']:.0f} %")
    print(t)
    if "loop_pybullet" in r:
        print("\nPyBullet 3.2 (DIRECT, same URDF, fixed base, no contacts; TORQUE_CONTROL "
              "after releasing the velocity motors) steps semi-implicitly with its own "
              "solver; its figures are per loop iteration.")
    print()
    t = Table(["one call", "µs / step", "td.simulate µs / step", "ratio"])
    for k in ("euler", "rkmk4"):
        a, b = r[f"n_{k}"], r[f"simulate_{k}"]
        t.add(f"sim.step(tau, n={N_CALL}), {k}", f"{a:.3f}", f"{b:.3f}", f"{a / b:.2f}")
    print(t)
    print()
    print("## Summary")
    print()
    s = Table(["target", "measured", "status"])
    e, k4 = r["loop_euler"] / mj, r["loop_rkmk4"] / mj
    s.add("Lie–Euler step ≤ 0.5× mj_step", f"{e:.2f}×", "PASS" if e <= 0.5 else "FAIL")
    s.add("RKMK4 step ≤ 1.0× mj_step", f"{k4:.2f}×", "PASS" if k4 <= 1.0 else "FAIL")
    for k in ("euler", "rkmk4"):
        ratio = r[f"n_{k}"] / r[f"simulate_{k}"]
        s.add(f"step(tau, n={N_CALL}) within 10 % of simulate ({k})", f"{ratio:.2f}",
              "PASS" if ratio <= 1.1 else "FAIL")
    print(s)


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=("step",))


if __name__ == "__main__":
    sys.exit(main())
