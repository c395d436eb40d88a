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
import math
import os
import re
import stat
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Tuple

from bake.documents import DocumentError, not_regular, read_json
from bake.errors import ConfigError, UsageError, did_you_mean
from bake.patterns import LazyPattern
from bake.plan.names import (
    check_digest,
    check_platform,
    check_reference,
    check_registry,
    normalise_reference,
    repository_name,
)
from bake.plan.compose import ParentImage
from bake.plan.render import shell_word
from bake.plan.secrets import SecretSpec, parse_secret

DATE_POLICIES = ("auto", "today", "source-date-epoch")
ENV_EPOCH = "env SOURCE_DATE_EPOCH"
_DAY = LazyPattern(r"\d{4}-\d{2}-\d{2}\Z")
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


ENTITLEMENTS = ("network.host", "security.insecure")
"""The privileges beyond reading its contexts a build may be granted (``--allow``, ``allow = [...]``),
in buildx's own spelling (``docker buildx bake --allow=network.host``)."""


def entitlements(values: Sequence[str], where: str) -> Tuple[str, ...]:
    """Privileges granted to the build: each one of :data:`ENTITLEMENTS` (a value may be a comma
    list), de-duplicated, sorted.

    :raises UsageError: (a flag, the environment) or :class:`ConfigError` (a file): an unknown
        one, naming ``where`` and the known ones.
    """
    out = set()
    for value in values:
        for name in str(value).split(","):
            name = name.strip()
            if name not in ENTITLEMENTS:
                hint = did_you_mean(name, ENTITLEMENTS) or ""
                raise error(where, f"{name!r} is not a privilege bake-plan grants{hint} "
                                   f"(buildx's entitlements: {', '.join(ENTITLEMENTS)})")
            out.add(name)
    return tuple(sorted(out))


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


_YES = ("1", "true", "yes", "on")
_NO = ("0", "false", "no", "off")


def boolean(value: str, where: str) -> bool:
    """A yes/no setting written as text (an environment variable, ``BAKE_PLAN_PULL``): ``1``,
    ``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off``, any case (the words pip takes
    for its ``PIP_*`` switches; the flag is ``--pull``/``--no-pull``, the file key a TOML boolean).

    :raises UsageError: anything else, naming ``where``.
    """
    if _filled(value, where).strip().lower() in _YES:
        return True
    if value.strip().lower() in _NO:
        return False
    raise error(where, f"{value!r} is not a boolean ({'/'.join(_YES)} or {'/'.join(_NO)})")


EPOCH_DAY = datetime.date(1970, 1, 1)
"""The first day a plan can have: every target's ``SOURCE_DATE_EPOCH`` is its midnight in Unix
seconds, which the reproducible-builds spec (and buildx) read as a non-negative integer."""


def date_policy(value, where: str) -> str:
    """``auto``, ``today``, ``source-date-epoch`` or a real ``YYYY-MM-DD`` day from 1970-01-01 on
    (:data:`EPOCH_DAY`; a TOML date is that day).

    :raises UsageError: anything else, naming ``where``.
    """
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = value.isoformat()
    if value in DATE_POLICIES:
        return value
    if _is_day(_filled(value, where)):
        if datetime.date.fromisoformat(value) < EPOCH_DAY:
            raise error(where, f"{value!r} is before {EPOCH_DAY.isoformat()}: its SOURCE_DATE_EPOCH would be "
                               "negative, which builds do not take")
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


