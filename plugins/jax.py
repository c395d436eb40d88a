"""``jax``: builder (jaxlib wheel with Bazel) → meal kit (JAX, XLA, Flax sources, the jaxlib and
Transformer Engine wheels, their requirement lines) → final (pip-compile + pip-sync).

Sources arrive as ``URLREF_<PKG>`` args (``<url>#<commit>`` from ``stages/sources.toml``) and
land in ``SRC_PATH_<PKG>`` (JAX-Toolbox layout: ``/opt/jax``, ``/opt/xla``, ``/opt/flax``). The builder's Bazel remote-cache silo is the
``CACHE_SILO`` arg bake-plan passes to every build.

The stage declares its requirement lines (jax editable from ``/opt/jax``, flax by its manifest
mode), and for ``bake-plan lock`` the host checkouts the ``-e file:///opt/…`` lines resolve from.
"""

from bake import ImageTest, Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.pip.sources import host_paths, patch_contexts, requirement, source
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="jax",
            registry=REGISTRY,
            image="jax",
            context=stage_dir("jax"),
            # bake-plan lint: the rules that do not apply to this Dockerfile, and why.
            lint_ignore={
                "DL3013": "pip here installs build tools or wheels just built; the image's packages are pinned by its lock (bake-pip-finalize)",
                "DL3003": "cd inside one RUN builds in a checkout; WORKDIR would change the image's working directory",
                "SC2086": "the variable is a list of words, split on purpose",
                "DL4006": "each pipe is a test whose last command decides (`dpkg-query \u2026 | grep -q`): pipefail would fail on a package that is missing by design",
            },
            parent="base",
            uses={"te": "te"},
            sources=(
                source("jax", path="/opt/jax", clone=True),
                source("xla", path="/opt/xla", clone=True),
                source("flax", path="/opt/flax"),
            ),
            # jax from its checkout; flax by its mode. The jaxlib and TE wheels' lines are
            # written at build time (their file names are known only then).
            requirements=(requirement("jax", path="/opt/jax"), requirement("flax", path="/opt/flax")),
            host_paths=host_paths(("jax", "/opt/jax"), ("flax", "/opt/flax")),
            contexts=patch_contexts("jax", "xla", "flax"),
            args={"BAZEL_CACHE": ""},
            # What JAX-Toolbox's nightly checks first in every image: the stack imports and
            # computes (on the CPU when the runner has no GPU); TE is installed (importing it
            # needs a GPU driver, so its metadata stands in).
            tests=(
                ImageTest("python -c 'import jax, jaxlib, flax'", name="import jax, jaxlib, flax"),
                ImageTest("python -c 'import jax.numpy as jnp; assert float(jnp.ones(2).sum()) == 2.0'",
                          name="jax computes"),
                ImageTest("python -c 'import importlib.metadata as m; print(m.version(\"transformer_engine\"))'",
                          name="transformer engine installed"),
            ),
        )
    ]

