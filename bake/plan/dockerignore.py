"""Which files of a build context BuildKit sends: the context's ``.dockerignore`` rules.

Pure (no Docker): the rules of moby's ``patternmatcher`` and ``ignorefile`` packages, which
buildx and BuildKit use, so the input digest (:mod:`bake.plan.inputs`) counts exactly the files a
build can see:

- one pattern a line; a line starting with ``#`` is a comment (only there: ``a #b`` is a
  pattern); blank lines are skipped; a UTF-8 byte order mark at the start is dropped;
- each pattern is trimmed and cleaned as a path (``a//b/../c`` → ``a/c``); a leading ``/`` is
  dropped (patterns are relative to the context's root);
- ``*`` is any run of characters but ``/``, ``?`` one such character, ``[…]`` a class, ``\\``
  escapes the next character; ``**`` is any number of directories (``**/x``: ``x`` at any
  depth; ``d/**``: everything under ``d``);
- a pattern matches a path or any of its parent directories (``d`` leaves out ``d/a/b``);
- ``!pattern`` puts back what an earlier pattern left out; the last pattern that matches decides.

Which file: ``<Dockerfile>.dockerignore`` beside the Dockerfile (``app.Dockerfile.dockerignore``)
when there is one, else ``.dockerignore`` at the context's root; a named context that is a local
directory reads its own ``.dockerignore``.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import List, Optional, Sequence, Tuple

_REGEX_SPECIAL = frozenset(".+()|{}$")
"""Characters a pattern means literally that a regular expression would not."""


def clean(path: str) -> str:
    """A slash-separated path cleaned as Go's ``path.Clean`` does: ``.`` and ``..`` resolved,
    doubled slashes merged, no trailing slash (``""`` → ``"."``)."""
    out = posixpath.normpath(path) if path else "."
    if out.startswith("//"):  # POSIX keeps a leading "//"; Go does not
        out = "/" + out.lstrip("/")
    return out


def read_patterns(text: str) -> List[str]:
    """The patterns of a ``.dockerignore`` file's text, as BuildKit reads them: comments and
    blank lines dropped, each pattern trimmed and cleaned, a leading ``/`` dropped, a ``!``
    kept in front. :returns: the patterns in file order."""
    out = []
    for n, line in enumerate(text.splitlines()):
        if n == 0:
            line = line.removeprefix("\ufeff")
        if line.startswith("#"):
            continue
        line = line.strip()
        if not line:
            continue
        invert = line.startswith("!")
        if invert:
            line = line[1:].strip()
        if line:
            line = clean(line)
            if len(line) > 1 and line.startswith("/"):
                line = line[1:]
        out.append("!" + line if invert else line)
    return out


class Pattern:
    """One cleaned pattern (without its ``!``), matched as moby's ``patternmatcher`` does."""

    def __init__(self, pattern: str, exclusion: bool) -> None:
        self.pattern, self.exclusion = pattern, exclusion
        self.kind, self.regex = _compile(pattern)

    def match(self, path: str) -> bool:
        """Whether ``path`` (slash-separated, relative to the context) matches this pattern
        itself (its parents are :meth:`PatternMatcher.excluded`'s business)."""
        if self.kind == "exact":
            return path == self.pattern
        if self.kind == "prefix":  # "d/**": strip the trailing **
            return path.startswith(self.pattern[:-2])
        if self.kind == "suffix":  # "**/x": strip the leading **
            suffix = self.pattern[2:]
            return path.endswith(suffix) or (suffix[:1] == "/" and path == suffix[1:])
        return self.regex.match(path) is not None


def _check(pattern: str) -> None:
    """Refuse what Go's ``filepath.Match`` calls a bad pattern (BuildKit checks each pattern with
    it): a trailing ``\\``, a class that does not close, is empty, or has a ``-`` or ``]`` where a
    character must be (``[-x]``, ``[x-]``, ``[]a]``, ``[a-b-c]``). :raises ValueError: one of those."""
    bad = ValueError(f"syntax error in pattern {pattern!r}")
    i, n = 0, len(pattern)

    def char(at: int) -> int:  # one character of a class, escaped or not: the index after it
        if at >= n or pattern[at] in "-]":
            raise bad
        if pattern[at] == "\\":
            at += 1
            if at >= n:
                raise bad
        return at + 1

    while i < n:
        ch = pattern[i]
        i += 1
        if ch == "\\":
            if i >= n:
                raise bad
            i += 1
        elif ch == "[":
            if i < n and pattern[i] == "^":
                i += 1
            ranges = 0
            while True:
                if i < n and pattern[i] == "]" and ranges:
                    i += 1
                    break
                i = char(i)
                if i < n and pattern[i] == "-":
                    i = char(i + 1)
                ranges += 1


