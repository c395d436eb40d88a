"""Composition: requested targets → their chain of stages → bake targets, in buildx's JSON shape.

Pure: the inputs are the collected stages, the options and the hooks; the output is the plan.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sys
from typing import Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from bake.errors import PluginError, StageError, UsageError, did_you_mean
from bake.patterns import LazyPattern
from bake.plan.checks import check_plan
from bake.plan.dockerfile import instructions
from bake.plan.inputs import label_targets
from bake.plan.names import (
    arch_of,
    check_repository,
    check_tag,
    context_name,
    normalise_reference,
    repository_name,
    target_name,
)
from bake.plan.plugins import CORE_PLUGINS, THROUGH_A_WRAPPER, Hooks, changes, snapshot
from bake.plan.secrets import SecretSpec
from bake.plan.stage import Stage, dependencies
from bake.resources import stages_dir

FLAVOR_MEALKIT, FLAVOR_FINAL, FLAVOR_SINGLE = "mealkit", "final", "single"
DEFAULT_GROUP = "default"


class ParentImage(NamedTuple):
    """What a parent job's report (``--parent-report``) says of one bake target it built.

    :param digest: ``sha256:…`` of the pushed image; ``None`` when the report names the target
        as not passed (``outcome``), so there is no image to build on.
    :param report: the file it was read from, named in errors.
    :param platforms: the platforms it was built for; ``None`` when the report does not say (a
        buildx metadata file).
    :param repositories: the normalised repositories its tags name
        (:func:`bake.plan.names.repository_name`); empty when the report does not say.
    :param outcome: the sitrep's outcome of the target; ``None`` for a buildx metadata file.
    """

    digest: Optional[str]
    report: str = ""
    platforms: Optional[Tuple[str, ...]] = None
    repositories: Tuple[str, ...] = ()
    outcome: Optional[str] = None

    def pin(self, tname: str, ref: str, platforms: Sequence[str], user: str) -> str:
        """The digest, once the report is seen to fit ``ref`` (the tag this plan pins, in its
        registry and namespace) built for ``platforms`` (those of ``user``, the target that
        builds on it). A per-job plan that pins another registry's image, one arch's image
        for several, or an image that was never pushed would fail inside buildx, or build on
        the wrong thing.

        :raises UsageError: naming the report, the target and what does not fit.
        """
        where = f"--parent-report: {self.report}: target '{tname}'"
        if self.outcome not in (None, "pass") or not self.digest:
            raise UsageError(f"{where} did not pass in that job (outcome {self.outcome!r}), so it pushed no image to "
                             f"build on: rerun that job first")
        repository = repository_name(ref)
        if self.repositories and repository not in self.repositories:
            raise UsageError(f"{where} was pushed to {', '.join(self.repositories)}, not {repository} (a report "
                             "of another registry or namespace? give this job the same --registry)")
        missing = [p for p in platforms if self.platforms is not None and p not in self.platforms]
        if missing:
            raise UsageError(f"{where} was built for {', '.join(self.platforms)}, not {', '.join(missing)} (target "
                             f"'{user}' builds on it for {', '.join(platforms)}: pass the report of a job that built "
                             "those platforms, or give --platform)")
        return self.digest


# eq=False: nothing compares two; an __eq__ (and __hash__) over every field is more code Python compiles at import
@dataclasses.dataclass(frozen=True, eq=False)
class PlanOptions:
    """What the user asked for.

    :param targets: stage names (or bake target names such as ``jax-mealkit``) to plan.
    :param platforms: normalised ``--platform`` values; empty means each stage's own platforms.
        Exactly one makes the plan per-arch: every tag and writable cache ref gets ``-<arch>``.
    :param registry: replaces every stage's registry when set.
    :param registry_needed: the plan's image names are shown (plan, build, publish, test), so a
        stage with no registry of its own needs ``registry``; ``False`` for commands that show none
        (graph, matrix, lock, wheelhouse), where such a stage's image is named without one.
    :param date: the date in ``nightly-``/``mealkit-`` tags.
    :param base_images: ``(original, replacement)`` pairs: every ``FROM original`` resolves to
        ``replacement`` through a named context (``original = "docker-image://replacement"``),
        for registry mirrors, stand-ins and air-gapped builds.
    :param cache_branch: a branch name for this run's writable cache refs (``<key>-<branch>``),
        so a branch never overwrites another's cache; ``None`` writes the shared key.
    :param cache_from_branch: a branch whose cache refs are read as well (the default branch).
    :param from_registry: per-job mode: published ancestors are not built but taken from the
        registry, pinned by digest (``docker-image://<repo>:mealkit@sha256:…``).
    :param digests: bake target name → ``sha256:…`` of its pushed image (from a parent job's
        sitrep or buildx metadata file); needed for every ancestor pinned in per-job mode.
    :param parents: bake target name → what the parent job's report says of it
        (:class:`ParentImage`); checked against the plan where it is pinned, and used instead
        of ``digests`` for the targets it names.
    :param per_arch: ``False`` keeps a one-platform plan's tags without ``-<arch>`` (``publish``
        names the multi-arch tags it makes from the per-arch ones).
    :param pip_locks: ``(stage name, directory)`` pairs: that stage's final target gets the named
        context ``pip-lock`` = the directory, which holds ``requirements.lock`` (or
        ``requirements-<arch>.lock`` per arch); the final stage then pip-syncs to it instead of
        compiling (``--locked``, see :func:`bake.pip.lock.locked_contexts`).
    :param secrets: build secrets every target may mount (bake's ``secret`` attribute): only their
        ids and the names of their variables or files are written, never a value.
    :param not_secret: arg and label names that look like credentials but are not.
    :param wheelhouse: the ``wheelhouse`` context value: an absolute directory of wheels, or (what
        the command line gives, :func:`bake.pip.wheelhouse.oci_layout`) ``oci-layout://DIR@sha256:…``
        of them (``--wheelhouse``): every target of a stage
        in ``wheelhouse_users`` gets it as the named context ``wheelhouse`` (replacing the stage's
        own) and the args ``PIP_NO_INDEX=1``, ``PIP_FIND_LINKS=/opt/wheelhouse``, so pip in the
        build installs only from it.
    :param wheelhouse_users: names of the stages whose Dockerfile uses the ``wheelhouse`` context
        (:func:`uses_named_context`; :func:`bake.api.make_plan` reads the Dockerfiles).
    :param bake_scripts_users: names of the stages whose Dockerfile uses the ``bake-scripts``
        context (:data:`BAKE_SCRIPTS`): every target of theirs gets bake-plan's helper scripts
        there, unless the stage gives that context itself.
    :param attest: bake ``attest`` entries (:func:`attestations`: provenance, SBOM) every target
        that exports an image gets; a cache-only target gets none (it exports no image to attach
        them to).
    :param cache_to: write each target's registry cache ref (``cache-to``); ``False`` for a build
        that pushes nothing (``build --load``), whose registry may not be there to write to.
    """

    targets: Tuple[str, ...]
    date: datetime.date
    platforms: Tuple[str, ...] = ()
    registry: Optional[str] = None
    registry_needed: bool = True
    base_images: Tuple[Tuple[str, str], ...] = ()
    cache_branch: Optional[str] = None
    cache_from_branch: Optional[str] = None
    from_registry: bool = False
    digests: Mapping[str, str] = dataclasses.field(default_factory=dict)
    parents: Mapping[str, ParentImage] = dataclasses.field(default_factory=dict)
    pip_locks: Tuple[Tuple[str, str], ...] = ()
    per_arch: bool = True
    secrets: Tuple[SecretSpec, ...] = ()
    not_secret: FrozenSet[str] = frozenset()
    wheelhouse: Optional[str] = None
    wheelhouse_users: FrozenSet[str] = frozenset()
    bake_scripts_users: FrozenSet[str] = frozenset()
    attest: Tuple[str, ...] = ()
    cache_to: bool = True

    @property
    def arch(self) -> Optional[str]:
        """The arch of a per-arch plan, else ``None``."""
        return arch_of(self.platforms[0]) if self.per_arch and len(self.platforms) == 1 else None


# eq=False: nothing compares two; an __eq__ over every field is more code Python compiles at import
@dataclasses.dataclass(eq=False)
class Composition:
    """A composed plan: ``plan`` in buildx's JSON shape, the chain of stages it came from (in
    build order), the requested stage names, every stage the plugins declared, and other bake
    files to pass to buildx after the plan (docker/metadata-action's, :mod:`bake.plan.metadata`)."""

    plan: dict
    chain: List[Stage]
    requested: List[str]
    stages: Dict[str, Stage]
    bake_files: List[str] = dataclasses.field(default_factory=list)
    inherited_tags: Dict[str, List[str]] = dataclasses.field(default_factory=dict)
    """Target → the tags it inherits from docker/metadata-action's bake file (``publish`` merges
    those too)."""
    changed_by: Dict[Tuple[str, str, Optional[str]], str] = dataclasses.field(default_factory=dict)
    """``(target, attribute, key)`` → the plugin whose ``bake_plan_adjust_target`` last changed it
    (:data:`bake.plan.plugins.THROUGH_A_WRAPPER` through a wrapper), so a check made after
    composing (the privileges a build is granted) can name it."""
    input_digests: Dict[str, str] = dataclasses.field(default_factory=dict)
    """Bake target name → its input digest, ``sha256:<hex>`` (:mod:`bake.plan.inputs`; also its
    ``io.bake-plan.input-digest`` label)."""
    unchanged: Dict[str, dict] = dataclasses.field(default_factory=dict)
    """``build --skip-unchanged``: target → the newest record whose input digest it has, taken out
    of the plan (:func:`bake.plan.records.drop_unchanged`); the sitrep lists it as unchanged."""


WHEELHOUSE = "wheelhouse"
"""The named context a Dockerfile mounts its wheels from (``stages/base/Dockerfile``)."""
WHEELHOUSE_MOUNT = "/opt/wheelhouse"
"""Where the built-in Dockerfiles mount the ``wheelhouse`` context."""
WHEELHOUSE_ARGS = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELHOUSE_MOUNT}
"""The args that make pip in the build install only from the mounted wheelhouse."""


