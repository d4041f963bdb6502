"""Forward kinematics and Jacobians: treedyn against Pinocchio.

    python benchmarks/bench_fk.py [--quick] [--processes K]

a. per call on example-robot-data robots:
   ``m.forward_kinematics(q)`` vs ``pin.forwardKinematics``,
   ``m.frame_poses(q)`` vs ``pin.framesForwardKinematics``,
   ``m.jacobian(q, frame, rep)`` vs ``pin.computeFrameJacobian`` for
   body/LOCAL, spatial/WORLD and hybrid/LOCAL_WORLD_ALIGNED;
b. serial chains of n revolute joints: µs per call and per joint;
c. batch of random panda states: treedyn batch calls vs Python loops of Pinocchio;
d. a Markdown summary.  (No performance targets are set for kinematics yet.)

Every section runs in K fresh processes (default 5); numbers are medians across
processes.  Results of both libraries are checked to agree before timing.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import (bench_main, QUICK_ROBOTS, ROBOTS, Table, chain_treedyn,  # noqa: E402
                    chain_urdf, print_header, random_chain_links, robot_label, time_calls)
from oracles import (PIN_REFERENCE_FRAME as PIN_REF, SWAP_HALVES as SWAP,  # noqa: E402
                     assert_rel_close, load_pair, pin_v_permutation, to_pinocchio_q)

REPS = ("body", "spatial", "hybrid")
#: frame whose Jacobian is timed
JAC_FRAME = {"ur5": "tool0", "panda": "panda_link7", "solo12": "FR_FOOT",
             "talos_reduced": "left_sole_link", "talos_full_v2": "left_sole_link"}
CHAIN_SIZES = (10, 30, 100, 300, 1000)
QUICK_CHAIN_SIZES = (10, 100)
PIN_CHAIN_MAX = 300          # Pinocchio's Data holds nv³ tensors (64 GB at nv = 1000)
BATCH_N, QUICK_BATCH_N = 10_000, 1_000
TOL = 1e-10                  # poses and Jacobians of order 1 (m, rad)


def _check(name, ours, ref, tol=TOL):
    """Relative error of treedyn against the reference; raises above ``tol``."""
    return assert_rel_close(ours, ref, tol, f"{name}: treedyn vs reference")


def _verify(m, pm, pd, q, qp, frame, what):
    """Body poses, named-frame poses and the Jacobians agree with Pinocchio."""
    import pinocchio as pin
    P = pin_v_permutation(m, pm)
    pin.framesForwardKinematics(pm, pd, qp)
    C = m.forward_kinematics(q)
    err = max(_check(f"{what} fk {b}", C[i], pd.oMf[pm.getFrameId(b)].homogeneous)
              for i, b in enumerate(m.body_names))
    F = m.frame_poses(q)
    err = max(err, max(_check(f"{what} frame {f}", F[k], pd.oMf[pm.getFrameId(f)].homogeneous)
                       for k, f in enumerate(m.frame_names) if pm.existFrame(f)))
    fid = pm.getFrameId(frame)
    for rep in REPS:
        Jp = pin.computeFrameJacobian(pm, pd, qp, fid, getattr(pin, PIN_REF[rep]))
        J = m.jacobian(q, frame, rep)
        err = max(err, _check(f"{what} jacobian {rep}", J[SWAP][:, P], Jp))
    return err, P, fid


# ------------------------------------------------------------------------ workers
def worker(quick=False, min_time=0.2, repeat=5, sections=("robots", "chain", "batch")):
    import numpy as np
    import pinocchio as pin

    out = {}
    tkw = dict(min_time=min_time, repeat=repeat)

    def stmts_for(frame_expr):
        s = {"pin_fk": "pin.forwardKinematics(pm, pd, qp)",
             "pin_frames": "pin.framesForwardKinematics(pm, pd, qp)",
             "td_fk": "m.forward_kinematics(q)",
             "td_fk_out": "m.forward_kinematics(q, data=d, out=C)",
             "td_frames": "m.frame_poses(q)"}
        for rep in REPS:
            s[f"pin_jac_{rep}"] = (f"pin.computeFrameJacobian(pm, pd, qp, fid, "
                                   f"pin.{PIN_REF[rep]})")
            s[f"td_jac_{rep}"] = f"m.jacobian(q, {frame_expr}, {rep!r})"
        s["td_jac_body_out"] = f"m.jacobian(q, {frame_expr}, 'body', data=d, out=J)"
        return s

    if "robots" in sections:
        for name, floating in (QUICK_ROBOTS if quick else ROBOTS):
            key = robot_label(name, floating)
            m, pm, pd = load_pair(name, floating)
            q = m.random_configuration(np.random.default_rng(1))
            qp = to_pinocchio_q(m, pm, q)
            frame = JAC_FRAME[name]
            err, _, fid = _verify(m, pm, pd, q, qp, frame, key)
            out[f"robot/{key}/err"] = err
            out[f"robot/{key}/nb"] = m.n_bodies
            out[f"robot/{key}/nv"] = m.nv
            out[f"robot/{key}/td_nframes"] = len(m.frame_names)
            out[f"robot/{key}/pin_nframes"] = int(pm.nframes)
            out[f"robot/{key}/frame"] = frame
            g = dict(m=m, q=q, pin=pin, pm=pm, pd=pd, qp=qp, fid=fid, frame=frame,
                     d=m.create_data(), C=np.empty((m.n_bodies, 4, 4)), J=np.empty((6, m.nv)))
            for k, us in time_calls(stmts_for("frame"), g, **tkw).items():
                out[f"robot/{key}/{k}"] = us

    if "chain" in sections:
        for n in (QUICK_CHAIN_SIZES if quick else CHAIN_SIZES):
            links = random_chain_links(n, seed=n)
            m = chain_treedyn(links)
            q = m.random_configuration(np.random.default_rng(2))
            frame = f"link{n - 1}"
            g = dict(m=m, q=q, pin=pin, frame=frame)
            stmts = {k: s for k, s in stmts_for("frame").items() if not k.endswith("_out")}
            if n <= PIN_CHAIN_MAX:
                pm = pin.buildModelFromXML(chain_urdf(links))
                pd = pm.createData()
                qp = to_pinocchio_q(m, pm, q)
                err, _, fid = _verify(m, pm, pd, q, qp, frame, f"chain {n}")
                out[f"chain/{n}/err"] = err
                g.update(pm=pm, pd=pd, qp=qp, fid=fid)
                del pm, pd
            else:
                stmts = {k: s for k, s in stmts.items() if k.startswith("td_")}
                # no Pinocchio here: check the tip pose against a plain product of
                # the URDF transforms instead
                from common import _rpy_matrix
                T = np.eye(4)
                for L, qi in zip(links, q):
                    X = np.eye(4)
                    X[:3, :3], X[:3, 3] = _rpy_matrix(*L["rpy"]), L["xyz"]
                    K = np.array([[0, -L["axis"][2], L["axis"][1]],
                                  [L["axis"][2], 0, -L["axis"][0]],
                                  [-L["axis"][1], L["axis"][0], 0]])
                    Rq = np.eye(4)
                    Rq[:3, :3] = np.eye(3) + np.sin(qi) * K + (1 - np.cos(qi)) * K @ K
                    T = T @ X @ Rq
                out[f"chain/{n}/err"] = _check(f"chain {n} tip pose",
                                               m.forward_kinematics(q)[-1], T, 1e-8)
            for k, us in time_calls(stmts, g, **tkw).items():
                out[f"chain/{n}/{k}"] = us
            g.clear()

    if "batch" in sections:
        N = QUICK_BATCH_N if quick else BATCH_N
        m, pm, pd = load_pair("panda", False)
        rng = np.random.default_rng(3)
        Q = np.array([m.random_configuration(rng) for _ in range(N)])
        Qp = np.array([to_pinocchio_q(m, pm, x) for x in Q])
        frame = JAC_FRAME["panda"]
        fid = pm.getFrameId(frame)
        jid = pm.frames[fid].parentJoint
        P = pin_v_permutation(m, pm)
        g = dict(m=m, Q=Q, Qp=Qp, pin=pin, pm=pm, pd=pd, fid=fid, jid=jid, frame=frame,
                 pose=np.empty((N, 4, 4)), jac=np.empty((N, 6, pm.nv)),
                 pin_fk_loop=pin_fk_loop, pin_jac_loop=pin_jac_loop)
        # check: both loops reproduce treedyn's batch results
        pin_fk_loop(pin, pm, pd, Qp, jid, g["pose"])
        out["batch/err"] = _check("batch fk", m.forward_kinematics(Q)[:, m.body_index(frame)],
                                  g["pose"])
        pin_jac_loop(pin, pm, pd, Qp, fid, g["jac"])
        out["batch/err"] = max(out["batch/err"], _check(
            "batch jacobian", m.jacobian(Q, frame, "body")[:, SWAP][:, :, P], g["jac"]))
        out["batch/N"] = N
        out["batch/threads"] = os.environ.get("OMP_NUM_THREADS", str(os.cpu_count()))
        stmts = {"pin_fk_loop": "pin_fk_loop(pin, pm, pd, Qp, jid, pose)",
                 "td_fk": "m.forward_kinematics(Q)",
                 "pin_jac_loop": "pin_jac_loop(pin, pm, pd, Qp, fid, jac)",
                 "td_jac": "m.jacobian(Q, frame, 'body')"}
        for k, us in time_calls(stmts, g, min_time=min_time, repeat=max(3, repeat)).items():
            out[f"batch/{k}"] = us / N
    return out


def pin_fk_loop(pin, pm, pd, Qp, jid, out):
    """Pinocchio user loop: forward kinematics, keep one pose per state."""
    for k in range(Qp.shape[0]):
        pin.forwardKinematics(pm, pd, Qp[k])
        out[k] = pd.oMi[jid].homogeneous


def pin_jac_loop(pin, pm, pd, Qp, fid, out):
    """Pinocchio user loop: a frame Jacobian (LOCAL) per state."""
    for k in range(Qp.shape[0]):
        out[k] = pin.computeFrameJacobian(pm, pd, Qp[k], fid, pin.LOCAL)


# ------------------------------------------------------------------------- report
def _cell(us, ref):
    return f"{us:.3f} ({us / ref:.2f}×)"


def report(r, spread, info, quick, processes):
    print_header("treedyn forward kinematics and Jacobians vs Pinocchio", info, processes,
                 quick)
    tables = []
    robots = [robot_label(n, f) for n, f in (QUICK_ROBOTS if quick else ROBOTS)]

    print("## a. Per call, µs (ratio treedyn / Pinocchio)\n")
    t = Table(["robot", "nb", "pin.forwardKinematics", "fk(q)", "fk(q, data, out)",
               "pin.framesForwardKinematics", "frame_poses(q)", "frames td / pin",
               "max spread", "max rel. err"])
    for key in robots:
        g = lambda k: r[f"robot/{key}/{k}"]  # noqa: E731
        sp = max(spread.get(f"robot/{key}/{k}", 0.0)
                 for k in ("pin_fk", "td_fk", "pin_frames", "td_frames"))
        t.add(key, g("nb"), f"{g('pin_fk'):.3f}", _cell(g("td_fk"), g("pin_fk")),
              _cell(g("td_fk_out"), g("pin_fk")), f"{g('pin_frames'):.3f}", _cell(g("td_frames"), g("pin_frames")),
              f"{g('td_nframes')} / {g('pin_nframes')}", f"{100 * sp:.0f} %",
              f"{g('err'):.1e}")
    print(t, "\n")
    tables.append(t)

    print("Frame Jacobian incl. its forward kinematics, µs: pin.computeFrameJacobian "
          "(LOCAL / WORLD / LOCAL_WORLD_ALIGNED) vs m.jacobian(q, frame, body / spatial / "
          "hybrid)\n")
    t = Table(["robot", "frame", "pin LOCAL", "td body", "td body (data, out)", "pin WORLD",
               "td spatial", "pin LWA", "td hybrid", "td slowest/fastest", "max spread"])
    for key in robots:
        g = lambda k: r[f"robot/{key}/{k}"]  # noqa: E731
        cells = []
        for rep in REPS:
            cells += [f"{g(f'pin_jac_{rep}'):.3f}", _cell(g(f"td_jac_{rep}"),
                                                          g(f"pin_jac_{rep}"))]
            if rep == "body":
                cells.append(_cell(g("td_jac_body_out"), g("pin_jac_body")))
        tds = [g(f"td_jac_{rep}") for rep in REPS]
        sp = max(spread.get(f"robot/{key}/{p}jac_{rep}", 0.0)
                 for rep in REPS for p in ("pin_", "td_"))
        t.add(key, g("frame"), *cells, f"{max(tds) / min(tds):.2f}", f"{100 * sp:.0f} %")
    print(t, "\n")
    tables.append(t)

    sizes = QUICK_CHAIN_SIZES if quick else CHAIN_SIZES
    print("## b. Serial revolute chains: µs per call (µs per joint); Jacobian of the tip link\n")
    t = Table(["n", "pin fk", "td fk", "pin jac LOCAL", "td jac body", "td jac spatial",
               "td jac hybrid", "max spread"])
    for n in sizes:
        cells = []
        for k in ("pin_fk", "td_fk", "pin_jac_body", "td_jac_body", "td_jac_spatial",
                  "td_jac_hybrid"):
            us = r.get(f"chain/{n}/{k}")
            cells.append("n/a (Data ~{:.0f} GB)".format(8 * n ** 3 * 8 / 1e9) if us is None
                         else f"{us:.2f} ({us / n:.4f})")
        sp = max(v for k, v in spread.items() if k.startswith(f"chain/{n}/")
                 and not k.endswith("err"))
        t.add(n, *cells, f"{100 * sp:.0f} %")
    print(t, "\n")
    tables.append(t)
    lo, hi = sizes[0], sizes[-1]
    lin = Table(["quantity", f"µs/joint n={lo}", f"µs/joint n={hi}", f"ratio {hi}/{lo}"])
    for k in ("td_fk", "td_jac_body", "td_jac_spatial", "td_jac_hybrid", "pin_fk",
              "pin_jac_body"):
        top = max(n for n in sizes if f"chain/{n}/{k}" in r)
        a, b = r[f"chain/{lo}/{k}"] / lo, r[f"chain/{top}/{k}"] / top
        lin.add(k + ("" if top == hi else f" (n={top})"), f"{a:.4f}", f"{b:.4f}",
                f"{b / a:.2f}")
    print("Linearity (per-joint cost; small n includes the call overhead):\n")
    print(lin, "\n")
    tables.append(lin)

    N = r["batch/N"]
    print("## c. Batch of random panda states, µs per state\n")
    t = Table(["N", "pin loop: forwardKinematics + 1 pose", "td forward_kinematics(Q) (all poses)",
               "speed-up", "pin loop: computeFrameJacobian LOCAL", "td jacobian(Q, body)",
               "speed-up"])
    t.add(N, f"{r['batch/pin_fk_loop']:.3f}", f"{r['batch/td_fk']:.3f}",
          f"{r['batch/pin_fk_loop'] / r['batch/td_fk']:.1f}×", f"{r['batch/pin_jac_loop']:.3f}",
          f"{r['batch/td_jac']:.3f}", f"{r['batch/pin_jac_loop'] / r['batch/td_jac']:.1f}×")
    print(t)
    print(f"\n(treedyn batches: OpenMP kernels, OMP_NUM_THREADS={r['batch/threads']}; the "
          f"Jacobian's representation change runs in NumPy; Pinocchio loops write into "
          f"preallocated arrays; max rel. err {r['batch/err']:.1e})\n")
    tables.append(t)

    print("## Summary\n")
    print(f"Kinematics benchmark, {info['date']}: {info['cpu']}, {info['cores']} cores; "
          f"Python {info['python']}, NumPy {info['numpy']}; treedyn {info['treedyn']}; "
          f"Pinocchio {info['pinocchio']} (pip `pin`). Median of {processes} fresh "
          f"process(es); µs per call unless stated" + ("; QUICK run, not for the README"
                                                     if quick else "") + ".\n")
    for tab in tables:
        print(tab, "\n")
    print("No performance targets are set for kinematics; all results agree with "
          "Pinocchio (max rel. err in the tables).")


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
