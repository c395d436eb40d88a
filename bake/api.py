"""The library face of bake-plan: plan and render without the command line.

Composition and rendering are pure; this module wires them to the plugin manager and the
shipped template. The CLI is a thin layer over these two calls.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Dict, FrozenSet, Iterable, Optional, Sequence, Tuple

import pluggy

from bake.errors import StageError, UsageError
from bake.plan import dockerfile
from bake.plan.compose import BAKE_SCRIPTS, WHEELHOUSE, Composition, PlanOptions, compose, ignores_lock, uses_named_context
from bake.plan.plugins import Hooks, get_plugin_manager
from bake.plan.render import hcl_parts, json_parts
from bake.plan.stage import Stage
from bake.plan.variants import expand
from bake.resources import template_path

if TYPE_CHECKING:
    from bake.plan.overrides import StageOverride

FORMATS = {"hcl": "docker-bake.hcl", "json": "docker-bake.json"}
"""Plan formats and their default file names (the names ``docker buildx bake`` reads by default)."""


def collect_stages(hooks: Hooks, overrides: Sequence[StageOverride] = (),
                   not_secret: Optional[AbstractSet[str]] = None) -> Dict[str, Stage]:
    """Every plugin's stages, with the configuration's per-stage ``overrides`` applied
    (:mod:`bake.plan.overrides`), then variants expanded into concrete stages (:mod:`bake.plan.variants`).

    :param not_secret: arg names that look like credentials but are not (``--not-secret``);
        ``None`` (listing stages, no plan): the overrides' arg names are not checked.
    :raises bake.errors.BakePlanError: a plugin, stage or override is wrong (one line naming it).
    """
    stages = hooks.collect_stages()
    if overrides:  # bake.plan.overrides is imported only for a configuration that has some
        from bake.plan.overrides import apply_overrides

        stages = apply_overrides(stages, overrides, not_secret)
    return expand(stages)


def make_plan(
    options: PlanOptions,
    pm: Optional[pluggy.PluginManager] = None,
    overrides: Sequence[StageOverride] = (),
    locks_dir: Optional[Path] = None,
    targets_from: Optional[str] = None,
) -> Composition:
    """Collect every plugin's stages and compose the plan for ``options``.

    The plan is also searched for the current value of every ``options.secrets`` (an
    environment variable's or a file's content, when available and 8 characters or longer): a
    secret must reach builds only through the ``secret`` attribute.

    :param pm: a plugin manager; default :func:`bake.plan.plugins.get_plugin_manager` (entry points).
    :param overrides: per-stage overrides from the configuration (:class:`bake.plan.overrides.StageOverride`).
    :param locks_dir: make a locked plan (``--locked``): each requested stage's final target gets
        its lock from this directory as the ``pip-lock`` named context
        (:func:`bake.pip.lock.locked_contexts`, which checks the lock is current).
    :param targets_from: where ``options.targets`` came from (``--target``, ``bake-plan.toml:
        targets``): an unknown target's error line starts with it.
    :raises bake.errors.BakePlanError: bad input, with a one-line message naming the culprit.
    """
    from bake.pip.lockfiles import check_lock_names
    from bake.pip.sources import check_manifest, check_sources
    from bake.plan.secrets import SECRET_HINT, find_secret_values

    check_manifest()  # a manifest that is not TOML fails every plan, naming the file, not a plugin
    hooks = Hooks(pm if pm is not None else get_plugin_manager())
    stages = collect_stages(hooks, overrides, options.not_secret)
    check_lock_names(list(stages.values()))
    if targets_from is not None:
        _check_targets(stages, options.targets, targets_from)
    if options.wheelhouse is not None:
        options = dataclasses.replace(options, wheelhouse_users=wheelhouse_users(stages))
    options = dataclasses.replace(options, bake_scripts_users=context_users(stages, BAKE_SCRIPTS))
    composition = compose(stages, options, hooks)
    check_sources(composition.chain)  # a bad manifest entry fails only the plans that use it
    if locks_dir is not None:
        from bake.pip.lock import locked_contexts

        pip_locks = locked_contexts(composition, Path(locks_dir))
        for name, _ in pip_locks:
            stage = stages[name]
            text = dockerfile_text(stage)
            lacking = ignores_lock(text) if text is not None else None
            if lacking:  # (a Dockerfile that cannot be read here is left to bake-pip-finalize)
                raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}': --locked, but its Dockerfile "
                                 f"{lacking}, so its final stage would compile afresh and ignore the lock "
                                 "(docs/plugins.md has the final-stage template)")
        composition = compose(stages, dataclasses.replace(options, pip_locks=pip_locks), hooks)
    found = find_secret_values(composition.plan, options.secrets)
    if found:
        spec, tname, path = found
        source = f"env {spec.env}" if spec.env else f"file {spec.src}"
        stage = next((s for s in composition.chain if tname in _targets_of(s)), None)
        where = f"plugin '{stage.plugin}', stage '{stage.name}', " if stage else ""
        raise StageError(f"{where}target '{tname}', {path}: holds the value of secret '{spec.id}' ({source}); "
                         f"{SECRET_HINT}")
    return composition


def _check_targets(stages: Dict[str, Stage], targets: Sequence[str], where: str) -> None:
    """:raises UsageError: (or :class:`ConfigError` for a file's ``targets``) an unknown target,
    the line led by ``where``: ``--target: unknown target 'x'; did you mean …``."""
    from bake.plan.compose import resolve_targets
    from bake.settings.values import error

    try:
        resolve_targets(stages, targets)
    except UsageError as err:  # resolve_targets' only error: an unknown name
        raise error(where, str(err)) from None


def dockerfile_text(stage: Stage) -> Optional[str]:
    """The text of a stage's Dockerfile (inline, or ``dockerfile`` under a directory ``context``;
    :func:`bake.plan.dockerfile.read`); ``None`` when it cannot be read here (a remote context, a
    missing file)."""
    return dockerfile.read(stage.context, stage.dockerfile, stage.dockerfile_inline)


def wheelhouse_users(stages: Dict[str, Stage]) -> FrozenSet[str]:
    """Names of the stages whose Dockerfile uses the ``wheelhouse`` named context
    (:func:`bake.plan.compose.uses_named_context`): the ones ``--wheelhouse`` is given to."""
    return context_users(stages, WHEELHOUSE)


def context_users(stages: Dict[str, Stage], name: str) -> FrozenSet[str]:
    """Names of the stages whose Dockerfile uses the named context ``name`` (a placeholder stage
    of that name, a mount or a copy from it: :func:`bake.plan.compose.uses_named_context`)."""
    found: Dict[tuple, bool] = {}  # a family's stages share Dockerfiles: each is read and parsed once
    users = []
    for stage_name, stage in stages.items():
        where = (stage.context, stage.dockerfile, stage.dockerfile_inline)
        if where not in found:
            found[where] = uses_named_context(dockerfile_text(stage) or "", name)
        if found[where]:
            users.append(stage_name)
    return frozenset(users)


def _targets_of(stage) -> list:
    from bake.plan.compose import target_names

    return [name for name, _ in target_names(stage)]


def render(composition: Composition, fmt: str = "hcl", filename: str = "docker-bake.hcl",
           environment: Sequence[Tuple[str, str]] = ()) -> str:
    """The plan file's text in ``fmt`` (``hcl`` through ``docker-bake.hcl.tmpl``, or ``json``).

    :param environment: ``(variable, text)`` of the ``BAKE_PLAN_*`` settings in force
        (:attr:`bake.settings.merge.Settings.environment`), written in the HCL header (JSON has
        no comments).

    Same composition, same bytes. :raises ValueError: an unknown format.
    """
    return "".join(render_parts(composition, fmt, filename, environment))


def render_parts(composition: Composition, fmt: str = "hcl", filename: str = "docker-bake.hcl",
                 environment: Sequence[Tuple[str, str]] = ()) -> Iterable[str]:
    """:func:`render`'s text in parts (a block at a time, for :func:`bake.output.write_atomic`), so a
    large plan's text is never held whole; its errors are raised before the first part.

    :raises ValueError: an unknown format.
    """
    if fmt == "json":
        return json_parts(composition.plan)
    if fmt == "hcl":
        return hcl_parts(composition.plan, template_path(), composition.requested,
                         filename=[filename, *composition.bake_files], environment=environment)
    raise ValueError(f"unknown plan format {fmt!r}")