BAKE_SCRIPTS = "bake-scripts"
"""The named context of bake-plan's helper scripts (``stages/scripts``: ``fetch-source.sh``,
``write-requirements.sh``, ``pip-finalize.sh``), given to every stage whose Dockerfile uses it
(``COPY --from=bake-scripts …``), so a root stage on any base image can install them."""


def bake_scripts_dir() -> str:
    """The directory the ``bake-scripts`` context holds: ``stages/scripts`` as installed."""
    return str(stages_dir() / "scripts")


PIP_LOCK = "pip-lock"
"""The named context a ``--locked`` final stage gets its lock from (mounted at /opt/pip-lock)."""

LOCKED_ARG = "BAKE_PIP_LOCKED"
"""The build arg that tells ``bake-pip-finalize`` a lock must be mounted."""

PYTHON_ARG = "BAKE_PYTHON_DECLARED"
"""The build arg holding the Python a chain declares (``"3.10"``, ``"3.10.14"``), which
``bake-check-python`` compares with the image's ``python3`` in the chain's first step with Python."""

PYTHON_STAGE_ARG = "BAKE_PYTHON_STAGE"
"""The build arg naming the stage that declares :data:`PYTHON_ARG` (named in the check's error)."""

_PYTHON_AXIS = LazyPattern(r"3\.[0-9]{1,2}(?:\.[0-9]{1,3})?")


