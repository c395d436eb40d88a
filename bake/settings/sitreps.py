"""Reading the sitreps given to ``publish --sitrep``: each file, or each ``sitrep.json`` under a
directory, read as untrusted input (another job wrote it; an artifact may be truncated, of another
tool, or hostile): a wrong shape is one line naming the file and the field, exit 2, before any
registry is asked anything. What they say together is a :class:`bake.plan.gate.Evidence`.

The shape read (:mod:`bake.run.sitrep`): ``targets.<name>`` with ``outcome`` (a string) and
``platforms`` (strings), and after ``bake-plan test`` ``tests.results[]`` with ``stage``,
``target``, ``platform``, ``test``, ``outcome`` (strings) and ``tests.installed[]`` with
``target``, ``platform`` and ``distributions`` (name → version), and ``tests.sizes[]`` with
``target``, ``platform`` and ``size_bytes`` (a non-negative integer). Other keys are ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, List

from bake.documents import DocumentError, not_regular, read_json
from bake.errors import UsageError
from bake.patterns import LazyPattern
from bake.plan.gate import Evidence, TestResult, arch_of_platform, distribution_name
from bake.plan.names import PLATFORM_ARCH

SITREP = "sitrep.json"
MAX_FILES = 1000
"""At most this many sitreps are read from the directories given (a nightly has a few per arch)."""

_DIGEST = LazyPattern(r"sha256:[0-9a-f]{64}")


def sitrep_files(given: Iterable[str], where: str = "--sitrep") -> List[Path]:
    """The files named: each file as it is, each directory's ``sitrep.json`` files (searched
    below it, in sorted order), each once.

    :raises UsageError: a path that does not exist or is not a regular file (``/dev/zero``, a
        FIFO: ``is not a regular file (a character device)``), a directory holding no ``sitrep.json``
        or one that is not a regular file (a FIFO; a directory of that name is passed over), or more
        than :data:`MAX_FILES` of them.
    """
    out: List[Path] = []
    for value in given:
        path = Path(value)
        if path.is_dir():
            found = sorted(p for p in path.rglob(SITREP) if not p.is_dir())
            for p in found:
                if not p.is_file():  # a FIFO, a device, a socket under that name
                    raise UsageError(f"{where} {value}: {p}: {not_regular(os.stat(p).st_mode)}")
            if not found:
                raise UsageError(f"{where} {value}: no {SITREP} in this directory")
            out += found
        elif path.is_file():
            out.append(path)
        elif os.path.lexists(path) and os.path.exists(path):  # a FIFO, a device, a socket
            raise UsageError(f"{where} {value}: {not_regular(os.stat(path).st_mode)}")
        else:
            raise UsageError(f"{where} {value}: no such file or directory")
        if len(out) > MAX_FILES:
            raise UsageError(f"{where} {value}: more than {MAX_FILES} sitreps")
    return list(dict.fromkeys(out))


def _arch(value, path: Path, field: str, where: str) -> str:
    """The arch of a platform a sitrep names (``linux/arm64`` → ``arm64``): one bake-plan builds
    for, else refused (an unknown one would compare with nothing and pass unseen)."""
    text = _text(value, path, field, where)
    if text not in PLATFORM_ARCH:
        raise UsageError(f"{where} {path}: {field} is not a platform bake-plan builds for "
                         f"({', '.join(PLATFORM_ARCH)})")
    return arch_of_platform(text)


def _text(value, path: Path, field: str, where: str) -> str:
    if not isinstance(value, str) or not value or len(value) > 4096:
        raise UsageError(f"{where} {path}: {field} is not a string of 1 to 4096 characters")
    return value


def read_sitreps(given: Iterable[str], where: str = "--sitrep") -> Evidence:
    """Every sitrep named (:func:`sitrep_files`), read into one :class:`Evidence`.

    :raises UsageError: a file unreadable, too large, not JSON, or not of the sitrep's shape,
        naming the file and the field (``targets.mx-root.platforms``).
    """
    evidence = Evidence()
    for path in sitrep_files(given, where):
        try:
            data = read_json(path)  # at most 64 MiB, as every file read back
        except OSError as err:
            raise UsageError(f"{where} {path}: {err.strerror or err}") from None
        except DocumentError as err:
            raise UsageError(f"{where} {path}: {err}") from None
        _read_one(data, path, where, evidence)
        evidence.files.append(str(path))
        evidence.documents.append(data)
    return evidence


def _read_one(data, path: Path, where: str, evidence: Evidence) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("targets"), dict):
        raise UsageError(f"{where} {path}: not a bake-plan sitrep.json (no 'targets' table)")
    for name, target in data["targets"].items():
        field = f"targets.{name}"
        if not isinstance(target, dict):
            raise UsageError(f"{where} {path}: {field} is not a table")
        outcome = _text(target.get("outcome"), path, f"{field}.outcome", where)
        platforms = target.get("platforms")
        if not isinstance(platforms, list) or not platforms:
            raise UsageError(f"{where} {path}: {field}.platforms is not a list of platforms")
        for platform in platforms:
            evidence.add_build(name, _arch(platform, path, f"{field}.platforms", where), outcome)
        digest = target.get("digest")
        if digest is not None and (not isinstance(digest, str) or not _DIGEST.fullmatch(digest)):
            raise UsageError(f"{where} {path}: {field}.digest is not a digest (sha256:<64 hex digits>)")
        if digest is not None and len(platforms) == 1:  # a per-arch build: the image its tests ran on
            evidence.digests[(name, _arch(platforms[0], path, f"{field}.platforms", where))] = digest
    tests = data.get("tests")
    if tests is None:
        return
    if not isinstance(tests, dict) or not isinstance(tests.get("results", []), list):
        raise UsageError(f"{where} {path}: tests is not a table with a 'results' list")
    for i, result in enumerate(tests.get("results", [])):
        field = f"tests.results[{i}]"
        if not isinstance(result, dict):
            raise UsageError(f"{where} {path}: {field} is not a table")
        words = {key: _text(result.get(key), path, f"{field}.{key}", where)
                 for key in ("stage", "target", "platform", "test", "outcome")}
        evidence.tests.append(TestResult(words["stage"], words["target"], _arch(words["platform"], path, f"{field}.platform", where),
                                         words["test"], words["outcome"]))
    installed = tests.get("installed", [])
    if not isinstance(installed, list):
        raise UsageError(f"{where} {path}: tests.installed is not a list")
    for i, entry in enumerate(installed):
        field = f"tests.installed[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("distributions"), dict):
            raise UsageError(f"{where} {path}: {field} is not a table with a 'distributions' table")
        target = _text(entry.get("target"), path, f"{field}.target", where)
        arch = _arch(entry.get("platform"), path, f"{field}.platform", where)
        dists = {}
        for name, version in entry["distributions"].items():
            dists[distribution_name(_text(name, path, f"{field}.distributions", where))] = \
                _text(version, path, f"{field}.distributions.{name}", where)
        evidence.installed[(target, arch)] = dists
    sizes = tests.get("sizes", [])
    if not isinstance(sizes, list):
        raise UsageError(f"{where} {path}: tests.sizes is not a list")
    for i, entry in enumerate(sizes):
        field = f"tests.sizes[{i}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{where} {path}: {field} is not a table")
        target = _text(entry.get("target"), path, f"{field}.target", where)
        arch = _arch(entry.get("platform"), path, f"{field}.platform", where)
        size = entry.get("size_bytes")
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < 2 ** 63:
            raise UsageError(f"{where} {path}: {field}.size_bytes is not a number of bytes")
        evidence.sizes[(target, arch)] = size
