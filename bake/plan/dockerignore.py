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

Read as untrusted input: a regular file of at most :data:`IGNORE_FILE_BYTES` (a larger one, a FIFO
or a device is refused in one line), and each pattern is matched in one pass over a path, in time
linear in the path whatever the pattern (:class:`Pattern`).
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import List, Optional, Sequence, Tuple

from bake.documents import DocumentError, read_bytes
from bake.errors import StageError

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
    """One cleaned pattern (without its ``!``), matched as moby's ``patternmatcher`` does.

    A pattern with a wildcard is matched by an automaton run over the path once, a character at
    a time (:class:`_Glob`): time linear in the path's length (times the pattern's, at worst),
    whatever the pattern; a backtracking regular expression takes exponential time on
    ``*a*a*a…b`` or ``**/**/…/b``, where BuildKit (Go's linear-time ``regexp``) does not.
    """

    def __init__(self, pattern: str, exclusion: bool) -> None:
        self.pattern, self.exclusion = pattern, exclusion
        self.kind, self.glob = _compile(pattern)

    def match(self, path: str) -> bool:
        """Whether ``path`` (slash-separated, relative to the context) matches this pattern
        itself (its parents are :meth:`PatternMatcher.excluded`'s business)."""
        if self.glob is not None:
            return self.glob.match(path, (len(path),))
        return self._literal(path)

    def match_or_parent(self, path: str, parents: Sequence[int]) -> bool:
        """Whether ``path`` or one of its parent directories matches: ``parents`` are the
        lengths of the parents' paths, each a prefix of ``path`` (``a/b/c``: ``(1, 3)``). One
        pass over ``path`` for a wildcard pattern."""
        if self.glob is not None:
            return self.glob.match(path, (*parents, len(path)))
        return self._literal(path) or any(self._literal(path[:n]) for n in parents)

    def _literal(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.pattern
        if self.kind == "prefix":  # "d/**": strip the trailing **
            return path.startswith(self.pattern[:-2])
        # "suffix", "**/x": strip the leading **
        suffix = self.pattern[2:]
        return path.endswith(suffix) or (suffix[:1] == "/" and path == suffix[1:])


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


def _compile(pattern: str) -> Tuple[str, Optional["_Glob"]]:
    """``(kind, glob)``: ``exact``, ``prefix`` (``d/**``), ``suffix`` (``**…``) with no glob, or
    ``regex`` with the :class:`_Glob` that matches it. The steps are moby's translation to a
    regular expression: ``*`` is ``[^/]*``, ``?`` ``[^/]``, ``**/`` (or ``**`` before more of
    the pattern) ``(.*/)?``, a trailing ``**`` ``.*``, a class a class, ``\\x`` the character
    ``x``.

    :raises ValueError: a pattern BuildKit refuses (:func:`_check`)."""
    _check(pattern)
    tokens: List[Tuple[str, object]] = []
    kind, i, n = "exact", 0, len(pattern)
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
                        tokens.append((_ALL, None))
                        kind = "regex"
                else:
                    tokens.append((_DSTAR, None))
                    kind = "regex"
                if first:
                    kind = "suffix"
            else:
                tokens.append((_STAR, None))
                kind = "regex"
        elif ch == "?":
            tokens.append((_ANY, None))
            kind = "regex"
        elif ch == "\\":  # escapes the next character (_check refuses a trailing one)
            if i < n:
                tokens.append((_CHAR, pattern[i]))
                i += 1
                kind = "regex"
            else:
                tokens.append((_CHAR, ch))
        elif ch == "[":
            cls, i = _class(pattern, i)
            tokens.append((_CLASS, cls))
            kind = "regex"
        else:
            if ch == "]":
                kind = "regex"
            tokens.append((_CHAR, ch))
    return (kind, _Glob(tokens)) if kind == "regex" else (kind, None)


def _class(pattern: str, i: int) -> Tuple["re.Pattern[str]", int]:
    """The class starting at ``pattern[i]`` (just after its ``[``; :func:`_check` has found it
    well formed) as a regular expression of one character, and the index after its ``]``.

    :raises ValueError: a range whose ends are in the wrong order (``[z-a]``)."""
    out = "["
    if pattern[i] == "^":
        out, i = "[^", i + 1
    items = 0
    while not (pattern[i] == "]" and items):
        for second in (False, True):
            if second:
                if pattern[i] != "-":
                    break
                out, i = out + "-", i + 1
            if pattern[i] == "\\":
                i += 1
            out, i = out + re.escape(pattern[i]), i + 1
        items += 1
    try:
        return re.compile(out + "]"), i + 1
    except re.error as err:
        raise ValueError(f"syntax error in pattern {pattern!r}: {err}") from None


_CHAR, _ANY, _CLASS, _STAR, _DSTAR, _ALL = "char", "any", "class", "star", "dstar", "all"
"""The steps of a pattern: one character; ``[^/]``; one character of a class; ``[^/]*``;
``(.*/)?``; ``.*`` (``.``: any character but a line break, as in Go's ``regexp``)."""

GLOB_CACHE_STATES = 1 << 20
"""How many automaton states a :class:`_Glob` keeps in its cached steps before it drops them all
(a bound on memory: a dropped step is worked out again when it is needed)."""


class _Glob:
    """A pattern's steps as a nondeterministic automaton, run over a path a character at a time
    in every state it can be in at once: O(len(path) × len(steps)) whatever the pattern, and one
    dictionary look-up a character once a step has been seen (the steps taken are cached: a
    deterministic automaton built lazily).

    States: ``k`` is "before step ``k``" (``len(steps)``: matched); ``-(k + 1)`` is "inside the
    ``.*`` of step ``k``'s ``(.*/)?``", which a ``/`` may leave for ``k + 1``."""

    def __init__(self, tokens: Sequence[Tuple[str, object]]) -> None:
        self.tokens = list(tokens)
        self.end = len(self.tokens)
        self.start = self._closure([0])
        self._steps: dict = {}
        self._cached = 0

    def _closure(self, states) -> frozenset:
        out, todo = set(), list(states)
        while todo:
            s = todo.pop()
            if s in out:
                continue
            out.add(s)
            if 0 <= s < self.end:
                op = self.tokens[s][0]
                if op in (_STAR, _ALL):
                    todo.append(s + 1)
                elif op == _DSTAR:
                    todo += [s + 1, -(s + 1)]
        return frozenset(out)

    def _step(self, states: frozenset, ch: str) -> frozenset:
        nxt = []
        for s in states:
            if s < 0:  # inside "(.*/)?"
                if ch != "\n":
                    nxt.append(s)
                if ch == "/":
                    nxt.append(-s)
                continue
            if s == self.end:
                continue
            op, arg = self.tokens[s]
            if op == _CHAR:
                if ch == arg:
                    nxt.append(s + 1)
            elif op == _ANY:
                if ch != "/":
                    nxt.append(s + 1)
            elif op == _CLASS:
                if arg.match(ch):  # type: ignore[union-attr]
                    nxt.append(s + 1)
            elif op == _STAR:
                if ch != "/":
                    nxt.append(s)
            elif op == _ALL:
                if ch != "\n":
                    nxt.append(s)
        return self._closure(nxt)

    def match(self, path: str, ends: Sequence[int]) -> bool:
        """Whether the pattern matches ``path[:n]`` for some ``n`` in ``ends`` (lengths, each at
        most ``len(path)``): one pass over ``path``."""
        want, states, end, steps = set(ends), self.start, self.end, self._steps
        if 0 in want and end in states:
            return True
        for i in range(max(want, default=0)):
            key = (states, path[i])
            nxt = steps.get(key)
            if nxt is None:
                nxt = self._step(states, path[i])
                if self._cached + len(nxt) > GLOB_CACHE_STATES:
                    steps.clear()
                    self._cached = 0
                steps[key] = nxt
                self._cached += len(nxt)
            states = nxt
            if not states:
                return False
            if end in states and i + 1 in want:
                return True
        return False


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
        ends = [len("/".join(parents[:k + 1])) for k in range(len(parents))]  # each a prefix of path
        for pattern in self.patterns:
            if pattern.exclusion != matched:  # only a "!" can undo a match, only a match can be undone
                continue
            if pattern.match_or_parent(path, ends):
                matched = not pattern.exclusion
        return matched


def ignore_file(context: str, dockerfile: Optional[str] = None) -> Optional[str]:
    """The ignore file a build of ``context`` reads: ``<dockerfile>.dockerignore`` beside the
    Dockerfile (``dockerfile`` relative to ``context`` or absolute) when it is there, else
    ``<context>/.dockerignore`` when that is, else ``None``. Anything but a directory counts as
    there (a FIFO or a device too: :func:`matcher_for` refuses it rather than the build reading
    another file than BuildKit would)."""
    if dockerfile:
        path = dockerfile if os.path.isabs(dockerfile) else os.path.join(context, dockerfile)
        if _there(path + ".dockerignore"):
            return path + ".dockerignore"
    path = os.path.join(context, ".dockerignore")
    return path if _there(path) else None


def _there(path: str) -> bool:
    return os.path.exists(path) and not os.path.isdir(path)


IGNORE_FILE_BYTES = 1024 * 1024
"""The largest ignore file read (1 MiB): far above any real one; a larger one is refused, not
held in memory."""


def matcher_for(path: Optional[str]) -> Optional[PatternMatcher]:
    """The matcher of the ignore file at ``path``; ``None`` when there is none, it cannot be
    read (``OSError``), or it has no pattern. It is read as untrusted input
    (:func:`bake.documents.read_bytes`): a regular file of at most :data:`IGNORE_FILE_BYTES`.

    :raises StageError: the file is larger than :data:`IGNORE_FILE_BYTES`, or is a FIFO, a
        device, a socket (``ignore file /ctx/.dockerignore: larger than 1 MiB: …``).
    :raises ValueError: a pattern BuildKit refuses."""
    if path is None:
        return None
    try:
        text = read_bytes(path, IGNORE_FILE_BYTES).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    except DocumentError as err:
        raise StageError(f"ignore file {path}: {err}") from None
    patterns = read_patterns(text)
    return PatternMatcher(patterns) if patterns else None
