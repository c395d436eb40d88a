"""What a finished plan must be before it is written, whoever filled it in (bake-plan, a stage's
fields, the configuration, or a plugin's ``bake_plan_adjust_target``).

:func:`check_plan` checks the plan as a whole, once every hook has run; nothing is trusted
because an earlier step checked it, as a plugin may change a target after that. Every target:

- has only attributes buildx's bake reads (:data:`TARGET_ATTRIBUTES`, the ``Target`` struct of
  buildx's ``bake/bake.go``), each of its type: strings, booleans, lists of strings, mappings of
  string to string, lists of ``k=v`` entries (or their object form); no NaN or infinity;
- tags that are image references, platforms bake-plan can name, contexts that are absolute
  directories or something buildx resolves itself (``target:`` another target of the plan, in
  no loop; ``docker-image://``, a URL …);
- valid Unicode text in NFC: bake stores every string through cty, which NFC-normalises it, so a
  decomposed ``é`` (``e`` + U+0301) would come back changed, and a lone surrogate cannot be
  written as UTF-8 at all;
- free of credentials (:mod:`bake.plan.secrets`): no arg or label named like one, no string that
  looks like one anywhere in the target.

An error names who filled in the failing value: the plugin whose ``bake_plan_adjust_target``
last changed that attribute (:meth:`bake.plan.plugins.Hooks.adjust_target` records it), else the
stage's own plugin.
"""

from __future__ import annotations

import ast
import math
import os.path
import unicodedata
from functools import lru_cache
from typing import AbstractSet, Callable, Iterator, Mapping, Optional, Sequence, Tuple

from bake.errors import PluginError, StageError, did_you_mean
from bake.patterns import LazyPattern
from bake.plan.names import ARG_NAME, check_platform, check_reference
from bake.plan.secrets import (
    SECRET_HINT,
    credential_name,
    credential_value,
    redact,
    strings_in,
    walk_strings,
)
from bake.plan.stage import Stage
from bake.plan.text import NUL, describe, label_fault
from bake.plan.validate import is_context_url

# The kinds of value bake reads, by attribute (buildx bake/bake.go, ``Target``: its hcl tags).
# "entries": a list of "k=v,k=v" strings or of their object form (cache-from, secret, … in 0.19+).
TARGET_ATTRIBUTES: Mapping[str, str] = {
    "description": "str",
    "inherits": "strs",
    "annotations": "strs",
    "attest": "entries",
    "context": "context",
    "contexts": "contexts",
    "dockerfile": "str",
    "dockerfile-inline": "str",
    "args": "args",
    "labels": "labels",
    "tags": "tags",
    "cache-from": "entries",
    "cache-to": "entries",
    "target": "str",
    "secret": "entries",
    "ssh": "entries",
    "platforms": "platforms",
    "output": "entries",
    "pull": "bool",
    "no-cache": "bool",
    "network": "str",
    "no-cache-filter": "strs",
    "shm-size": "str",
    "ulimits": "strs",
    "call": "str",
    "entitlements": "strs",
}
"""Every attribute of a bake ``target`` block, and the kind of value it holds. ``matrix`` and
``name`` are left out: a plan's targets are concrete (:mod:`bake.plan.variants`)."""

REQUIRED: Mapping[str, str] = {
    "context": "buildx would use the directory bake runs in",
    "platforms": "buildx would build for the engine's own platform under every tag",
}
"""Attributes every target of a plan has (bake-plan sets them), and what buildx does without."""

GROUP_ATTRIBUTES: Mapping[str, str] = {"targets": "strs", "description": "str"}
"""Every attribute of a bake ``group`` block."""

PLAN_BLOCKS = ("group", "target")
"""The top-level keys of a plan (buildx's JSON shape); bake-plan's plans declare no ``variable``."""

_SCALARS = (str, bool, int, float)

Culprit = Callable[[str, str, Optional[str]], Optional[str]]
"""``culprit(target name, attribute, key)``: who last changed that attribute (or, for args,
labels and contexts, that key) as error lines name it (``plugin 'vendor'``), or ``None`` when no
plugin did."""


def check_attribute_name(block: str, name) -> None:
    """Whether ``name`` is an attribute of a bake ``block`` (``"target"`` or ``"group"``).

    :raises ValueError: it is not (a did-you-mean hint when one is near); the message repeats the
        name with ``repr``, so a name holding a newline or ``=`` stays on one line.
    """
    known = TARGET_ATTRIBUTES if block == "target" else GROUP_ATTRIBUTES
    if isinstance(name, str) and name in known:
        return
    if not isinstance(name, str):
        raise ValueError(f"attribute {name!r} is {type(name).__name__}, not a string")
    hint = did_you_mean(name, known, n=1) or f" (see buildx's bake file reference: {', '.join(sorted(known))})"
    raise ValueError(f"{name!r:.80} is not an attribute of a bake {block}{hint}")


