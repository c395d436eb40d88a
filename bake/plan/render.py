"""Rendering: the plan (buildx's JSON shape) as HCL through ``docker-bake.hcl.tmpl``, or as JSON.

Both forms resolve under ``docker buildx bake --print`` to exactly the in-memory plan. bake
interpolates ``${`` and ``%{`` in every string of HCL *and* JSON files (buildx docs, "Bake file
reference"), object keys included, so literals are written ``$${`` and ``%%{`` in both; HCL
strings also need quotes, backslashes and control characters escaped.

bake reads each JSON string as a bare template, where two things do not survive: a raw carriage
return right before ``$${``/``%%{`` stops the escape from being read, and a leading U+FEFF is
dropped. A JSON string holding a carriage return or starting with U+FEFF is therefore written as
one interpolation of an HCL quoted string, ``${"…"}``, escaped as in the HCL form (found by the
property test in ``tests/test_escaping_property.py``).

Attribute names are written as they are (HCL identifiers), so the renderer writes none it has not
checked against bake's own (:func:`bake.plan.checks.check_attribute_name`): a name such as
``"no-cache = true\n  pull"`` would otherwise become attributes of its own.

The header's command lines are meant to be pasted into a shell: every path in them is one
shell word (:func:`shell_word`).
"""

from __future__ import annotations

import json
import shlex
import string
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from bake.errors import BakePlanError
from bake.owned import MARK
from bake.patterns import LazyPattern
from bake.plan.checks import PLAN_BLOCKS, check_attribute_name
from bake.version import __version__


def escape_interpolation(value: str) -> str:
    """Make ``value`` literal for bake: ``${`` → ``$${`` and ``%{`` → ``%%{`` (HCL template syntax)."""
    return value.replace("${", "$${").replace("%{", "%%{")


def json_template(value: str) -> str:
    """A JSON string's content whose value, read by bake, is exactly ``value``."""
    if "\r" in value or value.startswith("\ufeff"):
        return "${" + hcl_string(value) + "}"
    return escape_interpolation(value)


def _escape_tree(node):
    if isinstance(node, str):
        return json_template(node)
    if isinstance(node, list):
        return [_escape_tree(v) for v in node]
    if isinstance(node, dict):
        # Keys are interpolated too: a JSON object's property names are templates to bake (HCL's
        # JSON syntax), so a label key "${TAG}" would be an unknown variable.
        return {json_template(k): _escape_tree(v) for k, v in node.items()}
    return node


def check_names(plan: dict) -> None:
    """Every block and attribute name of the plan is bake's own (the names are written as they
    are). :raises BakePlanError: one is not, naming the block; nothing is written."""
    for block, entries in plan.items():
        if block not in PLAN_BLOCKS:
            raise BakePlanError(f"cannot write the plan: {block!r:.60} is not a block of a bake file")
        for name, attrs in entries.items():
            for attr in attrs:
                try:
                    check_attribute_name(block, attr)
                except ValueError as err:
                    raise BakePlanError(f"cannot write the plan: {block} '{name}': {err}") from None


def to_json(plan: dict) -> str:
    """The plan as a bake JSON file: UTF-8, two-space indent, keys in plan order, newline at the end.
    Its first key, ``"//"``, says who wrote it (:data:`bake.owned.MARK`): the HCL JSON syntax
    reads a property named ``//`` as a comment, so bake ignores it.

    :raises BakePlanError: a block or attribute name bake does not have (:func:`check_names`).
    """
    return "".join(json_parts(plan))


def json_parts(plan: dict) -> Iterator[str]:
    """:func:`to_json`'s text in parts, a group or target at a time, each escaped only when it is
    written (the escaped copy of the whole plan is never held). The same bytes as ``json.dumps``
    of the whole, with ``indent=2``: each part is dumped alone and indented to its depth (a JSON
    string holds no raw newline, so every newline of a part starts one of its lines).

    :raises BakePlanError: (before the first part) a block or attribute name bake does not have.
    """
    check_names(plan)
    header = {"//": f"{MARK} {__version__}. Do not edit; run bake-plan again."}
    return _json_parts(header, plan)


def _json_dumps(value, depth: int) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + "  " * depth)


