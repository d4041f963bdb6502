"""Drake's values for tests/data/drake_vendor.sdf and drake_vendor.urdf (issue #30).

Run once with pydrake installed (``python -m pip install drake``; it is not a
test dependency):

    python tests/data/make_drake_reference.py

It writes tests/data/drake_reference.json (floats written exactly: JSON keeps
Python's shortest round-trip repr), which tests/test_drake_reference.py
compares treedyn with.  Only pydrake and NumPy are used here, so the values are
Drake's own: for each file, Drake's joints (name, type, position and velocity
offsets), and at the default configuration and at random ones, Drake's
positions, the world pose of every body and frame, the mass matrix (with the
rotor inertias Drake reflects through the gear ratios) and the generalized
gravity forces, all in Drake's own coordinates (a floating joint's velocity is
(ω, v) of the body in the world).
"""
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {"sdf": ("drake_vendor.sdf", ["mount"]), "urdf": ("drake_vendor.urdf", [])}
SAMPLES = 6


def reference(path, rng, extra_frames):
    from pydrake.multibody.parsing import Parser
    from pydrake.multibody.plant import MultibodyPlant
    from pydrake.multibody.tree import BodyIndex, JointIndex

    plant = MultibodyPlant(0.0)
    Parser(plant).AddModels(path)
    plant.Finalize()
    context = plant.CreateDefaultContext()
    joints = [plant.get_joint(JointIndex(k)) for k in range(plant.num_joints())]
    joints = [j for j in joints if j.num_velocities() > 0]
    # every body (link) but the world, and the file's own frames
    names = [plant.get_body(BodyIndex(k)).name() for k in range(1, plant.num_bodies())]
    names += [n for n in extra_frames]
    out = {"joint_names": np.array([j.name() for j in joints]),
           "joint_types": np.array([j.type_name() for j in joints]),
           "position_start": np.array([j.position_start() for j in joints]),
           "velocity_start": np.array([j.velocity_start() for j in joints]),
           "frame_names": np.array(names)}
    q0 = plant.GetPositions(context).copy()
    Q, P, M, G = [], [], [], []
    for s in range(SAMPLES):
        q = q0.copy()
        if s:
            for j in joints:
                i = j.position_start()
                if j.type_name() == "quaternion_floating":
                    quat = rng.standard_normal(4)
                    q[i:i + 4] = quat / np.linalg.norm(quat)
                    q[i + 4:i + 7] += rng.uniform(-0.5, 0.5, 3)
                else:
                    q[i] = rng.uniform(-1.0, 1.0)
        plant.SetPositions(context, q)
        Q.append(plant.GetPositions(context))
        P.append([plant.GetFrameByName(n).CalcPoseInWorld(context).GetAsMatrix4()
                  for n in names])
        M.append(plant.CalcMassMatrix(context))
        G.append(plant.CalcGravityGeneralizedForces(context))
    out.update(q=np.array(Q), poses=np.array(P), M=np.array(M), gravity_forces=np.array(G))
    return out


def main():
    from importlib.metadata import version
    rng = np.random.default_rng(30)
    data = {"drake_version": version("drake")}
    for tag, (name, extra_frames) in FILES.items():
        for key, value in reference(os.path.join(HERE, name), rng, extra_frames).items():
            data[f"{tag}_{key}"] = value.tolist()
    target = os.path.join(HERE, "drake_reference.json")
    with open(target, "w") as f:
        json.dump(data, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {target} (pydrake {data['drake_version']})")


if __name__ == "__main__":
    sys.exit(main())