def check_plan(plan: dict, owners: Mapping[str, Stage], culprit: Optional[Culprit] = None,
               not_secret: AbstractSet[str] = frozenset()) -> None:
    """Check a finished plan as a whole: every group and target, after every hook has run and
    before anything is written.

    :param plan: the plan in buildx's JSON shape (``group``, ``target``).
    :param owners: bake target name → the stage it comes from.
    :param culprit: who last changed an attribute (:data:`Culprit`); default: nobody, so the
        stage's plugin is named.
    :param not_secret: arg and label names the user declared are not credentials (``--not-secret``).
    :raises PluginError: an attribute buildx does not read, or a value of the wrong type or shape.
    :raises StageError: a tag, platform or context buildx would refuse or misread, text that is not
        valid NFC Unicode, or that looks like a credential; the line names the plugin, the stage, the
        target and the attribute, never a credential's value.
    """
    for block in plan:
        if block not in PLAN_BLOCKS:
            raise PluginError(f"the plan has a block {block!r:.60}; bake-plan writes only {', '.join(PLAN_BLOCKS)}")
    for gname, group in plan.get("group", {}).items():
        for attr in group:
            try:
                check_attribute_name("group", attr)
            except ValueError as err:
                raise PluginError(f"group '{gname}': {err}") from None
    for tname, target in plan.get("target", {}).items():
        stage = owners[tname]
        _check_target(stage, tname, target, culprit or (lambda *_: None), not_secret)
    _check_target_contexts(plan, owners, culprit or (lambda *_: None))


def _check_target_contexts(plan: dict, owners: Mapping[str, Stage], culprit: Culprit) -> None:
    """Every ``target:NAME`` context names another target of the plan, and they form no loop:
    buildx would otherwise stop the whole bake before building anything ("failed to find target",
    "cannot link to itself", "infinite loop")."""
    targets = plan.get("target", {})

    def fail(tname: str, key: str, value: str, why: str) -> StageError:
        stage = owners[tname]
        who = culprit(tname, "contexts", key) or f"plugin '{stage.plugin}'"
        return StageError(f"{who}, stage '{stage.name}', target '{tname}', contexts[{key!r}]: {value!r:.80} {why}")

    def links(tname: str) -> Iterator[Tuple[str, str]]:
        """``(context key, target it names)`` of each ``target:`` context of a target, read from the
        plan when the walk gets there (not held for every target of a large plan at once)."""
        for key, value in (targets[tname].get("contexts") or {}).items():
            if value.startswith("target:"):
                yield key, value[len("target:"):]

    for tname in targets:
        for key, other in links(tname):
            if other not in targets:
                raise fail(tname, key, "target:" + other,
                           f"names no target of the plan{did_you_mean(other, targets, n=1)}")
            if other == tname:
                raise fail(tname, key, "target:" + other, "is the target itself")
    done: set = set()
    for start in targets:  # depth first, without recursion: a loop is a link back into the path walked
        if start in done:
            continue
        path, keys, stack = [start], [], [links(start)]  # keys[i]: the link path[i] -> path[i+1]
        on_path = {start}
        while stack:
            step = next(stack[-1], None)
            if step is None:
                on_path.discard(path[-1])
                done.add(path.pop())
                stack.pop()
                if keys:
                    keys.pop()
                continue
            key, other = step
            if other in on_path:
                first = path.index(other)
                edges = list(zip(path[first:], keys[first:] + [key], path[first + 1:] + [other]))
                # blame a link a plugin's bake_plan_adjust_target made, else the one that closed the loop
                tname, key, to = next((e for e in edges if culprit(e[0], "contexts", e[1])), edges[-1])
                loop = " -> ".join(path[first:] + [other])
                raise fail(tname, key, f"target:{to}", f"closes a loop of targets ({loop})")
            if other not in done:
                path.append(other)
                on_path.add(other)
                keys.append(key)
                stack.append(links(other))


def check_text(text: str) -> Optional[str]:
    """Why bake cannot carry ``text`` exactly (a lone surrogate, not Unicode NFC), or ``None``."""
    if text.isascii():  # ASCII is valid UTF-8 and already NFC
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"not valid Unicode text (a lone surrogate at character {err.start}); bake files are UTF-8"
    if not unicodedata.is_normalized("NFC", text):
        return ("not in Unicode NFC; bake stores every string NFC-normalised, so buildx would read a different "
                "value (normalise it with unicodedata.normalize('NFC', value))")
    return None


