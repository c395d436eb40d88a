"""Writing files whole or not at all: a temp file in the same directory, then an atomic rename."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

from bake.errors import OutputError


def write_atomic(path: str, text: str, what: str = "the plan") -> None:
    """Write ``text`` (UTF-8) to ``path``, or to stdout when ``path`` is ``-``.

    A reader never sees a half-written file: the text goes to a temporary file beside ``path``
    that replaces it in one ``os.replace``; on any error the old file is untouched and the
    temporary file is removed. A symlink is followed (the file it points to is replaced, the link
    stays). An existing path that is not a regular file (a FIFO, ``/dev/null``, ``/dev/stdout``) is
    written to directly: renaming over it would replace the device or pipe itself.

    :raises OutputError: the directory is missing or not writable, or ``path`` is a directory.
    """
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"cannot write {what} to {path}: it is a directory")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        except OSError as err:
            raise OutputError(f"cannot write {what} to {path}: {err.strerror or err}") from None
        return
    if target.is_symlink():
        target = Path(os.path.realpath(path))
        path = str(target)
    directory = target.parent if str(target.parent) else Path(".")
    tmp_name = None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        mode = os.stat(path).st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as err:
        raise OutputError(f"cannot write {what} to {path}: {err.strerror or err}") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
