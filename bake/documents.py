"""Reading the TOML and JSON files bake-plan is handed: one reader per kind of document.

Every file of a kind goes through the same function, so every one of them fails the same way:
the configuration file and the sources manifest (TOML), ``--parent-report``,
``--metadata-bake-file``, ``--sitrep`` and ``diff``'s sides (JSON). Only a regular file of at most
:data:`MAX_BYTES` is read (:func:`read_bytes`). A document nested deeper than :data:`MAX_DEPTH` is refused: the
parsers recurse once per level (a 1 KB file of ``[[[[…`` exhausts the interpreter's stack), and
so would every walk over the value afterwards. The limit is far above any real report,
manifest or configuration, and the same whatever the interpreter's recursion limit is.

The errors carry the reason only; each caller adds the file's name and its option, and raises
its own :class:`bake.errors.BakePlanError`.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, List, Tuple, Union

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib  # type: ignore[no-redef]

MAX_DEPTH = 100
"""How many arrays, tables or objects within each other a document may hold."""

MAX_BYTES = 64 * 1024 * 1024
"""The largest file read back (64 MiB): far above any real report, plan, record or configuration;
a larger file (or one that grows past it while read) is refused, not held in memory."""

TOML_CONTAINERS = "arrays or tables"
JSON_CONTAINERS = "arrays or objects"

PathLike = Union[str, "os.PathLike[str]"]


class DocumentError(ValueError):
    """The text is not a document of its kind: ``str(err)`` says why (``not valid TOML: …``,
    ``not JSON: …``, ``not UTF-8: …``, ``nested too deeply …``), without the file's name."""


def _too_deep(containers: str) -> DocumentError:
    return DocumentError(f"nested too deeply (more than {MAX_DEPTH} levels of {containers} within each other)")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def not_regular(mode: int) -> DocumentError:
    """The error for a file whose ``st_mode`` is not a regular file's: ``is not a regular file (a
    character device)``; ``a directory``, ``a FIFO``, ``a socket``, ``a block device``."""
    return DocumentError(f"is not a regular file ({_kind(mode)})")


def read_bytes(path: PathLike, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (:data:`MAX_BYTES` unless a reader
    of a smaller kind of file asks for less).

    The file is opened non-blocking and checked with ``fstat`` before a byte is read: a FIFO, a
    device (``/dev/zero``; ``/dev/null`` alone reads as empty), a socket or a directory is refused
    at once, never read until memory or forever.

    :raises OSError: the file cannot be opened or read (the caller names it, ``err.strerror``).
    :raises DocumentError: ``is not a regular file (…)``, or ``larger than 64 MiB`` (the limit).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) and not _is_devnull(info):  # /dev/null: empty, as `--config /dev/null` means
            raise not_regular(info.st_mode)
        if info.st_size > limit:
            raise _too_large(limit)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise _too_large(limit)
    return raw


def _is_devnull(info: os.stat_result) -> bool:
    try:
        return os.path.samestat(info, os.stat(os.devnull))
    except OSError:  # pragma: no cover - no /dev/null
        return False


def _too_large(limit: int = MAX_BYTES) -> DocumentError:
    size = f"{limit // (1024 * 1024)} MiB" if limit % (1024 * 1024) == 0 else f"{limit:,} bytes"
    return DocumentError(f"larger than {size}: not a file bake-plan reads")


def read_text(path: PathLike) -> str:
    """The file's text, UTF-8 (:func:`read_bytes`: a regular file, at most :data:`MAX_BYTES`); a
    leading byte-order mark (editors on Windows write one) is dropped.

    :raises OSError: the file cannot be read (the caller names it and says ``err.strerror``).
    :raises DocumentError: not a regular file, too large, or the bytes are not UTF-8.
    """
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DocumentError(f"not UTF-8: {err}") from None


def parse_toml(text: str) -> dict:
    """``text`` as TOML: a table (``dict``) of TOML values.

    :raises DocumentError: not valid TOML, or nested deeper than :data:`MAX_DEPTH`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DocumentError(f"not valid TOML: {err}") from None
    except RecursionError:  # tomllib recurses once per level of arrays and inline tables
        raise _too_deep(TOML_CONTAINERS) from None
    _check_depth(data, TOML_CONTAINERS)
    return data


def parse_json(text: str) -> Any:
    """``text`` as JSON (RFC 8259): any JSON value (the caller checks its shape).

    Python's :mod:`json` takes things RFC 8259 does not, or reads them as something else, and
    each is refused: an object that names one key twice (RFC 8259 section 4: which value is meant
    is then up to the reader; Python keeps the last, another tool the first); ``NaN``,
    ``Infinity`` and ``-Infinity``; a number out of a float's range (``1e999``, read as infinity).

    :raises DocumentError: not JSON, a key twice in one object, a number that is not one or is
        out of range, or nested deeper than :data:`MAX_DEPTH`.
    """
    try:
        data = json.loads(text, object_pairs_hook=_one_value_per_key, parse_constant=_no_constant,
                          parse_float=_finite)
    except DocumentError:
        raise
    except ValueError as err:  # json.JSONDecodeError
        raise DocumentError(f"not JSON: {err}") from None
    except RecursionError:  # the json scanner recurses once per level of arrays and objects
        raise _too_deep(JSON_CONTAINERS) from None
    _check_depth(data, JSON_CONTAINERS)
    return data


def _one_value_per_key(pairs: List[Tuple[str, Any]]) -> dict:
    """An object's pairs as a ``dict``. :raises DocumentError: a key comes twice (its name cut)."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            shown = key if len(key) <= 60 else key[:60] + "…"
            raise DocumentError(f"not JSON bake-plan reads: an object names {shown!r} twice")
        out[key] = value
    return out


def _finite(text: str) -> float:
    """A JSON number with a fraction or an exponent as a float. :raises DocumentError: it is out of
    a float's range (``1e999``: Python would read it as infinity, which JSON has not)."""
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise DocumentError(f"not JSON bake-plan reads: the number {shown} is out of range")
    return value


def _no_constant(name: str) -> Any:
    """:raises DocumentError: ``NaN``, ``Infinity`` or ``-Infinity``, which are not JSON numbers."""
    raise DocumentError(f"not JSON: {name} is not a JSON number")


def read_toml(path: PathLike) -> dict:
    """:func:`read_text` then :func:`parse_toml`. :raises OSError, DocumentError: as they do."""
    return parse_toml(read_text(path))


def read_json(path: PathLike) -> Any:
    """:func:`read_text` then :func:`parse_json`. :raises OSError, DocumentError: as they do."""
    return parse_json(read_text(path))


def _check_depth(data: Any, containers: str) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH` (an explicit stack: no recursion here
    either). A value within the limit parsed, but TOML's ``[a.b.c…]`` headers nest tables
    without the parser recursing, so the depth is checked on what came out."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(containers)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
