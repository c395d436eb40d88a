"""Text that must stay one line, and text shown to a person.

Two kinds of hole, each closed here once:

- **Text that splits.** A value that must be one line (a requirement line, a source's URL or ref,
  a path in a bake secret entry) is split by whoever reads it line by line, and Python's
  ``str.splitlines`` (which pip reads requirement files with) splits on more than ``\\n`` and
  ``\\r``: also ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029
  (:data:`LINE_BREAKS`). A NUL can be carried by no argv, environment variable, label or file
  name. :func:`line_fault` finds both; :func:`control_fault` also finds every other control
  character, for values that are never more than printable text (URLs, refs, requirement lines).
- **Text that spoofs.** Text bake-plan prints that came from a user, a plugin or buildx may hold
  terminal control sequences (``ESC [2K`` erases the line it is on) or bidirectional controls that
  make a line read differently; :func:`printable` shows each such character escaped
  (``\\x1b``, ``\\u202e``).

Text handed to another program is checked here too, once per program:

- **git** (:func:`git_fault`): a URL or ref bake-plan passes to git (``git clone``, ``git
  fetch``, ``git ls-remote``) must not read as an option (a leading ``-``: ``--upload-pack=…``
  runs a command), nor be a transport that runs one (``ext::``, ``fd::``); a ref follows
  ``git check-ref-format``'s character rules.
- **uv and pip** (:func:`expansion_fault`): both expand ``${NAME}`` in a requirement or URL they
  read from the environment, so a ``${CI_TOKEN}`` would be replaced by the secret, sent and
  printed; such a reference (or ``$NAME``) is refused in text bake-plan hands them.

And :func:`counted`, so a person reads "1 target", not "1 targets".
"""

from __future__ import annotations

from typing import Optional

from bake.patterns import LazyPattern

LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Every character ``str.splitlines`` splits on (and so pip, reading a requirements file)."""

NUL = "\x00"

# C0 and C1 controls, DEL, the line and paragraph separators, the bidirectional controls
# (U+061C, U+200E/F, U+202A-E, U+2066-9: "Trojan Source") and lone surrogates (undecodable bytes,
# which a strict UTF-8 stream cannot even write).
_CONTROL = LazyPattern("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMES = {"\x00": "a NUL", "\n": "a line feed", "\r": "a carriage return", "\x0b": "a vertical tab",
          "\x0c": "a form feed", "\x1b": "an escape", "\x85": "a next-line", "\u2028": "a line separator",
          "\u2029": "a paragraph separator", "\t": "a tab", "\x7f": "a delete"}


def describe(char: str) -> str:
    """A character as an error line names it: ``a form feed (U+000C)``, ``a control character (U+001F)``."""
    name = _NAMES.get(char)
    if name is None:
        name = "a line break" if char in LINE_BREAKS else "a control character"
    return f"{name} (U+{ord(char):04X})"


def line_fault(value: str) -> Optional[str]:
    """What keeps ``value`` from being one line of text anything can carry: the first character
    ``str.splitlines`` splits on, or a NUL, as :func:`describe` names it; ``None`` when there is none."""
    for char in value:
        if char in LINE_BREAKS or char == NUL:
            return describe(char)
    return None


_SURROGATES = "".join(map(chr, range(0xD800, 0xE000)))


def label_fault(key: str, value: str) -> Optional[str]:
    """What a label's key or value holds that an image's metadata must not (it is printed and
    pushed): a control character or a bidirectional control, or ``None``. A value may span lines
    (a description), as OCI labels do: tab, line feed and carriage return; a lone surrogate is
    left to :func:`bake.plan.checks.check_text`, which names it."""
    return control_fault(key, allow=_SURROGATES) or control_fault(value, allow=_SURROGATES + "\t\n\r")


def control_fault(value: str, allow: str = "\t") -> Optional[str]:
    """Like :func:`line_fault`, for a value that is only ever printable text (a URL, a git ref, a
    requirement line): also any other control character, bidirectional control or lone
    surrogate, except those in ``allow`` (default: a tab)."""
    if value.isprintable():  # nearly always; every character _CONTROL finds is one Python calls unprintable
        return None
    for match in _CONTROL.finditer(value):
        if match.group() not in allow:
            return describe(match.group())
    return None


def _escape(match: "re.Match[str]") -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, keep: str = "\t") -> str:
    """``text`` with every control character, line or paragraph separator, bidirectional control
    and lone surrogate written as an escape (ESC as ``\\x1b``, a newline as ``\\x0a``, U+2028 as
    ``\\u2028``), except those in ``keep`` (default: a tab), so a terminal shows what the text
    holds instead of obeying it. Idempotent: its output holds no such character."""
    if text.isprintable() or not _CONTROL.search(text):  # nearly always: no copy
        return text
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)


_BLANKS = LazyPattern(r"[ \t\r\n]+")


def one_line(text: str) -> str:
    """A message as one printable line: runs of spaces, tabs and newlines become one space
    (a plugin's multi-line message reads on), every other control character is escaped
    (:func:`printable`)."""
    return printable(_BLANKS.sub(" ", text).strip(), keep="")


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless one: ``counted(1, "target")`` is ``"1 target"``,
    ``counted(4, "target")`` ``"4 targets"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, ``…`` in the last place when it was longer, so a cut
    line says it was cut."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


_GIT_REF_BAD = LazyPattern(r"[\s~^:?*\[\\]|\.\.|@\{|//|/\.|\.lock(?:/|\Z)|[./]\Z")
_DANGEROUS_TRANSPORT = LazyPattern(r"(?i)(?:ext|fd)::")


def git_fault(value: str, kind: str = "ref") -> Optional[str]:
    """Why ``value`` must not be handed to git as a ``kind`` (``"ref"`` or ``"url"``), or ``None``.

    Both: not empty, one line of printable text (:func:`control_fault`, no tab), no leading
    ``-`` (git would read it as an option: ``--upload-pack=CMD`` runs ``CMD``). A URL: no
    ``ext::``/``fd::`` transport (each runs a command or reads a descriptor). A ref:
    ``git check-ref-format``'s character rules (no space, ``~ ^ : ? * [ \\``, ``..``, ``@{``,
    ``//``, ``/.``, a ``.lock`` component, a trailing ``.`` or ``/``), so a branch, a tag, a
    ``refs/…`` name, ``pull/12/head`` or a commit pass.

    :returns: a phrase such as ``"starts with '-': git would take it for an option"``.
    """
    if not isinstance(value, str) or not value:
        return "is empty"
    fault = control_fault(value, allow="")
    if fault:
        return f"holds {fault}"
    if value.startswith("-"):
        return "starts with '-': git would take it for an option"
    if kind == "url":
        if _DANGEROUS_TRANSPORT.match(value):
            return f"uses git's {value.split('::', 1)[0].lower()}:: transport, which runs a command or reads a descriptor"
        return None
    bad = _GIT_REF_BAD.search(value)
    if bad:
        return f"holds {bad.group()!r}, which git refuses in a ref name"
    return None


_EXPANSION = LazyPattern(r"\$(?:\{|[A-Za-z_][A-Za-z0-9_]*)")


def expansion_fault(value: str) -> Optional[str]:
    """Why uv or pip would not take ``value`` (a URL or a requirement line) literally, or ``None``:
    a ``${NAME}`` (or ``$NAME``) reference, which both expand from the environment, so a secret
    such as ``${CI_TOKEN}`` would be sent to the server and printed in their output.

    :returns: ``"holds '${CI_TOKEN}', which uv and pip replace by the environment variable's value"``.
    """
    match = _EXPANSION.search(value)
    if not match:
        return None
    ref = match.group()
    if ref == "${":
        end = value.find("}", match.start())
        ref = value[match.start():end + 1] if end != -1 else value[match.start():match.start() + 20]
    return f"holds {ref!r}, which uv and pip replace by the environment variable's value"
