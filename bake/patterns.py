"""Regular expressions compiled when first used, not when their module is imported.

Compiling a pattern costs far more than matching a short string with it, and most of bake-plan's
patterns serve one command, one kind of input or one error message: compiled at import, they made
a good part of every command's start-up. So a module writes each pattern once, at module level,
as ``_NAME = LazyPattern(r"…")``, and uses it as a compiled pattern (``_NAME.match(text)``); the
first use compiles it.
"""

from __future__ import annotations

import re

_COMPILED = ("match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split", "scanner",
             "flags", "groups", "groupindex")
"""What a compiled pattern offers, which a :class:`LazyPattern` takes over at its first use."""


class LazyPattern:
    """``re.compile(pattern, flags)``, done the first time the pattern is used.

    The first use of a method or attribute of a compiled pattern (``match``, ``search``, ``sub``,
    ``groups``…) compiles it and puts the compiled pattern's own methods and attributes on this
    object, so every later use costs what it costs on the compiled pattern. ``pattern`` (the
    source text) is there from the start: patterns built from other patterns' text compile none
    of them. ``compiled`` is the :class:`re.Pattern` (for code that needs the real one).
    """

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str):  # only asked for what the object does not have yet
        if name not in _COMPILED and name != "compiled":
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self._flags)
        for attribute in _COMPILED:
            setattr(self, attribute, getattr(compiled, attribute))
        self.compiled = compiled
        return getattr(self, name)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}{f', {self._flags!r}' if self._flags else ''})"