def string_fault(text: str) -> Optional[str]:
    """Why no bake file can carry ``text`` as it is (a NUL, which no build arg, label, path or
    file can hold; else :func:`check_text`), or ``None``: the check of every string a plan, or a
    bake file buildx reads beside it, holds."""
    if NUL in text:
        return f"holds {describe(NUL)}, which nothing a build reads can carry"
    return check_text(text)


def check_context(value: str) -> Optional[str]:
    """Why a ``context`` or named-context value would be misread, or ``None``: it must be an
    absolute directory or something buildx resolves itself (``target:``, ``docker-image://``,
    ``oci-layout://``, a git or HTTP URL). A relative path would be read from wherever bake runs."""
    if value.startswith("cwd://"):
        return f"{value!r:.80} is relative to wherever bake runs; give an absolute directory"
    if not is_context_url(value) and not os.path.isabs(value):
        return f"{value!r:.80} is not an absolute directory, target:, docker-image://, oci-layout:// or a URL"
    return None


def _check_target(stage: Stage, name: str, target: dict, culprit: Culprit, not_secret: AbstractSet[str]) -> None:
    def where(attr: str, key: Optional[str] = None) -> str:
        who = culprit(name, attr, key) or f"plugin '{stage.plugin}'"
        return f"{who}, stage '{stage.name}', target '{name}'"

    if not isinstance(target, dict):
        raise PluginError(f"{where('')}: the target is {type(target).__name__}, not a mapping of attributes")
    # A credential first, before any check that shows a value: a value cut short to fit an error
    # line ('ghp_A1b2…') would no longer look like one to the redaction of that line.
    texts = strings_in(target)
    if any(map(credential_value, texts)):
        for path, text in walk_strings(target):
            what = credential_value(text)
            if what:
                attr, key = _path_parts(path)
                raise StageError(redact(f"{where(attr, key)}, {path}: the value looks like {what}; {SECRET_HINT}"))
    for attr, value in target.items():
        kind = TARGET_ATTRIBUTES.get(attr) if isinstance(attr, str) else None
        if kind is None:
            try:
                check_attribute_name("target", attr)
            except ValueError as err:
                raise PluginError(f"{where(attr)}: {err}") from None
        if not _KIND_OK[kind](value):  # the common case is fast; the reason is worked out on failure
            _explain(where, attr, kind, value)
    for attr, without in REQUIRED.items():
        if attr not in target:
            raise PluginError(f"{where(attr)}, {attr}: missing; {without}")
    # Most targets are fine: their strings are checked without the paths an error would name
    # (a path per string is most of the cost of checking 38,500 targets), then walked again with
    # them only when something is wrong, in the same order, so the error is the same.
    joined = "".join(texts)  # one test of all of them; string by string only for text that is not ASCII
    if NUL not in joined and (joined.isascii() or all(check_text(text) is None for text in texts)):
        strings: Sequence[Tuple[str, str]] = ()
    else:
        strings = list(walk_strings(target))
    for path, text in strings:
        why = string_fault(text)
        if why:
            attr, key = _path_parts(path)
            raise StageError(f"{where(attr, key)}, {path}: {why}")
    for attr, kind in (("args", "arg"), ("labels", "label")):
        for key in target.get(attr, {}):
            why = None if key in not_secret else credential_name(key)
            if why:
                raise StageError(f"{where(attr, key)}, {kind} '{key}' looks like a credential ({why}); {SECRET_HINT} "
                                 f"(if it is not one: --not-secret {key})")
    for key, value in target.get("labels", {}).items():  # as a stage's own labels are checked (validate)
        why = label_fault(key, value)
        if why:
            raise StageError(f"{where('labels', key)}, labels[{key!r}]: holds {why}")


_PATH = LazyPattern(r"([^\[ ]+)(?:\[('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]| key ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))?")


def _path_parts(path: str) -> Tuple[str, Optional[str]]:
    """``args['X']`` → ``("args", "X")``; ``labels key 'k'`` → ``("labels", "k")``; ``tags[0]`` →
    ``("tags", None)``: the attribute and mapping key a :func:`walk_strings` path is in."""
    match = _PATH.match(path)
    if not match:
        return path, None
    quoted = match.group(2) or match.group(3)
    if quoted is None:
        return match.group(1), None
    return match.group(1), ast.literal_eval(quoted)


def _strs(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _str_map(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and k and isinstance(v, str) for k, v in value.items())


def _entries(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(v, str) or (isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (str, int))
                                                           for k, x in v.items()))
        for v in value)


@lru_cache(maxsize=4096)  # a family repeats its arg names in every target
def _is_arg_name(name: str) -> bool:
    return ARG_NAME.match(name) is not None


def _valid(check: Callable[[str], object], value: str) -> bool:
    try:
        check(value)
    except ValueError:
        return False
    return True


