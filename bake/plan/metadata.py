"""docker/metadata-action: chosen targets inherit the tags, labels, annotations and args it computes.

metadata-action writes a bake file with one target (``docker-metadata-action``, or the name its
``bake-target`` input gives): its ``bake-file`` output, or since v5.6 ``bake-file-tags``,
``bake-file-labels`` and ``bake-file-annotations`` (one part each, same target)::

    {"target": {"docker-metadata-action": {
        "tags": ["ghcr.io/acme/app:1.2.3", "ghcr.io/acme/app:latest"],
        "labels": {"org.opencontainers.image.version": "1.2.3", ...},
        "annotations": ["manifest:org.opencontainers.image.version=1.2.3"],
        "args": {"DOCKER_META_IMAGES": "ghcr.io/acme/app", "DOCKER_META_VERSION": "1.2.3"}}}}

bake-plan does what that action's README asks of a hand-written bake file, so docker/bake-action
users keep their workflow: the plan declares the target empty (``target "docker-metadata-action"
{}``) and gives the chosen targets ``inherits = ["docker-metadata-action"]``; bake reads the plan
and the action's file together (bake-action ``files:``, or ``docker buildx bake -f
docker-bake.hcl -f docker-metadata-action-bake.json``) and fills the target in.

In bake a target's own attributes beat inherited ones (``tags`` as a whole, ``labels`` and
``args`` key by key; ``annotations`` are appended), so a chosen target drops its own ``tags`` when
the file has tags, and its own labels that the file sets.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from bake.documents import DocumentError, read_json
from bake.errors import UsageError, did_you_mean
from bake.plan.checks import string_fault
from bake.plan.compose import CACHE_ONLY
from bake.plan.names import check_reference
from bake.plan.secrets import walk_strings

DEFAULT_TARGET = "docker-metadata-action"


@dataclasses.dataclass(frozen=True)
class MetadataFiles:
    """What the metadata-action files hold.

    :param target: the one target they define. :param files: the files, in order.
    :param tags: their tags (full image references), if any. :param labels: their labels.
    """

    target: str
    files: Tuple[str, ...]
    tags: Tuple[str, ...] = ()
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)


def read_bake_files(paths: Sequence[str]) -> MetadataFiles:
    """Read and check metadata-action bake files (JSON, one target, the same in every file).

    :raises UsageError: a file is unreadable, not JSON, not that shape, or the files name
        different targets; one line naming the file (``--metadata-bake-file F: …``).
    """
    target: Optional[str] = None
    tags: List[str] = []
    labels: Dict[str, str] = {}
    for path in paths:
        where = f"--metadata-bake-file {path}"
        try:
            data = read_json(path)
        except OSError as err:
            raise UsageError(f"{where}: {err.strerror or err}") from None
        except DocumentError as err:  # not UTF-8, not JSON, nested too deeply
            raise UsageError(f"{where}: {err}") from None
        targets = data.get("target") if isinstance(data, dict) else None
        if not isinstance(targets, dict) or len(targets) != 1:
            raise UsageError(f"{where}: expected one target, as docker/metadata-action writes "
                             '({"target": {"docker-metadata-action": {...}}})')
        (name, body), = targets.items()
        if target is not None and name != target:
            raise UsageError(f"{where}: defines target '{name}', another file defines '{target}'")
        target = name
        if not isinstance(body, dict):
            raise UsageError(f"{where}: target '{name}' is not an object")
        for path_, text in walk_strings(body):  # buildx reads this file itself: every value, not only tags and labels
            why = string_fault(text)
            if why:
                raise UsageError(f"{where}: target '{name}', {path_}: {why}")
        file_tags = body.get("tags") or []  # metadata-action writes null when no tag applies
        if not isinstance(file_tags, list) or not all(isinstance(t, str) for t in file_tags):
            raise UsageError(f"{where}: target '{name}': tags must be a list of strings")
        for tag in file_tags:  # what a plan's own tags must be, before a registry is asked about them
            try:
                check_reference(tag)  # [host[:port]/]path[:tag][@digest], the tag as registries take it
            except ValueError as err:
                raise UsageError(f"{where}: target '{name}', tags: {err}") from None
        file_labels = body.get("labels") or {}
        if not isinstance(file_labels, dict) or not all(isinstance(v, str) for v in file_labels.values()):
            raise UsageError(f"{where}: target '{name}': labels must be an object of strings")
        tags.extend(t for t in file_tags if t not in tags)
        labels.update(file_labels)
    if target is None:
        raise UsageError("--metadata-bake-file: no file given")
    return MetadataFiles(target=target, files=tuple(paths), tags=tuple(tags), labels=labels)


def chosen_targets(composition, names: Sequence[str]) -> List[str]:
    """The plan targets that inherit: each of ``names`` (a bake target of the plan, a stage of
    the chain meaning its final or single target, or a stage with variants meaning every
    variant's); by default the requested stages' final targets.

    :raises UsageError: a name that is not in the plan, with the nearest.
    """
    from bake.plan.compose import target_names, variant_groups

    targets = composition.plan["target"]
    in_chain = {s.name: s for s in composition.chain}
    groups = variant_groups(in_chain)
    out: List[str] = []
    for name in names or composition.requested:
        if name in targets:
            out.append(name)
        elif name in in_chain or name in groups:
            for stage in groups.get(name) or [name]:
                out.append(target_names(in_chain[stage])[-1][0])
        else:
            known = list(targets) + list(in_chain)
            raise UsageError(f"metadata-targets: '{name}' is not a target of this plan{did_you_mean(name, known)}")
    return list(dict.fromkeys(out))


def inherit(composition, meta: MetadataFiles, names: Sequence[str] = (), arch: Optional[str] = None) -> List[str]:
    """Make the chosen targets inherit ``meta.target``, declared empty at the top of the plan,
    and record ``meta.files`` as bake files to pass with the plan (``composition.bake_files``).

    :param names: ``--metadata-targets`` / ``metadata-targets`` (see :func:`chosen_targets`).
    :param arch: the arch of a per-arch plan: every tag of the file must end in ``-<arch>``
        (metadata-action's ``flavor: suffix=-<arch>``), as the plan's own tags do.
    :returns: the chosen target names.
    :raises UsageError: the target name is taken by the plan, several targets would share the
        file's tags, or a per-arch plan gets tags without the arch.
    """
    plan = composition.plan
    if meta.target in plan["target"] or meta.target in plan["group"]:
        raise UsageError(f"--metadata-bake-file: target '{meta.target}' is also a target or group of the plan; "
                         "set another bake-target in docker/metadata-action")
    chosen = chosen_targets(composition, names)
    if meta.tags and len(chosen) > 1:
        raise UsageError(f"{len(chosen)} targets ({', '.join(chosen)}) would share the tags of "
                         f"'{meta.target}'; choose one with --metadata-targets")
    if arch is not None:
        wrong = [t for t in meta.tags if not t.endswith(f"-{arch}")]
        if wrong:
            raise UsageError(f"--metadata-bake-file: a per-arch plan needs tags ending in -{arch}, got '{wrong[0]}' "
                             f"(set flavor: suffix=-{arch} in docker/metadata-action)")
    for name in chosen:
        target = plan["target"][name]
        target["inherits"] = list(dict.fromkeys([*target.get("inherits", []), meta.target]))
        if meta.tags:
            target.pop("tags", None)
            composition.inherited_tags[name] = list(meta.tags)
        if target.get("output") == [CACHE_ONLY]:  # tagged now, by the metadata-action target
            del target["output"]
        for key in meta.labels:
            target.get("labels", {}).pop(key, None)
    plan["target"] = {meta.target: {}, **plan["target"]}
    composition.bake_files = list(dict.fromkeys([*composition.bake_files, *meta.files]))
    return chosen
