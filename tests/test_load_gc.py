"""td.load holds off Python's cyclic garbage collector while it reads and compiles
a robot file (treedyn.io._collector_held): no collection runs inside a load, the
collector's state is restored afterwards (also on error, and a collector the
caller disabled stays disabled), and loads in several threads share one hold."""
import gc
import threading

import pytest

import treedyn as td
import treedyn.io as tio
from treedyn.errors import TreedynError

ROBOTS = ["humanoid.urdf", "quadruped.urdf", "slider_crank.xml", "panda.urdf"]


def test_no_collection_runs_inside_a_load():
    """No collection while a load holds the collector (tio._gc_depth > 0); the
    allocations' pending collection (generation 0, now and then 1) may run once
    when the hold ends, instead of several inside the load."""
    held, free = [], []

    def cb(phase, info):
        if phase == "start":
            (held if tio._gc_depth else free).append(info["generation"])
    gc.callbacks.append(cb)
    try:
        assert gc.isenabled()
        for _ in range(3):
            for name in ROBOTS:
                td.load(td.robots.path(name))
        assert held == []
        assert gc.isenabled()
        # without the hold these twelve loads set off collections inside them, and
        # the collector does run outside (the generation-0 ones after each load)
        assert free
    finally:
        gc.callbacks.remove(cb)


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    try:
        td.load(td.robots.path("panda.urdf"))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_restored_after_a_failed_load(tmp_path):
    bad = tmp_path / "bad.urdf"
    bad.write_text("<robot name='r'><link name='a'/><joint name='j' type='revolute'>"
                   "<parent link='a'/><child link='nowhere'/></joint></robot>")
    with pytest.raises(TreedynError):
        td.load(bad)
    assert gc.isenabled() and tio._gc_depth == 0


def test_loads_in_threads_share_one_hold():
    errors = []
    start = threading.Barrier(4)

    def work():
        try:
            start.wait()
            for name in ROBOTS:
                td.load(td.robots.path(name))
        except Exception as e:          # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert gc.isenabled() and tio._gc_depth == 0
