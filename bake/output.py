"""Writing files whole or not at all: a temp file in the same directory, then an atomic rename.

And stdout kept for documents: once :func:`claim_stdout` ran, the process's file descriptor 1
points at stderr, so nothing but the document written through :func:`stdout` (a plan with
``-o -``, the ``matrix`` JSON, a graph, the ``config``) reaches the real stdout.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import Iterable, Optional, TextIO, Tuple, Union

from bake.errors import OutputError

_document: Optional[TextIO] = None  # the real stdout, on a private descriptor, once claimed


def claim_stdout() -> None:
    """Keep the real stdout for the document alone, from now until the process ends.

    The real stdout moves to a private descriptor that only :func:`stdout` writes to; descriptor
    1 is pointed at stderr and ``sys.stdout`` is bound to ``sys.stderr``. So whatever else writes
    to "stdout" lands on stderr: a plugin's ``print``, ``sys.__stdout__``, ``os.write(1, …)``, a
    subprocess it runs, a C extension, a thread, an ``atexit`` handler. It stays so after the
    command returns (``atexit`` handlers run after that); it is meant for the console script.
    With no descriptor 1 (closed), nothing changes. Calling it again does nothing.
    """
    global _document
    if _document is not None or sys.stdout is None:
        return
    encoding, errors = getattr(sys.stdout, "encoding", None), getattr(sys.stdout, "errors", None)
    try:
        sys.stdout.flush()
        private = os.dup(1)  # not inherited by subprocesses (PEP 446)
        os.dup2(2, 1)
    except (OSError, ValueError):  # no stdout to keep
        return
    _document = open(private, "w", encoding=encoding or "utf-8", errors=errors or "strict")
    sys.stdout = sys.stderr


def stdout() -> Optional[TextIO]:
    """Where a document for stdout goes: the real stdout kept by :func:`claim_stdout`, else
    ``sys.stdout`` (``None`` when the process started with stdout closed)."""
    return _document if _document is not None else sys.stdout


def discard_stdout() -> None:
    """Point the document's stdout at ``/dev/null`` after writing it failed (the reader left, a
    full disk), so the flush at exit does not fail a second time. Never raises."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout().fileno())
    except (OSError, ValueError, AttributeError):
        pass


def write_atomic(path: str, text: Union[str, Iterable[str]], what: str = "the plan") -> None:
    """Write ``text`` (UTF-8) to ``path``, or to stdout (:func:`stdout`) when ``path`` is ``-``.

    ``text`` may come in parts (an iterable of str, :func:`bake.plan.render.hcl_parts`): a regular
    file is then written a part at a time, and a part that raises leaves no file (the temporary
    file is removed); stdout and other files get the whole text, made first.

    A reader never sees a half-written file: the text goes to a temporary file beside ``path``
    that replaces it in one ``os.replace``; on any error the old file is untouched and the
    temporary file is removed. A symlink is followed (the file it points to is replaced, the link
    stays). An existing path that is not a regular file (a FIFO, ``/dev/null``, ``/dev/stdout``) is
    written to directly: renaming over it would replace the device or pipe itself.

    :raises OutputError: the directory is missing or not writable, or ``path`` is a directory.
    :raises OSError: writing to stdout failed (``BrokenPipeError`` when the reader left); the
        CLI turns it into its exit status (:func:`discard_stdout`).
    """
    if not isinstance(text, str) and (path == "-" or not _regular_or_absent(path)):
        text = "".join(text)  # all or nothing where there is no temporary file
    if path == "-":
        out = stdout()
        if out is None:  # started with stdout closed (`bake-plan … >&-`)
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        out.write(text)
        out.flush()
        return
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"cannot write {what} to {path}: it is a directory")
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        _refuse_a_loop(path, what, err)
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        try:
            with open(path, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
        except OSError as err:
            raise OutputError(f"cannot write {what} to {path}: {err.strerror or err}") from None
        return
    shown = path
    if target.is_symlink():  # the file it points to is replaced; an error names the link and where it points
        target = Path(os.path.realpath(path))
        shown = f"{path} (a symbolic link to {target})"
        path = str(target)
    mode = os.stat(path).st_mode & 0o777 if target.exists() else None
    data = text.encode("utf-8") if isinstance(text, str) else (part.encode("utf-8") for part in text)
    replace_file(target, data, what, mode, shown=shown)


def _refuse_a_loop(path: str, what: str, err: OSError) -> None:
    """A ``path`` that is a loop of symbolic links is refused (``ELOOP``), not replaced by a file:
    the user named a link, and which file it meant cannot be known.

    :raises OutputError: it is one; any other error is left to the write, which says it.
    """
    if err.errno == errno.ELOOP:
        raise OutputError(f"cannot write {what} to {path}: {err.strerror} (a loop of symbolic links)") from None


def check_writable(path: str, what: str = "the plan") -> None:
    """Before the work that leads to it: that :func:`write_atomic` can put a file at ``path`` (``-``
    always): its directory is there and is one, and ``path`` is not a directory. A full disk or a
    read-only filesystem still shows only when it is written.

    :raises OutputError: the words :func:`write_atomic` would say.
    """
    if path == "-":
        return
    if os.path.isdir(path):
        raise OutputError(f"cannot write {what} to {path}: it is a directory")
    try:
        os.stat(path)
    except OSError as err:
        _refuse_a_loop(path, what, err)
    target = os.path.realpath(path) if os.path.islink(path) else path  # write_atomic replaces the link's file
    directory = os.path.dirname(target) or "."
    try:
        if not stat.S_ISDIR(os.stat(directory).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    except OSError as err:
        through = f" (a symbolic link to {os.readlink(path)})" if target != path else ""
        raise OutputError(f"cannot write {what} to {path}{through}: {err.strerror or err}") from None


def _regular_or_absent(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def replace_file(path: Path, data: Union[bytes, Iterable[bytes]], what: str, mode: Optional[int] = None,
                 shown: Optional[str] = None) -> None:
    """Put ``data`` (bytes, or bytes in parts) at ``path`` whole or not at all: a temporary file
    beside it, then one ``os.replace`` (which replaces the name itself, a symlink there included).

    :param mode: the permission bits of the new file (default: ``0o666`` less the umask).
    :param shown: how an error names the file (default ``path``): the link the user named.
    :raises OutputError: the directory is missing or not writable; the temporary file is removed.
    """
    directory = path.parent if str(path.parent) else Path(".")
    tmp_name = None
    try:
        fd, tmp_name = _new_file_beside(path, directory)
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                handle.writelines(data)
        os.chmod(tmp_name, 0o666 & ~_umask() if mode is None else mode)
        os.replace(tmp_name, path)
        tmp_name = None
    except OSError as err:
        raise OutputError(f"cannot write {what} to {shown or path}: {err.strerror or err}") from None
    finally:
        if tmp_name is not None:
            try:
                os.unlink(tmp_name)
            except OSError:
                pass


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _new_file_beside(path: Path, directory: Path) -> Tuple[int, str]:
    """A new empty file ``.NAME.<random>.tmp`` in ``directory`` (``path``'s), open for writing, and
    its name: made as :func:`tempfile.mkstemp` makes one (``O_EXCL``, mode ``0o600``, a name no
    other file has), without importing :mod:`tempfile` (with ``shutil``, ``random`` and the
    compression modules: more than a small plan takes to write)."""
    for _ in range(100):
        name = os.path.join(directory, f".{path.name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(name, _NEW_FILE, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary name", str(directory))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
