"""``upstream-pax``: paxml at ``/opt/paxml`` and praxis at ``/opt/praxis`` on the jax meal kit,
for amd64 and arm64 (on arm64 the Dockerfile's extra builder stages make tensorflow-text and
lingvo wheels, selected by ``TARGETARCH``). Both sources' commits come from ``stages/sources.toml``."""

from bake import Stage, hookimpl
from bake.pip.sources import source
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="upstream-pax",
            image="upstream-pax",
            context=stage_dir("upstream-pax"),
            parent="jax",
            platforms=("linux/amd64", "linux/arm64"),
            sources=(
                source("paxml", path="/opt/paxml"),
                source("praxis", path="/opt/praxis"),
            ),
        )
    ]
