"""One parser per kind of value, shared by the command line, the configuration file, the
environment and the reports read back (``--parent-report``).

Each parser takes the raw value and ``where`` it came from (``--platform``, ``bake-plan.toml:
[tool.bake-plan] platforms``, ``env SOURCE_DATE_EPOCH``) and returns the checked value, or raises
one line naming ``where``: :class:`bake.errors.UsageError` for the command line and the
environment, :class:`bake.errors.ConfigError` for a file. The grammars themselves (registry,
platform, image reference, digest) are :mod:`bake.plan.names`, which the stage checks use too.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

from bake.errors import ConfigError, UsageError
from bake.plan.names import (
    check_digest,
    check_platform,
    check_reference,
    check_registry,
)
from bake.plan.secrets import SecretSpec, parse_secret

DATE_POLICIES = ("auto", "today", "source-date-epoch")
ENV_EPOCH = "env SOURCE_DATE_EPOCH"
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_MAX_BRANCH = 255


def error(where: str, msg: str) -> UsageError:
    """The error for a bad value from ``where``: a :class:`ConfigError` when ``where`` names a
    file, else a :class:`UsageError` (a flag, an environment variable)."""
    kind = UsageError if where.startswith(("--", "env ")) else ConfigError
    return kind(f"{where}: {msg}")


def _filled(value: str, where: str) -> str:
    """``value`` unless it is the empty string, which every parser refuses with the same words."""
    if value == "":
        raise error(where, "empty string")
    return value


def registry(value: str, where: str) -> str:
    """``host[:port][/namespace]`` (:func:`bake.plan.names.check_registry`)."""
    _filled(value, where)
    try:
        return check_registry(value)
    except ValueError as err:
        raise error(where, str(err)) from None


def platforms(values: Sequence[str], where: str) -> Tuple[str, ...]:
    """Normalised, de-duplicated ``os/arch[/variant]`` platforms; each value may be a comma list
    (``linux/amd64,linux/arm64``, as buildx's ``--platform`` takes it)."""
    out = []
    for value in values:
        for item in _filled(value, where).split(","):
            try:
                out.append(check_platform(item))
            except ValueError as err:
                raise error(where, str(err)) from None
    return tuple(dict.fromkeys(out))


def names(values: Sequence[str], where: Optional[str] = None, what: str = "name") -> Tuple[str, ...]:
    """Stage, target or plugin names: comma lists split, each name stripped, first order kept.

    :param where: where the names came from (``--target``, ``bake-plan.toml: targets``): an empty
        name (``--target ''``, ``--target a,,b``) is then an error naming it, ``empty <what>``
        (an empty ``--target`` is a mistake, not "no target"). Without it, empty names are dropped.
    :raises UsageError: (a flag, the environment) or :class:`ConfigError` (a file): an empty name.
    """
    out = []
    for value in values:
        for name in value.split(","):
            if name.strip():
                out.append(name.strip())
            elif where is not None:
                raise error(where, f"empty {what}" + (f" in {value!r}" if value.strip() else ""))
    return tuple(dict.fromkeys(out))


def date_policy(value, where: str) -> str:
    """``auto``, ``today``, ``source-date-epoch`` or a real ``YYYY-MM-DD`` day (a TOML date is
    that day).

    :raises UsageError: anything else, naming ``where``.
    """
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    if value in DATE_POLICIES or _is_day(_filled(value, where)):
        return value
    raise error(where, f"{value!r} is not a date in the form YYYY-MM-DD, nor one of {', '.join(DATE_POLICIES)}")


def is_day_policy(policy: str) -> bool:
    """True when a (checked) date policy names one day rather than a rule."""
    return bool(_DAY.match(policy))


def _is_day(value) -> bool:
    try:
        return isinstance(value, str) and bool(_DAY.match(value)) and bool(datetime.date.fromisoformat(value))
    except ValueError:
        return False


def resolve_date(policy: str, environ: Mapping[str, str]) -> Tuple[datetime.date, Optional[str]]:
    """The build date a policy gives: ``auto`` is ``SOURCE_DATE_EPOCH`` (reproducible-builds.org)
    when set, else today in UTC.

    :returns: the date and, when it came from the environment, :data:`ENV_EPOCH`.
    :raises UsageError: ``SOURCE_DATE_EPOCH`` is not an integer, or unset for ``source-date-epoch``.
    """
    if is_day_policy(policy):
        return datetime.date.fromisoformat(policy), None
    epoch = environ.get("SOURCE_DATE_EPOCH")
    if policy == "source-date-epoch" and not epoch:
        raise UsageError("date = source-date-epoch, but SOURCE_DATE_EPOCH is not set")
    if policy != "today" and epoch:
        try:
            if not (epoch.isascii() and epoch.isdigit()):  # reproducible-builds.org: ASCII digits only
                raise ValueError(epoch)
            return datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc).date(), ENV_EPOCH
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"SOURCE_DATE_EPOCH {epoch!r} is not a Unix time in seconds") from None
    return datetime.datetime.now(tz=datetime.timezone.utc).date(), None


