"""Files bake-plan writes, and only those: the one place that decides whether a file in a
directory bake-plan writes into is bake-plan's to replace or delete (``docs/security.md``).

Two ways a file is known to be bake-plan's:

- **its header**: a lock and its copy in the ``pip-lock`` context start with ``# bake-plan``
  lines naming the stage (:mod:`bake.pip.lock` reads them); a plan file's first lines say
  :data:`MARK` (the HCL header comment, the JSON ``"//"`` key; :func:`check_replaceable`). Both
  are committed or kept beside a hand-written bake file, so the file itself must say whose it is;
- **the directory's record** (:class:`Record`): ``.bake-plan-written.json`` lists each file
  bake-plan wrote there with the sha256 of what it wrote (the reports of a build, the wheels
  ``bake-plan wheelhouse`` added, the wheelhouse's OCI layout). A file is bake-plan's while it
  still has that content.

Anything else found where bake-plan would write or delete (a file of the user's, one changed
since, a symbolic link, a FIFO) is left as it is and refused in one line, exit status 2. No
symbolic link is followed inside a directory bake-plan makes for itself (``.pip-lock``,
``.bake-plan-oci``): a committed link there could send another directory to a build or have
files deleted elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Dict, Iterable, Iterator, Optional, Union

from bake.errors import OutputError
from bake.output import replace_file

RECORD = ".bake-plan-written.json"
"""The record of what bake-plan wrote in a directory: ``{"written": {name: sha256 or null}}``
(``null``: a file bake-plan had another program write, such as buildx's metadata file; any
regular file of that name is then bake-plan's)."""


MARK = "written by bake-plan"
"""What the first lines of a plan file bake-plan wrote say: the HCL header's comment
(``docker-bake.hcl.tmpl``) and the JSON plan's ``"//"`` key (a comment to bake: the HCL JSON
syntax ignores a property named ``//``; buildx's ``--print`` drops it)."""

_MARK_WITHIN = 512
"""How far into a file :data:`MARK` is looked for, in bytes (both headers put it on line 1 or 2)."""


def says_written_by_bake_plan(path: Union[str, Path]) -> bool:
    """Whether the regular file at ``path`` (a symbolic link followed, as the plan's writer does)
    says :data:`MARK` in its first :data:`_MARK_WITHIN` bytes. ``False`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and MARK.encode() in os.read(fd, _MARK_WITHIN)
    except OSError:
        return False
    finally:
        os.close(fd)


def check_replaceable(path: Union[str, Path], force: bool = False) -> None:
    """Refuse to replace a document bake-plan did not write: a hand-written ``docker-bake.hcl``
    (bake-action users often keep one), or a workflow file of the user's, is no file of bake-plan's
    to overwrite. The plan and the workflow bake-plan writes say :data:`MARK` in their header.

    Nothing is refused when ``path`` is absent, not a regular file (a FIFO, ``/dev/stdout``: written
    through, not replaced), says :data:`MARK`, is in its directory's :class:`Record` unchanged (an
    output whose format has no comment: a JSON matrix, a graph; :func:`write_output`), or ``force``
    (``--force``) is given.

    :raises OutputError: ``path`` is a regular file (or a link to one) without :data:`MARK`.
    """
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return  # absent (or unreachable: writing it will say why)
    if regular and not force and not says_written_by_bake_plan(path) and not _recorded(path):
        raise OutputError(f"{path}: bake-plan did not write this file (its first lines do not say "
                          f"'{MARK}'), so it will not replace it: pass --force to replace it, or -o another file")


def sha256(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    import hashlib  # here, not at the top: loading OpenSSL costs a plan ~3 ms it does not need

    return "sha256:" + hashlib.sha256(data).hexdigest()


def file_sha256(path: Union[str, Path]) -> Optional[str]:
    """``sha256:<hex>`` of a regular file's content (read without following a symbolic link), or
    ``None`` when ``path`` is missing, a link, or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        import hashlib

        digest = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return "sha256:" + digest.hexdigest()
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)


