"""td.rollout on a dask.distributed LocalCluster of 2 worker processes: bitwise
the local call, a worker killed mid-run, Zarr output, failures named by sample."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import treedyn as td
from treedyn.errors import InputError

distributed = pytest.importorskip("distributed")
pytest.importorskip("zarr")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           host="127.0.0.1", dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def ur5():
    return td.load(td.robots.path("ur5.urdf"))


def _states(m, N, seed):
    rng = np.random.default_rng(seed)
    q0 = np.array([m.random_configuration(rng) for _ in range(N)])
    v0 = rng.normal(size=(N, m.nv)) * 0.3
    if m.loop_closures:
        q0 = np.array([m.assemble(q) for q in q0])
        v0 = np.array([m.project_velocity(q, v) for q, v in zip(q0, v0)])
    return q0, v0, rng


def test_distributed_equals_local_bitwise(client, ur5):
    q0, v0, rng = _states(ur5, 23, 0)
    kw = dict(tau=rng.normal(size=(23, ur5.nv)) * 0.1, save_every=3,
              params={"gravity": rng.normal(size=(23, 3)),
                      "damping": rng.uniform(0, 0.3, size=(23, ur5.nv))})
    local = td.rollout(ur5, q0, v0, 0.05, 1e-3, **kw)
    dist = td.rollout(ur5, q0, v0, 0.05, 1e-3, client=client, chunk=5, **kw)
    assert np.array_equal(local.q, dist.q) and np.array_equal(local.v, dist.v)
    assert np.array_equal(local.t, dist.t) and np.array_equal(local.status, dist.status)
    four = td.load(td.robots.path("four_bar.toml"))
    q0, v0, _ = _states(four, 6, 1)
    local = td.rollout(four, q0, v0, 0.05, 1e-3)
    dist = td.rollout(four, q0, v0, 0.05, 1e-3, client=client, chunk=4)
    assert np.array_equal(local.q, dist.q)
    assert np.array_equal(local.constraint_residual, dist.constraint_residual)


def _slow_damping(t, Q, V):
    time.sleep(0.002)                 # ~0.1 s per chunk: the kill lands mid-run
    return -0.1 * V


def test_a_killed_worker_is_retried_and_the_result_is_identical(client, ur5):
    q0, v0, _ = _states(ur5, 40, 2)
    local = td.rollout(ur5, q0, v0, 0.05, 1e-3, controller=_slow_damping)
    killed = []
    pids = client.run(os.getpid)            # {worker address: pid}
    addr = sorted(pids)[0]

    def kill_one(done, total):              # after the first chunk: SIGKILL a worker
        if not killed:
            killed.append(addr)
            os.kill(pids[addr], signal.SIGKILL)

    dist = td.rollout(ur5, q0, v0, 0.05, 1e-3, client=client, chunk=2, progress=kill_one,
                      controller=_slow_damping)
    assert killed and killed[0] not in client.scheduler_info()["workers"]   # it died
    assert np.array_equal(local.q, dist.q) and np.array_equal(local.v, dist.v)
    client.wait_for_workers(2, timeout=60)


def test_zarr_store_equals_the_in_memory_arrays(client, ur5, tmp_path):
    q0, v0, _ = _states(ur5, 11, 3)
    local = td.rollout(ur5, q0, v0, 0.03, 1e-3, save_every=2)
    path = str(tmp_path / "runs.zarr")
    lazy = td.rollout(ur5, q0, v0, 0.03, 1e-3, save_every=2, client=client, chunk=4, out=path)
    import dask.array as da
    assert isinstance(lazy.q, da.Array)
    assert np.array_equal(lazy.q.compute(), local.q) and np.array_equal(np.asarray(lazy.v), local.v)
    back = td.open_rollout(path)
    assert np.array_equal(back.q.compute(), local.q) and np.array_equal(back.t, local.t)
    assert np.array_equal(back.status, local.status)


class _Locked:
    def __init__(self):
        self.lock = threading.Lock()

    def __call__(self, t, Q, V):
        return np.zeros_like(V)


def _raise_on_big_q(t, Q, V):
    if np.any(Q[:, 0] > 10):
        raise ValueError("q[0] above 10")
    return np.zeros_like(V)


def test_bad_controller_and_failing_chunk_are_named(client, ur5):
    q0, v0, _ = _states(ur5, 20, 4)
    with pytest.raises(InputError, match="picklable"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, controller=_Locked(), client=client)
    q0[12, 0] = 11.0
    with pytest.raises(InputError, match=r"samples 10\.\.14.*q\[0\] above 10"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, controller=_raise_on_big_q, client=client, chunk=5)
    with pytest.raises(InputError, match="chunk"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, client=client, chunk=0)
    with pytest.raises(InputError, match="client"):
        td.rollout(ur5, q0, v0, 0.01, 1e-3, out="x.zarr")
