"""treedyn: robot and multibody dynamics with screw and Lie group theory.

>>> import treedyn as td
>>> model = td.load(td.robots.path("panda.urdf"))
>>> poses = model.forward_kinematics(model.neutral())     # (n_bodies, 4, 4)
"""
from . import derivatives, integrators, lie, robots
from .errors import InputError, ModelError, RobotFileError, SingularModelError, TreedynError
from .graph import JointGraph
from .io import from_mujoco, load, load_graph, save, to_mujoco
from ._ext import Data, batch_threads
from .model import LoopClosure, Model
from .simulate import Simulator, SimulatorState, Trajectory, simulate
from .rollout import LinearFeedback, Rollout, open_rollout, rollout
from . import viewer
from .viewer import animate, view

__version__ = "0.1.0"

__all__ = ["load", "load_graph", "save", "from_mujoco", "to_mujoco", "JointGraph", "Model", "Data", "LoopClosure", "lie", "robots",
           "derivatives", "simulate", "Trajectory", "rollout", "Rollout", "LinearFeedback",
           "open_rollout", "view", "animate", "viewer", "Simulator", "SimulatorState", "integrators", "batch_threads",
           "TreedynError", "RobotFileError", "ModelError", "InputError", "SingularModelError"]