def _json_parts(header: dict, plan: dict) -> Iterator[str]:
    for key, value in header.items():  # written as it is: bake-plan's own words
        yield "{\n  " + _json_dumps(key, 0) + ": " + _json_dumps(value, 1)
    for key, value in plan.items():
        yield ",\n  " + _json_dumps(json_template(key), 0) + ": "
        if key in PLAN_BLOCKS and isinstance(value, dict) and value:
            for j, (name, block) in enumerate(value.items()):
                yield (("{\n    " if j == 0 else ",\n    ") + _json_dumps(json_template(name), 0) + ": "
                       + _json_dumps(_escape_tree(block), 2))
            yield "\n  }"
        else:
            yield _json_dumps(_escape_tree(value), 1)
    yield "\n}\n"


_HCL_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Characters an HCL string cannot hold as they are: quotes, backslashes, C0/C1 controls and the
# Unicode line separators. Most values have none, and then the value goes out as it is.
_HCL_SPECIAL = LazyPattern(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029]')


def _hcl_escape_char(match: "re.Match[str]") -> str:
    ch = match.group()
    return _HCL_ESCAPES.get(ch) or f"\\u{ord(ch):04x}"


@lru_cache(maxsize=16384)  # a plan repeats most of its strings (names, platforms, paths) in every target
def hcl_string(value: str) -> str:
    """A quoted HCL string literal whose value is exactly ``value``."""
    # Most values need neither step; checking first halves the cost of rendering a large plan.
    if "{" in value:
        value = escape_interpolation(value)
    if _HCL_SPECIAL.search(value):
        value = _HCL_SPECIAL.sub(_hcl_escape_char, value)
    return '"' + value + '"'


def _hcl_value(value, indent: str) -> str:
    if isinstance(value, str):
        return hcl_string(value)
    # Strings, most of a plan's values, are quoted where they are met, not in a call of their own.
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = indent + "  "
        return "[\n" + "".join([f"{inner}{hcl_string(v) if type(v) is str else _hcl_value(v, inner)},\n"
                                 for v in value]) + f"{indent}]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        body = "".join([f"{inner}{hcl_string(k)} = {hcl_string(v) if type(v) is str else _hcl_value(v, inner)}\n"
                        for k, v in value.items()])
        return "{\n" + body + indent + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    raise TypeError(f"cannot render {type(value).__name__} in a bake file")


