"""The one reader of a Dockerfile's instructions, for every check that looks inside one: the named
contexts a stage uses (:func:`bake.plan.compose.uses_named_context`, ``--wheelhouse``,
``--locked``) and which target a failing build step belongs to (:mod:`bake.run.sitrep`).

It reads as BuildKit's Dockerfile parser does, as far as those checks need: parser directives
(``# escape=```) only before anything else, comment lines dropped (inside a continued instruction
too), a line ending in the escape character continued by the next one (joined as they are, no
space added), blank lines skipped (also inside a continued instruction).
Heredoc bodies are not told apart from instructions.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Union

from bake.patterns import LazyPattern
from bake.plan.validate import is_context_url

_DIRECTIVE = LazyPattern(r"#\s*(syntax|escape|check)\s*=\s*(\S+)\s*\Z", re.IGNORECASE)
"""A parser directive BuildKit knows; any other line ends the directives."""


def read(context: Union[str, Path, None], dockerfile: Optional[str] = "Dockerfile",
         inline: Optional[str] = None) -> Optional[str]:
    """The text of a Dockerfile as bake names it: ``inline`` (``dockerfile-inline``) when given,
    else ``dockerfile`` (default ``Dockerfile``) under the local directory ``context`` (an absolute
    ``dockerfile`` stands alone).

    :returns: the text (undecodable bytes replaced), or ``None`` when it cannot be read here: a
        remote context (a git or HTTP URL), no such file, or not a file.
    """
    if inline is not None:
        return inline
    path = Path(dockerfile or "Dockerfile")
    if not path.is_absolute():
        if context is None or is_context_url(str(context)):
            return None
        path = Path(context) / path
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None


def instructions(text: str) -> List[str]:
    """A Dockerfile's instructions, one string each: continued lines joined as BuildKit joins them
    (the escape character dropped, nothing added), whitespace runs made one space, comments, blank
    lines and parser directives left out.

    ``FROM  base \\⏎  AS  wheelhouse`` → ``["FROM base AS wheelhouse"]``.
    """
    lines = text.splitlines()
    escape = "\\"
    start = 0
    for start, line in enumerate(lines):  # parser directives: only at the very top
        match = _DIRECTIVE.match(line.strip())
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            escape = match.group(2)
    else:
        start = len(lines)
    out: List[str] = []
    pending: List[str] = []
    for line in lines[start:]:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):  # also between the lines of one instruction
            continue
        body = line.rstrip()
        if body.endswith(escape):  # continued: BuildKit joins the lines as they are, no space added
            pending.append(body[: -len(escape)])
            continue
        pending.append(body)
        out.append(" ".join("".join(pending).split()))
        pending = []
    if pending and "".join(pending).strip():  # the file ends inside a continued instruction
        out.append(" ".join("".join(pending).split()))
    return out


_ARG_USE = LazyPattern(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
"""``$NAME``, ``${NAME}`` or ``${NAME:-default}`` / ``${NAME-default}`` in a ``FROM`` line."""


def from_images(text: str, args: Optional[dict] = None) -> List[str]:
    """The images the ``FROM`` lines of a Dockerfile start from, with the build's ``args`` (else
    the defaults of the ``ARG`` lines before the first ``FROM``) put in for ``$NAME``/``${NAME}``
    (``${NAME:-default}`` when neither sets it): not ``scratch``, not the file's own stages (``AS``
    names), not a line whose image still holds an unset ``$`` after that. In file order, each once.
    """
    defaults: dict = {}
    images: List[str] = []
    aliases = set()
    seen_from = False
    for instruction in instructions(text):
        words = instruction.split()
        keyword = words[0].upper() if words else ""
        if keyword == "ARG" and not seen_from:
            for word in words[1:]:
                name, eq, value = word.partition("=")
                if eq:
                    defaults[name] = value.strip("\"'")
            continue
        if keyword != "FROM":
            continue
        seen_from = True
        words = [w for w in words[1:] if not w.startswith("--")]
        if not words:
            continue

        def value_of(match: "re.Match[str]") -> str:
            name = match.group(1) or match.group(3)
            given = (args or {}).get(name, defaults.get(name))
            if given is None or (given == "" and match.group(2) is not None and ":-" in match.group(0)):
                given = match.group(2)
            return "$" if given is None else str(given)

        image = _ARG_USE.sub(value_of, words[0])
        if len(words) >= 3 and words[1].upper() == "AS":
            aliases.add(words[2].lower())
        if "$" not in image and image.lower() != "scratch" and image.lower() not in aliases:
            images.append(image)
    return list(dict.fromkeys(images))
