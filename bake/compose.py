"""Composition: requested targets → their chain of stages → bake targets, in buildx's JSON shape.

Pure: the inputs are the collected stages, the options and the hooks; the output is the plan.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
from typing import Dict, List, Optional, Sequence, Tuple

from bake.errors import StageError, UsageError
from bake.naming import arch_of, check_repository, check_tag, target_name
from bake.plugins import Hooks
from bake.stage import Stage

FLAVOR_MEALKIT, FLAVOR_FINAL, FLAVOR_SINGLE = "mealkit", "final", "single"
DEFAULT_GROUP = "default"


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """What the user asked for.

    :param targets: stage names (or bake target names such as ``jax-mealkit``) to plan.
    :param platforms: normalised ``--platform`` values; empty means each stage's own platforms.
        Exactly one makes the plan per-arch: every tag and writable cache ref gets ``-<arch>``.
    :param registry: replaces every stage's registry when set.
    :param date: the date in ``nightly-``/``mealkit-`` tags.
    :param base_images: ``(original, replacement)`` pairs: every ``FROM original`` resolves to
        ``replacement`` through a named context (``original = "docker-image://replacement"``),
        for registry mirrors, stand-ins and air-gapped builds.
    """

    targets: Tuple[str, ...]
    date: datetime.date
    platforms: Tuple[str, ...] = ()
    registry: Optional[str] = None
    base_images: Tuple[Tuple[str, str], ...] = ()

    @property
    def arch(self) -> Optional[str]:
        """The arch of a per-arch plan, else ``None``."""
        return arch_of(self.platforms[0]) if len(self.platforms) == 1 else None


@dataclasses.dataclass
class Composition:
    """A composed plan: ``plan`` in buildx's JSON shape, and the chain of stages it came from."""

    plan: dict
    chain: List[Stage]
    requested: List[str]


def target_names(stage: Stage) -> List[Tuple[str, str]]:
    """``[(bake target name, flavor)]`` of a stage, in build order."""
    name = target_name(stage.name)
    if stage.kind == "mealkit":
        return [(f"{name}-mealkit", FLAVOR_MEALKIT), (name, FLAVOR_FINAL)]
    return [(name, FLAVOR_SINGLE)]


def output_target(stage: Stage) -> str:
    """The target other stages build on or copy from: the meal kit (never the final image,
    so each Python package is installed once, in the child's final stage), or the single target."""
    return target_names(stage)[0][0]


def resolve_targets(stages: Dict[str, Stage], requested: Sequence[str]) -> List[str]:
    """Map requested names (stage names or bake target names) to stage names.

    :raises UsageError: an unknown name, with the nearest known names.
    """
    by_target = {}
    for stage in stages.values():
        for tname, _ in target_names(stage):
            by_target[tname] = stage.name
    out = []
    for name in requested:
        if name in stages:
            out.append(name)
        elif name in by_target:
            out.append(by_target[name])
        else:
            known = sorted(set(stages) | set(by_target))
            near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
            hint = f"; did you mean {', '.join(near)}?" if near else f"; known stages: {', '.join(sorted(stages))}"
            raise UsageError(f"unknown target '{name}'{hint}")
    return list(dict.fromkeys(out))


def dependencies(stage: Stage) -> List[str]:
    """Stage names this stage needs built first: its parent, then the stages it ``uses``."""
    deps = [stage.parent] if stage.parent else []
    return deps + [s for s in stage.uses.values() if s not in deps]


def chain_of(stages: Dict[str, Stage], roots: Sequence[str]) -> List[Stage]:
    """The roots and all their ancestors, each after everything it depends on (depth-first, in
    declaration order, so the same inputs always give the same order).

    Iterative, so a chain thousands of stages deep is as fine as a short one.

    :raises StageError: a missing parent / used stage, or a cycle (naming every stage in it).
    """
    order: List[Stage] = []
    done = set()
    for root in roots:
        if root in done:
            continue
        # The path from the root to the stage being visited, and each one's deps still to visit.
        path = [root]
        on_path = {root}
        pending = [iter(dependencies(stages[root]))]
        while pending:
            name = next(pending[-1], None)
            if name is None:  # every dependency of path[-1] is done: it goes next
                finished = path.pop()
                on_path.remove(finished)
                pending.pop()
                done.add(finished)
                order.append(stages[finished])
            elif name not in done:
                if name in on_path:
                    raise _cycle_error(stages, path[path.index(name):] + [name])
                if name not in stages:
                    raise _missing_error(stages, name, stages[path[-1]])
                path.append(name)
                on_path.add(name)
                pending.append(iter(dependencies(stages[name])))
    return order


def _cycle_error(stages: Dict[str, Stage], cycle: List[str]) -> StageError:
    plugins = ", ".join(f"'{s}' from plugin '{stages[s].plugin}'" for s in dict.fromkeys(cycle))
    return StageError(f"cycle between stages: {' -> '.join(cycle)} ({plugins})")


def _missing_error(stages: Dict[str, Stage], name: str, needed_by: Stage) -> StageError:
    field = "parent" if needed_by.parent == name else "uses"
    near = difflib.get_close_matches(name, list(stages), n=1)
    hint = f"; did you mean '{near[0]}'?" if near else ""
    return StageError(
        f"plugin '{needed_by.plugin}', stage '{needed_by.name}', field '{field}': "
        f"stage '{name}' does not exist{hint}"
    )