def declared_python(stage: Stage, stages: Mapping[str, Stage],
                    known: Optional[Dict[str, Optional[Tuple[str, str]]]] = None) -> Optional[Tuple[str, str]]:
    """``(version, stage name)``: the Python ``stage``'s image is declared to have, and the stage
    that declares it: its own ``python``, else its nearest parent's (a concrete variant's one-value
    ``python`` axis counts too). ``None`` when no stage of its chain (``stages``, by name) says.

    :param known: stage name → its answer, from earlier calls on the same ``stages``: the walk up
        the parents stops at a stage found there, and each stage it passed is added. Composing asks
        it of every target; walking to the root each time cost a chain N stages deep N² steps.
    """
    known = {} if known is None else known
    seen = set()
    answer = None
    current: Optional[Stage] = stage
    while current is not None and current.name not in seen:  # (a cycle of parents declares nothing)
        if current.name in known:
            answer = known[current.name]
            break
        seen.add(current.name)
        if current.python:
            answer = current.python, current.name
            break
        values = (current.variants or {}).get("python") or ()
        if len(values) == 1 and isinstance(values[0], str) and _PYTHON_AXIS.fullmatch(values[0]):
            answer = values[0], current.name
            break
        current = stages.get(current.parent) if current.parent else None
    for name in seen:
        known[name] = answer
    return answer


def _instructions(dockerfile: str) -> str:
    """A Dockerfile's instructions, one a line (:func:`bake.plan.dockerfile.instructions`: comments
    dropped, continued lines joined), for the patterns here."""
    return "\n".join(instructions(dockerfile))


def ignores_lock(dockerfile: str) -> Optional[str]:
    """What a Dockerfile lacks for ``--locked`` to reach its final stage (it reads the
    ``pip-lock`` context, ``RUN --mount=…,from=pip-lock`` or ``COPY --from=pip-lock``, and declares
    ``ARG BAKE_PIP_LOCKED``), or ``None`` when it has both.

    The placeholder stage ``FROM scratch AS pip-lock`` alone is not enough: the named context
    replaces it, but nothing would read the lock."""
    if not reads_named_context(dockerfile, PIP_LOCK):
        if uses_named_context(dockerfile, PIP_LOCK):
            return f"declares the {PIP_LOCK} stage but never mounts it (RUN --mount=…,from={PIP_LOCK})"
        return f"does not mount the {PIP_LOCK} context"
    if not re.search(rf"(?im)^\s*ARG\s+{LOCKED_ARG}\b", _instructions(dockerfile)):
        return f"does not declare ARG {LOCKED_ARG}"
    return None


def reads_named_context(dockerfile: str, name: str) -> bool:
    """Whether a step of a Dockerfile reads the named context ``name``: a mount from it
    (``RUN --mount=…,from=NAME``) or a copy from it (``COPY --from=NAME``); a stage of that name
    alone (the placeholder) does not count. Case-insensitive; comments are not read."""
    return bool(re.search(rf"(?im)[\s,=-]from={re.escape(name)}(?=[\s,]|$)", _instructions(dockerfile)))


