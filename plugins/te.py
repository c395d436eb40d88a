"""``te``: Transformer Engine, built as a wheel on the base meal kit.

Not published on its own: the ``jax`` meal kit copies the wheel through the ``te`` named context
and writes its requirement line, so TE is installed once, in the final stage of whatever image
of the jax chain is built (JAX-Toolbox: "TE is now built as a wheel and shipped in the JAX core
meal kit image"). The commit comes from ``stages/sources.toml``.
"""

from bake import Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.pip.sources import patch_contexts, source
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="te",
            registry=REGISTRY,
            kind="single",
            target="wheel",
            context=stage_dir("te"),
            # bake-plan lint: the rules that do not apply to this Dockerfile, and why.
            lint_ignore={
                "DL3003": "cd inside one RUN builds in a checkout; WORKDIR would change the image's working directory",
            },
            parent="base",
            sources=(source("transformer-engine", path="/opt/transformer-engine", clone=True),),
            contexts=patch_contexts("transformer-engine"),
        )
    ]
