"""What every bake target must be before it is written, whoever filled it in (bake-plan, a
stage's fields, or a plugin's ``bake_plan_adjust_target``):

- made of values a bake file holds: strings, numbers, booleans, lists of those and mappings of
  string to string (anything else would fail rendering or be read differently by buildx);
- valid Unicode text in NFC: bake stores every string through cty, which NFC-normalises it, so a
  decomposed ``é`` (``e`` + U+0301) would come back changed, and a lone surrogate cannot be
  written as UTF-8 at all;
- free of credentials (:mod:`bake.plan.secrets`): no arg or label named like one, no string that
  looks like one anywhere in the target.
"""

from __future__ import annotations

import unicodedata
from typing import AbstractSet

from bake.errors import PluginError, StageError
from bake.plan.secrets import (
    SECRET_HINT,
    credential_name,
    credential_value,
    walk_strings,
)
from bake.plan.stage import Stage
from bake.plan.text import NUL, describe

_SCALARS = (str, bool, int, float)


def check_target(stage: Stage, name: str, target: dict, not_secret: AbstractSet[str] = frozenset()) -> None:
    """Check one finished target of ``stage``.

    :param not_secret: arg and label names the user declared are not credentials (``--not-secret``).
    :raises PluginError: a value of a type bake files do not hold.
    :raises StageError: text that is not valid NFC Unicode, or that looks like a credential; the
        line names the plugin, the stage, the target and the attribute, never the value.
    """
    where = f"plugin '{stage.plugin}', stage '{stage.name}', target '{name}'"
    for key, value in target.items():
        _check_shape(where, key, value)
    strings = list(walk_strings(target))
    for path, text in strings:
        if NUL in text:  # no build arg, label, path or file can carry one (issue 14)
            raise StageError(f"{where}, {path}: holds {describe(NUL)}, which nothing a build reads can carry")
        if text.isascii():  # ASCII is valid UTF-8 and already NFC
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise StageError(f"{where}, {path}: not valid Unicode text (a lone surrogate at character "
                             f"{err.start}); bake files are UTF-8") from None
        if not unicodedata.is_normalized("NFC", text):
            raise StageError(f"{where}, {path}: not in Unicode NFC; bake stores every string NFC-normalised, "
                             "so buildx would read a different value (normalise it with "
                             "unicodedata.normalize('NFC', value))")
    for attr, kind in (("args", "arg"), ("labels", "label")):
        for key in target.get(attr, {}):
            why = None if key in not_secret else credential_name(key)
            if why:
                raise StageError(f"{where}, {kind} '{key}' looks like a credential ({why}); {SECRET_HINT} "
                                 f"(if it is not one: --not-secret {key})")
    for path, text in strings:
        what = credential_value(text)
        if what:
            raise StageError(f"{where}, {path}: the value looks like {what}; {SECRET_HINT}")


def _check_shape(where: str, key, value) -> None:
    if not isinstance(key, str):
        raise PluginError(f"{where}: attribute {key!r} is {type(key).__name__}, not a string")

    def bad(what, v):
        return PluginError(f"{where}, {what}: {type(v).__name__} {v!r:.40} is not a string, number or boolean")

    if isinstance(value, _SCALARS):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, dict):  # object-form entries (cache-from, secret, ... in buildx 0.19+)
                for k, v in item.items():
                    if not isinstance(k, str) or not isinstance(v, _SCALARS):
                        raise bad(f"{key}[{i}][{k!r}]", v)
            elif not isinstance(item, _SCALARS):
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