def _hcl_block(kind: str, name: str, attrs: dict) -> str:
    lines = [f"{kind} {hcl_string(name)} {{"]
    for key, value in attrs.items():
        lines.append(f"  {key} = {_hcl_value(value, '  ')}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def read_paths(plan: dict) -> list:
    """Every local path the plan makes buildx read, sorted: contexts and named contexts (a
    directory, or the directory of an ``oci-layout://DIR@sha256:…``), a Dockerfile given by an
    absolute path, and the file of each ``src=FILE`` build secret. What ``--allow=fs.read=PATH``
    must grant (buildx 0.17+ bake entitlements, which ask before reading outside the working
    directory); relative and remote values (``target:``, ``docker-image://``, a Git URL) need none.
    """
    paths = set()
    for target in plan.get("target", {}).values():
        values = [target.get("context", ""), target.get("dockerfile", "")] + list(target.get("contexts", {}).values())
        for value in values:
            if isinstance(value, str) and value.startswith(_OCI_LAYOUT):
                value = value[len(_OCI_LAYOUT):].split("@", 1)[0].split(":", 1)[0]
            if isinstance(value, str) and value.startswith("/"):
                paths.add(value)
        for entry in target.get("secret", []):
            for field in _secret_fields(entry):
                if field.startswith("src=") and field[len("src="):].startswith("/"):
                    paths.add(field[len("src="):])
    return sorted(paths)


def _secret_fields(entry: str) -> List[str]:
    """The fields of a bake ``secret`` entry, read as buildx reads it: one CSV record."""
    import csv  # only a plan with build secrets has one to read

    return next(csv.reader([entry]))


_OCI_LAYOUT = "oci-layout://"


def entitlements(plan: dict) -> Dict[str, List[str]]:
    """The privileges beyond reading its contexts each target of ``plan`` asks buildx for (its
    ``entitlements``: ``network.host``, ``security.insecure``), target → sorted names; targets
    that ask none are left out. A plan is written only once the user granted each
    (``bake-plan --allow``), so these are also what the header and ``build`` grant
    (``--allow=network.host``)."""
    out = {}
    for name, target in plan.get("target", {}).items():
        asked = target.get("entitlements") or []
        if isinstance(asked, (list, tuple)) and asked:
            out[name] = sorted({str(e) for e in asked})
    return out


def granted(plan: dict) -> List[str]:
    """Every privilege :func:`entitlements` finds in ``plan``, once, sorted."""
    return sorted({e for asked in entitlements(plan).values() for e in asked})


def shell_word(text: str) -> str:
    """``text`` as one word of a POSIX shell command line, on one line: ``shlex.quote``, or for
    text with a character that is not printable (a newline, a tab …) ``$'…'`` with escapes
    (bash, zsh, ksh and POSIX.1-2024 ``sh``), so the header's comment line stays one line."""
    if text.isprintable():
        return shlex.quote(text)
    out = []
    for ch in text:
        if ch in "\\'":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:  # its UTF-8 bytes: \u would depend on the shell's locale
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogatepass"))
    return "$'" + "".join(out) + "'"


class _PlanTemplate(string.Template):
    delimiter = "@"  # "$" is HCL's own interpolation character


def to_hcl(plan: dict, template: Path, requested: Iterable[str],
           filename: Union[str, Sequence[str]] = "docker-bake.hcl",
           environment: Sequence[Tuple[str, str]] = ()) -> str:
    """The plan as HCL, laid out by ``template`` (placeholders ``@groups``, ``@targets``,
    ``@version``, ``@requested``, ``@date``, ``@environment``, ``@filename``, ``@allow``).

    :param filename: the plan file's name, or the bake files to pass (the plan's first): in the
        header as ``-f`` arguments, each one shell word, as are the ``--allow=fs.read=`` flags.
    :param environment: ``(variable, text)`` pairs of the environment's settings the plan was
        made with (``BAKE_PLAN_REGISTRY``…): in the header as ``NAME=VALUE``, the value one shell
        word, so the line can prefix the command again; ``no setting`` when there is none.
    :raises KeyError: the template names a placeholder that does not exist.
    :raises BakePlanError: a block or attribute name bake does not have (:func:`check_names`).
    """
    return "".join(hcl_parts(plan, template, requested, filename, environment))


def hcl_parts(plan: dict, template: Path, requested: Iterable[str],
              filename: Union[str, Sequence[str]] = "docker-bake.hcl",
              environment: Sequence[Tuple[str, str]] = ()) -> Iterator[str]:
    """:func:`to_hcl`'s text in parts, a block at a time, for writing without holding the whole
    text (65 MB for 20,000 stages) or its blocks at once. The names, the header and the template
    are checked before this returns, so the errors of :func:`to_hcl` come before any part.
    """
    check_names(plan)
    files = [filename] if isinstance(filename, str) else list(filename)
    created = next(
        (t["labels"].get("org.opencontainers.image.created", "") for t in plan.get("target", {}).values() if "labels" in t),
        "",
    )

    def comment(text: str) -> str:  # keep user-controlled text on its comment line
        return " ".join(text.split())

    header = dict(
        version=__version__,
        # One shell word each (never through comment(), which would fold a path's own spaces).
        allow=" ".join([*(shell_word(f"--allow=fs.read={d}") for d in read_paths(plan)),
                        *(shell_word(f"--allow={e}") for e in granted(plan))]),
        requested=comment(", ".join(requested)),
        date=comment(created[:10]),
        environment=" ".join(f"{name}={shell_word(text)}" for name, text in environment) or "no setting",
        filename=" -f ".join(shell_word(f) for f in files),
    )
    # The template cut at @groups and @targets (the blocks' places), the rest filled in now.
    text, pieces, start = template.read_text(encoding="utf-8"), [], 0
    for match in _PlanTemplate.pattern.finditer(text):
        block = match.group("named") or match.group("braced")
        if block in _BLOCK_PLACES:
            pieces.append((_PlanTemplate(text[start:match.start()]).substitute(header), block))
            start = match.end()
    pieces.append((_PlanTemplate(text[start:]).substitute(header), None))
    return _hcl_parts(plan, pieces)


_BLOCK_PLACES = {"groups": "group", "targets": "target"}


def _hcl_parts(plan: dict, pieces: Sequence[Tuple[str, Optional[str]]]) -> Iterator[str]:
    for literal, place in pieces:
        yield literal
        if place is not None:
            kind = _BLOCK_PLACES[place]
            # The blocks one blank line apart, without the last one's newline.
            for i, (name, attrs) in enumerate(plan.get(kind, {}).items()):
                yield ("\n\n" if i else "") + _hcl_block(kind, name, attrs)[:-1]
