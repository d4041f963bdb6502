"""Reading XML robot files (URDF, SDFormat): bytes from disk, a safe parse, the
root element and the free-joint group checked, each failure a RobotFileError
naming the file (and element).

Names are read literally, as libsdformat, urdfdom and Drake read them (TinyXML
does no namespace processing): ``<drake:rotor_inertia>`` has the tag
``"drake:rotor_inertia"`` whether or not the file declares ``xmlns:drake``, and
``xmlns`` declarations are dropped from the attributes.  So a vendor prefix
that is never declared (``drake:``, ``gazebo:``, ``ignition:``, ...) is no
parse error; :func:`vendor_items` lists the prefixed elements and attributes
for the readers, which read the few they understand and name the others in
their one "not read" warning."""
from __future__ import annotations

import os
import sys
import warnings
import xml.etree.ElementTree as ET
from xml.parsers import expat

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from ..errors import RobotFileError
from .files import read_file_bytes

__all__ = ["read_bytes", "parse_root", "warn_user", "vendor_items", "MAX_PREFIXES"]

#: most distinct namespace prefixes (declared or not) in one file; more is refused
#: as hostile (real robot files use a handful: drake, gazebo, ignition, gz, xacro)
MAX_PREFIXES = 64

#: expat handlers of ElementTree's parser and of defusedxml's protections, moved
#: onto the literal-name parser
_HANDLERS = ("DefaultHandlerExpand", "StartElementHandler", "EndElementHandler",
             "CharacterDataHandler", "CommentHandler", "ProcessingInstructionHandler",
             "StartDoctypeDeclHandler", "EntityDeclHandler", "UnparsedEntityDeclHandler",
             "ExternalEntityRefHandler")


class _LiteralParser(DefusedXMLParser):
    """defusedxml's parser (no DTD, no entities, no external references) with
    expat's namespace processing off: qualified names stay as written."""

    def __init__(self):
        super().__init__(target=ET.TreeBuilder(), forbid_dtd=True)
        ns_parser = self.parser
        parser = expat.ParserCreate(None)          # no namespace separator
        for name in _HANDLERS:
            handler = getattr(ns_parser, name, None)
            if handler is not None:
                setattr(parser, name, handler)
        parser.buffer_text = 1
        parser.ordered_attributes = 1
        self.parser = self._parser = parser


def _parse_literal(text):
    parser = _LiteralParser()
    parser.feed(text)
    return parser.close()



def read_bytes(path, max_bytes=None):
    """(path as str, the file's bytes): a regular file of at most the byte limit
    (:mod:`treedyn.io.files`)."""
    path = os.fspath(path)
    return path, read_file_bytes(path, max_bytes)


def parse_root(text, filename, tag, free_group, malformed_hint=""):
    """The root element of XML ``text`` (hostile XML refused by defusedxml: no DTD,
    no entities), which must be ``<tag>``; ``free_group`` must be "SE3" or "SO3xR3"."""
    try:
        root = _parse_literal(text)
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
    _drop_declarations(root, filename)
    if root.tag != tag:
        hint = (" (a vendor prefix makes it another element: the format's root has none)"
                if root.tag.endswith(":" + tag) else "")
        raise RobotFileError(f"root element is <{root.tag}>, expected <{tag}>{hint}",
                             file=filename, element=f"<{root.tag}>")
    if free_group not in ("SE3", "SO3xR3"):
        raise RobotFileError(f"free_group must be 'SE3' or 'SO3xR3', got {free_group!r}",
                             file=filename)
    return root


def _drop_declarations(root, filename):
    """Remove the ``xmlns`` / ``xmlns:p`` attributes (declarations, not data) and
    refuse a file with more than :data:`MAX_PREFIXES` distinct prefixes."""
    prefixes = set()
    for el in root.iter():
        names = [el.tag] if isinstance(el.tag, str) else []
        for key in list(el.attrib):
            if key == "xmlns" or key.startswith("xmlns:"):
                del el.attrib[key]
                if key != "xmlns":
                    prefixes.add(key[6:])
            else:
                names.append(key)
        for name in names:
            if ":" in name:
                prefixes.add(name.split(":", 1)[0])
        if len(prefixes) > MAX_PREFIXES:
            raise RobotFileError(f"more than {MAX_PREFIXES} distinct XML namespace prefixes "
                                 f"(a namespace bomb?): refused; robot files use a few "
                                 f"(drake:, gazebo:, ...)", file=filename,
                                 element=f"<{el.tag}>")


def vendor_items(root, understood=()):
    """Prefixed (vendor-namespace) elements and attributes of the tree at ``root``,
    each as a string ``<parent name="..."><prefix:tag>`` or
    ``<element name="...">@prefix:attr``, in document order.  An element in
    ``understood`` (a set of element ids) is not listed; the content of a listed
    element is not listed apart.  The root element itself is never listed."""
    out = []
    stack = [(root, None)]
    while stack:
        el, parent = stack.pop()
        if el is not root and ":" in el.tag:
            if id(el) not in understood:
                out.append(f"{_label(parent)}<{el.tag}>")
            continue
        for key in el.attrib:
            if ":" in key:
                out.append(f"{_label(el)}@{key}")
        stack.extend((child, el) for child in reversed(list(el))
                     if isinstance(child.tag, str))
    return out


def _label(el):
    name = el.get("name")
    return f'<{el.tag} name="{name}">' if name is not None else f"<{el.tag}>"


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
