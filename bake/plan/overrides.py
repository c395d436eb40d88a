"""Per-stage overrides from the configuration, applied to the collected stages before composition.

``[tool.bake-plan.stages.<name>]`` (or ``[stages.<name>]`` in ``bake-plan.toml``) changes what a
plugin declared, without touching the plugin:

- ``args``: merged over the stage's args (the override wins per name);
- ``sources``: by source name (``JAX``), a new ``url`` and/or ``ref``;
- ``base-image``: the external image a root stage starts from;
- ``variants``: axes merged over the stage's own (an axis given here replaces its values);
  ``variant-format`` and ``variant-args`` as on :class:`bake.plan.stage.Stage`. Only a stage that
  declares variant axes takes them: on any other, the values could only become build args its
  Dockerfile does not read, and tags. An axis the stage does not declare must appear in the
  ``variant-format`` in force (so ``pyth`` for ``python`` is an error naming ``python``).

Each overridden stage is validated again, so a bad value is an error naming the file, the table
and the key as the configuration spells it (``base-image``, not the field ``base_image``). Every
string the override gives is checked here too (text bake would change, anything that looks like
a credential), so such a value is blamed on the file, not on the stage's plugin.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import AbstractSet, Dict, Iterator, Mapping, Optional, Sequence, Tuple

from bake.errors import ConfigError, StageError, did_you_mean
from bake.patterns import LazyPattern
from bake.plan.checks import check_text
from bake.plan.secrets import SECRET_HINT, credential_name, credential_value
from bake.plan.stage import Stage
from bake.plan.validate import validate
from bake.plan.variants import _FIELD, expand


@dataclasses.dataclass(frozen=True)
class StageOverride:
    """What the configuration changes in one stage.

    :param stage: the declared stage name.
    :param where: where it was written, for messages: ``pyproject.toml:tool.bake-plan.stages.jax``.
    :param sources: source name → ``{"url": …, "ref": …}`` (either or both).
    """

    stage: str
    where: str
    args: Mapping[str, str] = dataclasses.field(default_factory=dict)
    sources: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    base_image: Optional[str] = None
    variants: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)
    variant_format: Optional[str] = None
    variant_args: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def as_table(self) -> Dict[str, object]:
        """The override in its configuration form (kebab-case keys, only what is set)."""
        table: Dict[str, object] = {}
        for key, value in (("args", dict(self.args)), ("sources", {k: dict(v) for k, v in self.sources.items()}),
                           ("base-image", self.base_image), ("variants", {k: list(v) for k, v in self.variants.items()}),
                           ("variant-format", self.variant_format), ("variant-args", dict(self.variant_args))):
            if value:
                table[key] = value
        return table


FIELD_KEYS = {"args": "args", "sources": "sources", "base_image": "base-image", "variants": "variants",
              "variant_format": "variant-format", "variant_args": "variant-args", "variant": "variant-format"}
"""Stage field → the configuration key that sets it (what error lines name)."""
_FIELD_ERROR = LazyPattern(r"plugin '[^']*', stage '(?P<stage>[^']*)', field '(?P<field>\w+)': ")
_FIELD_NAME = LazyPattern(r"(?<!['\w])(" + "|".join(k for k, v in FIELD_KEYS.items() if k != v and k != "variant") + r")(?![\w'])")


def apply_overrides(stages: Dict[str, Stage], overrides: Sequence[StageOverride],
                    not_secret: Optional[AbstractSet[str]] = frozenset()) -> Dict[str, Stage]:
    """``stages`` with each override applied (``dataclasses.replace``) and validated again.

    :param not_secret: arg names that look like credentials but are not (``--not-secret``);
        ``None`` when the caller writes no plan (``bake-plan stages``): names are not checked.
    :raises ConfigError: an override names an unknown stage or source, sets ``base-image`` on a
        stage that builds on another stage or ``variants`` on one without variant axes, gives a
        value the stage model refuses, text bake would change, or something that looks like a
        credential; the message starts with the override's ``where`` and names the key.
    """
    if not overrides:
        return stages
    out = dict(stages)
    for override in overrides:
        stage = out.get(override.stage)
        if stage is None:
            hint = did_you_mean(override.stage, stages) or f" (stages: {', '.join(sorted(stages))})"
            raise ConfigError(f"{override.where}: no stage '{override.stage}'{hint}")
        _check_strings(override, not_secret)
        changes: Dict[str, object] = {}
        if override.args:
            changes["args"] = {**stage.args, **override.args}
        if override.sources:
            changes["sources"] = _sources(stage, override)
        if override.base_image is not None:
            if stage.parent is not None:
                raise ConfigError(
                    f"{override.where}: base-image: stage '{stage.name}' builds on stage '{stage.parent}', "
                    "not on an external image"
                )
            changes["base_image"] = override.base_image
        if override.variants:
            _check_axes(stage, override)
            if not stage.variants:
                raise ConfigError(
                    f"{override.where}: variants: stage '{stage.name}' (plugin '{stage.plugin}') declares no variant "
                    "axes, so its build cannot use them (the values would only become build args its Dockerfile "
                    "does not read); the plugin declares axes with Stage(variants=...)"
                )
            changes["variants"] = {**stage.variants, **override.variants}
            changes["variant"] = None
        if override.variant_format is not None:
            changes["variant_format"] = override.variant_format
        if override.variant_args:
            changes["variant_args"] = {**stage.variant_args, **override.variant_args}
        try:
            out[stage.name] = validate(dataclasses.replace(stage, **changes), stage.plugin)
            expand({stage.name: out[stage.name]})  # its own matrix: distinct, valid variant tags
        except StageError as err:
            raise ConfigError(f"{override.where}: {_as_configured(str(err), override)}") from None
    return out


def _as_configured(message: str, override: StageOverride) -> str:
    """A stage check's message as the configuration's user reads it: ``plugin 'p', stage 's',
    field 'base_image': …`` becomes ``base-image: …`` (the override's ``where`` already names the
    stage, and the value is the file's, not the plugin's), field names in the text become keys."""
    match = _FIELD_ERROR.match(message)
    if match:
        stage = match.group("stage")
        key = FIELD_KEYS.get(match.group("field"), match.group("field"))
        head = f"{key}: " if stage == override.stage else f"{key} (for stage '{stage}'): "
        message = head + message[match.end():]
    return _FIELD_NAME.sub(lambda m: FIELD_KEYS[m.group(1)], message)


def _key(name: str) -> str:
    """A TOML key as written: bare when it can be, else quoted."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def _strings(node, path: str) -> Iterator[Tuple[str, str]]:
    """Every string of a configuration value with its dotted key (``args.X``, ``variants.python[0]``);
    a mapping's keys too."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{_key(key)}"
            yield sub, key
            yield from _strings(value, sub)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")


def _check_strings(override: StageOverride, not_secret: Optional[AbstractSet[str]]) -> None:
    """Text bake would change and credentials in what the configuration gives, blamed on the file
    and key (the plan's own check would only know the stage's plugin)."""
    for key, value in override.as_table().items():
        for path, text in _strings(value, key):
            why = check_text(text)
            if why:
                raise ConfigError(f"{override.where}: {path}: {why}")
            what = credential_value(text)
            if what:
                raise ConfigError(f"{override.where}: {path}: the value looks like {what}; {SECRET_HINT}")
    if not_secret is None:
        return
    for name in [*override.args, *override.variant_args.values()]:
        why = None if name in not_secret else credential_name(name)
        if why:
            key = f"args.{_key(name)}" if name in override.args else "variant-args"
            raise ConfigError(f"{override.where}: {key}: arg '{name}' looks like a credential ({why}); {SECRET_HINT} "
                              f"(if it is not one: --not-secret {name})")


def _check_axes(stage: Stage, override: StageOverride) -> None:
    """An axis the stage does not declare may be added only when the variant tag shows it: it is
    in the ``variant-format`` in force (the override's, else the stage's). Without one, the tag is
    made of every axis. So a misspelt axis (``pyth`` for ``python``) is an error, not a new arg."""
    fmt = override.variant_format if override.variant_format is not None else stage.variant_format
    if fmt is None:
        return
    used = set(_FIELD.findall(fmt))
    for axis in override.variants:
        if axis in stage.variants or axis in used:
            continue
        if stage.variants:
            hint = did_you_mean(axis, stage.variants)
            raise ConfigError(
                f"{override.where}: variants: stage '{stage.name}' has no axis '{axis}'{hint} "
                f"(its axes: {', '.join(stage.variants)}; a new axis must appear in variant-format '{fmt}')"
            )
        raise ConfigError(f"{override.where}: variants: axis '{axis}' does not appear in variant-format '{fmt}'")


def _sources(stage: Stage, override: StageOverride):
    by_name = {src.name: src for src in stage.sources}
    for name in override.sources:
        if name not in by_name:
            hint = did_you_mean(name, by_name) or f" (its sources: {', '.join(by_name) or 'none'})"
            raise ConfigError(f"{override.where}: sources: stage '{stage.name}' has no source '{name}'{hint}")
    return tuple(
        dataclasses.replace(src, **override.sources[src.name]) if src.name in override.sources else src
        for src in stage.sources
    )