def uses_named_context(dockerfile: str, name: str) -> bool:
    """Whether a Dockerfile's text uses the named context ``name``: a stage of that name
    (``FROM scratch AS wheelhouse``, the placeholder a named context replaces), a mount from it
    (``RUN --mount=…,from=wheelhouse``) or a copy from it (``COPY --from=wheelhouse``).
    Case-insensitive, as the Dockerfile frontend is; comments are not read."""
    text = _instructions(dockerfile)
    n = re.escape(name)
    return bool(re.search(rf"(?im)^\s*FROM\s+(?:--\S+\s+)*\S+\s+AS\s+{n}\s*$", text)
                or reads_named_context(dockerfile, name))


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


def variant_groups(stages: Dict[str, Stage]) -> Dict[str, List[str]]:
    """Declared name of each expanded variant stage → its concrete stages' names (:mod:`bake.plan.variants`)."""
    groups: Dict[str, List[str]] = {}
    for stage in stages.values():
        if stage.variant_of:
            groups.setdefault(stage.variant_of, []).append(stage.name)
    return groups


def resolve_targets(stages: Dict[str, Stage], requested: Sequence[str]) -> List[str]:
    """Map requested names (stage names, bake target names, or the declared name of a stage with
    variants, meaning every variant) to stage names.

    :raises UsageError: an unknown name, with the nearest known names.
    """
    by_target: Dict[str, List[str]] = {}
    for stage in stages.values():
        for tname, _ in target_names(stage):
            by_target[tname] = [stage.name]
    for base, names in variant_groups(stages).items():
        for group in _group_names(base, stages[names[0]]):
            by_target.setdefault(group, names)
        by_target.setdefault(base, names)
    out = []
    for name in requested:
        if name in stages:
            out.append(name)
        elif name in by_target:
            out.extend(by_target[name])
        else:
            hint = did_you_mean(name, sorted(set(stages) | set(by_target)))
            hint = hint or f"; known stages: {', '.join(sorted(stages))}"
            raise UsageError(f"unknown target '{name}'{hint}")
    return list(dict.fromkeys(out))


def _group_names(base: str, stage: Stage) -> List[str]:
    """The plan groups of a stage with variants: ``<base>`` (every variant's final or single
    target) and, for a meal-kit stage, ``<base>-mealkit``."""
    name = target_name(base)
    return [name, f"{name}-mealkit"] if stage.kind == "mealkit" else [name]


