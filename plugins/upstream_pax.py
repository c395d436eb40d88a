"""``upstream-pax``: paxml at ``/opt/paxml`` and praxis at ``/opt/praxis`` on the jax meal kit,
for amd64 and arm64 (on arm64 the Dockerfile's extra builder stages make tensorflow-text and
lingvo wheels, selected by ``TARGETARCH``). Both sources' commits come from ``stages/sources.toml``, as does fiddle's (praxis needs it; a
``pip-vcs`` source: a ``fiddle @ git+…@<commit>`` line, no clone)."""

from bake import ImageTest, Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.pip.sources import host_paths, patch_contexts, requirement, source
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="upstream-pax",
            registry=REGISTRY,
            image="upstream-pax",
            context=stage_dir("upstream-pax"),
            # bake-plan lint: the rules that do not apply to this Dockerfile, and why.
            lint_ignore={
                "DL3008": "apt packages follow the base image's release, which its digest pins",
                "DL3013": "pip here installs build tools or wheels just built; the image's packages are pinned by its lock (bake-pip-finalize)",
                "DL3003": "cd inside one RUN builds in a checkout; WORKDIR would change the image's working directory",
                "DL3006": "FROM wheels-${TARGETARCH} names a stage of this Dockerfile, not an image",
                "DL4006": "each pipe is a test whose last command decides (`dpkg-query \u2026 | grep -q`): pipefail would fail on a package that is missing by design",
            },
            parent="jax",
            platforms=("linux/amd64", "linux/arm64"),
            sources=(
                source("paxml", path="/opt/paxml"),
                source("praxis", path="/opt/praxis"),
                source("fiddle", path="/opt/fiddle"),
            ),
            requirements=(
                requirement("praxis", path="/opt/praxis"),
                requirement("paxml", path="/opt/paxml"),
                requirement("fiddle", path="/opt/fiddle"),
            ),
            host_paths=host_paths(("paxml", "/opt/paxml"), ("praxis", "/opt/praxis")),
            contexts=patch_contexts("paxml", "praxis"),
            tests=(ImageTest("python -c 'import paxml, praxis, fiddle'", name="import paxml, praxis, fiddle"),),
        )
    ]