def resolve_date(policy: str, environ: Mapping[str, str], where: str = "date") -> Tuple[datetime.date, Optional[str]]:
    """The build date a policy gives: ``auto`` is ``SOURCE_DATE_EPOCH`` (reproducible-builds.org)
    when set, else today in UTC. ``where``: where the policy came from, for the message (``--date``,
    ``env BAKE_PLAN_DATE``, ``bake-plan.toml: date``; :func:`error`).

    :returns: the date and, when it came from the environment, :data:`ENV_EPOCH`.
    :raises UsageError: ``SOURCE_DATE_EPOCH`` is not an integer, or unset for ``source-date-epoch``.
    """
    if is_day_policy(policy):
        return datetime.date.fromisoformat(policy), None
    epoch = environ.get("SOURCE_DATE_EPOCH")
    if policy == "source-date-epoch" and not epoch:
        raise error(where, "source-date-epoch, but SOURCE_DATE_EPOCH is not set")
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
    """``{original: replacement}`` from pairs (:func:`base_image_pair` each), first spelling kept.
    Originals are compared as one image however they are spelled
    (:func:`bake.plan.names.normalise_reference`: ``busybox``, ``busybox:latest`` and
    ``docker.io/library/busybox:latest`` are one), so the same pair twice is kept once.

    :raises UsageError: (flags) / :class:`ConfigError` (file): a bad pair, or one image given two
        different replacements, naming both.
    """
    out: Dict[str, str] = {}
    seen: Dict[str, Tuple[str, str]] = {}  # normalised original → the pair that first named it
    for original, replacement in pairs:
        base_image_pair(original, replacement, where)
        image = normalise_reference(original)
        first = seen.setdefault(image, (original, replacement))
        if normalise_reference(first[1]) != normalise_reference(replacement):
            raise error(where, f"'{first[0]}={first[1]}' and '{original}={replacement}' replace one image "
                               f"({image}) differently: give one replacement")
        if first == (original, replacement):
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


def sbom_generator(value: str, where: str) -> str:
    """The SBOM generator image (``--sbom-generator``, ``sbom-generator``): a whole image reference
    (:func:`bake.plan.names.check_reference`) that BuildKit pulls and runs by the SBOM generator
    protocol (buildkit docs, attestations/sbom-protocol.md), so it must be in a registry the
    builder reaches."""
    _filled(value, where)
    try:
        return check_reference(value)
    except ValueError as err:
        raise error(where, str(err)) from None


