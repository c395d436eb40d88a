"""A reference family of real packages: the JAX CPU stack on Python 3.11, linux/amd64.

- ``jx-root`` is the built-in ``base`` Dockerfile on ``python:3.11-slim-bookworm`` (stand it in
  with ``--base-image``); it asks for jax, jaxlib and flax, pinned to released versions with
  cp311 manylinux x86_64 wheels.
- ``jx-child`` builds on ``jx-root``'s meal kit and adds einops; its final stage installs the
  whole chain once (``bake-pip-finalize``), from the lock when the plan is ``--locked``.

Both Dockerfiles use the ``wheelhouse`` named context, so ``bake-plan build --wheelhouse DIR``
builds the family offline from a directory filled by ``bake-plan wheelhouse --target jx-child``.
"""

from pathlib import Path

from bake import Stage, hookimpl
from bake.resources import stage_dir, stages_dir

HERE = Path(__file__).resolve().parent
BASE_IMAGE = "python:3.11-slim-bookworm"
PYTHON = "3.11"
ROOT_REQUIREMENTS = ("jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8")
CHILD_REQUIREMENTS = ("einops==0.8.2",)


@hookimpl
def bake_plan_stages():
    common = dict(registry="localhost:5555/jaxfamily", platforms=("linux/amd64",))
    return [
        Stage(name="jx-root", image="jx-root", context=stage_dir("base"), base_image=BASE_IMAGE, python=PYTHON,
              requirements=ROOT_REQUIREMENTS, args={"APT_PACKAGES": "python3 python3-venv"},
              contexts={"scripts": str(stages_dir() / "scripts")}, **common),
        Stage(name="jx-child", image="jx-child", parent="jx-root", context=HERE / "jx-child",
              requirements=CHILD_REQUIREMENTS, **common),
    ]