def chain_of(stages: Dict[str, Stage], roots: Sequence[str], stop_at_published: bool = False) -> List[Stage]:
    """The roots and all their ancestors, each after everything it depends on (depth-first, in
    declaration order, so the same inputs always give the same order).

    Iterative, so a chain thousands of stages deep is as fine as a short one.

    :param stop_at_published: per-job mode: an ancestor that publishes an image is taken from
        the registry, so neither it nor its own ancestors join the chain.
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
                if stop_at_published and stages[name].image is not None:
                    continue  # taken from the registry (per-job mode)
                path.append(name)
                on_path.add(name)
                pending.append(iter(dependencies(stages[name])))
    return order


def _cycle_error(stages: Dict[str, Stage], cycle: List[str]) -> StageError:
    plugins = ", ".join(f"'{s}' from plugin '{stages[s].plugin}'" for s in dict.fromkeys(cycle))
    return StageError(f"cycle between stages: {' -> '.join(cycle)} ({plugins})")


def _missing_error(stages: Dict[str, Stage], name: str, needed_by: Stage) -> StageError:
    field = "parent" if needed_by.parent == name else "uses"
    return StageError(
        f"plugin '{needed_by.plugin}', stage '{needed_by.name}', field '{field}': "
        f"stage '{name}' does not exist{did_you_mean(name, stages, n=1)}"
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


def _check_unique_tags(targets: Mapping[str, dict], owners: Mapping[str, Stage]) -> None:
    """Two targets with one tag would push one image over the other (two stages with one
    ``image``, or a tag policy that forgets the variant).

    :raises StageError: naming the tag and both targets' stages and plugins.
    """
    seen: Dict[str, str] = {}
    for tname, target in targets.items():
        for tag in target.get("tags", []):
            other = seen.setdefault(tag, tname)
            if other != tname:
                a, b = owners[other], owners[tname]
                raise StageError(f"targets '{other}' (stage '{a.name}', plugin '{a.plugin}') and '{tname}' (stage "
                                 f"'{b.name}', plugin '{b.plugin}') are both tagged {tag}: one would overwrite the other")


def _targets(chain: List[Stage], platforms: Dict[str, List[str]], ctx: "_Context"):
    """Every target of the chain, in build order, and ``(target, attribute, key)`` → the plugin
    whose ``bake_plan_adjust_target`` last changed it.

    :raises PluginError: a plugin changed a target after its own adjust call had returned (it
        kept a reference): the composition is run again with the hooks watching every finished
        target, so the error names the plugin and the hook call that changed it.
    """
    targets: Dict[str, dict] = {}
    changed_by: Dict[Tuple[str, str, Optional[str]], str] = {}
    finished: Dict[str, dict] = {}
    # Only bake_plan_adjust_target is handed a target (every value in it is made afresh), so
    # without an implementation no plugin can hold one: nothing to compare.
    held = ctx.hooks.adjusts_targets()
    for stage in chain:
        for tname, flavor in target_names(stage):
            targets[tname], changed = _target(stage, tname, flavor, platforms[stage.name], ctx)
            changed_by.update({(tname, attr, key): plugin for (attr, key), plugin in changed.items()})
            if held:
                finished[tname] = snapshot(targets[tname])
                ctx.hooks.watch(tname, targets[tname])
    late = next((t for t in finished if targets[t] != finished[t]), None)
    if late is not None:
        if not ctx.watching:
            # Afresh (no answer cached), so every hook is called as in the first run.
            again = _Context(ctx.stages, ctx.options, ctx.hooks, ctx.in_chain)
            again.watching = True
            with ctx.hooks.watching():
                _targets(chain, platforms, again)  # raises at the call that changes a finished target
        attr, key = next(iter(changes(finished[late], targets[late])), ("?", None))
        what = f"{attr}[{key!r}]" if key is not None else attr
        raise PluginError(f"target '{late}', {what}: changed by a plugin after the target was finished; "
                          "a plugin may change a target only in bake_plan_adjust_target for that target")
    return targets, changed_by


def compose(stages: Dict[str, Stage], options: PlanOptions, hooks: Hooks) -> Composition:
    """Compose the plan for ``options.targets``.

    :returns: a :class:`Composition`; its ``plan`` has ``group`` (``default``: every target of
        the chain, so ``bake`` pushes meal kits too; buildx otherwise builds ``target:``-only
        dependencies as cache-only) and ``target`` keyed by bake target name, in build order.
    :raises UsageError: unknown target, or a requested platform a requested stage does not support.
    :raises StageError: missing parent, cycle, clashing target names, platform mismatch in the
        chain; a finished target buildx would refuse or misread (:func:`bake.plan.checks.check_plan`).
    :raises PluginError: a hook raised or answered with the wrong shape, left an attribute or a
        value of a type bake does not read, or changed a target after it was finished.
    """
    check_unique_targets(stages)
    requested = resolve_targets(stages, options.targets)
    chain = chain_of(stages, requested, stop_at_published=options.from_registry)
    # In per-job mode, the published ancestors this job takes from the registry.
    in_chain = {s.name for s in chain}
    pinned = [stages[d] for s in chain for d in dependencies(s) if d not in in_chain]
    if options.registry is None and options.registry_needed:
        _check_registries(pinned + chain)

    platforms: Dict[str, List[str]] = {}
    for stage in pinned + chain:
        if stage.name in platforms:
            continue
        answer = hooks.platforms(stage, options.platforms)
        unsupported = [p for p in answer if p not in stage.platforms]
        if unsupported:
            raise UsageError(
                f"stage '{stage.name}' (plugin '{stage.plugin}') does not support {', '.join(unsupported)}; "
                f"it supports {', '.join(stage.platforms)}"
            )
        for dep in dependencies(stage):
            if dep not in platforms:  # behind a pinned ancestor: not this job's business
                continue
            missing = [p for p in answer if p not in platforms[dep]]
            if missing:
                # the policy that answered for one of the two, when it is not bake-plan's own: it chose
                chooser = next(((hooks.platforms_by[s], s) for s in (dep, stage.name)
                                if hooks.platforms_by.get(s) not in (None, *CORE_PLUGINS)), None)
                chose = (f" (plugin '{chooser[0]}' chose stage '{chooser[1]}''s platforms: bake_plan_platforms)"
                         if chooser else "")
                raise StageError(
                    f"plugin '{stage.plugin}', stage '{stage.name}': builds for {', '.join(missing)} "
                    f"but stage '{dep}' it builds on does not{chose}"
                )
        platforms[stage.name] = answer

    ctx = _Context(stages, options, hooks, in_chain)
    owners = {tname: s for s in chain for tname, _ in target_names(s)}
    targets, changed_by = _targets(chain, platforms, ctx)
    # The whole plan is checked only now, after every hook has run: a plugin may have changed
    # any target since bake-plan filled it in.
    def culprit(tname: str, attr: str, key: Optional[str]) -> Optional[str]:
        plugin = changed_by.get((tname, attr, key)) or changed_by.get((tname, attr, None))
        if plugin is None:
            return None
        return "a plugin (through a hook wrapper)" if plugin == THROUGH_A_WRAPPER else f"plugin '{plugin}'"

    check_plan({"target": targets}, owners, culprit, options.not_secret)
    _check_unique_tags(targets, owners)
    input_digests = label_targets(targets)  # after every hook: what a plugin changed counts too

    groups = {DEFAULT_GROUP: {"targets": list(targets)}}
    for base, names in variant_groups({s.name: s for s in chain}).items():
        members = [target_names(stages[n]) for n in names]
        for index, group in enumerate(_group_names(base, stages[names[0]])):
            if group in targets:
                raise StageError(f"the group '{group}' of the variants of stage '{base}' has the name of a bake target")
            # <base>: each variant's last target (final or single); <base>-mealkit: each meal kit.
            groups[group] = {"targets": [t[-1 - index][0] for t in members]}
    plan = {"group": groups, "target": targets}
    return Composition(plan=plan, chain=chain, requested=requested, stages=stages, changed_by=changed_by,
                       input_digests=input_digests)


def _check_registries(stages: Sequence[Stage]) -> None:
    """Every stage's tags and cache refs need a registry: its own, else the configured one.

    :raises StageError: a stage without one (``Stage.registry`` is ``None``) and no ``--registry``.
    """
    for stage in stages:
        if stage.registry is None:
            raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}': no registry for its tags and cache: "
                             "pass --registry (or set registry in the configuration), or give the stage one "
                             "(Stage(registry=...))")


PROVENANCE_ATTEST = "type=provenance,mode=max"
"""SLSA provenance with the full build definition (BuildKit's ``mode=max``: every step, its
build args, the sources and base images by digest), not buildx's default ``mode=min``."""

