"""Python threads on one shared model: throughput of single-state calls, and the
GIL-release threshold.

    python benchmarks/bench_threads.py [--quick] [--processes K]

a. threads: T Python threads each make the same number of single-state calls on
   one shared model (plain calls: each call takes a Data from the model's pool);
   throughput with 2 threads / throughput with 1 (calls per second).  Models with
   nv >= treedyn._ext.kernels.GIL_RELEASE_NV release the GIL in the kernel, so the
   threads overlap; below it they take turns.
b. gil: for robots and revolute chains of growing nv, one thread's µs per call
   with the GIL released around the kernel and with it held, and the 2-thread
   throughput ratio with it released.  The threshold is the smallest nv where
   releasing costs (one thread) little and pays (two threads) clearly.
c. a Markdown summary.

Every section runs in K fresh processes (default 5); numbers are medians across
processes.  Needs at least 2 cores to show a speed-up.
"""
from __future__ import annotations

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import Table, bench_main, chain_treedyn, print_header, random_chain_links  # noqa: E402
from oracles import load_erd  # noqa: E402

#: (robot, floating base) of section a, and the calls timed
THREAD_ROBOTS = [("panda", False), ("talos_full_v2", True)]
QUICK_THREAD_ROBOTS = [("talos_full_v2", True)]
CALLS = {
    "inverse_dynamics": "m.inverse_dynamics(q, v, a)",
    "forward_dynamics": "m.forward_dynamics(q, v, a)",
    "mass_matrix": "m.mass_matrix(q)",
    "jacobian": "m.jacobian(q, m.n_bodies - 1)",
}
GIL_ROBOTS = [("ur5", False), ("panda", False), ("solo12", True), ("talos_reduced", True),
              ("talos_full_v2", True)]
GIL_CHAINS = (10, 20, 40, 80)
QUICK_GIL_ROBOTS = [("panda", False), ("talos_full_v2", True)]
QUICK_GIL_CHAINS = (10, 40)


