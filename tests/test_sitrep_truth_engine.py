"""The sitrep tells the truth on real builds (docs/sitrep.md): each step BuildKit ran counted once,
durations within the command's own run, base images and their digests for every platform of a
multi-arch push, a failed step's own last lines, and the bytes of context sent."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
import uuid

import pytest
from conftest import console_script

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
PLATFORMS = ("linux/amd64", "linux/arm64")
_STEP = re.compile(r"\[[^\]]*\d+/\d+\] ")  # a Dockerfile step's label ends "i/n]"


def _plugin(make_plugin, engine, context, stages):
    """A plugin whose stages are ``(name, dockerfile, platforms)``, each on the busybox stand-in."""
    busybox = f"{engine.registry}/stand-in/busybox:latest"
    entries = ",\n            ".join(
        f"Stage(name={name!r}, image={name!r}, kind='single', context={str(context)!r}, base_image={busybox!r}, "
        f"platforms={tuple(platforms)!r}, dockerfile_inline={dockerfile.format(base=busybox)!r})"
        for name, dockerfile, platforms in stages)
    return make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [{entries}]
""")


def _build(cli, tmp_path, site, *args, sitrep="sitrep", env=None, expect=0):
    env = dict(os.environ if env is None else env, PYTHONPATH=str(site))
    started = time.time()
    proc = cli("build", "--date", DATE, "--sitrep-dir", str(tmp_path / sitrep), *args, cwd=tmp_path, env=env)
    wall = time.time() - started
    assert proc.returncode == expect, proc.stderr[-4000:]
    return proc, json.loads((tmp_path / sitrep / "sitrep.json").read_text()), wall


def _distinct_steps(rawjson: str) -> set:
    """BuildKit's own count: the distinct digests of Dockerfile-step vertices that started (or
    were cached) in buildx's ``--progress rawjson`` output."""
    out = set()
    for line in rawjson.splitlines():
        if line.startswith("{"):
            for v in json.loads(line).get("vertexes") or ():
                if _STEP.match(v.get("name", "")) and (v.get("started") or v.get("cached")):
                    out.add(v["digest"])
    return out