DEFAULT_SBOM_GENERATOR = "docker/buildkit-syft-scanner"
"""BuildKit's own default SBOM generator image (buildkit docs, attestations/sbom.md)."""


def attestations(provenance: bool, sbom_generator: Optional[str]) -> Tuple[str, ...]:
    """The bake ``attest`` entries for ``--provenance`` and ``--sbom``: ``type=provenance,mode=max``,
    and ``type=sbom,generator=IMAGE`` when ``sbom_generator`` is an image that follows BuildKit's SBOM
    generator protocol (buildkit docs, attestations/sbom-protocol.md: run with
    ``BUILDKIT_SCAN_SOURCE``, it writes SPDX JSON under ``BUILDKIT_SCAN_DESTINATION``);
    ``None``: no SBOM."""
    out = [PROVENANCE_ATTEST] if provenance else []
    if sbom_generator is not None:
        out.append(f"type=sbom,generator={sbom_generator}")
    return tuple(out)


def sbom_generators(target: dict) -> List[str]:
    """The SBOM generator images a target's ``attest`` names (``type=sbom,generator=IMAGE``, or the
    object form buildx 0.19+ prints), each normalised (:func:`bake.plan.names.normalise_reference`):
    BuildKit pulls them, so they show in the build's provenance beside the base images."""
    out = []
    for entry in target.get("attest") or ():
        fields = entry if isinstance(entry, dict) else dict(p.partition("=")[::2] for p in str(entry).split(","))
        if fields.get("type") == "sbom" and fields.get("generator"):
            try:
                out.append(normalise_reference(str(fields["generator"])))
            except ValueError:
                continue  # not an image buildx could pull: no build used it
    return out


CACHE_ONLY = "type=cacheonly"
"""The output of a target without tags: built into the cache only (buildx's cacheonly exporter)."""


def repository(stage: Stage, registry: Optional[str]) -> str:
    """``<registry>/<image>`` of a stage; a stage without an image is named after itself.

    :param registry: the configured registry, which replaces the stage's own; with neither (a
        plan whose image names are not shown, :attr:`PlanOptions.registry_needed`), the image alone."""
    name = stage.image or target_name(stage.name).lower()
    prefix = registry or stage.registry
    return f"{prefix}/{name}" if prefix else name


CACHE_BRANCH = "--cache-branch"
CACHE_FROM_BRANCH = "--cache-from-branch (cache-from-branch in the configuration)"
"""How errors name the options a cache ref's branch comes from."""


def _branch(name: Optional[str]) -> str:
    if not name:
        return ""
    return "-" + "".join(c if c.isalnum() or c in "_.-" else "-" for c in name)


