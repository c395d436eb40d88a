"""``jax``: builder (jaxlib wheel with Bazel) → meal kit (JAX, XLA, Flax sources, the jaxlib and
Transformer Engine wheels, their requirement lines) → final (pip-compile + pip-sync).

Sources arrive as ``URLREF_<PKG>`` args (``<url>#<commit>`` from ``stages/sources.toml``) and
land in ``SRC_PATH_<PKG>`` (JAX-Toolbox layout: ``/opt/jax``, ``/opt/xla``, ``/opt/flax``). The builder's Bazel remote-cache silo is the
``CACHE_SILO`` arg bake-plan passes to every build.
"""

from bake import Stage, hookimpl
from bake.pip.sources import source
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
                source("jax", path="/opt/jax"),
                source("xla", path="/opt/xla"),
                source("flax", path="/opt/flax"),
            ),
            args={"BAZEL_CACHE": ""},
        )
    ]
