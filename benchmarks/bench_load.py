"""Loading large robots: time and memory from a URDF file to a usable model.

For serial chains of 1 000, 10 000 and 100 000 revolute joints and a binary tree
of 20 000 (random geometry and inertias, ``common.random_chain_links``), each in a
fresh interpreter:

* load time of ``td.load(path)`` (parse, joint graph, compile), s;
* resident memory (RSS) after ``import treedyn`` and after the load, MB, and the
  peak RSS of the process;
* bytes of the model's arrays and of one ``Data`` (``model.create_data()``);
* one inverse-dynamics call, µs per joint.

Everything the model keeps is O(n): the table shows bytes per joint staying
flat from 1 000 to 100 000 joints.

    python benchmarks/bench_load.py            # all sizes (about 5 min)
    python benchmarks/bench_load.py --quick    # 1 000 and 5 000 joints
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import Table, chain_urdf, machine_info, print_header, random_chain_links  # noqa: E402

WORKER = r"""
import json, resource, sys, time
import numpy as np

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

import treedyn as td
rss0 = rss_mb()
t = time.perf_counter()
m = td.load(sys.argv[1])
t_load = time.perf_counter() - t
rss1 = rss_mb()
model_bytes = sum(v.nbytes for v in vars(m).values() if isinstance(v, np.ndarray))
d = m.create_data()
q = m.neutral()
v = np.full(m.nv, 0.1)
tau = np.empty(m.nv)
m.inverse_dynamics(q, v, v, data=d, out=tau)
reps = max(3, int(2e5 / m.nv))
t = time.perf_counter()
for _ in range(reps):
    m.inverse_dynamics(q, v, v, data=d, out=tau)
t_id = (time.perf_counter() - t) / reps
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(dict(nb=m.n_bodies, load_s=t_load, rss_import=rss0, rss_model=rss1, peak=peak,
                      model_bytes=model_bytes, data_bytes=d.nbytes,
                      id_us_per_joint=t_id * 1e6 / m.nv)))
"""


def binary_tree_parents(n):
    """Parent index of link i in a binary tree (link 0 on the base)."""
    return [-1] + [(i - 1) // 2 for i in range(1, n)]


def measure(n, tree, workdir):
    links = random_chain_links(n, seed=1)
    path = os.path.join(workdir, f"{'tree' if tree else 'chain'}{n}.urdf")
    with open(path, "w") as f:
        f.write(chain_urdf(links, binary_tree_parents(n) if tree else None))
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", WORKER, path], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 000 and 5 000 joints only")
    args = ap.parse_args(argv)
    cases = ([(1000, False), (5000, False)] if args.quick else
             [(1000, False), (10000, False), (100000, False), (20000, True)])
    print_header("Loading large robots", machine_info(), 1, args.quick)
    table = Table(["robot", "joints", "load (s)", "RSS import (MB)", "RSS + model (MB)",
                   "peak RSS (MB)", "model bytes/joint", "Data bytes/joint",
                   "ID µs/joint"])
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for n, tree in cases:
            r = measure(n, tree, workdir)
            rows.append(r)
            table.add("binary tree" if tree else "chain", n, f"{r['load_s']:.2f}",
                      f"{r['rss_import']:.0f}", f"{r['rss_model']:.0f}", f"{r['peak']:.0f}",
                      f"{r['model_bytes'] / n:.0f}", f"{r['data_bytes'] / n:.0f}",
                      f"{r['id_us_per_joint']:.3f}")
    print(table)
    return rows


if __name__ == "__main__":
    main()