def check_unique_targets(stages: Dict[str, Stage]) -> None:
    """Two stages whose names sanitise onto the same bake target name are an error naming both."""
    seen: Dict[str, Stage] = {}
    for stage in stages.values():
        for tname, _ in target_names(stage):
            other = seen.get(tname)
            if other is not None and other.name != stage.name:
                raise StageError(
                    f"stages '{other.name}' (plugin '{other.plugin}') and '{stage.name}' (plugin "
                    f"'{stage.plugin}') both become bake target '{tname}'"
                )
            seen[tname] = stage


def compose(stages: Dict[str, Stage], options: PlanOptions, hooks: Hooks) -> Composition:
    """Compose the plan for ``options.targets``.

    :returns: a :class:`Composition`; its ``plan`` has ``group`` (``default``: every target of
        the chain, so ``bake`` pushes meal kits too; buildx otherwise builds ``target:``-only
        dependencies as cache-only) and ``target`` keyed by bake target name, in build order.
    :raises UsageError: unknown target, or a requested platform a requested stage does not support.
    :raises StageError: missing parent, cycle, clashing target names, platform mismatch in the chain.
    :raises PluginError: a policy hook raised or answered with the wrong shape.
    """
    check_unique_targets(stages)
    requested = resolve_targets(stages, options.targets)
    chain = chain_of(stages, requested)

    platforms: Dict[str, List[str]] = {}
    for stage in chain:
        answer = hooks.platforms(stage, options.platforms)
        unsupported = [p for p in answer if p not in stage.platforms]
        if unsupported:
            raise UsageError(
                f"stage '{stage.name}' (plugin '{stage.plugin}') does not support {', '.join(unsupported)}; "
                f"it supports {', '.join(stage.platforms)}"
            )
        for dep in dependencies(stage):
            missing = [p for p in answer if p not in platforms[dep]]
            if missing:
                raise StageError(
                    f"plugin '{stage.plugin}', stage '{stage.name}': builds for {', '.join(missing)} "
                    f"but stage '{dep}' it builds on does not"
                )
        platforms[stage.name] = answer

    cache_refs: Dict[Tuple[str, str], str] = {}
    targets: Dict[str, dict] = {}
    for stage in chain:
        for tname, flavor in target_names(stage):
            targets[tname] = _target(stage, tname, flavor, platforms[stage.name], options, hooks, stages, cache_refs)

    plan = {"group": {DEFAULT_GROUP: {"targets": list(targets)}}, "target": targets}
    return Composition(plan=plan, chain=chain, requested=requested)


def _repository(stage: Stage, options: PlanOptions) -> str:
    registry = options.registry or stage.registry
    return f"{registry}/{stage.image or target_name(stage.name).lower()}"


def _target(stage, tname, flavor, platforms, options, hooks, stages, cache_refs) -> dict:
    arch = options.arch
    suffix = f"-{arch}" if arch else ""
    repo = _repository(stage, options)
    check_repository(repo)

    target: dict = {}
    if isinstance(stage.context, str):
        target["context"] = stage.context
    if stage.dockerfile_inline is not None:
        target["dockerfile-inline"] = stage.dockerfile_inline
    else:
        target["dockerfile"] = stage.dockerfile
    if flavor != FLAVOR_SINGLE:
        target["target"] = flavor
    elif stage.target:
        target["target"] = stage.target

    contexts = {}
    if stage.parent:
        contexts["base"] = "target:" + output_target(stages[stage.parent])
    for ctx, used in stage.uses.items():
        contexts[ctx] = "target:" + output_target(stages[used])
    if flavor == FLAVOR_FINAL:
        # A named context replaces the Dockerfile stage of the same name (BuildKit), so the final
        # stage's `FROM mealkit` is the meal kit target itself: built once, and listed by
        # `bake --print <stage>` as a dependency. The other contexts stay for the Dockerfile's
        # other stages (BuildKit's checks resolve them all).
        contexts["mealkit"] = "target:" + output_target(stage)
    contexts.update(stage.contexts)
    for original, replacement in options.base_images:
        contexts[original] = "docker-image://" + replacement
    if contexts:
        target["contexts"] = contexts

    key = hooks.cache_key(stage, flavor) + suffix
    try:
        check_tag(key)
    except ValueError as err:
        raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}': cache key: {err}") from None
    cache_refs[(stage.name, flavor)] = f"{repo}:{key}"

    args = stage.build_args()
    args["CACHE_SILO"] = key
    target["args"] = args

    labels = {
        "org.opencontainers.image.title": stage.image or stage.name,
        "org.opencontainers.image.created": f"{options.date.isoformat()}T00:00:00Z",
    }
    labels.update(stage.labels)
    target["labels"] = labels

    if stage.image is not None:
        tags = []
        for tag in hooks.tags(stage, flavor, options.date):
            try:
                check_tag(tag + suffix)
            except ValueError as err:
                raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}': {err}") from None
            tags.append(f"{repo}:{tag}{suffix}")
        target["tags"] = tags
    target["platforms"] = list(platforms)

    # Read own ref first, then what this target builds on: for a final, its meal kit; for a
    # meal kit or single target, the parent's output. Write only the own ref.
    reads = [cache_refs[(stage.name, flavor)]]
    if flavor == FLAVOR_FINAL:
        reads.append(cache_refs[(stage.name, FLAVOR_MEALKIT)])
    elif stage.parent:
        parent = stages[stage.parent]
        reads.append(cache_refs[(parent.name, target_names(parent)[0][1])])
    target["cache-from"] = [f"type=registry,ref={ref}" for ref in reads]
    target["cache-to"] = [f"type=registry,ref={cache_refs[(stage.name, flavor)]},mode=max,ignore-error=true"]

    hooks.adjust_target(stage, tname, flavor, target)
    return target