def kind_of(path: Union[str, Path]) -> Optional[str]:
    """What ``path`` is, without following a link: ``None`` (absent), ``"file"``, ``"directory"``,
    ``"symbolic link"`` or ``"special file"`` (a FIFO, a socket, a device)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    return "special file"


def own_directory(path: Path, root: Path, why: str) -> Path:
    """Make ``path`` (a directory under ``root`` that bake-plan keeps for itself) as real
    directories, following no symbolic link below ``root`` (``root`` itself is the user's choice).

    :param why: what the directory is for, for the message (``"the pip-lock context of 'jax'"``).
    :returns: ``path``.
    :raises OutputError: a part of it below ``root`` is a symbolic link or not a directory, or it
        cannot be made.
    """
    parts = path.relative_to(root).parts
    here = root
    for part in parts:
        here = here / part
        kind = kind_of(here)
        if kind == "symbolic link":
            raise OutputError(f"{here} is a symbolic link: bake-plan makes {why} there itself and follows no "
                              "link out of it; remove the link")
        if kind not in (None, "directory"):
            raise OutputError(f"{here} is a {kind}: bake-plan makes {why} there as a directory; move it away")
        if kind is None:
            try:
                here.mkdir()
            except FileExistsError:
                return own_directory(path, root, why)
            except OSError as err:
                raise OutputError(f"cannot make {here} ({why}): {err.strerror or err}") from None
    return path


@contextlib.contextmanager
def no_empty_directory_left(*directories: Union[str, Path]) -> Iterator[None]:
    """Around a command's work: of ``directories`` (and their parents), those missing now are the
    command's to make; when the block ends, however it ends, each of them that is empty, or holds
    only bake-plan's :data:`RECORD`, is removed again, deepest first. So a command leaves no empty
    directory of its own behind: a refused ``--sitrep-dir a/b/c``, a wheelhouse ``-o`` nothing was
    added to, the ``--metadata-file`` directory of a bake that failed before buildx wrote it. A
    directory the user made, or one that holds anything else, is kept as it is.

    The paths are walked as given, ``..`` and symbolic links left to the system as the command's
    own ``mkdir`` meets them (``p/../q`` makes ``p`` and ``q``; ``link/../x`` makes ``x`` beside
    the link's target).
    """
    missing = []
    for directory in directories:
        here = Path(os.getcwd(), directory)  # not normalised: p/../q stays, so p is seen as made
        chain = []
        while kind_of(here) is None and here.parent != here:
            chain.append(here)
            here = here.parent
        missing.extend(path for path in reversed(chain) if path not in missing)
    try:
        yield
    finally:
        for path in sorted(missing, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                if kind_of(path) != "directory" or path.name == "..":
                    continue
                if os.listdir(path) == [RECORD]:
                    (path / RECORD).unlink()
                path.rmdir()


def not_ours(path: Union[str, Path], kind: Optional[str], what: str) -> OutputError:
    """The one line for a file bake-plan will not replace or delete (``what``: why bake-plan
    wanted that name, e.g. ``"the sitrep"``)."""
    if kind == "symbolic link":
        return OutputError(f"{path} is a symbolic link: bake-plan writes {what} there only as a file of its own "
                           "and follows no link; remove the link")
    if kind == "directory":
        return OutputError(f"cannot write {what} to {path}: it is a directory")
    if kind == "special file":
        return OutputError(f"cannot write {what} to {path}: it is not a regular file")
    return OutputError(f"{path}: bake-plan did not write this file (or it changed since), so it will not replace "
                       f"or delete it; move it away (bake-plan writes {what} there)")


def plain_name(name: str) -> bool:
    """``name`` is a plain relative name inside a directory (``blobs/sha256/<hex>``): no absolute
    path, no ``..``, ``.`` or empty part, no backslash or NUL. A name read back from a record is
    checked with it before it is used."""
    return (isinstance(name, str) and bool(name) and not name.startswith("/") and "\\" not in name
            and "\0" not in name and all(part not in ("", ".", "..") for part in name.split("/")))


class Record:
    """What bake-plan wrote in one ``directory``, kept in its :data:`RECORD` file.

    Names are relative to ``directory`` (``blobs/sha256/<hex>`` is fine; no part may be a link).
    Every change is saved at once (atomically), so an interrupted run leaves a true record.
    """

    def __init__(self, directory: Union[str, Path]):
        self.directory = Path(directory)
        self.path = self.directory / RECORD
        self.written: Dict[str, Optional[str]] = {}
        if kind_of(self.path) == "symbolic link":
            raise not_ours(self.path, "symbolic link", "its record of the files it wrote")
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            written = data["written"]
            if isinstance(written, dict):
                self.written = {str(k): (v if isinstance(v, str) else None) for k, v in written.items()}
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            pass  # no record (or an unreadable one): nothing here is known to be bake-plan's
        for name in self.written:  # read back from the directory: untrusted (a restored cache, a commit)
            if not plain_name(name):
                raise OutputError(f"{self.path} names {name!r}, which is no file bake-plan writes in "
                                  f"{self.directory} (not a plain relative name inside it), so it trusts nothing "
                                  "this record says and deletes nothing by it; remove the record")

    def ours(self, name: str) -> bool:
        """``name`` is absent, or a regular file (not a link) bake-plan wrote and nobody changed since;
        never for a name that is not :func:`plain_name`, or whose directories below
        :attr:`directory` are not real directories (a link there could lead anywhere)."""
        if not plain_name(name) or any(kind_of(self.directory.joinpath(*name.split("/")[:i])) != "directory"
                                       for i in range(1, name.count("/") + 1)):
            return False
        kind = kind_of(self.directory / name)
        if kind is None:
            return True
        if kind != "file" or name not in self.written:
            return False
        recorded = self.written[name]
        return recorded is None or file_sha256(self.directory / name) == recorded

    def check(self, name: str, what: str) -> None:
        """:raises OutputError: ``name`` is there and not bake-plan's (:meth:`ours`)."""
        if not self.ours(name):
            raise not_ours(self.directory / name, kind_of(self.directory / name), what)

    def write(self, name: str, data: Union[str, bytes], what: str) -> None:
        """Write ``name`` whole (a temporary file renamed over it) and record it.

        :raises OutputError: the name is taken by something not bake-plan's, or the write fails.
        """
        self.check(name, what)
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self._replace(name, raw, what)
        self.written[name] = sha256(raw)
        self._save(what)

    def adopt(self, name: str, digest: Optional[str], what: str) -> None:
        """Record ``name`` as bake-plan's, with ``digest`` (``None``: whatever another program,
        asked by bake-plan, writes there). :raises OutputError: the record cannot be written."""
        self.written[name] = digest
        self._save(what)

    def remove(self, name: str, what: str) -> bool:
        """Delete ``name`` when it is bake-plan's. :returns: whether a file was deleted.

        :raises OutputError: it is there and not bake-plan's (left as it is), or cannot be deleted.
        """
        self.check(name, what)
        path = self.directory / name
        deleted = False
        try:
            path.unlink()
            deleted = True
        except FileNotFoundError:
            pass
        except OSError as err:
            raise OutputError(f"cannot remove the previous {path}: {err.strerror or err}") from None
        if self.written.pop(name, "absent") != "absent":
            self._save(what)
        return deleted

    def forget(self, names: Iterable[str], what: str) -> None:
        """Drop ``names`` from the record (files bake-plan no longer claims), leaving the files."""
        changed = False
        for name in names:
            if self.written.pop(name, "absent") != "absent":
                changed = True
        if changed:
            self._save(what)

    def _replace(self, name: str, raw: bytes, what: str) -> None:
        replace_file(self.directory / name, raw, what)  # the name itself: a link there was refused above

    def _save(self, what: str) -> None:
        text = json.dumps({"written": dict(sorted(self.written.items()))}, indent=1) + "\n"
        self._replace(RECORD, text.encode("utf-8"), f"the record of {what}")


def _recorded(path: Union[str, Path]) -> bool:
    """``path`` (a link followed, as the writer follows it) is a file its directory's
    :class:`Record` says bake-plan wrote, with that content still."""
    real = Path(os.path.realpath(path))
    try:
        record = Record(real.parent)
    except OutputError:
        return False
    return real.name in record.written and record.ours(real.name)


def write_output(path: str, text, what: str, force: bool = False) -> None:
    """The one gate every command passes to write a file the user named (``-o``): ``plan``,
    ``matrix`` (each format), ``graph``. ``-`` is stdout.

    The file may be replaced only when :func:`check_replaceable` allows it (absent, says
    :data:`MARK`, recorded unchanged, or ``force``); it is written whole
    (:func:`bake.output.write_atomic`); one whose text does not say :data:`MARK` (a JSON matrix, a
    graph) is then recorded in its directory's :class:`Record`, so the next run knows it is
    bake-plan's and a hand-written file of that name is not.

    :param text: the content, whole or in parts (as :func:`bake.output.write_atomic` takes it).
    :raises OutputError: the file is not bake-plan's to replace, or cannot be written or recorded.
    """
    from bake.output import write_atomic

    if path == "-":
        write_atomic(path, text, what=what)
        return
    check_replaceable(path, force=force)
    write_atomic(path, text, what=what)
    real = Path(os.path.realpath(path))
    if kind_of(real) == "file" and not says_written_by_bake_plan(real):
        Record(real.parent).adopt(real.name, file_sha256(real), what)
