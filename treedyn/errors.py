"""Exceptions raised by treedyn.

Every error is a subclass of :class:`TreedynError`, itself a ``ValueError``, so
``except ValueError`` catches them all.  Errors about robot files name the file,
the element and the field.
"""

__all__ = ["TreedynError", "RobotFileError", "ModelError", "InputError", "SingularModelError",
           "AccuracyWarning"]


class TreedynError(ValueError):
    """Base class of all treedyn errors."""


class RobotFileError(TreedynError):
    """A robot file (URDF or TOML) is malformed, hostile or describes something invalid.

    Attributes
    ----------
    file : str or None
        Path (or ``"<string>"``) of the offending file.
    element : str or None
        The element, e.g. ``<joint name="elbow">`` or ``[[body]] "link1"``.
    field : str or None
        The attribute or key, e.g. ``axis`` or ``inertia``.
    """

    def __init__(self, message, file=None, element=None, field=None):
        self.file = file
        self.element = element
        self.field = field
        where = []
        if file is not None:
            where.append(str(file))
        if element is not None:
            where.append(str(element))
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ModelError(TreedynError):
    """The joint graph or model is invalid (topology, inertia, joint data)."""


class InputError(TreedynError):
    """An array passed to a model function has the wrong shape, dtype or values."""


class SingularModelError(TreedynError):
    """The requested dynamics quantity does not exist for this model (e.g. a massless chain)."""


class AccuracyWarning(UserWarning):
    """A result is computed but probably inaccurate, e.g. :func:`treedyn.simulate`
    of an unforced run whose energy drifts by more than
    ``treedyn.simulate.ENERGY_RTOL`` (relative): reduce dt or use an adaptive method."""
