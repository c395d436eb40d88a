"""Step counts in the sitrep on the real engine, for the cases users found wrong: an unchanged
rebuild (``FROM`` steps were counted as run), one-stage Dockerfiles under ``--platform`` (labels
without a stage: nothing counted), and meal kits (a step named after another target). Each target
counts its own Dockerfile steps, each once, as cached or run (``bake/run/progress.py``)."""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

pytestmark = pytest.mark.engine

DATE = "2026-11-29"


def _build(cli, tmp_path, site, *args, env=None, sitrep="sitrep"):
    proc = cli("build", "--push", "--date", DATE, "--sitrep-dir", str(tmp_path / sitrep), *args, cwd=tmp_path,
               env=dict(os.environ if env is None else env, PYTHONPATH=str(site)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((tmp_path / sitrep / "sitrep.json").read_text())
    return proc, {name: {"cached": t["steps_cached"], "run": t["steps_run"]} for name, t in report["targets"].items()}


def test_an_unchanged_rebuild_runs_no_step(cli, engine, make_plugin, tmp_path):
    # One target (buildx names no target) on two platforms, FROM an image straight from the registry.
    context = tmp_path / "context"
    context.mkdir()
    (context / "hello.txt").write_text(uuid.uuid4().hex)  # new to the engine: the COPYs run the first time
    site = make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="pe-one", image="pe-one", kind="single", context={str(context)!r},
                  base_image="{engine.registry}/stand-in/busybox:latest", platforms=("linux/amd64", "linux/arm64"),
                  dockerfile_inline="FROM {engine.registry}/stand-in/busybox:latest\\nCOPY hello.txt /hello.txt\\n")]
""")
    registry = ["--registry", f"{engine.registry}/pe{uuid.uuid4().hex[:8]}", "--target", "pe-one"]
    _, first = _build(cli, tmp_path, site, *registry, sitrep="first")
    assert first["pe-one"]["cached"] + first["pe-one"]["run"] == 4  # FROM and COPY, twice
    assert first["pe-one"]["run"] >= 2
    proc, again = _build(cli, tmp_path, site, *registry, sitrep="again")
    assert again == {"pe-one": {"cached": 4, "run": 0}}
    # The console reads like plain progress.
    copy = r"^#(\d+) \[linux/arm64 2/2\] COPY hello.txt /hello.txt\n#\1 CACHED$"
    assert re.search(copy, proc.stderr, re.MULTILINE), proc.stderr[-4000:]
    assert re.search(r"^#(\d+) \[linux/amd64 1/2\] FROM .*\n(#\1 .*\n)*#\1 DONE \d+\.\ds$", proc.stderr, re.MULTILINE)
    assert '{"vertexes"' not in proc.stderr


def test_one_stage_dockerfiles_under_one_platform_count_their_steps(cli, engine, make_plugin, tmp_path):
    # buildx labels these steps "[pe-leaf 1/2]": no platform, no stage name.
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
COMMON = dict(kind="single", context=os.path.dirname(__file__), platforms=("linux/amd64", "linux/arm64"))
@hookimpl
def bake_plan_stages():
    return [Stage(name="pe-root", image="pe-root", base_image="{engine.registry}/stand-in/busybox:latest",
                  dockerfile_inline="FROM {engine.registry}/stand-in/busybox:latest\\nRUN echo root > /root-file\\n",
                  **COMMON),
            Stage(name="pe-leaf", image="pe-leaf", parent="pe-root",
                  dockerfile_inline="FROM base\\nRUN echo {uuid.uuid4().hex} > /leaf-file\\n", **COMMON)]
""")
    args = ["--registry", f"{engine.registry}/pe{uuid.uuid4().hex[:8]}", "--target", "pe-leaf",
            "--platform", "linux/amd64"]
    _, first = _build(cli, tmp_path, site, *args, sitrep="first")
    assert first["pe-root"]["cached"] + first["pe-root"]["run"] == 2  # FROM, RUN
    assert first["pe-leaf"] == {"cached": 0, "run": 1}  # FROM base is the root's image: no step
    _, again = _build(cli, tmp_path, site, *args, sitrep="again")
    assert again == {"pe-root": {"cached": 2, "run": 0}, "pe-leaf": {"cached": 1, "run": 0}}


def test_meal_kit_steps_count_for_their_own_targets(cli, engine, family_site, tmp_path):
    # mx-root's meal kit step is reported to all four builds, named after any of them.
    env = dict(os.environ, BAKE_PLAN_TESTFAMILY_LEAF_INPUT=uuid.uuid4().hex)
    args = ["--registry", f"{engine.registry}/pe{uuid.uuid4().hex[:8]}", "--target", "mx-leaf",
            "--platform", "linux/amd64", "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest"]
    _, first = _build(cli, tmp_path, family_site, *args, env=env, sitrep="first")
    # Each Dockerfile stage here has one RUN (FROM is a named context or the meal kit).
    assert {name: c["cached"] + c["run"] for name, c in first.items()} == \
        {"mx-root-mealkit": 1, "mx-root": 1, "mx-leaf-mealkit": 1, "mx-leaf": 1}
    assert first["mx-leaf-mealkit"] == first["mx-leaf"] == {"cached": 0, "run": 1}  # a new LEAF_INPUT
    _, again = _build(cli, tmp_path, family_site, *args, env=env, sitrep="again")
    assert again == {name: {"cached": 1, "run": 0} for name in first}
