"""A Gymnasium-style reach environment: a torque-controlled Panda arm stepped by
``td.Simulator``.

The agent commands the seven joint torques (actions in [-1, 1], scaled by the
arm's effort limits) and is rewarded for bringing the flange (``panda_link8``)
to a random target:

    reward = −|p − p*| − 0.01 |a|²,  terminated when |p − p*| < 2 cm with the
    flange slower than 5 cm/s, truncated after ``max_episode_steps``.

Observation (23,): q (7), v (7), flange position p (3), target p* (3) and
p* − p (3).  One environment step is ``frame_skip`` simulator steps of
``dt`` (default 10 × 1 ms, a 100 Hz control loop) with the torques held:
``sim.step(tau, n=frame_skip)``, one compiled loop.

``reset(seed=None, options=None) -> (observation, info)`` and
``step(action) -> (observation, reward, terminated, truncated, info)`` follow
the Gymnasium API; ``gymnasium`` is not required: if it is installed the class
derives from ``gymnasium.Env`` and has ``gymnasium.spaces.Box`` spaces, else it
has small stand-ins with ``shape``, ``low``, ``high`` and ``sample()``.

    python examples/gym_reach.py [--steps 1000] [--policy random|expert]

The "expert" policy (joint-space computed torque towards an inverse-kinematics
solution) shows that the task is solvable: it reaches the target in about a
second.
"""
import argparse

import numpy as np

import treedyn as td

try:                                    # optional: pip install gymnasium
    import gymnasium
    _Base = gymnasium.Env
except ImportError:                     # pragma: no cover - depends on the environment
    gymnasium = None
    _Base = object


class _Box:
    """The part of gymnasium.spaces.Box this example uses."""

    def __init__(self, low, high, shape, seed=None):
        self.shape = tuple(shape)
        self.low = np.broadcast_to(np.asarray(low, dtype=np.float64), self.shape).copy()
        self.high = np.broadcast_to(np.asarray(high, dtype=np.float64), self.shape).copy()
        self.dtype = np.dtype(np.float64)
        self._rng = np.random.default_rng(seed)

    def seed(self, seed=None):
        self._rng = np.random.default_rng(seed)

    def sample(self):
        low = np.where(np.isfinite(self.low), self.low, -1.0)
        high = np.where(np.isfinite(self.high), self.high, 1.0)
        return self._rng.uniform(low, high)

    def contains(self, x):
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= self.low) and np.all(x <= self.high))


def _box(low, high, shape):
    if gymnasium is not None:
        return gymnasium.spaces.Box(low=low, high=high, shape=shape, dtype=np.float64)
    return _Box(low, high, shape)


