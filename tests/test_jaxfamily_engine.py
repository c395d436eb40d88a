"""The reference family of real packages (``tests/packages/bake-plan-jaxfamily``: jax, jaxlib,
flax; einops in a child) end to end on the test engine: ``bake-plan wheelhouse`` fetches its
wheels with pip's own configuration (cached between runs), ``bake-plan lock`` locks it from that
wheelhouse, ``bake-plan build --locked --wheelhouse`` builds it offline for linux/amd64, the image
imports jax and holds exactly the lock; later builds of the same plan, even from a fresh buildx
state, re-send < 1 % of the wheelhouse (BuildKit's own progress: the layer of the wheelhouse's
OCI layout, ``bake.pip.wheelhouse.oci_layout``).

The wheelhouse is kept under ``$BAKE_PLAN_TEST_CACHE`` (default ``~/.cache/bake-plan-tests``)
with a stamp of what it was filled for: a warm cache downloads nothing. The lock and the locked
build are made once a session (``conftest.jax_family_built``), which the build benchmark's test
asks for too: the family's first build is paid once, before either.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import JAX_BASE as FAMILY_BASE
from conftest import JAX_DATE as DATE
from conftest import TEST_CACHE as CACHE  # noqa: F401  other engine tests keep their wheelhouses there
from conftest import console_script

from bake.run.progress import bytes_sent

pytestmark = pytest.mark.engine

STAND_IN_PYTHON = "stand-in/python:bookworm"
PIP_TOOLS_NAMES = {"pip", "setuptools", "wheel"}  # pip freeze leaves these out


def _bake_plan(*args, cwd, env) -> subprocess.CompletedProcess:
    """The installed console script, with room for a real build (the ``cli`` fixture allows 120 s)."""
    return subprocess.run([str(console_script()), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


def _pins(lines) -> dict:
    out = {}
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")) or "==" not in line:
            continue
        name, version = line.split("==", 1)
        out[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    return out


def test_jax_family_builds_offline_locked_from_the_wheelhouse(engine, jax_family_built, jax_wheelhouse):
    built = jax_family_built  # locked and built --locked once a session (conftest.py)
    work, env = built.work, built.env
    lock_text = built.lock_text
    lock = _pins(lock_text.splitlines())
    assert {"jax", "jaxlib", "flax", "einops", "optax"} <= set(lock)
    assert "resolver: uv" in lock_text and "python-platform: x86_64-manylinux_2_28" in lock_text  # the stage's Python

    namespace = built.namespace
    print(f"bake-plan build: {built.build_seconds:.1f} s")
    image = built.image
    ran = engine.docker("run", "--rm", "--network", "none", image, "python", "-c",
                        "import jax; print(jax.numpy.ones(2).sum())")
    assert ran.stdout.strip() == "2.0"
    frozen = _pins(engine.docker("run", "--rm", image, "pip", "freeze").stdout.splitlines())
    assert frozen == {k: v for k, v in lock.items() if k not in PIP_TOOLS_NAMES}

    # The same plan again, through buildx with a fresh local state: later builds re-send under
    # 1 % of the wheelhouse. The first one sends the layer only if the engine never had it.
    size = sum(f.stat().st_size for f in jax_wheelhouse.glob("*.whl"))
    plan_text = (work / "docker-bake.hcl").read_text()
    layout = re.search(r"oci-layout://([^@\"]+)@(sha256:[0-9a-f]{64})", plan_text)
    assert layout, "the plan does not give the wheelhouse as an OCI layout"
    manifest = json.loads((Path(layout.group(1)) / "blobs" / "sha256" / layout.group(2)[7:]).read_text())
    layer = manifest["layers"][0]["digest"][7:]
    bx_env = dict(os.environ, BUILDX_CONFIG=str(work / "buildx"), BUILDX_BAKE_ENTITLEMENTS_FS="0")
    sent = []
    for _ in range(3):
        run = subprocess.run(["docker", "buildx", "bake", "-f", str(work / "docker-bake.hcl"),
                              "--progress=plain"], cwd=work, env=bx_env, capture_output=True, text=True,
                             timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        sent.append(bytes_sent(run.stderr, layer, context="wheelhouse"))
    print(json.dumps({"wheelhouse_bytes": size, "first_sent": sent[0], "second_sent": sent[1], "third_sent": sent[2]}))
    assert max(sent[1:]) < 0.01 * size, sent

    # Unlocked, the image compiles its own lock (pip-compile in its final stage, same wheelhouse):
    # the host's lock, made by uv for the stage's Python and platform, has the same pins.
    proc = _bake_plan("build", "--target", "jx-child", "--wheelhouse", str(jax_wheelhouse), "--platform",
                      "linux/amd64", "--registry", namespace, "--date", DATE, "--load", "--base-image",
                      f"{FAMILY_BASE}={engine.registry}/{STAND_IN_PYTHON}", "--config", os.devnull,
                      "--sitrep-dir", str(work / "sitrep-unlocked"), "-o", "unlocked.hcl", cwd=work, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own = _pins(engine.docker("run", "--rm", image, "pip", "freeze").stdout.splitlines())
    assert own == frozen
