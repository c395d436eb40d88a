"""``jax``: builder (jaxlib wheel with Bazel) → meal kit (JAX, XLA, Flax sources, the jaxlib and
Transformer Engine wheels, their requirement lines) → final (pip-compile + pip-sync).

Sources arrive as ``URLREF_<PKG>`` args and land in ``SRC_PATH_<PKG>`` (JAX-Toolbox layout:
``/opt/jax``, ``/opt/xla``, ``/opt/flax``). The builder's Bazel remote-cache silo is the
``CACHE_SILO`` arg bake-plan passes to every build.
"""

from bake import Source, Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="jax",
            image="jax",
            context=stage_dir("jax"),
            parent="base",
            uses={"te": "te"},
            sources=(
                Source("JAX", "https://github.com/google/jax.git", "main", path="/opt/jax"),
                Source("XLA", "https://github.com/openxla/xla.git", "main", path="/opt/xla"),
                Source("FLAX", "https://github.com/google/flax.git", "main", path="/opt/flax"),
            ),
            args={"BAZEL_CACHE": ""},
        )
    ]
