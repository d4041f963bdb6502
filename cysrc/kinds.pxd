# Joint kinds: the one definition, shared by the kernels (cimport) and the Python
# layer (treedyn._kernels.KIND_*, exported by _kernels.pyx).

# ModelCore.kind of each body:
#   KIND_SCREWS     revolute, prismatic, helical, cylindrical, universal, planar:
#                   a product of exponentials of body-fixed unit screws
#   KIND_SPHERICAL  unit quaternion about a fixed centre
#   KIND_FREE_SE3   free joint on SE(3): v is the body twist
#   KIND_FREE_SO3R3 free joint on SO(3)×R³: v = (ω body, ṙ world)
cdef enum JointKind:
    KIND_SCREWS = 0
    KIND_SPHERICAL = 1
    KIND_FREE_SE3 = 2
    KIND_FREE_SO3R3 = 3
