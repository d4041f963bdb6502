"""The joint vocabulary shared by the graph and the compiler (a leaf module, so
that the compiler need not import the graph module, which imports the compiler
for ``JointGraph.compile``)."""

__all__ = ["WORLD", "JOINT_TYPES"]

#: name of the world body
WORLD = "world"

#: joint type -> (nq, nv)
JOINT_TYPES = {
    "revolute": (1, 1),
    "continuous": (1, 1),
    "prismatic": (1, 1),
    "helical": (1, 1),
    "cylindrical": (2, 2),
    "universal": (2, 2),
    "planar": (3, 3),
    "spherical": (4, 3),
    "free": (7, 6),
    "fixed": (0, 0),
}
