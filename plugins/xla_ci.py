"""``xla-ci``: the PyTorch/XLA CI image, on the development image.

Chain: ``python:3.8-bullseye`` → dev image ``development:3.8_cuda_12.1`` → this image, tagged
``dev-`` + the dev tag (``gcr.io/tpu-pytorch/xla_base:dev-3.8_cuda_12.1``). Its cache key
``cache-silo-ci-dev-3.8_cuda_12.1`` keys Bazel's remote cache so CI never pollutes developer
caches. Root installs come before the ``jenkins`` user the upstream CI template needs.

The toolchain is a variant matrix of one (Python 3.8 × CUDA 12.1), so the default plan has one
target, ``xla-ci``; the configuration widens it, e.g. ``[tool.bake-plan.stages.xla-ci] variants =
{ python = ["3.10", "3.12"], cuda = ["12.1", "12.4"] }`` gives ``xla-ci-3.10-12.1`` … tagged
``dev-3.10_cuda_12.1`` on the dev image ``development:3.10_cuda_12.1`` (see :mod:`bake.plan.variants`).
"""

from bake import ImageTest, Stage, hookimpl
from bake.resources import stage_dir

PYTHON_VERSIONS = ("3.8",)
CUDA_VERSIONS = ("12.1",)
DEV_IMAGE = "us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/development:{python}_cuda_{cuda}"


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="xla-ci",
            image="xla_base",
            registry="gcr.io/tpu-pytorch",
            kind="single",
            context=stage_dir("xla-ci"),
            # bake-plan lint: the rules that do not apply to this Dockerfile, and why.
            lint_ignore={
                "DL3008": "apt packages follow the base image's release, which its digest pins",
                "DL3003": "cd inside one RUN builds in a checkout; WORKDIR would change the image's working directory",
                "DL3066": "the CI template this image serves runs as the user jenkins by name",
            },
            base_image=DEV_IMAGE,
            base_image_arg="base_image",
            platforms=("linux/amd64",),
            variants={"python": PYTHON_VERSIONS, "cuda": CUDA_VERSIONS},
            variant_format="dev-{python}_cuda_{cuda}",
            # `cuda` in the Dockerfile is XLA_CUDA's on/off switch, so the version gets its own arg.
            variant_args={"python": "python_version", "cuda": "CUDA_VERSION"},
            cache_scope="ci",
            # The CI toolchain the Dockerfile adds, and the user the CI template runs as.
            tests=(
                ImageTest('for t in clang valgrind sccache jq sudo; do command -v "$t" >/dev/null '
                          '|| { echo "missing $t"; exit 1; }; done', name="toolchain on PATH"),
                ImageTest('test "$(id -un)" = jenkins', name="runs as jenkins"),
            ),
            args={
                "cuda": "1",
                "cuda_compute": "5.2,7.5",
                "cc": "clang",
                "cxx": "clang++",
                "tpuvm": "",
            },
        )
    ]
