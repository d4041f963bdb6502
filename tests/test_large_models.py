"""Very large robots load and run in O(n) memory (oracle: a memory limit).

A 100 000-link chain and a 20 000-link binary tree are loaded from URDF in a
subprocess whose address space is limited to 4 GiB (``resource.setrlimit``):
anything of size n_bodies × nv (the former 10 GB ``support`` table of the chain)
cannot be allocated there.  The subprocess then runs inverse dynamics, forward
kinematics and a Jacobian, and reports the bytes the model keeps per body.
benchmarks/bench_load.py measures load time and RSS at 1k, 10k and 100k links.
"""
import json
import subprocess
import sys
import textwrap

import pytest

LIMIT = 4 * 2**30

WORKER = textwrap.dedent("""
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
    import numpy as np
    import treedyn as td

    def urdf(n, tree):
        parts = ['<robot name="big">', '<link name="l0"/>']
        inertial = ('<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.02" izz="0.015" '
                    'ixy="0" ixz="0" iyz="0"/></inertial>')
        for i in range(1, n + 1):
            p = (i - 1) // 2 if tree else i - 1
            axis = ("1 0 0", "0 1 0", "0 0 1")[i % 3]
            parts.append(f'<link name="l{{i}}">{{inertial}}</link>')
            parts.append(f'<joint name="j{{i}}" type="revolute"><parent link="l{{p}}"/>'
                         f'<child link="l{{i}}"/><origin xyz="0 0.01 0.1" rpy="0 0.1 0"/>'
                         f'<axis xyz="{{axis}}"/><limit lower="-1" upper="1" effort="1" '
                         f'velocity="1"/></joint>')
        parts.append('</robot>')
        return "\\n".join(parts)

    n, tree = int(sys.argv[1]), sys.argv[2] == "tree"
    path = sys.argv[3]
    with open(path, "w") as f:
        f.write(urdf(n, tree))
    t = time.perf_counter()
    m = td.load(path)
    load_s = time.perf_counter() - t
    q = np.full(m.nq, 0.1)
    v = np.full(m.nv, 0.2)
    tau = m.inverse_dynamics(q, v, v)
    T = m.forward_kinematics(q)
    last = f"l{{n}}"                                  # the link added last
    J = m.jacobian(q, last, "spatial")
    depth = int(m.support(last).sum())
    arrays = sum(x.nbytes for x in vars(m).values() if isinstance(x, np.ndarray))
    print(json.dumps(dict(nb=m.n_bodies, load_s=load_s, finite=bool(
        np.isfinite(tau).all() and np.isfinite(T).all() and np.isfinite(J).all()),
        depth=depth, jac_columns=int((np.abs(J).sum(axis=0) > 0).sum()),
        bytes_per_body=arrays / m.n_bodies)))
""").format(limit=LIMIT)


@pytest.mark.parametrize("n, shape", [(100_000, "chain"), (20_000, "tree")])
def test_large_robot_loads_in_linear_memory(tmp_path, n, shape):
    script = tmp_path / "big.py"
    script.write_text(WORKER)
    run = subprocess.run([sys.executable, str(script), str(n), shape,
                          str(tmp_path / f"{shape}.urdf")],
                         capture_output=True, text=True, timeout=600,
                         env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads(run.stdout.strip().splitlines()[-1])
    assert r["nb"] == n and r["finite"]
    # the last link's path: every joint of the chain, ~log2 n joints of the tree
    expected_depth, i = 0, n
    while i > 0:                                       # link i's parent: i - 1 or (i - 1) // 2
        i = i - 1 if shape == "chain" else (i - 1) // 2
        expected_depth += 1
    assert r["depth"] == expected_depth
    assert r["jac_columns"] == expected_depth
    assert r["bytes_per_body"] < 2000          # O(n): about 1 kB of arrays per body
