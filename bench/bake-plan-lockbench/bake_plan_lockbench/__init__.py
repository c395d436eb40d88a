"""bake-plan's lock benchmark family: real requirements spread over a chain of three stages.

``lockbench-root`` ← ``lockbench-nn`` ← ``lockbench-ckpt``, Python 3.11 on linux/amd64 (the
image's Python, so ``bake-plan lock`` resolves for it with no such interpreter needed).
``BAKE_PLAN_LOCKBENCH_PYTHON=host`` declares no Python instead (the lock is then
resolved for the interpreter running bake-plan). ``BAKE_PLAN_LOCKBENCH_SET`` picks the requirements:

- ``jax`` (the default): the JAX stack as a research image would split it: jax and jaxlib in the
  root, flax, optax and chex in ``nn``, orbax-checkpoint and einops in ``ckpt`` (about 30 wheels,
  170 MB for Python 3.11 on x86_64);
- ``tiny``: three small pure-Python projects, so a test can run the benchmark in seconds.

A real plugin under the ``bake_plan`` entry-point group, like bench/bake-plan-bench.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

from bake import Stage, hookimpl
from bake.resources import stage_dir

ENV = "BAKE_PLAN_LOCKBENCH_SET"
"""The environment variable naming the requirement set (:data:`SETS`)."""

PYTHON = "3.11"
PYTHON_ENV = "BAKE_PLAN_LOCKBENCH_PYTHON"
"""``host``: the root declares no Python; anything else (the default): it declares :data:`PYTHON`."""
PLATFORM = "linux/amd64"
STAGES = ("lockbench-root", "lockbench-nn", "lockbench-ckpt")
"""The chain, root first; the last one is the benchmark's ``--target``."""

SETS: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "jax": (("jax", "jaxlib"), ("flax", "optax", "chex"), ("orbax-checkpoint", "einops")),
    "tiny": (("einops",), ("opt-einsum",), ("toolz",)),
}
"""Each set's requirement lines, one tuple per stage of :data:`STAGES`."""


def requirement_set(environ=os.environ) -> Tuple[Tuple[str, ...], ...]:
    """The lines per stage that ``BAKE_PLAN_LOCKBENCH_SET`` names (default ``jax``).

    :raises ValueError: an unknown set.
    """
    name = environ.get(ENV, "").strip() or "jax"
    if name not in SETS:
        raise ValueError(f"{ENV}={name!r}: not one of {', '.join(SETS)}")
    return SETS[name]


def family(lines: Tuple[Tuple[str, ...], ...], python: Optional[str] = PYTHON) -> List[Stage]:
    """The chain, each stage with its lines (root first); the root declares ``python``."""
    out = []
    for i, (name, requirements) in enumerate(zip(STAGES, lines)):
        where = dict(parent=STAGES[i - 1]) if i else dict(base_image="python:3.11-slim-bookworm", python=python)
        out.append(Stage(name=name, image=name, registry="localhost:5555/lockbench", context=stage_dir("jax"),
                         platforms=(PLATFORM,), requirements=requirements, **where))
    return out


@hookimpl
def bake_plan_stages():
    """The chain, with the requirement set ``BAKE_PLAN_LOCKBENCH_SET`` names."""
    return family(requirement_set(), None if os.environ.get(PYTHON_ENV) == "host" else PYTHON)
