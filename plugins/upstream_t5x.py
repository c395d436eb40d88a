"""``upstream-t5x``: T5X at ``/opt/t5x`` on the jax meal kit, at the commit ``stages/sources.toml`` pins."""

from bake import ImageTest, Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.pip.sources import host_paths, patch_contexts, requirement, source
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="upstream-t5x",
            registry=REGISTRY,
            image="upstream-t5x",
            context=stage_dir("upstream-t5x"),
            parent="jax",
            sources=(source("t5x", path="/opt/t5x"),),
            requirements=(requirement("t5x", path="/opt/t5x"),),
            host_paths=host_paths(("t5x", "/opt/t5x")),
            contexts=patch_contexts("t5x"),
            tests=(ImageTest("python -c 'import t5x'", name="import t5x"),),
        )
    ]
