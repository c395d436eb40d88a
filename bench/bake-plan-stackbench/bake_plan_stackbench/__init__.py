"""bake-plan's real JAX stack, for benchmarks: the stack JAX-Toolbox's pax image carries, as a
third-party family written from docs/plugins.md (the quick start's two Dockerfiles).

``pax-root`` (``jax==0.4.26``, ``jaxlib==0.4.26``, ``flax==0.8.2``) on a Python 3.10 image
(``python="3.10.13"``, ``glibc="2.36"``: Debian bookworm, so ``bake-plan lock`` resolves for
``x86_64-manylinux_2_36``), and ``pax-leaf`` on its meal kit (``paxml==1.4.0``,
``praxis==1.4.0``); linux/amd64 only. Locked, it is 228 pins, about 900 MB of wheels (two of the
pins, ``promise`` and ``rouge-score``, exist only as sdists; ``bake-plan wheelhouse`` builds them).

A real plugin under the ``bake_plan`` entry-point group, like bench/bake-plan-lockbench; its
stages publish to :data:`REGISTRY` (the test engine's registry) unless the configuration says
otherwise. ``bench/lock.py --set stack`` locks it offline against ``uv pip compile``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

from bake import Stage, hookimpl

HERE = Path(__file__).resolve().parent
PYTHON = "3.10.13"
"""The image's exact Python (what the lock is resolved for)."""
GLIBC = "2.36"
PLATFORM = "linux/amd64"
BASE_IMAGE = "python:3.10-slim-bookworm"
REGISTRY = "localhost:5555/stackbench"
STAGES = ("pax-root", "pax-leaf")
"""The chain, root first; the last one is the benchmark's ``--target``."""
LINES: Dict[str, Tuple[str, ...]] = {
    "pax-root": ("jax==0.4.26", "jaxlib==0.4.26", "flax==0.8.2"),
    "pax-leaf": ("paxml==1.4.0", "praxis==1.4.0"),
}
"""Each stage's requirement lines."""


@hookimpl
def bake_plan_stages() -> List[Stage]:
    """The two stages, root first."""
    return [
        Stage(name="pax-root", image="pax-root", context=HERE / "pax-root", base_image=BASE_IMAGE,
              python=PYTHON, glibc=GLIBC, platforms=(PLATFORM,), registry=REGISTRY,
              requirements=LINES["pax-root"]),
        Stage(name="pax-leaf", image="pax-leaf", parent="pax-root", context=HERE / "pax-leaf",
              platforms=(PLATFORM,), registry=REGISTRY, requirements=LINES["pax-leaf"]),
    ]
