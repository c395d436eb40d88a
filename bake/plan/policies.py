"""bake-plan's default policies for tags, cache keys and platforms (design.md, "Names, tags and
cache keys"). Registered as the ``default-policies`` entry point and ``trylast``, so any plugin
that answers a policy hook replaces them.
"""

from __future__ import annotations

import datetime
from typing import List, Sequence

from bake.plan.hookspecs import hookimpl
from bake.plan.stage import Stage


@hookimpl(trylast=True)
def bake_plan_tags(stage: Stage, flavor: str, date: datetime.date) -> List[str]:
    """JAX-Toolbox tags: final ``latest``, ``nightly-YYYY-MM-DD``; meal kit ``mealkit``,
    ``mealkit-YYYY-MM-DD``. A stage with a variant is tagged by it instead (the PyTorch/XLA CI
    convention ``dev-3.8_cuda_12.1``), plus the variant with the nightly date."""
    day = date.isoformat()
    if stage.variant:
        if flavor == "mealkit":
            return [f"{stage.variant}-mealkit", f"{stage.variant}-mealkit-{day}"]
        return [stage.variant, f"{stage.variant}-nightly-{day}"]
    if flavor == "mealkit":
        return ["mealkit", f"mealkit-{day}"]
    return ["latest", f"nightly-{day}"]


@hookimpl(trylast=True)
def bake_plan_cache_key(stage: Stage, flavor: str) -> str:
    """``cache-silo-<scope>-<variant tag>``: scope is ``cache_scope`` or the stage name; the variant
    tag is the stage's variant (or ``latest``), with ``-mealkit`` for a meal kit. The PyTorch/XLA CI
    image's key is therefore ``cache-silo-ci-dev-3.8_cuda_12.1``."""
    scope = stage.cache_scope or stage.name
    variant = stage.variant or "latest"
    if flavor == "mealkit":
        variant = f"{stage.variant}-mealkit" if stage.variant else "mealkit"
    return f"cache-silo-{scope}-{variant}"


@hookimpl(trylast=True)
def bake_plan_platforms(stage: Stage, requested: Sequence[str]) -> List[str]:
    """The requested platforms, or every platform the stage supports when none was requested."""
    return list(requested) if requested else list(stage.platforms)
