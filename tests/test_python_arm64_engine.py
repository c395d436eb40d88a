"""A Python family built for linux/amd64 and linux/arm64 (arm64 under qemu) on the python
stand-ins ``scripts/test-engine stand-ins`` pushes (``localhost:5555/stand-in/python:bookworm`` and
``:bullseye``, indexes of amd64 + arm64), offline: the wheels are made here and reach the builds
through the ``wheelhouse`` named context.

The family is two small stages of its own (not the ``base`` Dockerfile: under emulation each of
its venvs and pip-tools runs takes minutes): ``pyarm-root`` makes ``/opt/venv`` with ``python3 -m
venv`` (so the stand-in's ensurepip, pip and dpkg-free Python must work on arm64) and installs
``hexa``; ``pyarm-leaf`` adds ``hexb``, which needs ``hexa``.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from conftest import console_script, make_wheel

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
BASE = "python:3.11-slim-bookworm"
STAND_IN = "stand-in/python:bookworm"
PLATFORMS = ("linux/amd64", "linux/arm64")
MACHINE = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}

ROOT_DOCKERFILE = """\
# pyarm-root: /opt/venv from the base image's own python3, with hexa from the wheelhouse.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM scratch AS wheelhouse

FROM ${BASE_IMAGE} AS mealkit
RUN --mount=type=bind,from=wheelhouse,target=/opt/wheelhouse \\
    python3 -m venv /opt/venv && \\
    /opt/venv/bin/pip install --no-index --find-links /opt/wheelhouse hexa && \\
    uname -m > /opt/root-arch

FROM mealkit AS final
"""

LEAF_DOCKERFILE = """\
# pyarm-leaf: hexb (which needs hexa) into the root's /opt/venv.
FROM scratch AS wheelhouse

FROM base AS mealkit
RUN --mount=type=bind,from=wheelhouse,target=/opt/wheelhouse \\
    /opt/venv/bin/pip install --no-index --find-links /opt/wheelhouse hexb

FROM mealkit AS final
"""

PLUGIN = """
from bake import Stage, hookimpl


@hookimpl
def bake_plan_stages():
    common = dict(registry="localhost:5555/pyarm", platforms={platforms!r}, contexts={{"wheelhouse": {house!r}}})
    return [Stage(name="pyarm-root", image="pyarm-root", context={root!r}, base_image={base!r}, **common),
            Stage(name="pyarm-leaf", image="pyarm-leaf", parent="pyarm-root", context={leaf!r}, **common)]
"""


def _platforms(engine, ref: str) -> list:
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", ref).stdout)
    assert raw["mediaType"] in ("application/vnd.oci.image.index.v1+json",
                                "application/vnd.docker.distribution.manifest.list.v2+json"), (ref, raw["mediaType"])
    return sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]
                  if m.get("platform", {}).get("os") != "unknown")


@pytest.mark.parametrize("suite", ["bookworm", "bullseye"])
def test_python_stand_ins_hold_amd64_and_arm64(engine, suite):
    assert _platforms(engine, f"{engine.registry}/stand-in/python:{suite}") == list(PLATFORMS)


def test_python_family_builds_for_amd64_and_arm64_offline(engine, make_plugin, tmp_path):
    house = tmp_path / "wheelhouse"
    make_wheel(house, "hexa", "1.0")
    make_wheel(house, "hexb", "1.0", requires=("hexa",))
    contexts = {}
    for name, text in (("root", ROOT_DOCKERFILE), ("leaf", LEAF_DOCKERFILE)):
        contexts[name] = tmp_path / name
        contexts[name].mkdir()
        (contexts[name] / "Dockerfile").write_text(text)
    site = make_plugin(PLUGIN.format(platforms=PLATFORMS, house=str(house), root=str(contexts["root"]),
                                     leaf=str(contexts["leaf"]), base=BASE), name="pyarmfamily")
    namespace = f"{engine.registry}/pyarm{uuid.uuid4().hex[:8]}"

    # Both arches in one build; arm64 runs its venv and pip under qemu (minutes on a busy machine).
    proc = subprocess.run([str(console_script()), "build", "--target", "pyarm-leaf", "--push", "--registry", namespace,
                           "--date", DATE, "--base-image", f"{BASE}={engine.registry}/{STAND_IN}",
                           "--sitrep-dir", str(tmp_path / "sitrep"), "--config", os.devnull],
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(site)), capture_output=True, text=True,
                          timeout=2400)
    assert proc.returncode == 0, proc.stderr[-4000:]
    sitrep = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
    assert sitrep["outcome"] == "pass", sitrep["summary"]

    # One build of both arches pushes one multi-arch tag.
    leaf = f"{namespace}/pyarm-leaf:latest"
    assert _platforms(engine, leaf) == list(PLATFORMS)
    for platform in PLATFORMS:
        out = engine.docker("run", "--rm", "--network", "none", "--platform", platform, leaf, "sh", "-c",
                            "uname -m; cat /opt/root-arch; /opt/venv/bin/pip freeze", timeout=900).stdout.split()
        assert out[:2] == [MACHINE[platform]] * 2, (platform, out)
        assert {"hexa==1.0", "hexb==1.0"} <= set(out[2:]), (platform, out)
