"""``base``: the root of the JAX-Toolbox family.

Starts from a CUDA devel image (arg ``BASE_IMAGE``), adds Python, pip-tools (pinned: a minor
release once broke ``-r`` includes), ``/opt/pip-tools.d`` and the helper scripts every child uses
(``bake-fetch-source``, ``bake-write-requirements``, ``bake-pip-finalize``), taken from the
``bake-scripts`` named context bake-plan gives every stage that uses it.
"""

from bake import Stage, hookimpl
from bake_plan_plugins import REGISTRY
from bake.resources import stage_dir

CUDA_IMAGE = "nvidia/cuda:12.2.0-devel-ubuntu22.04"


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="base",
            registry=REGISTRY,
            image="base",
            context=stage_dir("base"),
            base_image=CUDA_IMAGE,
        )
    ]
