"""A family with an untagged wheel builder (like the built-in ``te`` that ``jax`` uses): the
builder's target has no tags, so it builds cache-only (``output = ["type=cacheonly"]``), and
``build --push`` then ``publish`` work for amd64 and arm64, on both buildx."""

from __future__ import annotations

import hashlib
import json
import os
import uuid

import pytest

from conftest import OLD_BUILDX_DEFAULT

pytestmark = pytest.mark.engine

DATE = "2026-11-29"


def _env(site, tmp_path, which):
    env = dict(os.environ, PYTHONPATH=str(site))
    if which == "old":  # the docker CLI takes the buildx plugin from $DOCKER_CONFIG/cli-plugins first
        path = os.environ.get("BAKE_PLAN_BUILDX_OLD", OLD_BUILDX_DEFAULT)
        if not os.access(path, os.X_OK):
            if os.environ.get("CI") == "true":
                pytest.fail(f"buildx 0.13 at {path} is required under CI=true")
            pytest.skip(f"buildx 0.13 at {path} not available")
        plugins = tmp_path / "docker-config" / "cli-plugins"
        plugins.mkdir(parents=True)
        (plugins / "docker-buildx").symlink_to(path)
        env["DOCKER_CONFIG"] = str(plugins.parent)
    return env


@pytest.mark.parametrize("which", ["new", "old"])
def test_an_untagged_wheel_builder_builds_pushes_and_publishes(cli, engine, make_plugin, tmp_path, which):
    busybox = f"{engine.registry}/stand-in/busybox:latest"
    site = make_plugin(f"""
from bake import Stage, hookimpl
COMMON = dict(kind="single", context={str(tmp_path)!r}, base_image={busybox!r},
              platforms=("linux/amd64", "linux/arm64"))
@hookimpl
def bake_plan_stages():
    return [
        Stage(name="uw-wheels", dockerfile_inline="FROM {busybox}\\nRUN echo wheel-$(uname -m) > /w.whl\\n", **COMMON),
        Stage(name="uw-user", image="uw-user", uses={{"wheels": "uw-wheels"}},
              dockerfile_inline="FROM {busybox}\\nCOPY --from=wheels /w.whl /w.whl\\n", **COMMON),
    ]
""")
    env = _env(site, tmp_path, which)
    common = ["--target", "uw-user", "--registry", f"{engine.registry}/uw{uuid.uuid4().hex[:8]}", "--date", DATE]
    plan = json.loads(cli("plan", *common, "--format", "json", "-o", "-", cwd=tmp_path, env=env, check=True).stdout)
    assert plan["target"]["uw-wheels"]["output"] == ["type=cacheonly"] and "tags" not in plan["target"]["uw-wheels"]
    assert "output" not in plan["target"]["uw-user"]
    for platform in ("linux/amd64", "linux/arm64"):
        sitrep = tmp_path / f"sitrep-{platform[6:]}"
        proc = cli("build", *common, "--platform", platform, "--push", "--sitrep-dir", str(sitrep), cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "tag is needed" not in proc.stderr
        report = json.loads((sitrep / "sitrep.json").read_text())
        assert report["outcome"] == "pass" and report["targets"]["uw-user"]["digest"], report
        # The sitrep says which base image went in, as BuildKit resolved it: the registry's index
        # digest (from buildx's provenance, or from BuildKit's progress: buildx 0.13 records none
        # in its metadata file).
        raw = engine.docker("buildx", "imagetools", "inspect", "--raw", busybox).stdout.encode()
        want = [{"image": busybox, "platform": platform, "digest": "sha256:" + hashlib.sha256(raw).hexdigest()}]
        assert report["targets"]["uw-user"]["base_images"] == want
        # The pushed image's compressed size (config + layers, as a pull downloads it); none for the
        # cache-only wheel builder.
        sizes = report["targets"]["uw-user"]["size_bytes"]
        assert list(sizes) == [platform] and 1000 < sizes[platform] < 50_000_000, sizes
        assert report["targets"]["uw-wheels"]["size_bytes"] == {}
    proc = cli("publish", *common, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    ref = f"{common[3]}/uw-user:latest"
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", ref).stdout)
    platforms = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]
                       if m.get("platform", {}).get("os") != "unknown")
    assert platforms == ["linux/amd64", "linux/arm64"]
    wheel = engine.docker("run", "--rm", "--platform", "linux/arm64", ref, "cat", "/w.whl").stdout.strip()
    assert wheel == "wheel-aarch64"
