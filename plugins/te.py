"""``te``: Transformer Engine, built as a wheel on the base meal kit.

Not published on its own: the ``jax`` meal kit copies the wheel through the ``te`` named context
and writes its requirement line, so TE is installed once, in the final stage of whatever image
of the jax chain is built (JAX-Toolbox: "TE is now built as a wheel and shipped in the JAX core
meal kit image").
"""

from bake import Source, Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="te",
            kind="single",
            target="wheel",
            context=stage_dir("te"),
            parent="base",
            sources=(
                Source("TRANSFORMER_ENGINE", "https://github.com/NVIDIA/TransformerEngine.git", "main",
                       path="/opt/transformer-engine"),
            ),
        )
    ]
