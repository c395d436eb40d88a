"""``upstream-t5x``: T5X at ``/opt/t5x`` on the jax meal kit."""

from bake import Source, Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="upstream-t5x",
            image="upstream-t5x",
            context=stage_dir("upstream-t5x"),
            parent="jax",
            sources=(Source("T5X", "https://github.com/google-research/t5x.git", "main", path="/opt/t5x"),),
        )
    ]
