"""``xla-ci``: the PyTorch/XLA CI image, on the development image.

Chain: ``python:3.8-bullseye`` → dev image ``development:3.8_cuda_12.1`` → this image, tagged
``dev-`` + the dev tag (``gcr.io/tpu-pytorch/xla_base:dev-3.8_cuda_12.1``). Its cache key
``cache-silo-ci-dev-3.8_cuda_12.1`` keys Bazel's remote cache so CI never pollutes developer
caches. Root installs come before the ``jenkins`` user the upstream CI template needs.
"""

from bake import Stage, hookimpl
from bake.resources import stage_dir

PYTHON_VERSION = "3.8"
CUDA_VERSION = "12.1"
DEV_TAG = f"{PYTHON_VERSION}_cuda_{CUDA_VERSION}"


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="xla-ci",
            image="xla_base",
            registry="gcr.io/tpu-pytorch",
            kind="single",
            context=stage_dir("xla-ci"),
            base_image=f"us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/development:{DEV_TAG}",
            base_image_arg="base_image",
            platforms=("linux/amd64",),
            variant=f"dev-{DEV_TAG}",
            cache_scope="ci",
            args={
                "python_version": PYTHON_VERSION,
                "cuda": "1",
                "cuda_compute": "5.2,7.5",
                "cc": "clang",
                "cxx": "clang++",
                "tpuvm": "",
            },
        )
    ]