def test_a_step_unrelated_targets_share_is_counted_once(cli, engine, make_plugin, tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    (context / "a.txt").write_text(uuid.uuid4().hex)  # new to the engine: the shared steps run
    shared = "FROM {base}\nCOPY a.txt /a.txt\nRUN cat /a.txt > /b.txt\n"
    site = _plugin(make_plugin, engine, context, [("sc-one", shared + "RUN echo one > /one\n", ["linux/amd64"]),
                                                  ("sc-two", shared + "RUN echo two > /two\n", ["linux/amd64"])])
    args = ["--target", "sc-one", "--target", "sc-two", "--registry", f"{engine.registry}/sc{uuid.uuid4().hex[:8]}",
            "--platform", "linux/amd64", "--progress", "rawjson"]
    for sitrep, want in (("cold", {"sc-one": {"cached": 1, "run": 3}, "sc-two": {"cached": 0, "run": 1}}),
                         ("warm", {"sc-one": {"cached": 4, "run": 0}, "sc-two": {"cached": 1, "run": 0}})):
        proc, report, _ = _build(cli, tmp_path, site, *args, sitrep=sitrep)
        steps = {name: {"cached": t["steps_cached"], "run": t["steps_run"]} for name, t in report["targets"].items()}
        # FROM, COPY and the shared RUN under sc-one (first in the plan), each target's own RUN under it.
        assert steps == want, sitrep
        assert sum(c["cached"] + c["run"] for c in steps.values()) == len(_distinct_steps(proc.stderr)) == 5


def test_no_duration_is_longer_than_the_command(engine, make_plugin, cli, tmp_path):
    """A second build of the same step while a first one runs it on the same engine: BuildKit
    hands the second build the step with the first build's times, from before it started."""
    token = uuid.uuid4().hex
    site = _plugin(make_plugin, engine, tmp_path, [
        ("du-slow", f"FROM {{base}}\nRUN echo {token} && sleep 20\n", ["linux/amd64"])])
    args = ["--target", "du-slow", "--platform", "linux/amd64", "--progress", "rawjson"]
    first_dir = tmp_path / "first"
    first_dir.mkdir()
    # Each its own tags (two exports of one name at once collide); the step is the same.
    first_tags, second_tags = (["--registry", f"{engine.registry}/du{uuid.uuid4().hex[:8]}"] for _ in range(2))
    env = dict(os.environ, PYTHONPATH=str(site))
    with open(first_dir / "stderr", "w") as log:
        first = subprocess.Popen([str(console_script()), "build", "--date", DATE, "--sitrep-dir", "sitrep", *args,
                                  *first_tags], cwd=first_dir, env=env, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.time() + 120
        while not _started(first_dir / "stderr", f"RUN echo {token} && sleep 20"):
            assert first.poll() is None and time.time() < deadline, "the first build never started its step"
            time.sleep(0.5)
        time.sleep(8)  # well into the step: the first build's times reach 8 s before the second
        started = time.time()
        proc, report, wall = _build(cli, tmp_path, site, *args, *second_tags, sitrep="second")
    finally:
        first.wait(timeout=120)
    earlier = [v for line in proc.stderr.splitlines() if line.startswith("{")
               for v in json.loads(line).get("vertexes") or () if v.get("started") and _epoch(v["started"]) < started]
    assert earlier, "BuildKit gave the second build a vertex started before it: the case this test is about"
    duration = report["targets"]["du-slow"]["duration_s"]
    assert duration is not None and 0 < duration <= wall, (duration, wall)


def _started(rawjson, step: str) -> bool:
    """buildx's ``rawjson`` progress in the file ``rawjson`` shows ``step`` started."""
    for line in rawjson.read_text().splitlines():
        if line.startswith("{") and line.endswith("}"):
            if any(v.get("name", "").endswith(step) and v.get("started")
                   for v in json.loads(line).get("vertexes") or ()):
                return True
    return False


def _epoch(stamp: str) -> float:
    from bake.run.progress import _seconds

    return _seconds(stamp)


def test_base_images_of_a_multi_arch_push_whatever_buildx_metadata_holds(cli, engine, family_site, make_plugin,
                                                                         tmp_path):
    """buildx writes no provenance to its metadata file for a multi-platform build, and none at all
    under BUILDX_METADATA_PROVENANCE=disabled: the base images still come from BuildKit's progress,
    a FROM's digest as BuildKit resolved it, a named context's from the registry."""
    busybox = f"{engine.registry}/stand-in/busybox:latest"
    raw = engine.docker("buildx", "imagetools", "inspect", "--raw", busybox).stdout.encode()
    index = "sha256:" + hashlib.sha256(raw).hexdigest()
    want = [{"image": busybox, "platform": platform, "digest": index} for platform in PLATFORMS]
    site = _plugin(make_plugin, engine, tmp_path, [("bi-one", "FROM {base}\nRUN true\n", PLATFORMS)])
    env = dict(os.environ, BUILDX_METADATA_PROVENANCE="disabled")
    namespace = f"{engine.registry}/bi{uuid.uuid4().hex[:8]}"
    _, report, _ = _build(cli, tmp_path, site, "--target", "bi-one", "--push", "--registry", namespace, env=env)
    assert report["targets"]["bi-one"]["base_images"] == want
    # The test family's mx pair: busybox:1.36 replaced by the stand-in through a named context.
    env["BAKE_PLAN_TESTFAMILY_LEAF_INPUT"] = uuid.uuid4().hex
    _, report, _ = _build(cli, tmp_path, family_site, "--target", "mx-leaf", "--push", "--registry", namespace,
                          "--base-image", f"busybox:1.36={busybox}", sitrep="family", env=env)
    for name in ("mx-root-mealkit", "mx-root", "mx-leaf-mealkit", "mx-leaf"):
        assert report["targets"][name]["base_images"] == want, name


def test_a_failed_steps_own_last_lines_are_in_the_sitrep_and_the_step_summary(cli, engine, make_plugin, tmp_path):
    reason = f"ERROR: No matching distribution found for alpha==9 ({uuid.uuid4().hex[:8]})"
    failing = ("FROM {base}\nRUN for i in $(seq 1 100); do echo noise line $i; done; "
               f"echo '{reason}' >&2; exit 1\n")
    site = _plugin(make_plugin, engine, tmp_path, [("fs-broken", failing, ["linux/amd64"])])
    summary = tmp_path / "step-summary.md"
    env = dict(os.environ, GITHUB_STEP_SUMMARY=str(summary))
    proc, report, _ = _build(cli, tmp_path, site, "--target", "fs-broken", "--registry",
                             f"{engine.registry}/fs{uuid.uuid4().hex[:8]}", "-q", env=env, expect=1)
    [failed] = report["targets"]["fs-broken"]["failed_steps"]
    assert failed["output"][-1] == reason
    assert failed["output"][:-1] == [f"noise line {i}" for i in range(82, 101)]  # the last 20 lines
    assert failed["error"].endswith("exit code: 1") and failed["step"].startswith("RUN for i in")
    for text in ((tmp_path / "sitrep" / "sitrep.md").read_text(), summary.read_text()):
        assert reason in text and "noise line 100" in text and "noise line 81\n" not in text


def test_context_bytes_sent_are_the_change_not_the_whole_context(cli, engine, make_plugin, tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    payload = context / "payload.bin"
    payload.write_bytes(os.urandom(300_000))
    site = _plugin(make_plugin, engine, context, [("cb-one", "FROM {base}\nCOPY payload.bin /payload.bin\n",
                                                   ["linux/amd64"])])
    args = ["--target", "cb-one", "--registry", f"{engine.registry}/cb{uuid.uuid4().hex[:8]}", "--platform",
            "linux/amd64"]
    proc, first, _ = _build(cli, tmp_path, site, *args, sitrep="first")
    assert 300_000 <= first["targets"]["cb-one"]["context_bytes"] < 301_000
    assert re.search(r"^#\d+ transferring context: 30\d\.\d\dkB done$", proc.stderr, re.MULTILINE), proc.stderr[-3000:]
    _, again, _ = _build(cli, tmp_path, site, *args, sitrep="again")
    # Unchanged: BuildKit sends only the file's metadata (its name, size and times), no content.
    assert again["targets"]["cb-one"]["context_bytes"] < 200
    payload.write_bytes(os.urandom(120_000))
    _, changed, _ = _build(cli, tmp_path, site, *args, sitrep="changed")
    assert 120_000 <= changed["targets"]["cb-one"]["context_bytes"] < 121_000
