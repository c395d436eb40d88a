"""Which files of the locks directory a stage's lock is written to, and the check every plan makes
that no two stages share one.

Apart from :mod:`bake.pip.lock` so that planning, which makes this check, does not import what
locking needs (``subprocess``, the requirement-line parser, the resolvers' error patterns).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Dict, List, Sequence, Set

from bake.errors import StageError
from bake.plan.names import arch_of
from bake.plan.stage import Stage


def lock_file_names(stage: Stage) -> List[str]:
    """Every lock file name ``stage`` may write in the locks directory: ``<stage>.txt`` and, for
    a lock per arch, ``<stage>-<arch>.txt`` for each of its platforms ([] for a one-target stage)."""
    if stage.kind != "mealkit":
        return []
    return [f"{stage.name}.txt", *dict.fromkeys(f"{stage.name}-{arch_of(p)}.txt" for p in stage.platforms)]


def check_lock_names(stages: Sequence[Stage]) -> None:
    """Refuse two stages whose locks could land on one file of the locks directory (stage ``x``
    locked per arch writes ``x-amd64.txt``, which is also the lock of a stage ``x-amd64``).

    :raises StageError: one line naming both stages, their plugins and the file.
    """
    seen: Dict[str, Stage] = {}
    for stage in sorted(stages, key=lambda s: s.name):
        for filename in lock_file_names(stage):
            other = seen.get(filename)
            if other is not None and other.name != stage.name:
                raise StageError(f"stages '{other.name}' (plugin '{other.plugin}') and '{stage.name}' (plugin "
                                 f"'{stage.plugin}') would both write the lock file {filename} in the locks "
                                 f"directory (a lock per arch is <stage>-<arch>.txt); rename one of them")
            seen[filename] = stage


LOCK_READ_BYTES = 16 * 1024 * 1024
"""A per-arch lock larger than this is not read for :func:`lock_differences` (a lock is kilobytes)."""


def locked_versions(text: str) -> Dict[str, str]:
    """``{distribution name (normalised): its pin}`` of a lock's text: each requirement line's
    version specifier (``==1.26.4``) or URL; comments, option lines (``--hash``, ``--index-url``)
    and lines that are not a requirement are left out."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    out: Dict[str, str] = {}
    for line in text.splitlines():
        line = line.split(" #", 1)[0].rstrip().rstrip("\\").strip()
        if not line or line.startswith(("#", "-")):
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        out[canonicalize_name(requirement.name)] = str(requirement.specifier) or requirement.url or ""
    return out


def lock_differences(stages: Sequence[Stage], locks_dir: Path) -> Dict[str, Set[str]]:
    """What each stage's per-arch locks (``<locks_dir>/<stage>-<arch>.txt``, written by
    ``bake-plan lock`` when the arches resolve differently) predict will differ between its
    images' arches: stage name → the distribution names pinned on some arches only or pinned
    differently. A stage with fewer than two per-arch locks (one lock for every arch, or none)
    predicts nothing. A lock that is not a regular file, is unreadable or larger than
    :data:`LOCK_READ_BYTES` is left out.
    """
    out: Dict[str, Set[str]] = {}
    for stage in stages:
        pins = []
        for platform in dict.fromkeys(stage.platforms):
            path = Path(locks_dir) / f"{stage.name}-{arch_of(platform)}.txt"
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
                with os.fdopen(fd, "rb") as handle:
                    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                        continue
                    data = handle.read(LOCK_READ_BYTES + 1)
            except OSError:
                continue
            if len(data) <= LOCK_READ_BYTES:
                pins.append(locked_versions(data.decode("utf-8", errors="replace")))
        if len(pins) >= 2:
            names = {name for pinned in pins for name in pinned}
            out[stage.name] = {name for name in names if len({pinned.get(name) for pinned in pins}) > 1}
    return out
