"""``base``: the root of the JAX-Toolbox family.

Starts from a CUDA devel image (arg ``BASE_IMAGE``), adds Python, pip-tools (pinned: a minor
release once broke ``-r`` includes), ``/opt/pip-tools.d`` and the helper scripts every child uses
(``bake-fetch-source``, ``bake-write-requirements``, ``bake-pip-finalize``), taken from the
``bake-scripts`` named context bake-plan gives every stage that uses it.
"""

from bake import ImageTest, Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.resources import stage_dir

CUDA_IMAGE = "nvidia/cuda:12.2.0-devel-ubuntu22.04"

SMOKE_TESTS = (
    ImageTest("python -c 'import sys; assert sys.prefix == \"/opt/venv\", sys.prefix'", name="python is /opt/venv"),
    ImageTest(["/opt/pip-tools/bin/pip-compile", "--version"], name="pip-tools runs"),
    ImageTest('for s in bake-fetch-source bake-write-requirements bake-pip-finalize; do command -v "$s" || exit 1; done',
              name="helper scripts on PATH"),
)
"""``bake-plan test``'s checks of the base image: what every child relies on (the venv first on
``PATH``, pip-tools apart from it, the ``bake-*`` scripts). Third-party families on the ``base``
Dockerfile may reuse them."""


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="base",
            registry=REGISTRY,
            image="base",
            context=stage_dir("base"),
            # bake-plan lint: the rules that do not apply to this Dockerfile, and why.
            lint_ignore={
                "DL3008": "apt packages follow the base image's release, which its digest pins",
                "DL4006": "each pipe is a test whose last command decides (`dpkg-query \u2026 | grep -q`): pipefail would fail on a package that is missing by design",
                "SC2086": "the variable is a list of words, split on purpose",
            },
            base_image=CUDA_IMAGE,
            tests=SMOKE_TESTS,
        )
    ]
