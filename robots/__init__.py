"""Robot files shipped with treedyn (installed as ``treedyn.robots``)."""
from pathlib import Path

__all__ = ["path", "available"]

_HERE = Path(__file__).resolve().parent


def available():
    """Names of the shipped robot files, e.g. ``['delta.sdf', 'delta.toml', 'panda.urdf', ...]``."""
    return sorted(p.name for p in _HERE.iterdir()
                  if p.suffix in (".urdf", ".toml", ".sdf", ".xml"))


def path(name):
    """Absolute path of a shipped robot file: ``path("panda.urdf")`` or ``path("panda")``
    (a bare name looks for .urdf, then .toml, then .sdf, then .xml)."""
    for cand in (name, f"{name}.urdf", f"{name}.toml", f"{name}.sdf", f"{name}.xml"):
        p = _HERE / cand
        if p.is_file():
            return str(p)
    raise FileNotFoundError(f"no shipped robot file named {name!r}; available: {available()}")