class _Context:
    """What every target of one composition shares: inputs, and per-stage answers of the hooks."""

    def __init__(self, stages: Dict[str, Stage], options: PlanOptions, hooks: Hooks, in_chain):
        self.stages, self.options, self.hooks, self.in_chain = stages, options, hooks, in_chain
        self.suffix = f"-{options.arch}" if options.arch else ""
        self._keys: Dict[Tuple[str, str], str] = {}
        self._args: Tuple[Optional[str], dict] = (None, {})  # the stage whose targets are being made, its args
        self.pythons: Dict[str, Optional[Tuple[str, str]]] = {}  # stage name → declared_python's answer
        self.watching = False  # composing again to find a plugin that changes finished targets
        # The same text in every target, made once (38,500 copies of each for 20,000 stages).
        self.created = f"{options.date.isoformat()}T00:00:00Z"
        self.epoch = str(source_date_epoch(options.date))

    def build_args(self, stage: Stage) -> dict:
        """A new dict of :meth:`Stage.build_args` for each target, whose names and values are
        shared by the stage's targets (and the names by every stage: ``sys.intern``)."""
        if self._args[0] != stage.name:  # a stage's targets are made one after another
            self._args = (stage.name, {sys.intern(k): v for k, v in stage.build_args().items()})
        return dict(self._args[1])

    def cache_key(self, stage: Stage, flavor: str) -> str:
        """The policy's key plus ``-<arch>`` in a per-arch plan (CACHE_SILO; the cache refs' tag).

        :raises StageError: the key is not a tag (the policy's plugin is named).
        :raises UsageError: the key with ``-<branch>`` is too long for a tag (the option is named).
        """
        if (stage.name, flavor) not in self._keys:
            key, by = self.hooks.cache_key_by(stage, flavor)
            key += self.suffix
            try:
                check_tag(key)
            except ValueError as err:
                raise StageError(f"{_policy(by, stage)}, stage '{stage.name}': cache key {flavor}: {err}") from None
            for option, branch in ((CACHE_BRANCH, self.options.cache_branch),
                                   (CACHE_FROM_BRANCH, self.options.cache_from_branch)):
                try:
                    check_tag(key + _branch(branch))
                except ValueError as err:
                    shown = repr(branch) if len(branch) <= 60 else repr(branch[:60]) + "…"
                    raise UsageError(f"{option} {shown}: the cache ref of stage '{stage.name}' ({flavor}) "
                                     f"would not be a tag: {err}") from None
            self._keys[(stage.name, flavor)] = key
        return self._keys[(stage.name, flavor)]

    def cache_ref(self, stage: Stage, flavor: str, branch: Optional[str]) -> str:
        """``<repository>:<cache key>[-<branch>]``: a registry cache ref of the target."""
        return f"{repository(stage, self.options.registry)}:{self.cache_key(stage, flavor)}{_branch(branch)}"

    def tags(self, stage: Stage, flavor: str) -> List[str]:
        """The target's full tags from the tag policy. :raises StageError: a tag registries refuse."""
        repo = repository(stage, self.options.registry)
        out = []
        tags, by = self.hooks.tags_by(stage, flavor, self.options.date)
        for tag in tags:
            try:
                check_tag(tag + self.suffix)
            except ValueError as err:
                arch = f" (with the per-arch suffix '{self.suffix}')" if self.suffix else ""
                raise StageError(f"{_policy(by, stage)}, stage '{stage.name}', {flavor} tag{arch}: {err}") from None
            out.append(f"{repo}:{tag}{self.suffix}")
        return out

    def build_on(self, dep: Stage, user: str, platforms: Sequence[str]) -> str:
        """The named-context value for a stage target ``user`` (built for ``platforms``) builds on
        or copies from: the dependency's output target, or in per-job mode its published image
        pinned by digest (:meth:`ParentImage.pin` checks the report fits)."""
        if dep.name in self.in_chain:
            return "target:" + output_target(dep)
        tname, flavor = target_names(dep)[0]
        ref = self.tags(dep, flavor)[0]
        parent = self.options.parents.get(tname)
        digest = parent.pin(tname, ref, platforms, user) if parent else self.options.digests.get(tname)
        if not digest:
            raise UsageError(
                f"--from-registry: no digest for '{tname}' (stage '{dep.name}'); pass the sitrep.json "
                "or buildx metadata file of the job that pushed it with --parent-report"
            )
        return f"docker-image://{ref}@{digest}"


def source_date_epoch(date: datetime.date) -> int:
    """Midnight UTC of the plan date as a Unix time: the ``SOURCE_DATE_EPOCH`` every target
    pins (the same instant as its ``org.opencontainers.image.created`` label)."""
    return int(datetime.datetime.combine(date, datetime.time(), tzinfo=datetime.timezone.utc).timestamp())


def _policy(plugin: Optional[str], stage: Stage) -> str:
    """Who answered a policy hook: the plugin, or the stage's own plugin when pluggy did not say."""
    return f"plugin '{plugin or stage.plugin}'"


def _same_image(ref: str, image: str) -> bool:
    """Whether ``ref`` is a spelling of the normalised ``image`` (a ``{axis}`` template is not)."""
    try:
        return normalise_reference(ref) == image
    except ValueError:
        return False