class PandaReachEnv(_Base):
    """Reach a random target with the flange of a torque-controlled Panda."""

    metadata = {"render_modes": []}
    FLANGE = "panda_link8"

    def __init__(self, dt=1e-3, frame_skip=10, max_episode_steps=500, method="semi_euler",
                 damping=0.5):
        model = td.load(td.robots.path("panda.urdf"))
        if damping:                     # joint friction of the real arm, as viscous damping
            graph = model.graph
            for _, _, _, data in graph.graph.edges(keys=True, data=True):
                if len(data["armature"]):
                    data["damping"] = np.full(len(data["armature"]), float(damping))
            model = graph.compile()
        self.model = model
        self.frame_skip = int(frame_skip)
        self.max_episode_steps = int(max_episode_steps)
        self.sim = td.Simulator(model, dt=dt, method=method)
        self.q_home = model.neutral() + np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8])
        self.tau_max = np.array(model.effort_limit)
        self.action_space = _box(-1.0, 1.0, (model.nv,))
        self.observation_space = _box(-np.inf, np.inf, (2 * model.nv + 9,))
        self._rng = np.random.default_rng()
        self._tau = np.zeros(model.nv)
        self.target = np.zeros(3)
        self._q_goal = None
        self.steps = 0

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, seed=None, options=None):
        if gymnasium is not None:
            super().reset(seed=seed)            # seeds self.np_random (Gymnasium's rule)
            self._rng = self.np_random
        elif seed is not None:
            self._rng = np.random.default_rng(seed)
        if seed is not None:
            self.action_space.seed(seed)
        q0 = self.q_home + self._rng.uniform(-0.1, 0.1, self.model.nq)
        self.sim.reset(np.clip(q0, self.model.lower_limit, self.model.upper_limit))
        home = self.model.frame_pose(self.q_home, self.FLANGE)[:3, 3]
        self.target = home + self._rng.uniform([-0.2, -0.2, -0.15], [0.2, 0.2, 0.15])
        self._q_goal = None
        self.steps = 0
        obs, dist, _ = self._observe()
        return obs, {"distance": dist}

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (self.model.nv,):
            raise ValueError(f"action: expected shape ({self.model.nv},), got {a.shape}")
        np.clip(a, -1.0, 1.0, out=self._tau)
        self._tau *= self.tau_max
        self.sim.step(self._tau, self.frame_skip)
        self.steps += 1
        obs, dist, speed = self._observe()
        reward = -dist - 0.01 * float(a @ a)
        terminated = dist < 0.02 and speed < 0.05
        truncated = self.steps >= self.max_episode_steps and not terminated
        return obs, reward, terminated, truncated, {"distance": dist, "t": self.sim.t}

    def close(self):
        pass

    # ------------------------------------------------------------------ helpers
    def _observe(self):
        q, v = self.sim.q, self.sim.v
        p = self.model.frame_pose(q, self.FLANGE)[:3, 3]
        pdot = (self.model.jacobian(q, self.FLANGE, "hybrid") @ v)[3:]
        d = self.target - p
        obs = np.concatenate([q, v, p, self.target, d])
        return obs, float(np.linalg.norm(d)), float(np.linalg.norm(pdot))

    def expert(self, obs=None):
        """A scripted policy that solves the task: joint-space computed torque
        M (kp (q* − q) − kd v) + h towards q*, a configuration placing the flange
        on the target (damped least squares, solved once per episode)."""
        if self._q_goal is None:
            self._q_goal = self._inverse_kinematics(self.target)
        q, v = self.sim.q, self.sim.v
        m = self.model
        acc = 100.0 * m.difference(q, self._q_goal) - 20.0 * v
        tau = m.mass_matrix(q) @ acc + m.bias_forces(q, v) - m.passive_forces(q, v)
        return np.clip(tau / self.tau_max, -1.0, 1.0)

    def _inverse_kinematics(self, target, iterations=100):
        m, q = self.model, self.q_home.copy()
        for _ in range(iterations):
            e = target - m.frame_pose(q, self.FLANGE)[:3, 3]
            if np.linalg.norm(e) < 1e-6:
                break
            J = m.jacobian(q, self.FLANGE, "hybrid")[3:]
            dq = J.T @ np.linalg.solve(J @ J.T + 1e-4 * np.eye(3), e)
            q = np.clip(m.integrate(q, dq), m.lower_limit, m.upper_limit)
        return q


def main(quick=False, steps=1000, policy="random", seed=0):
    """Run ``steps`` environment steps (resetting at the end of each episode);
    returns a summary dict."""
    env = PandaReachEnv()
    obs, info = env.reset(seed=seed)
    episodes, returns, ret, final = 0, [], 0.0, []
    reached = 0
    for _ in range(steps):
        action = env.action_space.sample() if policy == "random" else env.expert(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        ret += reward
        if terminated or truncated:
            episodes += 1
            reached += bool(terminated)
            returns.append(ret)
            final.append(info["distance"])
            ret = 0.0
            obs, info = env.reset()
    print(f"{steps} steps ({steps * env.frame_skip} simulator steps), {policy} policy: "
          f"{episodes} episodes ended, {reached} reached the target; last distance "
          f"{info['distance']:.3f} m")
    return dict(env=env, episodes=episodes, reached=reached, returns=returns, final=final,
                obs=obs, distance=info["distance"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--policy", choices=("random", "expert"), default="random")
    args = ap.parse_args()
    main(steps=args.steps, policy=args.policy)
