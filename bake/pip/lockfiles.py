"""Which files of the locks directory a stage's lock is written to, and the check every plan makes
that no two stages share one.

Apart from :mod:`bake.pip.lock` so that planning, which makes this check, does not import what
locking needs (``subprocess``, the requirement-line parser, the resolvers' error patterns).
"""

from __future__ import annotations

from typing import Dict, List, Sequence

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