def _target(stage: Stage, tname: str, flavor: str, platforms: List[str], ctx: _Context):
    """One target of ``stage`` as bake-plan fills it in, then adjusted by the plugins.

    :returns: ``(target, what changed)``: the second is :meth:`bake.plan.plugins.Hooks.adjust_target`'s.
    """
    options, stages = ctx.options, ctx.stages
    try:
        check_repository(repository(stage, options.registry))
    except ValueError as err:
        via = " with --registry" if options.registry else ""
        raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}', field 'image'{via}: {err}") from None

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
        contexts["base"] = ctx.build_on(stages[stage.parent], tname, platforms)
    for name, used in stage.uses.items():
        contexts[name] = ctx.build_on(stages[used], tname, platforms)
    if flavor == FLAVOR_FINAL:
        # A named context replaces the Dockerfile stage of the same name (BuildKit), so the final
        # stage's `FROM mealkit` is the meal kit target itself: built once, and listed by
        # `bake --print <stage>` as a dependency. The other contexts stay for the Dockerfile's
        # other stages (BuildKit's checks resolve them all).
        contexts["mealkit"] = "target:" + output_target(stage)
    if stage.name in options.bake_scripts_users:
        contexts[BAKE_SCRIPTS] = bake_scripts_dir()
    contexts.update(stage.contexts)  # a stage's own bake-scripts (its own copy of them) wins
    wheelhouse = options.wheelhouse is not None and stage.name in options.wheelhouse_users
    if wheelhouse:
        contexts[WHEELHOUSE] = options.wheelhouse
    if flavor == FLAVOR_FINAL:
        for locked, directory in options.pip_locks:
            if locked == stage.name:
                contexts["pip-lock"] = directory
    own = set(contexts)
    for original, replacement in options.base_images:
        # bake keeps a context's name as written (docker/buildx#2328), but the Dockerfile frontend
        # looks `FROM x` up by one key for every spelling of the image (`busybox` for
        # `docker.io/library/busybox:latest`): that key, the name as written, and the stage's own
        # spelling of its base image (what `bake-plan graph` matches) all get the replacement.
        image = normalise_reference(original)
        spellings = [original, context_name(original)]
        if stage.base_image is not None and _same_image(stage.base_image, image):
            spellings.append(stage.base_image)
        for spelling in spellings:
            if spelling in own:  # `--base-image base=…` would replace the parent, not an image
                raise UsageError(f"base image '{original}={replacement}': Dockerfiles look '{original}' up as the "
                                 f"named context '{spelling}', which stage '{stage.name}' (plugin '{stage.plugin}') "
                                 "already sets; it would be replaced")
            contexts[spelling] = "docker-image://" + replacement
    if contexts:
        target["contexts"] = contexts

    key = ctx.cache_key(stage, flavor)
    args = ctx.build_args(stage)
    args["CACHE_SILO"] = key
    if wheelhouse:
        args.update(WHEELHOUSE_ARGS)
    # buildx passes an ambient SOURCE_DATE_EPOCH to every build as an arg unless the plan sets
    # one, so the plan sets it: the same plan resolves the same under any environment.
    args.setdefault("SOURCE_DATE_EPOCH", ctx.epoch)
    if PIP_LOCK in contexts and flavor == FLAVOR_FINAL:
        args[LOCKED_ARG] = "1"  # bake-pip-finalize fails when the lock is not mounted
    python = declared_python(stage, stages, ctx.pythons)
    if python is not None:  # bake-check-python compares it with the image's python3
        args[PYTHON_ARG], args[PYTHON_STAGE_ARG] = python
    target["args"] = args

    labels = {
        "org.opencontainers.image.title": stage.image or stage.name,
        "org.opencontainers.image.created": ctx.created,
    }
    labels.update(stage.labels)
    target["labels"] = labels

    if stage.image is not None:
        target["tags"] = ctx.tags(stage, flavor)
    target["platforms"] = list(platforms)

    # Read the own ref first, then what this target builds on (for a final, its meal kit; for a
    # meal kit or single target, the parent's output), each on this run's branch and then on the
    # --cache-from-branch one. Write only the own ref, on this run's branch.
    sources = [(stage, flavor)]
    if flavor == FLAVOR_FINAL:
        sources.append((stage, FLAVOR_MEALKIT))
    elif stage.parent:
        parent = stages[stage.parent]
        sources.append((parent, target_names(parent)[0][1]))
    branches = list(dict.fromkeys([options.cache_branch, options.cache_from_branch]))
    reads = [ctx.cache_ref(s, f, b) for s, f in sources for b in branches]
    target["cache-from"] = [f"type=registry,ref={ref}" for ref in dict.fromkeys(reads)]
    own = ctx.cache_ref(stage, flavor, options.cache_branch)
    if options.cache_to:
        target["cache-to"] = [f"type=registry,ref={own},mode=max,ignore-error=true"]
    if options.secrets:
        target["secret"] = [spec.to_bake() for spec in options.secrets]

    changed = ctx.hooks.adjust_target(stage, tname, flavor, target)
    if not target.get("tags") and "output" not in target:
        # An untagged target (a wheel builder used through `uses`) is only built for what builds
        # on it: with the default output, `bake --push` stops at "tag is needed when pushing".
        target["output"] = [CACHE_ONLY]
    if options.attest and target.get("output") != [CACHE_ONLY]:
        # Attestations attach to an exported image: a cache-only target has none. A plugin's own
        # attest (set in bake_plan_adjust_target) is kept.
        target.setdefault("attest", list(options.attest))
    return target, changed
