"""Opening robot files safely: regular files only, a bounded number of bytes.

A path naming a FIFO, a device, a socket or a directory is refused before a
byte is read (a FIFO would block the reader forever, ``/dev/zero`` would be read
until memory runs out), and so is a file larger than the byte limit.  The
limit is ``max_bytes`` when given, else the environment variable
``TREEDYN_MAX_FILE_BYTES``, else :data:`DEFAULT_MAX_BYTES` (256 MiB).
"""
from __future__ import annotations

import os
import stat

from ..errors import InputError, RobotFileError

__all__ = ["DEFAULT_MAX_BYTES", "ENV_MAX_BYTES", "max_file_bytes", "read_file_bytes"]

#: default cap on the size of a robot file read by treedyn (256 MiB)
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
#: environment variable overriding the default cap (a positive integer, in bytes)
ENV_MAX_BYTES = "TREEDYN_MAX_FILE_BYTES"

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode):
    for test, text in _KINDS:
        if test(mode):
            return text
    return "not a regular file"


def max_file_bytes(max_bytes=None):
    """The byte limit in force: ``max_bytes``, else $TREEDYN_MAX_FILE_BYTES, else 256 MiB."""
    if max_bytes is not None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise InputError(f"load: max_bytes: expected a positive integer (bytes), got "
                             f"{max_bytes!r}")
        return max_bytes
    raw = os.environ.get(ENV_MAX_BYTES)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_BYTES
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"environment variable {ENV_MAX_BYTES}: expected a positive integer "
                         f"(bytes), got {raw!r}")
    return value


def read_file_bytes(path, max_bytes=None):
    """The bytes of the regular file ``path`` (at most the byte limit), or RobotFileError."""
    limit = max_file_bytes(max_bytes)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RobotFileError(f"cannot read file: {exc.strerror}", file=path) from None
    except ValueError as exc:                     # e.g. an embedded NUL character
        raise RobotFileError(f"cannot read file: {exc}", file=path) from None
    if not stat.S_ISREG(st.st_mode):
        raise RobotFileError(f"cannot read file: it is {_kind(st.st_mode)}, not a regular "
                             f"file", file=path)
    _check_size(st.st_size, limit, path)
    # O_NONBLOCK: should the path be swapped for a FIFO after the check, open()
    # returns at once instead of waiting for a writer; fstat then refuses it.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise RobotFileError(f"cannot read file: {exc.strerror}", file=path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RobotFileError(f"cannot read file: it is {_kind(st.st_mode)}, not a regular "
                                 f"file", file=path)
        _check_size(st.st_size, limit, path)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:                     # the file grew while being read
                _check_size(total, limit, path, known=False)
    except OSError as exc:
        raise RobotFileError(f"cannot read file: {exc.strerror}", file=path) from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def _check_size(size, limit, path, known=True):
    if size > limit:
        has = f"{size} bytes" if known else f"more than {limit} bytes"
        raise RobotFileError(f"the file is larger than the limit of {limit} bytes ({has}); "
                             f"raise it with load(..., max_bytes=n) or the environment "
                             f"variable {ENV_MAX_BYTES}", file=path)
