"""Many rollouts at once: td.rollout against MuJoCo's ``mujoco.rollout``.

    python benchmarks/bench_rollout.py [--quick] [--n N] [--threads 2]

ur5, panda and talos_full_v2 (+ free flyer) from example-robot-data, their
``<visual>``, ``<collision>`` and ``<mimic>`` elements stripped so that MuJoCo
loads the same URDF (talos' free joint added to its root body by ``MjSpec``).
N rollouts (default 10 000; --quick 200) of 1 s at dt = 1 ms from the same
initial states in both libraries (neutral pose, every one-freedom joint turned by
0.05 rad and moving at 0.2 rad/s, normal draws; talos' free base at rest: a
gravity free fall, no contacts) with zero applied torques (the file's joint
damping in both, except talos: none in either, see bench_tree),
run in calls of ``--batch`` samples (default 500); MuJoCo writes every state
into a reused output array, treedyn keeps the first and last (save_every =
n_steps).  A treedyn sample that diverges stops; only the steps taken count
(and the number of diverged samples is printed).  MuJoCo: contacts,
limits and friction loss disabled, one ``MjData`` per thread (``--threads``,
default 2, persistent pool); treedyn: ``threads=--threads``.  Printed: sample
steps per second and treedyn / MuJoCo ratios (Lie–Euler, semi-implicit Euler,
RKMK4 against MuJoCo's semi-implicit Euler).

Closed loops (four-bar, Delta): one constrained RKMK4 step inside a rollout
(save_every = n_steps, as the trees' rows; on ``--threads`` threads and on one)
against one ABA call of the same model: the issue's yardstick, a call for one
state with its Python binding (``m.forward_dynamics(q, v, tau)``, as in
bench_loops' "step / ABA" column, which gave the issue's 6.4–7.9× through
``td.simulate``), and, stricter, the ABA of a batch per state (vector lanes, on
``--threads`` threads: the batch's OpenMP team is sized by OMP_NUM_THREADS, which
main sets to ``--threads`` before treedyn is imported); also a ``td.simulate``
step (one trajectory) in that yardstick.  All timed alternately in one process;
ratios of the minima (medians beside them).  Cassie (examples/cassie.py,
cassie_v2.sdf): constrained RKMK4 steps per second in a rollout.

--dask: ur5 rollouts on LocalClusters of 1 and 2 worker processes (one thread
each, chunks of 1 000 samples) against the local call on one thread, the three
interleaved (bench_dask): the Dask path's overhead and its 1 -> 2 worker scaling.

Timings are wall-clock medians (closed loops: also minima) of ``--repeat`` runs on
this machine as it is (the figures of a shared machine are indicative only).
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from oracles import erd_path  # noqa: E402

sys.path.insert(0, HERE)
from common import aligned_cassie  # noqa: E402

ROBOTS = ("ur5", "panda", "talos_full_v2")
DT = 1e-3


def stripped(name):
    text = open(erd_path(name)).read()
    for tag in ("visual", "collision", "mimic"):
        text = re.sub(rf"<{tag}\b.*?</{tag}>", "", text, flags=re.S)
        text = re.sub(rf"<{tag}\b[^>]*/>", "", text)
    return text


def load_pair(name, tmpdir):
    """(treedyn model, MuJoCo model) of the same stripped URDF."""
    import mujoco

    import treedyn as td
    path = os.path.join(tmpdir, name + ".urdf")
    with open(path, "w") as fh:
        fh.write(stripped(name))
    floating = name.startswith("talos")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = td.load(path, floating_base=floating, lenient_inertia=True) \
            if "lenient_inertia" in td.load.__code__.co_varnames else td.load(path, floating_base=floating)
    spec = mujoco.MjSpec.from_file(path)
    if floating:
        spec.worldbody.first_body().add_freejoint()
    mj = spec.compile()
    mj.opt.timestep = DT
    mj.opt.disableflags |= (mujoco.mjtDisableBit.mjDSBL_CONTACT
                            | mujoco.mjtDisableBit.mjDSBL_FRICTIONLOSS
                            | mujoco.mjtDisableBit.mjDSBL_LIMIT)
    return m, mj


def median_time(fn, repeat):
    fn()                                # warm-up: thread teams, first touch of memory
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def initial_states(m, mj, batch, rng):
    """The same ``batch`` initial states in both libraries, as a user would start
    them: the neutral pose (free base at its file pose, at rest) with every
    one-freedom joint turned by 0.05 rad and moving at 0.2 rad/s (normal draws),
    mapped to MuJoCo's qpos / qvel by joint name.  Returns (q0, v0, MuJoCo states
    (batch, mjSTATE_FULLPHYSICS size))."""
    import mujoco
    q0 = np.repeat(m.neutral()[None], batch, axis=0)
    v0 = np.zeros((batch, m.nv))
    d = mujoco.MjData(mj)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    init = np.empty((batch, mujoco.mj_stateSize(mj, spec)))
    pairs = []
    for i, (name, k) in enumerate(zip(m.joint_names, m.nqj)):
        if k == 1 and m.nvj[i] == 1:
            j = mj.joint(name)
            pairs.append((m.qoff[i], m.voff[i], int(j.qposadr[0]), int(j.dofadr[0])))
    dq = 0.05 * rng.normal(size=(batch, len(pairs)))
    dv = 0.2 * rng.normal(size=(batch, len(pairs)))
    for s in range(batch):
        mujoco.mj_resetData(mj, d)
        for c, (qi, vi, qa, da) in enumerate(pairs):
            q0[s, qi] += dq[s, c]
            v0[s, vi] = dv[s, c]
            d.qpos[qa] += dq[s, c]
            d.qvel[da] = dv[s, c]
        mujoco.mj_getState(mj, d, init[s], spec)
    return q0, v0, init


def bench_tree(name, N, batch, nstep, threads, repeat, tmpdir, rng):
    import mujoco
    from mujoco import rollout as mjr

    import treedyn as td
    m, mj = load_pair(name, tmpdir)
    # the humanoid without the file's joint damping in both libraries: on its light
    # hand and head links it is stiff for explicit steps of 1 ms (treedyn's passive
    # forces are explicit, MuJoCo's Euler treats damping implicitly), and every
    # treedyn sample diverged within 20–45 steps
    passive = not name.startswith("talos")
    if not passive:
        mj.dof_damping[:] = 0.0
    q0, v0, init = initial_states(m, mj, batch, rng)
    calls = -(-N // batch)
    res = {"passive": passive}
    for method in ("euler", "semi_euler", "rkmk4"):
        def run(method=method):
            for _ in range(calls):
                td.rollout(m, q0, v0, nstep * DT, DT, method=method, threads=threads,
                           save_every=nstep, passive=passive)
        # a sample that diverges stops: only the steps taken count
        r = td.rollout(m, q0, v0, nstep * DT, DT, method=method, threads=threads,
                       save_every=nstep, passive=passive)
        taken = np.where(r.diverged, r.failed_step, nstep).sum()
        res[method] = calls * taken / median_time(run, repeat)
        res[method + "_div"] = int(r.diverged.sum())
    datas = [mujoco.MjData(mj) for _ in range(threads)]
    nstate = init.shape[1]
    state = np.empty((batch, nstep, nstate))
    with mjr.Rollout(nthread=threads) as pool:
        def run_mj():
            for _ in range(calls):
                pool.rollout(mj, datas, init, nstep=nstep, state=state)
        run_mj()
        # MuJoCo resets a diverging sample to its initial pose (time back to 0)
        # and goes on: count those whose time did not reach the end, or not finite
        tend = state[:, -1, 0]
        res["mujoco_div"] = int(np.sum(~(np.isfinite(state[:, -1]).all(axis=1)
                                         & np.isclose(tend, nstep * DT))))
        res["mujoco"] = calls * batch * nstep / median_time(run_mj, repeat)
    res["nv"] = m.nv
    return res


def bench_loops(threads, repeat, quick, rng):
    """Closed loops: per model (four-bar, Delta), in µs, the constrained RKMK4 step in
    a rollout on ``threads`` threads (``step``) and on one (``step1``), per sample step;
    the ABA of a batch per state (``aba_batch``); one ABA call for one state, Python
    binding included (``aba_call``, a loop of ``ncall`` calls over the states); a
    ``td.simulate`` step (one trajectory of ``nsim`` steps).  All timed alternately
    ``repeat`` times after a warm-up each, so that they see the same machine: minima
    under ``name``, medians under ``name + "_median"`` (dicts).  Cassie: steps per
    second (median)."""
    import treedyn as td
    out = {"aba_threads": td.batch_threads()}
    N, nstep, ncall, nsim = (200, 20, 200, 200) if quick else (2000, 100, 2000, 2000)
    for name in ("four_bar", "delta"):
        m = td.load(td.robots.path(name + ".toml"))
        q = m.assemble(m.neutral())
        Q0 = np.repeat(q[None], N, axis=0)
        V0 = np.array([m.project_velocity(q, 0.1 * rng.normal(size=m.nv)) for _ in range(N)])
        tau = np.zeros((N, m.nv))
        states = [(Q0[k], V0[k], tau[k]) for k in range(ncall)]

        def aba_calls(fd=m.forward_dynamics, states=states):
            for qk, vk, tk in states:
                fd(qk, vk, tk)

        calls = {"step": (lambda: td.rollout(m, Q0, V0, nstep * 1e-4, 1e-4, threads=threads,
                                             save_every=nstep), N * nstep),
                 "aba_batch": (lambda: m.forward_dynamics(Q0, V0, tau), N),
                 "step1": (lambda: td.rollout(m, Q0, V0, nstep * 1e-4, 1e-4, threads=1,
                                              save_every=nstep), N * nstep),
                 "aba_call": (aba_calls, ncall),
                 "simulate": (lambda: td.simulate(m, Q0[0], V0[0], t_final=nsim * 1e-4,
                                                  dt=1e-4, method="rkmk4"), nsim)}
        ts = {k: [] for k in calls}
        for fn, _ in calls.values():
            fn()                        # warm-up: thread teams, first touch of memory
        for _ in range(max(repeat, 3)):
            for k, (fn, _) in calls.items():
                t0 = time.perf_counter()
                fn()
                ts[k].append(time.perf_counter() - t0)
        out[name] = {k: 1e6 * min(ts[k]) / n for k, (_, n) in calls.items()}
        out[name + "_median"] = {k: 1e6 * float(np.median(ts[k])) / n
                                 for k, (_, n) in calls.items()}
    cassie = aligned_cassie()
    if cassie is not None:
        m, q = cassie
        n = 50 if quick else 500
        Q0 = np.repeat(q[None], n, axis=0)
        V0 = np.zeros((n, m.nv))
        ns = 20 if quick else 100
        t = median_time(lambda: td.rollout(m, Q0, V0, ns * 1e-4, 1e-4, threads=threads,
                                           save_every=ns), repeat)
        out["cassie"] = n * ns / t
    return out


def bench_dask(quick, repeat, rng):
    """Seconds of one call: local on one thread, and the same call on LocalClusters of
    1 and 2 worker processes of one thread each (chunks of 1 000 samples; the two
    clusters up at once, idle between their calls), the three interleaved repeat
    times (local, 1 worker, 2 workers, local, …) after a warm-up call each, so that
    they see the same machine.  Medians.  Then the fault injection: the 2-worker call
    again, one worker SIGKILLed once the first chunk is back (its nanny starts a
    new one; Dask reruns the lost chunks): its time and whether the arrays equal
    the local call's bit for bit."""
    import signal

    from distributed import Client, LocalCluster

    import treedyn as td
    m = td.load(td.robots.path("ur5.urdf"))
    N, nstep, chunk = (2000, 50, 1000) if quick else (4000, 250, 1000)
    q0 = np.array([m.random_configuration(rng) for _ in range(N)])
    v0 = np.zeros((N, m.nv))
    kw = dict(save_every=nstep, progress=False, threads=1)
    out = {"N": N, "nstep": nstep, "chunk": chunk}
    ref = td.rollout(m, q0, v0, nstep * DT, DT, **kw)
    clusters, clients = {}, {}
    try:
        for nw in (1, 2):
            clusters[nw] = LocalCluster(n_workers=nw, threads_per_worker=1, processes=True,
                                        host="127.0.0.1", dashboard_address=None,
                                        env={"OMP_NUM_THREADS": "1"},
                                        silence_logs=logging.ERROR)
            clients[nw] = Client(clusters[nw])
        calls = {"local": lambda: td.rollout(m, q0, v0, nstep * DT, DT, **kw)}
        for nw in (1, 2):
            calls[nw] = (lambda c=clients[nw]: td.rollout(m, q0, v0, nstep * DT, DT, client=c,
                                                          chunk=chunk, **kw))
        for nw in (1, 2):                   # warm-up; the same arrays as the local call
            r = calls[nw]()
            assert np.array_equal(r.q, ref.q) and np.array_equal(r.v, ref.v)
        ts = {key: [] for key in calls}
        for _ in range(max(repeat, 3)):
            for key, fn in calls.items():
                t = time.perf_counter()
                fn()
                ts[key].append(time.perf_counter() - t)
        for key in calls:
            out[key] = float(np.median(ts[key]))
        pids = clients[2].run(os.getpid)        # {worker address: pid}
        victim = sorted(pids)[0]
        killed = []

        def kill_one(done, total):
            if not killed:
                killed.append(done)
                os.kill(pids[victim], signal.SIGKILL)

        t = time.perf_counter()
        r = td.rollout(m, q0, v0, nstep * DT, DT, client=clients[2], chunk=chunk,
                       **dict(kw, progress=kill_one))
        out["killed"] = dict(seconds=time.perf_counter() - t, killed=bool(killed),
                             gone=victim not in clients[2].scheduler_info()["workers"],
                             equal=bool(np.array_equal(r.q, ref.q)
                                        and np.array_equal(r.v, ref.v)
                                        and np.array_equal(r.status, ref.status)))
    finally:
        for c in clients.values():
            c.close()
        for cl in clusters.values():
            cl.close()
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="200 rollouts of 0.1 s, one repeat")
    ap.add_argument("--n", type=int, default=None, help="rollouts per robot (default 10 000)")
    ap.add_argument("--batch", type=int, default=500, help="samples per call (default 500)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=None, help="timing repeats (default 3)")
    ap.add_argument("--robots", default=",".join(ROBOTS),
                    help="comma-separated; empty: the closed-loop section only")
    ap.add_argument("--dask", action="store_true",
                    help="also time the Dask path (LocalCluster of 1 and 2 worker processes)")
    args = ap.parse_args(argv)
    if "treedyn" not in sys.modules:
        # the loop section's ABA batch runs on OpenMP's default team: the same
        # number of threads as the rollouts it is compared with
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    N = args.n or (200 if args.quick else 10_000)
    nstep = 100 if args.quick else 1000
    batch = min(args.batch, N)
    repeat = args.repeat or (1 if args.quick else 3)
    rng = np.random.default_rng(0)
    print(f"rollouts: {N} per robot of {nstep} steps at dt = {DT:g} s, {args.threads} threads, "
          f"calls of {batch} samples; median of {repeat}; load average "
          f"{os.getloadavg()[0]:.2f} (shared machine: indicative)")
    print(f"{'robot':<16}{'nv':>4}{'MuJoCo':>12}{'Lie-Euler':>12}{'semi-Euler':>12}"
          f"{'RKMK4':>12}   ratios to MuJoCo (steps/s)")
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in filter(None, args.robots.split(",")):
            r = bench_tree(name, N, batch, nstep, args.threads, repeat, tmpdir, rng)
            mj = r["mujoco"]
            print(f"{name:<16}{r['nv']:>4}{mj:>12.4g}{r['euler']:>12.4g}{r['semi_euler']:>12.4g}"
                  f"{r['rkmk4']:>12.4g}   Lie-Euler {r['euler'] / mj:.2f}x (target 3), "
                  f"semi-Euler {r['semi_euler'] / mj:.2f}x, RKMK4 {r['rkmk4'] / mj:.2f}x "
                  f"(target 1)")
            div = {k: r[k + "_div"] for k in ("euler", "semi_euler", "rkmk4", "mujoco")
                   if r[k + "_div"]}
            if div:
                print(f"{'':<16}diverged samples (of {batch}, treedyn's counted up to their "
                      f"failing step): {div}")
            if not r["passive"]:
                print(f"{'':<16}(without the file's joint damping in both libraries)")
    loops = bench_loops(args.threads, repeat, args.quick, rng)
    if loops["aba_threads"] != args.threads:
        print(f"(closed loops: the ABA batch ran on {loops['aba_threads']} threads, the "
              f"rollouts on {args.threads}: the ratios are not comparable)")
    print(f"closed loops: one constrained RKMK4 step (with its projection) against one ABA "
          f"call, minima (medians); target <= 5x")
    for name in ("four_bar", "delta"):
        r, rm = loops[name], loops[name + "_median"]
        call, callm = r["aba_call"], rm["aba_call"]
        print(f"{name:<16} ABA call (one state, Python binding) {call:.3g} µs: rollout step "
              f"on {args.threads} threads {r['step']:.3g} µs = {r['step'] / call:.2f}x "
              f"({rm['step'] / callm:.2f}x), on 1 thread {r['step1']:.3g} µs = "
              f"{r['step1'] / call:.2f}x ({rm['step1'] / callm:.2f}x); td.simulate step "
              f"{r['simulate']:.3g} µs = {r['simulate'] / call:.2f}x "
              f"({rm['simulate'] / callm:.2f}x)")
        print(f"{'':<16} stricter, the ABA of a batch per state on {loops['aba_threads']} "
              f"threads {r['aba_batch']:.3g} µs: rollout step {r['step'] / r['aba_batch']:.2f}x "
              f"({rm['step'] / rm['aba_batch']:.2f}x); thread scaling of the rollout "
              f"{r['step1'] / r['step']:.2f}x")
    if "cassie" in loops:
        print(f"{'cassie':<16} constrained RKMK4 in a rollout: {loops['cassie']:.4g} steps/s")
    if args.dask:
        d = bench_dask(args.quick, repeat, rng)
        print(f"dask (ur5, {d['N']} rollouts of {d['nstep']} RKMK4 steps, chunks of "
              f"{d['chunk']}, worker processes of one thread, interleaved medians): local "
              f"1 thread {d['local']:.3g} s; 1 worker {d[1]:.3g} s (overhead "
              f"{100 * (d[1] / d['local'] - 1):+.1f} %, target <= 15 %); 2 workers "
              f"{d[2]:.3g} s (1 -> 2 workers: {d[1] / d[2]:.2f}x, overhead against half the "
              f"local call {100 * (2 * d[2] / d['local'] - 1):+.1f} %)")
        k = d["killed"]
        print(f"dask fault injection (2 workers, one SIGKILLed after the first chunk came "
              f"back): {'completed' if k['killed'] else 'no kill happened'} in "
              f"{k['seconds']:.3g} s ({k['seconds'] / d[2]:.2f}x the undisturbed call), "
              f"worker gone from the scheduler: {k['gone']}, arrays bitwise equal to the "
              f"local call: {k['equal']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