def _compile(pattern: str) -> Tuple[str, Optional["re.Pattern[str]"]]:
    """``(kind, regex)``: ``exact``, ``prefix`` (``d/**``), ``suffix`` (``**…``) or ``regex``.

    :raises ValueError: a pattern BuildKit refuses (:func:`_check`)."""
    _check(pattern)
    out, kind, i, n = "^", "exact", 0, len(pattern)
    while i < n:
        ch = pattern[i]
        first = i == 0
        i += 1
        if ch == "*":
            if i < n and pattern[i] == "*":
                i += 1
                if i < n and pattern[i] == "/":
                    i += 1
                if i >= n:  # "**" at the end: everything below
                    if kind == "exact":
                        kind = "prefix"
                    else:
                        out += ".*"
                        kind = "regex"
                else:
                    out += "(.*/)?"
                    kind = "regex"
                if first:
                    kind = "suffix"
            else:
                out += "[^/]*"
                kind = "regex"
        elif ch == "?":
            out += "[^/]"
            kind = "regex"
        elif ch in _REGEX_SPECIAL:
            out += "\\" + ch
        elif ch == "\\":  # escapes the next character (a trailing one stays as it is)
            if i < n:
                out += "\\" + pattern[i]
                i += 1
                kind = "regex"
            else:
                out += "\\"
        elif ch in "[]":
            out += ch
            kind = "regex"
        else:
            out += ch
    if kind != "regex":
        return kind, None
    try:
        return kind, re.compile(out + "$")
    except re.error as err:
        raise ValueError(f"syntax error in pattern {pattern!r}: {err}") from None


class PatternMatcher:
    """The patterns of one ignore file, in order.

    :raises ValueError: a pattern BuildKit refuses (a lone ``!``, a class that does not close).
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns: List[Pattern] = []
        for p in patterns:
            p = p.strip()
            if not p:
                continue
            p = clean(p)
            exclusion = p.startswith("!")
            if exclusion:
                if p == "!":
                    raise ValueError('illegal exclusion pattern: "!"')
                p = p[1:]
            self.patterns.append(Pattern(p, exclusion))
        self.exclusions = any(p.exclusion for p in self.patterns)
        """Whether a ``!`` pattern may put back something under a directory left out."""

    def excluded(self, path: str) -> bool:
        """Whether BuildKit leaves ``path`` (slash-separated, relative to the context root) out of
        the context: the last pattern matching it or one of its parent directories decides."""
        matched = False
        parent = posixpath.dirname(path)
        parents = parent.split("/") if parent else []
        for pattern in self.patterns:
            if pattern.exclusion != matched:  # only a "!" can undo a match, only a match can be undone
                continue
            hit = pattern.match(path)
            if not hit:
                hit = any(pattern.match("/".join(parents[:k + 1])) for k in range(len(parents)))
            if hit:
                matched = not pattern.exclusion
        return matched


def ignore_file(context: str, dockerfile: Optional[str] = None) -> Optional[str]:
    """The ignore file a build of ``context`` reads: ``<dockerfile>.dockerignore`` beside the
    Dockerfile (``dockerfile`` relative to ``context`` or absolute) when it is a file, else
    ``<context>/.dockerignore`` when that is one, else ``None``."""
    if dockerfile:
        path = dockerfile if os.path.isabs(dockerfile) else os.path.join(context, dockerfile)
        if os.path.isfile(path + ".dockerignore"):
            return path + ".dockerignore"
    path = os.path.join(context, ".dockerignore")
    return path if os.path.isfile(path) else None


def matcher_for(path: Optional[str]) -> Optional[PatternMatcher]:
    """The matcher of the ignore file at ``path``; ``None`` when there is none, it cannot be
    read, or it has no pattern. :raises ValueError: a pattern BuildKit refuses."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            patterns = read_patterns(f.read())
    except OSError:
        return None
    return PatternMatcher(patterns) if patterns else None
