"""A stage's requirement lines, as pip reads a requirements file
(https://pip.pypa.io/en/stable/reference/requirements-file-format/): what a line is, and whether
pip can read it at all.

A line is a PEP 508 requirement (``numpy<2``, ``jaxlib @ https://…``), optionally followed by
per-requirement options (``--hash=sha256:…``, ``--config-settings``, ``--global-option``); an
option line (``-e file:///opt/paxml``, ``--extra-index-url …``, ``--pre``); a bare path or URL;
or a comment. :func:`split_option` is the one reader of an option line (``bake.pip.requirements``
uses it too); :func:`requirement_fault` is the check ``bake.plan.validate`` runs on every line.

``packaging`` is imported only for a line outside the usual shapes, so planning does not pay for it.
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

from bake.patterns import LazyPattern

_OPTION = LazyPattern(r"\s*(?P<opt>--[A-Za-z0-9-]+|-[A-Za-z])(?:[\s=]+(?P<value>.*?))?\s*$")

OPTIONS_WITH_VALUE = ("-i", "--index-url", "--extra-index-url", "-c", "--constraint", "-r", "--requirement",
                      "-e", "--editable", "-f", "--find-links", "--no-binary", "--only-binary", "--trusted-host",
                      "--use-feature")
"""The option lines pip reads in a requirements file that take a value."""
OPTION_FLAGS = ("--no-index", "--prefer-binary", "--require-hashes", "--pre")
"""The option lines pip reads in a requirements file that take none."""
PER_REQUIREMENT = ("--hash", "--config-settings", "-C", "--global-option")
"""The options pip reads after a requirement, on its line."""
_HASH = LazyPattern(r"(?:sha256|sha384|sha512):[0-9a-fA-F]+\Z")

# The usual PEP 508 line: a name, extras, then plain release clauses (1.2, ==1.*, ~=1.2) or
# "@ scheme://host/…", no marker; spaces and tabs only (packaging's whitespace, not
# str.isspace's). It passes without importing packaging, so planning does not pay for it. Any other
# line that is neither an option nor a path or URL is parsed by packaging, as pip and uv parse it.
_NAME_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_CLAUSE = rf"(?:(?:==|!=)[ \t]*{_RELEASE}(?:\.\*)?|(?:<=|>=|<|>)[ \t]*{_RELEASE}|~=[ \t]*[0-9]+(?:\.[0-9]+)+)"
SIMPLE_REQUIREMENT = LazyPattern(
    rf"{_NAME_PART}(?:[ \t]*\[[ \t]*{_NAME_PART}[ \t]*(?:,[ \t]*{_NAME_PART}[ \t]*)*\])?"
    rf"(?:[ \t]*{_CLAUSE}(?:[ \t]*,[ \t]*{_CLAUSE})*"
    r"|[ \t]*@[ \t]*(?!file:)[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~%!$&'()*+,=:@-]+(?:/[^\s;\[\]\x00-\x1f\x7f]*)?)?\Z")
_ARCHIVE = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


def split_option(line: str) -> Tuple[Optional[str], str]:
    """``("-e", "file:///opt/x")`` for ``-e file:///opt/x``; ``(None, line)`` for a line that is
    not an option. ``--opt value`` and ``--opt=value`` forms are accepted; the option comes back
    as written."""
    match = _OPTION.match(line)
    if not match:
        return None, line.strip()
    return match.group("opt"), (match.group("value") or "").strip()


def requirement_fault(line: str) -> Optional[str]:
    """Why pip (and uv) could not read ``line`` of a requirements file, or ``None``.

    An option line must be one pip reads there, with its value when it takes one; options after a
    requirement must be per-requirement ones (``--hash=ALG:HEX`` with sha256/384/512); the
    requirement itself must parse as PEP 508 (packaging's words). Comments, bare paths, URLs,
    archives and lines with ``${VARIABLES}`` are left to pip here (``bake.plan.validate`` refuses a
    stage's line holding one first, by :func:`bake.plan.text.expansion_fault`).
    The common PEP 508 shape (:data:`SIMPLE_REQUIREMENT`) passes without importing packaging.
    """
    if SIMPLE_REQUIREMENT.match(line):  # most lines: nothing more to ask
        return None
    text = re.split(r"\s#", line, maxsplit=1)[0].strip()  # pip: a comment starts at whitespace + '#'
    if not text or text.startswith("#"):
        return None
    if text.startswith("-"):
        return _option_fault(text)
    after = re.search(r"\s--?[A-Za-z]", text)  # per-requirement options follow the requirement
    text, options = (text[:after.start()], text[after.start():].strip()) if after else (text, "")
    for option in re.split(r"\s+(?=--?[A-Za-z])", options) if options else ():
        fault = _per_requirement_fault(option)
        if fault:
            return fault
    text = text.strip()
    if (text.startswith((".", "/", "~")) or "${" in text or SIMPLE_REQUIREMENT.match(text)
            or ("@" not in text and ("://" in text or "/" in text or "\\" in text or text.endswith(_ARCHIVE)))):
        return None
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(text)
    except InvalidRequirement as err:
        hint = " (a version is pinned with ==)" if re.search(r"[^=!<>~]=[^=]", text) and ";" not in text else ""
        return str(err).splitlines()[0] + hint
    return None


def _option_fault(text: str) -> Optional[str]:
    option, value = split_option(text)
    if option in OPTIONS_WITH_VALUE:
        return None if value else f"{option} needs a value"
    if option in OPTION_FLAGS:
        return None if not value else f"{option} takes no value"
    return f"{option or text.split()[0]} is no option pip reads in a requirements file"


def _per_requirement_fault(text: str) -> Optional[str]:
    option, value = split_option(text)
    if option not in PER_REQUIREMENT:
        return f"{option or text.split()[0]!r} is no option pip reads after a requirement (only {', '.join(PER_REQUIREMENT)})"
    if not value:
        return f"{option} needs a value"
    if option == "--hash" and not _HASH.match(value):
        return f"--hash={value}: not ALGORITHM:HEX with sha256, sha384 or sha512"
    return None