def install_requirement(value: str, where: str) -> str:
    """The requirement the generated CI workflow installs bake-plan from (``install``): one pip
    requirement line naming ``bake-plan`` (PEP 508, read by :mod:`packaging`), a version
    (``bake-plan==0.2.0``) or a direct reference (``bake-plan @ git+https://…@v0.2``)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    _filled(value, where)
    if any(not c.isprintable() for c in value):
        raise error(where, f"{value!r} holds a line break or a control character: one requirement line")
    try:
        requirement = Requirement(value)
    except InvalidRequirement as err:
        raise error(where, f"{value!r} is not a pip requirement: {err}") from None
    if canonicalize_name(requirement.name) != "bake-plan":
        raise error(where, f"{value!r} names {requirement.name!r}; it must install bake-plan "
                           "(bake-plan==VERSION, or bake-plan @ URL)")
    return value.strip()


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


PROGRESS_MODES = ("auto", "tty", "plain", "quiet", "rawjson")
"""``build --progress`` / ``progress``: buildx's own words for its progress output (``docker
buildx bake --progress``); ``auto`` is ``tty`` on a terminal, else ``plain``."""


def progress(value: str, where: str) -> str:
    """One of :data:`PROGRESS_MODES`. :raises UsageError/ConfigError: another word, naming the nearest."""
    _filled(value, where)
    if value not in PROGRESS_MODES:
        raise error(where, f"{value!r} is not a progress mode{did_you_mean(value, PROGRESS_MODES)} "
                           f"(choose from {', '.join(PROGRESS_MODES)})")
    return value


_DECIMAL = LazyPattern(r"[0-9]+(\.[0-9]+)?", re.ASCII)


def size_ratio(value, where: str) -> float:
    """``publish --arch-size-ratio`` / ``arch-size-ratio``: how many times the smallest arch's image
    the largest may be (:func:`bake.plan.gate.size_reason`), a finite number of at least 1 (an
    integer, a float, or its text: ``2``, ``2.5``).

    :raises UsageError/ConfigError: anything else, one line naming where it came from."""
    if isinstance(value, str):
        _filled(value, where)
    try:
        if isinstance(value, bool) or (isinstance(value, str) and not _DECIMAL.fullmatch(value)):
            ratio = math.nan  # float() also takes "1_0", " 2" and other scripts' digits
        else:
            ratio = float(value)
    except (TypeError, ValueError):
        ratio = math.nan
    if not (math.isfinite(ratio) and ratio >= 1):
        raise error(where, f"{value!r:.40} is not a size ratio: a number of at least 1 (the largest arch's image "
                           "over the smallest's, e.g. 2)")
    return ratio


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


_PYTHON_VERSION = LazyPattern(r"3\.(?:0|[1-9][0-9]{0,2})\Z")


def python_version(value: str, where: str) -> str:
    """A Python ``3.N`` version (``--python-version``), as pip's ``--python-version`` takes it:
    MAJOR.MINOR in ASCII digits, without a leading zero (``3.011`` is refused, not read as 3.11).

    :raises UsageError: empty, or not ``3.N``.
    """
    _filled(value, where)
    if not _PYTHON_VERSION.match(value):
        raise error(where, f"{value!r} is not a Python version like 3.11 (MAJOR.MINOR, no leading zeros)")
    return value


def python(value: str, where: str = "--python") -> str:
    """An interpreter for ``bake-plan lock`` (``--python``): a name on ``PATH`` or a path. Whether
    it is a Python interpreter is asked when the lock runs (:func:`bake.pip.lock.python_version`).

    :raises UsageError: empty.
    """
    return _filled(value, where)


def index_url(value: str, where: str = "--index-url") -> str:
    """An ``-i``/``--extra-index-url`` value as pip and uv take it: an ``http(s)://`` or ``file:``
    URL of a simple repository (PEP 503), or a local directory laid out the same way that is there
    now. Anything else made ``lock`` fail late, as "no distribution found", exit 1.

    :raises UsageError: empty; not a URL with a host, and not a directory.
    """
    _filled(value, where)
    import urllib.parse

    parts = urllib.parse.urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if not parts.hostname:
            raise UsageError(f"{where} {value}: a URL names its host ({scheme}://HOST/simple)")
        return value
    if scheme == "file":
        return find_links(value, where)
    if len(scheme) > 1:  # a scheme pip cannot read (a one-letter one is a Windows drive)
        raise UsageError(f"{where} {value}: not a URL pip or uv reads (http, https or file)")
    if not os.path.isdir(value):
        raise UsageError(f"{where} {value}: not a URL (http(s)://HOST/simple) nor a directory")
    return value


def find_links(value: str, where: str = "--find-links") -> str:
    """A ``-f``/``--find-links`` location as pip and uv take it: a URL; or a local directory of
    archives, or an HTML page of links, that is there now, by path or as a ``file:`` URL of this
    machine (``file:/x``, ``file:///x``, ``file://localhost/x``; the scheme comes back in lower
    case, which uv needs). pip skips a missing one with a warning and uv stops on it with its own
    words, after the plugins have loaded.

    :raises UsageError: empty; a ``file:`` URL of another host; a local path that is not there, or
        is a file other than an HTML page.
    """
    _filled(value, where)
    scheme, colon, rest = value.partition(":")
    if colon and scheme.lower() == "file":
        import urllib.parse

        value = "file:" + rest
        parts = urllib.parse.urlsplit(value)
        if parts.netloc.lower() not in ("", "localhost"):
            raise UsageError(f"{where} {value}: a file: URL names this machine's files (file:///path), "
                             f"not {parts.netloc}'s")
        path = urllib.parse.unquote(parts.path)
        if not path.startswith("/"):  # uv reads file:x as /x
            raise UsageError(f"{where} {value}: a file: URL's path is absolute (file:///path); give a relative "
                             "directory as a plain path")
    elif "://" in value:
        return value
    else:
        path = value
    if not os.path.exists(path):
        raise UsageError(f"{where} {value}: no such directory or file")
    if not os.path.isdir(path) and not path.lower().endswith((".html", ".htm")):
        raise UsageError(f"{where} {value}: not a directory (pip and uv read a directory of archives, or an "
                         "HTML page of links)")
    return value


def _makeable(path: str, where: str, value: str) -> None:
    """That ``mkdir -p path`` can make ``path`` (a directory bake-plan makes when missing): no part
    of it, from the top down to the first missing one, is a file or a symbolic link to nothing
    (``mkdir`` would say only "File exists", naming no option). Past the first missing part
    nothing is on disk, so ``new/../afile`` there is read as ``afile``, as ``mkdir -p`` meets it.

    :raises UsageError: naming ``where``, the value and the part in the way.
    """
    parts = Path(path).parts
    done = ""
    for i, name in enumerate(parts):
        part = os.path.join(done, name) if done else name
        here = "" if part == value else f"{part} "
        if os.path.islink(part) and not os.path.exists(part):
            raise UsageError(f"{where} {value}: {here}{'is ' if here else ''}a symbolic link to {os.readlink(part)}, "
                             "which is not there")
        if not os.path.exists(part):
            missing = os.path.join(*parts[i:])
            rest = os.path.normpath(missing)  # never on disk: no link to follow; differs only for a ".."
            if rest != missing:
                _makeable(os.path.join(done, rest) if done else rest, where, value)
            return
        if not os.path.isdir(part):
            raise UsageError(f"{where} {value}: {here}is not a directory")
        done = part


def _directory(value: str, where: str, must_exist: bool, hint: str = "") -> Path:
    """A directory path from ``where``: not empty, and makeable (:func:`_makeable`: no part of it a
    file or a symbolic link to nothing); with ``must_exist``, there now."""
    _filled(value, where)
    _makeable(value, where, value)
    if must_exist and not os.path.isdir(value):
        raise UsageError(f"{where} {value}: no such directory{hint}")
    return Path(value)


def locks_dir(value: str, where: str = "--locks-dir", must_exist: bool = False) -> Path:
    """The locks directory (``--locks-dir``); ``must_exist`` for a ``--locked`` plan, which reads
    the locks from it (``bake-plan lock`` makes it).

    :raises UsageError: empty, an existing file, or (``must_exist``) missing.
    """
    return _directory(value, where, must_exist,
                      f" (make the locks there: bake-plan lock --target T --locks-dir {shell_word(value)})")


def metadata_file(value: str, where: str = "--metadata-file") -> Path:
    """The file buildx writes its build metadata to (``--metadata-file``): a file name, not a
    directory's (``meta/``, an existing directory), in a directory that can be made.

    :raises UsageError: as said.
    """
    _filled(value, where)
    if value.endswith(("/", os.sep)) or os.path.isdir(value):
        raise UsageError(f"{where} {value}: names a directory; give the file buildx writes (DIR/meta.json)")
    _makeable(os.path.dirname(value) or ".", where, value)
    return Path(value)


def sitrep_dir(value: str, where: str = "--sitrep-dir") -> Path:
    """The directory of a build's reports (``--sitrep-dir``; made when missing).

    :raises UsageError: empty, or an existing file.
    """
    return _directory(value, where, must_exist=False)


def wheelhouse_output(value: str, where: str = "-o") -> str:
    """The directory ``bake-plan wheelhouse -o DIR`` fills: not empty, not ``-`` (a wheelhouse is
    a directory, never stdout), not an existing file.

    :raises UsageError: as said.
    """
    _filled(value, where)
    if value == "-":
        raise UsageError(f"{where} -: bake-plan wheelhouse fills a directory, not stdout; give -o DIR")
    return str(_directory(value, where, must_exist=False))


def existing_wheelhouse(path: str, where: str) -> str:
    """``path`` if it is a directory with at least one wheel (``*.whl``), each a wheel: a plan
    that sends an empty, missing or broken wheelhouse would fail inside the build, offline, with
    pip's words.

    :raises UsageError: (flag) / :class:`ConfigError` (file): missing, not a directory, no wheel
        in it, or a ``*.whl`` that is not a wheel (its name, or not a zip archive), naming the file.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise error(where, f"{path}: is not a directory (a wheelhouse is a directory of wheels)")
    if not os.path.isdir(path):
        raise error(where, f"{path}: no such directory (make one: bake-plan wheelhouse --target T -o {path})")
    wheels = sorted(name for name in os.listdir(path) if name.endswith(".whl"))
    if not wheels:
        raise error(where, f"{path}: holds no wheel (fill it: bake-plan wheelhouse --target T -o {path})")
    for name in wheels:
        why = _not_a_wheel(os.path.join(path, name))
        if why:
            raise error(where, f"{os.path.join(path, name)}: not a wheel ({why}); remove it or fill the "
                               f"wheelhouse again: bake-plan wheelhouse --target T -o {path}")
    return path


