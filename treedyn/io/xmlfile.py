"""Reading XML robot files (URDF, SDFormat): bytes from disk, a safe parse, the
root element and the free-joint group checked, each failure a RobotFileError
naming the file (and element)."""
from __future__ import annotations

import os
import sys
import warnings
import xml.etree.ElementTree as ET

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as _safe_fromstring

from ..errors import RobotFileError
from .files import read_file_bytes

__all__ = ["read_bytes", "parse_root", "warn_user"]


def read_bytes(path, max_bytes=None):
    """(path as str, the file's bytes): a regular file of at most the byte limit
    (:mod:`treedyn.io.files`)."""
    path = os.fspath(path)
    return path, read_file_bytes(path, max_bytes)


def parse_root(text, filename, tag, free_group, malformed_hint=""):
    """The root element of XML ``text`` (hostile XML refused by defusedxml: no DTD,
    no entities), which must be ``<tag>``; ``free_group`` must be "SE3" or "SO3xR3"."""
    try:
        root = _safe_fromstring(text, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise RobotFileError(f"refused unsafe XML ({type(exc).__name__}: {exc})",
                             file=filename, element=f"<{tag}>") from None
    except ET.ParseError as exc:
        raise RobotFileError(f"malformed XML: {exc}{malformed_hint}", file=filename) from None
    except (LookupError, ValueError) as exc:     # the declared encoding: unknown, not a text
        # codec, multi-byte (expat reads none but UTF-8/16), or failing (UnicodeError)
        raise RobotFileError(f"unsupported XML encoding ({type(exc).__name__}: {exc}); "
                             f"treedyn reads UTF-8, UTF-16 and single-byte encodings",
                             file=filename, element="<?xml encoding=...?>") from None
    if root.tag != tag:
        raise RobotFileError(f"root element is <{root.tag}>, expected <{tag}>",
                             file=filename, element=f"<{root.tag}>")
    if free_group not in ("SE3", "SO3xR3"):
        raise RobotFileError(f"free_group must be 'SE3' or 'SO3xR3', got {free_group!r}",
                             file=filename)
    return root


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warn_user(message):
    """``warnings.warn(message)`` attributed to the first caller outside treedyn."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)


def warn_friction(file, joints):
    """One warning naming the joints with dry friction (kept on the model as
    ``model.friction``, not modelled yet), if any."""
    if joints:
        more = f" and {len(joints) - 10} more" if len(joints) > 10 else ""
        warn_user(f"{file}: dry joint friction is not modelled (the values are kept as "
                  f"model.friction and not applied): joints {', '.join(joints[:10])}{more}")