def _throughput(fn, threads, seconds):
    """Calls per second of ``threads`` Python threads each running ``fn`` in a loop
    for about ``seconds`` (all start together)."""
    counts = [0] * threads
    stop = threading.Event()
    start = threading.Barrier(threads + 1)

    def run(k):
        start.wait()
        n = 0
        while not stop.is_set():
            for _ in range(50):
                fn()
            n += 50
        counts[k] = n

    ts = [threading.Thread(target=run, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in ts:
        t.join()
    return sum(counts) / (time.perf_counter() - t0)


def _speedup(fn, seconds, repeat):
    """Median over repeats of throughput(2 threads) / throughput(1 thread), interleaved."""
    import statistics
    r = []
    for _ in range(repeat):
        one = _throughput(fn, 1, seconds)
        two = _throughput(fn, 2, seconds)
        r.append(two / one)
    return statistics.median(r)


def _state(m, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return m.random_configuration(rng), rng.standard_normal(m.nv), rng.standard_normal(m.nv)


def worker(quick=False, min_time=0.2, repeat=5, sections=("threads", "gil")):
    import timeit

    from treedyn._ext import kernels as K      # the build in use

    out = {"gil_release_nv": K.GIL_RELEASE_NV}
    seconds = 0.1 if quick else 0.4

    if "threads" in sections:
        for name, ff in (QUICK_THREAD_ROBOTS if quick else THREAD_ROBOTS):
            m = load_erd(name, ff)
            q, v, a = _state(m)
            key = name + (" + FF" if ff else "")
            out[f"threads/{key}/nv"] = m.nv
            for label, stmt in CALLS.items():
                code = compile(stmt, "<bench>", "eval")
                g = dict(m=m, q=q, v=v, a=a)
                out[f"threads/{key}/{label}/one_us"] = 1e6 / _throughput(
                    lambda: eval(code, g), 1, seconds)
                out[f"threads/{key}/{label}/speedup"] = _speedup(
                    lambda: eval(code, g), seconds, 3 if quick else repeat)

    if "gil" in sections:
        models = []
        for name, ff in (QUICK_GIL_ROBOTS if quick else GIL_ROBOTS):
            models.append((name + (" + FF" if ff else ""), load_erd(name, ff)))
        for n in (QUICK_GIL_CHAINS if quick else GIL_CHAINS):
            models.append((f"chain {n}", chain_treedyn(random_chain_links(n, seed=n))))
        default = K.GIL_RELEASE_NV
        # "release" measures the release's own cost: with one thread the kernels keep
        # the GIL below GIL_RELEASE_ALONE_NV unless told otherwise
        alone = K._set_gil_release_alone_nv(0) if hasattr(K, "_set_gil_release_alone_nv") else None
        try:
            for key, m in models:
                q, v, a = _state(m)
                g = dict(m=m, q=q, v=v, a=a)
                stmt = "m.inverse_dynamics(q, v, a)"
                out[f"gil/{key}/nv"] = m.nv
                times = {"release": [], "hold": []}
                timer = timeit.Timer(stmt, globals=g)
                number = max(1, int(min_time / max(timer.timeit(200) / 200, 1e-9)))
                for _ in range(repeat):
                    for mode, thr in (("release", 0), ("hold", 10 ** 9)):
                        K._set_gil_release_nv(thr)
                        times[mode].append(timer.timeit(number) / number * 1e6)
                for mode in times:
                    times[mode].sort()
                    out[f"gil/{key}/{mode}_us"] = times[mode][len(times[mode]) // 2]
                K._set_gil_release_nv(0)
                code = compile(stmt, "<bench>", "eval")
                out[f"gil/{key}/speedup_release"] = _speedup(lambda: eval(code, g), seconds,
                                                             3 if quick else repeat)
        finally:
            K._set_gil_release_nv(default)
            if alone is not None:
                K._set_gil_release_alone_nv(alone)
    return out


def report(r, spread, info, quick, processes):
    print_header("treedyn: Python threads on one model", info, processes, quick)
    thr = int(r["gil_release_nv"])
    lines = []
    keys = sorted({k.split("/")[1] for k in r if k.startswith("threads/")})
    if keys:
        print("## a. Two Python threads, single-state calls on one shared model\n")
        t = Table(["robot", "nv", "call", "1 thread µs/call", "2 threads / 1 thread "
                   "(throughput)", "GIL released"])
        for key in keys:
            nv = int(r[f"threads/{key}/nv"])
            for label in CALLS:
                released = "yes" if nv >= thr else "no"
                if label == "jacobian":      # work: the freedoms on the frame's path
                    released = f"if ≥ {thr} freedoms on the path"
                t.add(key, nv, label, r[f"threads/{key}/{label}/one_us"],
                      f"{r[f'threads/{key}/{label}/speedup']:.2f}×", released)
        print(t, "\n")
        for key in keys:
            if int(r[f"threads/{key}/nv"]) >= thr:
                s = r[f"threads/{key}/inverse_dynamics/speedup"]
                lines.append(f"| two threads, inverse dynamics, {key} | ≥ 1.6× | {s:.2f}× | "
                             f"{'PASS' if s >= 1.6 else 'FAIL'} |")
    keys = [k.split("/")[1] for k in r if k.startswith("gil/") and k.endswith("/nv")]
    if keys:
        print("## b. GIL release around a single inverse-dynamics call\n")
        t = Table(["model", "nv", "released µs", "held µs", "cost of release µs",
                   "2 threads / 1 (released)", "released by default"])
        for key in keys:
            nv = int(r[f"gil/{key}/nv"])
            rel, hold = r[f"gil/{key}/release_us"], r[f"gil/{key}/hold_us"]
            t.add(key, nv, rel, hold, f"{rel - hold:+.3f}",
                  f"{r[f'gil/{key}/speedup_release']:.2f}×", "yes" if nv >= thr else "no")
        print(t, "\n")
    print("## Summary\n")
    print(f"GIL_RELEASE_NV = {thr}: single-state calls on models with nv ≥ {thr} release "
          f"the GIL while the kernel runs.\n")
    if lines:
        print("| target | goal | measured | status |\n|---|---|---|---|")
        print("\n".join(lines))
    print()


def main(argv=None):
    return bench_main(__file__, report, __doc__, argv, sections=("threads", "gil"))


if __name__ == "__main__":
    sys.exit(main())
