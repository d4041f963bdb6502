"""Batch evaluation: one call for N states, threaded in the kernels.

    python examples/batch_evaluation.py
"""
import time

import numpy as np

import treedyn as td


def main(quick=False):
    arm = td.load(td.robots.path("panda.urdf"))
    N = 2000 if quick else 100_000
    rng = np.random.default_rng(0)
    Q = np.array([arm.random_configuration(rng) for _ in range(N)])
    V, A = rng.normal(size=(N, arm.nv)), rng.normal(size=(N, arm.nv))
    t0 = time.perf_counter()
    tau = arm.inverse_dynamics(Q, V, A)                 # (N, nv) in one threaded call
    t1 = time.perf_counter()
    acc = arm.forward_dynamics(Q, V, tau)               # back to the accelerations
    t2 = time.perf_counter()
    M = arm.mass_matrix(Q)                              # (N, nv, nv)
    t3 = time.perf_counter()
    loop = np.array([arm.inverse_dynamics(Q[k], V[k], A[k]) for k in range(min(N, 2000))])
    t4 = time.perf_counter()
    print(f"{N} states: inverse dynamics {1e6 * (t1 - t0) / N:.3f} µs/state, forward "
          f"dynamics {1e6 * (t2 - t1) / N:.3f} µs/state, mass matrix {1e6 * (t3 - t2) / N:.3f} "
          f"µs/state; a Python loop of single calls {1e6 * (t4 - t3) / len(loop):.3f} µs/state")
    print("forward(inverse(a)) − a:", np.abs(acc - A).max())
    print("batch == single calls:", np.array_equal(loop, tau[:len(loop)]))
    return tau, acc, M


if __name__ == "__main__":
    main()
