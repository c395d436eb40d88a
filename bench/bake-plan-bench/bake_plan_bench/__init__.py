"""bake-plan's benchmark family: a tree of ``BAKE_PLAN_BENCH_STAGES`` synthetic stages (default 20).

A real plugin, registered under the ``bake_plan`` entry-point group like any third-party one, so
the benchmark pays for discovery, loading and validation exactly as a user's family would. The
stages look like an organisation's images: stage ``i`` builds on stage ``(i - 1) // FANOUT`` (a
tree a few levels deep), fetches two sources, contributes requirement lines, carries args and
labels (one arg holds a literal ``${`` for the renderer to escape), and one in three has a toolchain
variant (variant tags and cache keys). Every tenth leaf is a one-target wheel builder; once there
is one, one stage in ten copies the latest one's output through the ``wheels`` named context.
Every context is the shared directory ``context/`` beside this module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

from bake import Source, Stage, hookimpl

ENV = "BAKE_PLAN_BENCH_STAGES"
"""The environment variable holding the number of stages."""

DEFAULT_STAGES = 20
FANOUT = 4
CONTEXT = str(Path(__file__).resolve().parent / "context")
SCRIPTS = str(Path(CONTEXT) / "scripts")
VARIANTS = (None, "dev-3.10_cuda_12.2", "dev-3.11_cuda_12.4")


def stage_count(environ=os.environ) -> int:
    """The number of stages ``BAKE_PLAN_BENCH_STAGES`` asks for (default 20).

    :raises ValueError: not a positive integer.
    """
    value = environ.get(ENV, "")
    count = int(value) if value.strip() else DEFAULT_STAGES
    if count < 1:
        raise ValueError(f"{ENV}={value!r}: need at least one stage")
    return count


def name(index: int) -> str:
    """The name of stage ``index``: ``bench-root``, then ``bench-0001``, ``bench-0002``…"""
    return "bench-root" if index == 0 else f"bench-{index:04d}"


def parent(index: int) -> int:
    """The index of the stage that stage ``index`` (> 0) builds on."""
    return (index - 1) // FANOUT


def is_leaf(index: int, count: int) -> bool:
    """True when no stage of a ``count``-stage family builds on stage ``index``."""
    return FANOUT * index + 1 >= count


def leaves(count: int) -> List[str]:
    """Names of the stages nothing builds on: requesting them plans the whole family."""
    return [name(i) for i in range(count) if is_leaf(i, count)]


def family(count: int) -> List[Stage]:
    """The ``count`` stages of the family, root first."""
    stages = []
    last_wheel = None
    for i in range(count):
        stage_name = name(i)
        single = i % 10 == 9 and is_leaf(i, count)
        variant = VARIANTS[i % len(VARIANTS)]
        uses = {"wheels": name(last_wheel)} if i % 10 == 5 and last_wheel is not None else {}
        stages.append(
            Stage(
                name=stage_name,
                image=f"bench/{stage_name}",
                registry="ghcr.io/example",
                parent=name(parent(i)) if i else None,
                base_image=None if i else "python:3.11-slim-bookworm",
                kind="single" if single else "mealkit",
                target="wheel" if single else None,
                context=CONTEXT,
                contexts={} if i else {"scripts": SCRIPTS},
                uses=uses,
                variant=variant,
                sources=(
                    Source("SRC_MAIN", f"https://github.com/example/{stage_name}.git", "main"),
                    Source("SRC_SHARED", "https://github.com/example/shared.git", f"v{i % 7}.0", path="/opt/shared"),
                ),
                requirements=("numpy>=1.26,<2", f"{stage_name}-core=={i % 5}.{i % 3}", "pyyaml"),
                args={
                    "PYTHON_VERSION": "3.11",
                    "CUDA_VERSION": "12.4",
                    "BUILD_JOBS": "8",
                    "NVCC_APPEND_FLAGS": "--threads ${BUILD_JOBS} -O3",
                },
                labels={
                    "org.opencontainers.image.source": f"https://github.com/example/{stage_name}",
                    "com.example.team": f"team-{i % 13}",
                },
            )
        )
        if single:
            last_wheel = i
    return stages


@hookimpl
def bake_plan_stages():
    """The family, sized by ``BAKE_PLAN_BENCH_STAGES``."""
    return family(stage_count())
