"""Per-stage overrides from the configuration, applied to the collected stages before composition.

``[tool.bake-plan.stages.<name>]`` (or ``[stages.<name>]`` in ``bake-plan.toml``) changes what a
plugin declared, without touching the plugin:

- ``args``: merged over the stage's args (the override wins per name);
- ``sources``: by source name (``JAX``), a new ``url`` and/or ``ref``;
- ``base-image``: the external image a root stage starts from;
- ``variants``: axes merged over the stage's own (an axis given here replaces its values);
  ``variant-format`` and ``variant-args`` as on :class:`bake.plan.stage.Stage`. Variants added to a
  stage with a fixed ``variant`` tag replace it. An axis the stage does not declare must appear
  in the ``variant-format`` in force (so ``pyth`` for ``python`` is an error naming ``python``).

Each overridden stage is validated again, so a bad value is an error naming the file and table.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, Optional, Sequence, Tuple

from bake.errors import ConfigError, StageError, did_you_mean
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


def apply_overrides(stages: Dict[str, Stage], overrides: Sequence[StageOverride]) -> Dict[str, Stage]:
    """``stages`` with each override applied (``dataclasses.replace``) and validated again.

    :raises ConfigError: an override names an unknown stage or source, sets ``base-image`` on a
        stage that builds on another stage, or gives a value the stage model refuses; the
        message starts with the override's ``where``.
    """
    if not overrides:
        return stages
    out = dict(stages)
    for override in overrides:
        stage = out.get(override.stage)
        if stage is None:
            hint = did_you_mean(override.stage, stages) or f" (stages: {', '.join(sorted(stages))})"
            raise ConfigError(f"{override.where}: no stage '{override.stage}'{hint}")
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
            raise ConfigError(f"{override.where}: {err}") from None
    return out


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
