"""examples/gym_reach.py: the Gymnasium-style reach environment runs 1 000 steps
(random actions: finite observations and rewards, episodes truncated at
max_episode_steps), follows the reset/step API, is reproducible from a seed, and
its scripted policy reaches every target."""
import numpy as np
import pytest

from test_examples import load_example


@pytest.fixture(scope="module")
def gym_reach():
    return load_example("gym_reach")


def test_random_policy_runs_1000_steps(gym_reach):
    res = gym_reach.main(steps=1000, policy="random", seed=3)
    env = res["env"]
    assert res["episodes"] == 2                   # 500-step episodes, truncated
    assert len(res["returns"]) == 2 and np.all(np.isfinite(res["returns"]))
    assert res["obs"].shape == env.observation_space.shape == (23,)
    assert np.all(np.isfinite(res["obs"]))
    assert env.sim.steps == 0                     # reset after the last episode


def test_api_shapes_and_reproducibility(gym_reach):
    env = gym_reach.PandaReachEnv(max_episode_steps=5)
    obs, info = env.reset(seed=7)
    assert obs.shape == (23,) and "distance" in info
    np.testing.assert_array_equal(obs[14:17] + obs[20:23], obs[17:20])   # p + (p* − p) = p*
    actions = [env.action_space.sample() for _ in range(5)]
    trace = []
    for k, a in enumerate(actions):
        assert env.action_space.contains(a)
        obs, reward, terminated, truncated, info = env.step(a)
        assert isinstance(reward, float) and reward <= 0.0
        assert truncated == (k == 4) and not terminated
        trace.append(obs)
    assert info["t"] == pytest.approx(5 * env.frame_skip * 1e-3)
    env2 = gym_reach.PandaReachEnv(max_episode_steps=5)
    obs2, _ = env2.reset(seed=7)
    for a, o in zip(actions, trace):
        np.testing.assert_array_equal(env2.step(a)[0], o)
    with pytest.raises(ValueError, match="action"):
        env.step(np.zeros(3))


def test_scripted_policy_reaches_every_target(gym_reach):
    res = gym_reach.main(steps=1000, policy="expert", seed=1)
    assert res["episodes"] >= 10 and res["reached"] == res["episodes"]
    assert max(res["final"]) < 0.02


def test_gymnasium_env_checker_passes_when_installed(gym_reach):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env
    env = gym_reach.PandaReachEnv()
    assert isinstance(env, gymnasium.Env)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # unbounded observation space: by design
        check_env(env, skip_render_check=True)


def test_runs_without_gymnasium(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "gymnasium", None)   # import gymnasium fails
    mod = load_example("gym_reach")
    assert mod.gymnasium is None
    env = mod.PandaReachEnv(max_episode_steps=3)
    obs, _ = env.reset(seed=2)
    a = env.action_space.sample()
    assert a.shape == (7,) and env.action_space.contains(a)
    obs, reward, terminated, truncated, info = env.step(a)
    assert obs.shape == (23,) and np.isfinite(reward)
    env2 = mod.PandaReachEnv(max_episode_steps=3)
    np.testing.assert_array_equal(env2.reset(seed=2)[0], env.reset(seed=2)[0])