# Whether a value is right for its kind: fast, no message (``_explain`` says what is wrong).
_KIND_OK: Mapping[str, Callable[[object], bool]] = {
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "strs": _strs,
    "entries": _entries,
    "context": lambda v: isinstance(v, str) and check_context(v) is None,
    "contexts": lambda v: _str_map(v) and all(check_context(x) is None for x in v.values()),
    "args": lambda v: _str_map(v) and all(map(_is_arg_name, v)),
    "labels": _str_map,
    "tags": lambda v: _strs(v) and all(_valid(check_reference, t) for t in v),
    "platforms": lambda v: _strs(v) and bool(v) and all(_valid(check_platform, p) for p in v),
}


def _explain(where: Callable[..., str], attr: str, kind: str, value) -> None:
    """Raise the error for a value :data:`_KIND_OK` refused: first whether a bake file can hold it
    at all (strings, finite numbers, booleans, lists, mappings of string to string), then whether
    it is of the attribute's kind and a value buildx reads as meant.

    :raises PluginError: the type is wrong. :raises StageError: a tag, platform or context is.
    """
    if isinstance(value, dict):  # by key: a plugin that added one entry is named for it
        for k, v in value.items():
            _check_shape(where(attr, k if isinstance(k, str) else None), attr, {k: v})
    else:
        _check_shape(where(attr), attr, value)

    def fail(msg: str, key: Optional[str] = None, sub: str = "", cls=PluginError):
        return cls(f"{where(attr, key)}, {attr}{sub}: {msg}")

    def got(v) -> str:
        return f"{type(v).__name__} {v!r:.40}"

    if kind in ("str", "context"):
        if not isinstance(value, str):
            raise fail(f"{got(value)} is not a string")
        raise fail(check_context(value), cls=StageError)
    if kind == "bool":
        raise fail(f"{got(value)} is not true or false")
    if kind in ("strs", "tags", "platforms", "entries"):
        if not isinstance(value, list):
            raise fail(f"{got(value)} is not a list" + (" of strings" if kind != "entries" else " of entries"))
        for i, item in enumerate(value):
            if kind == "entries" and isinstance(item, dict):
                for k, v in item.items():
                    if not isinstance(v, (str, int)):
                        raise fail(f"{got(v)} is not a string", sub=f"[{i}][{k!r}]")
                continue
            if not isinstance(item, str):
                raise fail(f"{got(item)} is not a string", sub=f"[{i}]")
            try:
                if kind == "tags":
                    check_reference(item)
                elif kind == "platforms":
                    check_platform(item)
            except ValueError as err:
                raise fail(str(err), sub=f"[{i}]", cls=StageError) from None
        raise fail("no platform; buildx would build for the engine's own platform under every tag", cls=StageError)
    if not isinstance(value, dict):
        raise fail(f"{got(value)} is not a mapping of string to string")
    for key, item in value.items():
        if not key:
            raise fail("an empty name", key=key, cls=StageError)
        if kind == "args" and not ARG_NAME.match(key):
            raise fail(f"{key!r:.60} is not a build-arg name ([A-Za-z_][A-Za-z0-9_]*)", key=key, cls=StageError)
        if kind == "contexts":
            why = check_context(item)
            if why:
                raise fail(why, key=key, sub=f"[{key!r}]", cls=StageError)
    raise AssertionError(f"{attr}: refused, but no reason found")  # pragma: no cover - the two tables disagree


def _check_shape(where: str, key, value) -> None:
    """Values a bake file holds at all: scalars, lists of scalars or flat mappings, mappings of
    string to string. NaN and infinity have no spelling in HCL or JSON."""
    def bad(what, v):
        if isinstance(v, float) and not math.isfinite(v):
            return PluginError(f"{where}, {what}: float {v!r} is not a finite number; bake files cannot hold it")
        return PluginError(f"{where}, {what}: {type(v).__name__} {v!r:.40} is not a string, number or boolean")

    def scalar(v) -> bool:
        return isinstance(v, _SCALARS) and not (isinstance(v, float) and not math.isfinite(v))

    if scalar(value):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):  # object-form entries (cache-from, secret, ... in buildx 0.19+)
                for k, v in item.items():
                    if not isinstance(k, str) or not scalar(v):
                        raise bad(f"{key}[{i}][{k!r}]", v)
            elif not scalar(item):
                raise bad(f"{key}[{i}]", item)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise PluginError(f"{where}, {key}: key {k!r} is {type(k).__name__}, not a string")
            if not isinstance(v, str):
                raise PluginError(f"{where}, {key}[{k!r}]: {type(v).__name__} {v!r:.40} is not a string")
        return
    raise bad(key, value)
