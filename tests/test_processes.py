"""Process pools after threaded batch calls (oracle: the parent's own results).

GNU OpenMP's thread pool does not survive ``fork()``: a child forked after its
parent ran a parallel region used to wait forever on its first threaded batch.
Here a fresh interpreter runs every kind of batch call, then maps the same calls
over a ``multiprocessing`` pool of each start method and checks that the workers
finish (within a timeout, in a subprocess so that a hang fails the test instead
of stalling the suite) and return the parent's results bit for bit.
"""
import subprocess
import sys
import textwrap

import pytest

import treedyn as td

WORKER = textwrap.dedent("""
    import multiprocessing as mp, sys
    import numpy as np
    import treedyn as td

    m = td.load(td.robots.path("panda.urdf"))
    rng = np.random.default_rng(0)
    N = 64                                   # N × nv above the threaded-batch threshold
    Q = np.array([m.random_configuration(rng) for _ in range(N)])
    V = rng.standard_normal((N, m.nv))
    A = rng.standard_normal((N, m.nv))
    frame = m.body_names[-1]

    def batch_calls(_=None):
        out = [m.inverse_dynamics(Q, V, A, rep) for rep in ("body", "spatial", "hybrid")]
        out += [m.forward_dynamics(Q, V, A), m.mass_matrix(Q), m.forward_kinematics(Q),
                m.frame_poses(Q), m.bias_forces(Q, V), m.gravity_forces(Q),
                m.body_velocities(Q, V), m.body_accelerations(Q, V, A),
                m.kinetic_energy(Q, V), m.momentum(Q, V)]
        out += [m.jacobian(Q, frame, rep) for rep in ("body", "spatial", "hybrid", "mixed")]
        return [np.asarray(x) for x in out]

    def threads_in_child(_=None):
        return td.batch_threads()

    if __name__ == "__main__":
        method = sys.argv[1]
        ref = batch_calls()                      # the parent's threaded batches
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            results = pool.map(batch_calls, range(4))
            threads = pool.map(threads_in_child, range(2))
        for res in results:
            assert len(res) == len(ref)
            for x, y in zip(res, ref):
                assert np.array_equal(x, y)
        print("ok", method, td.batch_threads(), min(threads))
""")


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_pool_after_threaded_batches(tmp_path, method):
    script = tmp_path / "pool.py"
    script.write_text(WORKER)
    try:
        run = subprocess.run([sys.executable, str(script), method], capture_output=True,
                             text=True, timeout=240, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a '{method}' pool hung after threaded batch calls in the parent")
    assert run.returncode == 0, run.stderr[-3000:]
    word, got, parent_threads, child_threads = run.stdout.split()
    assert (word, got) == ("ok", method)
    if method == "fork" and int(parent_threads) > 1:
        # a forked child cannot use the parent's OpenMP pool: one thread
        assert int(child_threads) == 1
    elif method != "fork":
        assert int(child_threads) == int(parent_threads)


def test_batch_threads_in_this_process():
    assert td.batch_threads() >= 1