def base_image_pair(original: str, replacement: str, where: str) -> Tuple[str, str]:
    """One ``ORIGINAL=REPLACEMENT`` base-image substitution: two whole image references
    (:func:`bake.plan.names.check_reference`)."""
    for part in (original, replacement):
        try:
            check_reference(part)
        except ValueError as err:
            raise error(where, f"{original}={replacement}: {err}") from None
    return original, replacement


def base_images(pairs: Sequence[Tuple[str, str]], where: str) -> Dict[str, str]:
    """``{original: replacement}`` from pairs (:func:`base_image_pair` each); one original
    replaced twice, differently, is an error."""
    out: Dict[str, str] = {}
    for original, replacement in pairs:
        base_image_pair(original, replacement, where)
        if out.get(original, replacement) != replacement:  # a TOML table cannot say it twice
            raise UsageError(f"{where} {original!r} is given twice, as {out[original]!r} and {replacement!r}")
        out[original] = replacement
    return out


def base_image_flags(values: Sequence[str], where: str = "--base-image") -> Dict[str, str]:
    """``--base-image ORIGINAL=REPLACEMENT`` values as ``{original: replacement}``."""
    pairs = []
    for value in values:
        original, sep, replacement = value.partition("=")
        if not sep:
            raise error(where, f"{value!r} is not ORIGINAL=REPLACEMENT (two image references)")
        pairs.append((original, replacement))
    return base_images(pairs, where)


def branch(value: str, where: str) -> str:
    """A branch name for cache refs (``--cache-branch``, ``cache-from-branch``): one line of
    printable characters, at most 255 (git's own limit for a ref name component is looser;
    bake-plan turns anything outside ``[A-Za-z0-9_.-]`` into ``-`` in the cache ref)."""
    _filled(value, where)
    if len(value) > _MAX_BRANCH:
        raise error(where, f"branch name is {len(value)} characters long; at most {_MAX_BRANCH}")
    if not value.isprintable() or any(c.isspace() for c in value):
        raise error(where, f"branch name {value!r} holds whitespace or a control character")
    return value


def secrets(values: Sequence[str], where: str = "--secret") -> Tuple[SecretSpec, ...]:
    """``--secret`` values as :class:`bake.plan.secrets.SecretSpec` (a relative ``src`` made
    absolute; :func:`bake.plan.secrets.parse_secret`). One id given twice is an error."""
    specs = []
    for value in values:
        try:
            spec = parse_secret(value)
        except ValueError as err:
            raise error(where, f"{value!r}: {err}") from None
        if any(s.id == spec.id for s in specs):
            raise error(where, f"id '{spec.id}' is given twice")
        specs.append(spec)
    return tuple(specs)


def wheelhouse(value: str, where: str, base: Optional[Path] = None) -> str:
    """A wheelhouse directory (``--wheelhouse``, ``wheelhouse = "DIR"``) as an absolute path: a
    relative one is taken from ``base`` (the configuration file's directory), else from the
    current directory. Whether it exists is checked by :func:`existing_wheelhouse`, where a
    build needs it (``bake-plan wheelhouse`` creates it).

    :raises UsageError: (from a flag) or :class:`ConfigError` (from a file) an empty value.
    """
    _filled(value, where)
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return os.path.normpath(str(path))


_PYTHON_VERSION = re.compile(r"3\.\d{1,3}\Z")


def python_version(value: str, where: str) -> str:
    """A Python ``3.N`` version (``--python-version``), as pip's ``--python-version`` takes it.

    :raises UsageError: empty, or not ``3.N``.
    """
    _filled(value, where)
    if not _PYTHON_VERSION.match(value):
        raise error(where, f"{value!r} is not a Python version like 3.11")
    return value


