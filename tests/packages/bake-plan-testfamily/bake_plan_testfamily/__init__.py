"""The engine tests' family: ``tf-root`` → ``tf-mid`` → ``tf-leaf`` (and ``tf-broken``, which
fails on purpose), on a Python base image, with every package served from a wheelhouse made on the
host (builds have no network here).

- ``tf-root`` is the built-in ``base`` Dockerfile on ``python:3.11-slim-bookworm`` (the tests
  stand it in with ``--base-image``); it asks for ``beta``, which needs ``alpha`` (2.0 is newest).
- ``tf-mid`` ships a local wheel (``gamma``) in its meal kit.
- ``tf-leaf`` adds an editable source (``delta``) and a pin only it asks for: ``alpha<2``.
- ``mx-root`` → ``mx-leaf``: a multi-arch pair on ``busybox:1.36`` (amd64 and arm64, no
  Python) for per-arch builds, caches and publishing; ``BAKE_PLAN_TESTFAMILY_LEAF_INPUT`` is the
  leaf's one changeable input.

``tf-mid`` and ``tf-leaf`` name paths in the image (``/opt/wheels``, ``/opt/delta``); their
``host_paths`` say where the same files are on the host, so ``bake-plan lock`` resolves them there.

Directories come from the environment: ``BAKE_PLAN_TESTFAMILY_WHEELHOUSE`` (the wheelhouse) and
``BAKE_PLAN_TESTFAMILY_LOCAL_WHEELS`` (where ``gamma``'s wheel is).
"""

import os
from pathlib import Path

from bake import Stage, hookimpl
from bake.resources import stage_dir, stages_dir

HERE = Path(__file__).resolve().parent
BASE_IMAGE = "python:3.11-slim-bookworm"
GAMMA_WHEEL = "gamma-1.0-py3-none-any.whl"
OFFLINE_PIP = {"PIP_FIND_LINKS": "/opt/wheelhouse", "PIP_NO_INDEX": "1"}


def _present(contexts):
    """The named contexts whose directory is there: bake-plan refuses a named context that is a
    missing directory, and the families' stages are declared even where the tf- ones are not built
    (the mx- families run without a wheelhouse)."""
    return {name: path for name, path in contexts.items() if os.path.isdir(path)}


@hookimpl
def bake_plan_stages():
    wheelhouse = os.environ.get("BAKE_PLAN_TESTFAMILY_WHEELHOUSE", str(HERE / "wheelhouse"))
    local_wheels = os.environ.get("BAKE_PLAN_TESTFAMILY_LOCAL_WHEELS", str(HERE / "local-wheels"))
    common = dict(registry="localhost:5555/testfamily", platforms=("linux/amd64",),
                  args=OFFLINE_PIP, contexts=_present({"wheelhouse": wheelhouse}))
    return [
        Stage(name="tf-root", image="tf-root", context=stage_dir("base"), base_image=BASE_IMAGE,
              requirements=("beta",),
              **{**common, "args": {**OFFLINE_PIP, "APT_PACKAGES": "python3 python3-venv"},
                 "contexts": _present({"wheelhouse": wheelhouse, "scripts": str(stages_dir() / "scripts")})}),
        Stage(name="tf-mid", image="tf-mid", parent="tf-root", context=HERE / "mid",
              requirements=(f"gamma @ file:///opt/wheels/{GAMMA_WHEEL}",), host_paths={"/opt/wheels": local_wheels},
              **{**common, "contexts": _present({"wheelhouse": wheelhouse, "local-wheels": local_wheels})}),
        Stage(name="tf-leaf", image="tf-leaf", parent="tf-mid", context=HERE / "leaf",
              requirements=("alpha<2", "-e file:///opt/delta"), host_paths={"/opt/delta": str(HERE / "leaf" / "delta")},
              **common),
        Stage(name="tf-broken", image="tf-broken", parent="tf-root", context=HERE / "broken", **common),
        Stage(name="mx-root", image="mx-root", context=HERE / "mx-root", base_image="busybox:1.36",
              registry="localhost:5555/testfamily"),
        Stage(name="mx-leaf", image="mx-leaf", parent="mx-root", context=HERE / "mx-leaf",
              registry="localhost:5555/testfamily",
              args={"LEAF_INPUT": os.environ.get("BAKE_PLAN_TESTFAMILY_LEAF_INPUT", "1")}),
    ]