def _not_a_wheel(path: str) -> Optional[str]:
    """Why the file at ``path`` is not a wheel (PEP 427 name, a zip archive), or ``None``."""
    import zipfile

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        parse_wheel_filename(os.path.basename(path))
    except InvalidWheelFilename as err:
        return f"its name: {err}"
    if not os.path.isfile(path):
        return "not a file"
    try:
        if not zipfile.is_zipfile(path):
            return "not a zip archive"
    except OSError as err:
        return err.strerror or str(err)
    return None


def existing_file(value: str, where: str, what: str) -> Path:
    """A path that must name a regular file now (``--sources``, ``--parent-report``).

    :raises UsageError: ``no such file``, ``is a directory``, or ``is not a regular file (a FIFO)``
        (a device, a socket), naming ``where``, the path and ``what``.
    """
    try:
        mode = os.stat(value).st_mode
    except OSError:
        raise UsageError(f"{where} {value}: no such file ({what})") from None
    if not stat.S_ISREG(mode):
        why = "is a directory" if stat.S_ISDIR(mode) else str(not_regular(mode))
        raise UsageError(f"{where} {value}: {why} ({what})")
    return Path(value)


def parent_digests(path: str, where: str = "--parent-report") -> Dict[str, ParentImage]:
    """What a parent job's report says of each target it names: bake target →
    :class:`bake.plan.compose.ParentImage` (digest, and what the report tells of where and for
    which platforms it was pushed and whether it passed), from a sitrep.json
    (``targets.<name>``: ``digest``, ``platforms``, ``tags``, ``outcome``) or a buildx metadata
    file (``<name>``: ``containerimage.digest``, ``image.name``). Each digest is checked
    (:func:`bake.plan.names.check_digest`), as it goes into the plan; whether the report fits the
    plan (its registry, its platforms, a parent that failed) is checked where the plan pins it
    (:meth:`bake.plan.compose.ParentImage.pin`).

    :raises UsageError: the file is unreadable, neither shape, or holds a malformed digest.
    """
    try:
        data = read_json(path)
    except OSError as err:
        raise error(where, f"{path}: {err.strerror or err}") from None
    except DocumentError as err:  # not UTF-8, not JSON, nested too deeply
        raise error(where, f"{path}: {err}") from None
    if isinstance(data, dict):  # buildx's own keys beside the targets (buildx.build.warnings)
        data = {k: v for k, v in data.items() if not k.startswith("buildx.")}
    if isinstance(data, dict) and isinstance(data.get("targets"), dict):
        entries = {n: t for n, t in data["targets"].items() if isinstance(t, dict)}
        found = {n: (t.get("digest"), t.get("platforms"), t.get("tags"), t.get("outcome")) for n, t in entries.items()}
    elif isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        found = {n: (t.get("containerimage.digest"), None, str(t.get("image.name") or "").split(","), None)
                 for n, t in data.items()}
    else:
        raise error(where, f"{path}: neither a sitrep.json nor a buildx metadata file")
    out = {}
    for name, (digest, built, tags, outcome) in found.items():
        if digest:
            try:
                check_digest(digest)
            except ValueError as err:
                raise error(where, f"{path}: target {name!r}: {err}") from None
        elif outcome in (None, "pass"):
            continue  # named without an image and without saying why: as if not named
        repositories = []
        for tag in tags if isinstance(tags, list) else ():
            try:
                repositories.append(repository_name(tag))
            except (ValueError, TypeError):
                continue  # not an image reference: the report does not say where this one went
        out[name] = ParentImage(
            digest=digest or None, report=str(path),
            platforms=tuple(map(str, built)) if isinstance(built, list) else None,
            repositories=tuple(dict.fromkeys(repositories)), outcome=outcome if isinstance(outcome, str) else None,
        )
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
