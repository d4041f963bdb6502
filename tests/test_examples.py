"""The examples run (short versions) and write what they promise."""
import importlib.util
import os

from conftest import REPO


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "examples", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_configuration_space_study_short_run(tmp_path):
    study = load_example("configuration_space_study")
    rows = study.run(t_final=0.05, dt=1e-3, out=str(tmp_path), plot=False, verbose=False)
    assert len(rows) == 8
    text = (tmp_path / "configuration_space_study.md").read_text()
    assert "Heavy top" in text and "SO3xR3" in text and "Against the paper" in text
    by = {(r[0], r[1]): r for r in rows}
    top = [k for k in by if k[0].startswith("Heavy top")]
    se3 = by[[k for k in top if k[1] == "SE3"][0]][3].max()
    so3 = by[[k for k in top if k[1] == "SO3xR3"][0]][3].max()
    assert se3 < 1e-12 < 1e-9 < so3          # the paper's heavy-top finding, already at 50 ms