def existing_wheelhouse(path: str, where: str) -> str:
    """``path`` if it is a directory with at least one wheel (``*.whl``): a plan that sends an
    empty or missing wheelhouse would fail inside the build, offline, with pip's words.

    :raises UsageError: (flag) / :class:`ConfigError` (file): not a directory, or no wheel in it.
    """
    if not os.path.isdir(path):
        raise error(where, f"{path}: no such directory (make one: bake-plan wheelhouse --target T -o {path})")
    if not any(name.endswith(".whl") for name in os.listdir(path)):
        raise error(where, f"{path}: holds no wheel (fill it: bake-plan wheelhouse --target T -o {path})")
    return path


def existing_file(value: str, where: str, what: str) -> Path:
    """A path that must name a file now (``--sources``, ``--parent-report``)."""
    if not os.path.isfile(value):
        why = "is a directory" if os.path.isdir(value) else "no such file"
        raise UsageError(f"{where} {value}: {why} ({what})")
    return Path(value)


def parent_digests(path: str, platforms: Sequence[str] = (), where: str = "--parent-report") -> Dict[str, str]:
    """Bake target → image digest from a sitrep.json (``targets.<name>.digest``) or a buildx
    metadata file (``<name>.containerimage.digest``); each digest checked
    (:func:`bake.plan.names.check_digest`), as it goes into the plan.

    :param platforms: the platforms of this run: a sitrep target built for other platforms (a
        per-arch job handed the other arch's report) is refused. Metadata files name no platform.
    :raises UsageError: the file is unreadable, neither shape, holds a malformed digest, or
        reports a target built for other platforms.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise error(where, f"{path}: {getattr(err, 'strerror', None) or err}") from None
    except RecursionError:  # json nests no deeper than the interpreter's stack
        raise error(where, f"{path}: nested too deeply to be a report") from None
    if isinstance(data, dict):  # buildx's own keys beside the targets (buildx.build.warnings)
        data = {k: v for k, v in data.items() if not k.startswith("buildx.")}
    if isinstance(data, dict) and isinstance(data.get("targets"), dict):
        found = {n: t.get("digest") for n, t in data["targets"].items() if isinstance(t, dict)}
        for name, entry in data["targets"].items():
            built = entry.get("platforms") if isinstance(entry, dict) else None
            if found.get(name) and platforms and isinstance(built, list) and not set(platforms) <= set(built):
                raise error(where, f"{path}: target {name!r} was built for {', '.join(map(str, built))}, "
                                   f"not {', '.join(platforms)} (the report of another arch's job?)")
    elif isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        found = {n: t.get("containerimage.digest") for n, t in data.items()}
    else:
        raise error(where, f"{path}: neither a sitrep.json nor a buildx metadata file")
    out = {}
    for name, digest in found.items():
        if not digest:
            continue
        try:
            out[name] = check_digest(digest)
        except ValueError as err:
            raise error(where, f"{path}: target {name!r}: {err}") from None
    return out


_BUILDX_READS_AS = {".hcl": "hcl", ".json": "json", ".yml": "compose", ".yaml": "compose"}
"""File-name endings buildx picks its parser by (``bake.ParseFiles``; the ending's case counts):
only that parser reads the file. Any other name is tried as each format in turn."""

_FORMAT_WORDS = {"hcl": "HCL", "json": "JSON", "compose": "a Compose file"}


def plan_format(path: Optional[str], fmt: Optional[str], where: str = "-o") -> str:
    """The format (``hcl`` or ``json``) to write the plan file ``path`` in, so that
    ``docker buildx bake -f`` reads it: buildx reads ``x.hcl`` only as HCL, ``x.json`` only as
    JSON and ``x.yml``/``x.yaml`` as a Compose file; other names (``plan``, ``x.txt``, ``-``,
    ``/dev/stdout``) either way.

    :param path: ``-o`` (``None``: the default file of the format).
    :param fmt: ``--format`` when given; else the format is the one ``path``'s ending names
        (``-o plan.json`` writes JSON), else ``hcl``.
    :raises UsageError: ``path`` makes buildx read the plan as another format than ``fmt``, or as
        a Compose file, naming ``where``.
    """
    ending = os.path.splitext(path or "")[1]
    reads_as = _BUILDX_READS_AS.get(ending)
    if fmt is None:
        fmt = reads_as if reads_as in ("hcl", "json") else "hcl"
    if reads_as is None or reads_as == fmt:
        return fmt
    fix = f"name it {path[: -len(ending)]}.{fmt}" + (f" or pass --format {reads_as}" if reads_as != "compose" else "")
    raise UsageError(f"{where} {path}: buildx reads a file ending in {ending} as {_FORMAT_WORDS[reads_as]}, "
                     f"but --format {fmt} writes {_FORMAT_WORDS[fmt]} ({fix})")
