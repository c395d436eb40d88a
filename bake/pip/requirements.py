"""Requirement lines, as a stage writes them to ``/opt/pip-tools.d/requirements-<stage>.in``.

A line is pip's requirements-file syntax (https://pip.pypa.io/en/stable/reference/requirements-file-format/):
a PEP 508 requirement (``numpy<2``, ``jaxlib @ file:///opt/jaxlib/dist/x.whl``), an editable
(``-e file:///opt/paxml``), a bare path or URL, or an option (``--extra-index-url …``,
``-f …``, ``-r …``). This module answers the few questions bake-plan asks about one line: which
project it names, which local path it refers to, and whether its environment marker holds on a
given platform. It rewrites in-image paths to host paths (for ``bake-plan lock``) and back.

``packaging`` is imported lazily: ``bake-plan plan`` needs none of it.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import PurePosixPath
from typing import Dict, Mapping, Optional, Tuple

from bake.errors import UsageError
from bake.patterns import LazyPattern
from bake.plan.requirement_lines import split_option
from bake.plan.text import expansion_fault

# Options whose value is a path or URL that may point into the image.
_LOCATION_OPTIONS = ("-e", "--editable", "-f", "--find-links", "-r", "--requirement", "-c", "--constraint",
                     "-i", "--index-url", "--extra-index-url")
_OPTION_VALUE = LazyPattern(r"\s*(?:--[A-Za-z0-9-]+|-[A-Za-z])[\s=]*(?P<loc>[^\s]+)")
_URL_REQUIREMENT = LazyPattern(r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*@\s*(?P<loc>[^\s;]+)")
_BARE_LOCATION = LazyPattern(r"\s*(?P<loc>(?:\.|/|file:|[A-Za-z][A-Za-z0-9+.-]*://)[^\s;]*)")
# Options that tell pip where to find packages: pip-sync in the image still needs them, so a lock
# carries them at its top (stages/scripts/pip-finalize.sh does the same).
INDEX_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--trusted-host", "--no-index")

# buildx platform → the ``platform_machine`` PEP 508 markers see on it (uname -m in the image).
PLATFORM_MACHINE = {
    "linux/amd64": "x86_64",
    "linux/arm64": "aarch64",
    "linux/arm/v7": "armv7l",
    "linux/arm/v6": "armv6l",
    "linux/ppc64le": "ppc64le",
    "linux/s390x": "s390x",
    "linux/riscv64": "riscv64",
    "linux/386": "i686",
}


def refuse_variables(line: str, where: str) -> None:
    """The one check of requirement text bake-plan hands to pip or uv on the host (``bake-plan
    lock``, ``bake-plan wheelhouse``): a ``${NAME}`` there is expanded by them from the environment
    (``http://h/${CI_TOKEN}/x.git`` sends the token to ``h`` and prints it), so it is refused, by
    the rule :func:`bake.plan.text.expansion_fault` keeps for every text uv and pip read.

    :param where: what the line is, for the message (``"stage 'x' (plugin 'p'), requirement line …"``).
    :raises UsageError: one line naming ``where`` and the reference.
    """
    fault = expansion_fault(line)  # the one rule for text uv and pip read (bake.plan.text)
    if fault is not None:
        raise UsageError(f"{where} {fault} (sent to the host the line names, and printed); bake-plan hands "
                         "no such line to them on the host: write the value itself, or give a secret "
                         "through pip's configuration (PIP_INDEX_URL, a netrc)")


def is_index_option(line: str) -> bool:
    """True for ``--extra-index-url``, ``-f`` and the other options that say where packages are."""
    option, _ = split_option(line)
    return option in INDEX_OPTIONS


def _location_span(line: str) -> Optional[Tuple[int, int]]:
    """Where in ``line`` the path or URL it refers to is, as ``(start, end)``; ``None`` if it names none."""
    option, value = split_option(line)
    if option is not None:
        if option not in _LOCATION_OPTIONS or not value:
            return None
        match = _OPTION_VALUE.match(line)
    else:
        match = _URL_REQUIREMENT.match(line) or _BARE_LOCATION.match(line)
    return match.span("loc") if match else None


def location(line: str) -> Optional[str]:
    """The path or URL a line refers to (``file:///opt/paxml`` for ``-e file:///opt/paxml``), or ``None``."""
    span = _location_span(line)
    return line[span[0]:span[1]] if span else None


def local_path(loc: str) -> Optional[str]:
    """The local filesystem path a location means: ``file:///opt/x`` and ``/opt/x`` give
    ``/opt/x``; a relative ``./x`` comes back as is; remote URLs (``https://``, ``git+…``) give
    ``None``. A URL fragment (``#egg=…``) is dropped."""
    if loc.startswith("file:"):
        parsed = urllib.parse.urlsplit(loc)
        if parsed.netloc not in ("", "localhost"):
            return None
        return urllib.parse.unquote(parsed.path)
    if "://" in loc or loc.startswith("git+"):
        return None
    return loc.split("#", 1)[0]


def _map_prefix(path: str, mapping: Mapping[str, str]) -> Optional[str]:
    for key in sorted(mapping, key=len, reverse=True):
        base = key.rstrip("/") or "/"
        if path == base or path.startswith(base.rstrip("/") + "/"):
            return mapping[key].rstrip("/") + path[len(base.rstrip("/")):]
    return None


def to_host(line: str, host_paths: Mapping[str, str]) -> Tuple[Optional[str], Optional[str]]:
    """Rewrite an in-image line for resolving on the host.

    :param host_paths: in-image absolute path → host absolute path (longest prefix wins).
    :returns: ``(host_line, None)``: the line with its local path replaced (unchanged when it
        names no local path); or ``(None, path)`` when it names a local path that ``host_paths``
        does not cover (the in-image ``path``).
    """
    span = _location_span(line)
    if span is None:
        return line, None
    loc = line[span[0]:span[1]]
    path = local_path(loc)
    if path is None:
        return line, None
    if not path.startswith("/"):
        return None, path
    host = _map_prefix(str(PurePosixPath(path)), host_paths)
    if host is None:
        return None, path
    # Always a file:// URL on the host: a host path may hold spaces, which a bare path cannot.
    fragment = urllib.parse.urlsplit(loc).fragment if loc.startswith("file:") else loc.partition("#")[2]
    new = file_uri(host) + (f"#{fragment}" if fragment else "")
    return line[:span[0]] + new + line[span[1]:], None


def file_uri(path: str) -> str:
    """``file://`` URL of an absolute path, percent-encoded the way pip writes it (``file:///a%20b``)."""
    return "file://" + urllib.parse.quote(path)


def to_image(text: str, host_paths: Mapping[str, str]) -> str:
    """Undo :func:`to_host` on a whole lock: every ``file://<host path>`` becomes
    ``file://<in-image path>`` again. Paths are matched whole (``/a/delta`` never rewrites
    ``/a/delta2``)."""
    pairs = sorted(((image, host) for image, host in host_paths.items()), key=lambda p: len(p[1]), reverse=True)
    for image, host in pairs:
        host, image = host.rstrip("/"), image.rstrip("/")
        for old, new in ((file_uri(host), file_uri(image)), ("file://" + host, "file://" + image)):
            text = re.sub(re.escape(old) + r"(?=[/#\s;]|$)", lambda _m, new=new: new, text, flags=re.M)
    return text


def project_name(line: str) -> Optional[str]:
    """The canonical project name a PEP 508 line asks for (``Typing_Extensions>=4`` →
    ``typing-extensions``), or ``None`` for options, editables and bare paths."""
    req = parse(line)
    return None if req is None else _canonical(req.name)


def parse(line: str):
    """The line as a ``packaging.requirements.Requirement``, or ``None`` when it is not a PEP 508 line."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = line.split(" #", 1)[0].strip()
    if not text or text.startswith(("-", "#", ".", "/")):
        return None
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name (``Typing_Extensions`` → ``typing-extensions``)."""
    return _canonical(name)


def marker_environment(platform: str, python: Optional[str] = None,
                       environment: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The PEP 508 marker environment of the running interpreter (or ``environment``, another
    interpreter's, ``lock --python``), moved to ``platform`` (``linux/arm64``: ``platform_machine``
    ``aarch64``, ``sys_platform`` ``linux``). Python version markers keep the interpreter's values
    (the lock is resolved for it), unless ``python`` (``"3.9"``, ``"3.9.18"``) names the image's
    Python the lock is resolved for."""
    from packaging.markers import default_environment

    env = dict(environment or default_environment())
    env.update(platform_machine=PLATFORM_MACHINE.get(platform, env["platform_machine"]),
               sys_platform="linux", platform_system="Linux", os_name="posix")
    if python:
        env.update(_python_markers(python))
    return env


def _python_markers(python: str) -> Dict[str, str]:
    """``python_version`` and ``python_full_version`` for ``"3.11"`` (taken as 3.11.0, as uv
    takes it) or ``"3.11.2"``."""
    full = python if python.count(".") >= 2 else python + ".0"
    return {"python_version": ".".join(full.split(".")[:2]), "python_full_version": full}


def for_platform(line: str, platform: str, python: Optional[str] = None,
                 environment: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The line as the host's pip-compile should see it for an image on ``platform``.

    With ``python`` (the image's Python, which the resolver evaluates markers for), Python version
    markers are evaluated for it on both sides. ``environment``: the marker environment of the
    interpreter the resolver evaluates markers for (``lock --python``), default bake-plan's own.

    A line without a marker, or whose marker gives the same answer on the host and on
    ``platform``, comes back unchanged (pip-compile evaluates it the same way). A marker that
    holds on ``platform`` but not on the host is dropped from the line (so the host resolves it);
    a line whose marker does not hold on ``platform`` gives ``None``.
    """
    if ";" not in line:  # PEP 508: no marker without a ';' (and no packaging to import for it)
        return line
    req = parse(line)
    if req is None or req.marker is None:
        return line
    from packaging.markers import default_environment

    on_platform = req.marker.evaluate(marker_environment(platform, python, environment))
    host = dict(environment or default_environment())
    if python:
        host.update(_python_markers(python))
    on_host = req.marker.evaluate(host)
    if not on_platform:
        return None
    if on_host:
        return line
    req.marker = None
    return str(req)


def same_requirement(printed: str, line: str) -> bool:
    """True when pip's rendering of a requirement (``alpha<2``, as in "The user requested alpha<2")
    is what ``line`` asks for: same project, and same version specifiers when both have them."""
    a, b = parse(printed), parse(line)
    if a is None or b is None:
        return False
    if _canonical(a.name) != _canonical(b.name):
        return False
    return a.specifier == b.specifier or not str(a.specifier) or not str(b.specifier)

