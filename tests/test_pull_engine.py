"""Stale inputs: with an older copy of a base image in the engine's image store and a newer one in
the registry, a build uses the store's copy unless it pulls. ``build --pull`` (and ``--push``,
which pulls unless ``--no-pull``) builds on the registry's, and the sitrep says which digest went in."""

from __future__ import annotations

import json
import os
import uuid

import pytest

pytestmark = pytest.mark.engine

DATE = "2026-11-29"


def _image(engine, tmp_path, ref, marker):
    context = tmp_path / f"ctx-{marker}"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {engine.registry}/stand-in/busybox:latest\nRUN echo {marker} > /marker\n")
    engine.docker("buildx", "build", "--platform", "linux/amd64", "--push", "-t", ref, str(context))


def test_a_stale_base_image_is_used_only_without_pull(cli, engine, make_plugin, tmp_path):
    namespace = f"{engine.registry}/st{uuid.uuid4().hex[:8]}"
    base = f"{namespace}/base:v1"
    _image(engine, tmp_path, base, "old")  # pushed, and in the engine's store as base:v1
    _image(engine, tmp_path, f"{namespace}/base:next", "new")
    engine.docker("buildx", "imagetools", "create", "-t", base, f"{namespace}/base:next")  # registry only
    site = make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="st-leaf", image="st-leaf", kind="single", context={str(tmp_path)!r}, base_image={base!r},
                  platforms=("linux/amd64",), dockerfile_inline="FROM {base}\\nRUN cat /marker > /seen\\n")]
""")
    env = dict(os.environ, PYTHONPATH=str(site))
    common = ["--target", "st-leaf", "--registry", namespace, "--date", DATE, "--platform", "linux/amd64"]
    image = f"{namespace}/st-leaf:latest-amd64"

    def build(*args, sitrep):
        proc = cli("build", *common, *args, "--sitrep-dir", str(tmp_path / sitrep), cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen = engine.docker("run", "--rm", "--platform", "linux/amd64", image, "cat", "/seen").stdout.strip()
        return seen, json.loads((tmp_path / sitrep / "sitrep.json").read_text())["targets"]["st-leaf"]

    assert build("--load", sitrep="stale")[0] == "old"
    seen, report = build("--load", "--pull", sitrep="pulled")
    assert seen == "new"
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}", base).stdout)
    assert [b["digest"] for b in report["base_images"] if b["image"] == base] == [raw["digest"]]
    assert build("--push", sitrep="pushed")[0] == "new"  # --push pulls unless told --no-pull
