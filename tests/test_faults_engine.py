"""Faults during builds, on real engines and registries: a registry that refuses a push, a publish
interrupted half-way, and the engine going away mid-build. Each time the exit status (1) and the
sitrep or the output say what happened, and rerunning the same command finishes the work without
duplicating or losing a tag.

The registry is a private one on a free port that the tests stop and start, and the engine that
dies is a private dockerd (``tests/private_engine.py``): the shared engine and registry other
tests use are never touched.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import console_script

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
BAKE_PLAN = str(console_script())


@pytest.fixture
def registry(private_registry):
    """The test's own registry (conftest ``private_registry``), started; the test stops and starts it."""
    return private_registry


def _expected_tags(plan_file: Path) -> dict:
    """repository → every tag the plan pushes there: image tags and written cache refs."""
    plan = json.loads(plan_file.read_text())
    out: dict = {}
    for target in plan["target"].values():
        refs = list(target.get("tags", []))
        refs += [re.search(r"ref=([^,]+)", entry).group(1) for entry in target.get("cache-to", [])]
        for ref in refs:
            repo, _, tag = ref.rpartition(":")
            out.setdefault(repo.split("/", 1)[1], set()).add(tag)
    return out


def _assert_registry_holds_exactly(registry, expected: dict):
    for repo, tags in expected.items():
        assert sorted(registry.tags(repo)) == sorted(tags), repo


def _sitrep(path: Path) -> dict:
    return json.loads((path / "sitrep.json").read_text())


def test_refused_push_fails_the_build_and_a_rerun_pushes_every_tag_once(cli, engine, family_site, registry, tmp_path):
    args = ["build", "--target", "mx-leaf", "--platform", "linux/amd64", "--push", "--registry",
            f"{registry.name}/refused", "--date", DATE, "--format", "json", "-o", "plan.json",
            "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest"]
    env = dict(os.environ, PYTHONPATH=str(family_site))

    registry.stop()
    proc = cli(*args, "--sitrep-dir", "first", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    first = _sitrep(tmp_path / "first")
    assert first["outcome"] == "fail"
    assert "failed to push" in first["error"] and "connection refused" in first["error"]
    # Every push is refused; a target whose export buildx cancelled (another push failed first) is
    # "not built" rather than "fail", as the sitrep says of cancelled targets: which ones is timing.
    outcomes = {t["outcome"] for t in first["targets"].values()}
    assert "fail" in outcomes and outcomes <= {"fail", "not built"}, first["targets"]
    assert proc.stderr.strip().splitlines()[-1].startswith("bake-plan: mx-leaf build: failed: ")

    registry.start()
    proc = cli(*args, "--sitrep-dir", "again", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = _sitrep(tmp_path / "again")
    assert again["outcome"] == "pass" and again["error"] is None
    _assert_registry_holds_exactly(registry, _expected_tags(tmp_path / "plan.json"))


def test_publish_interrupted_half_way_then_a_rerun_publishes_every_tag_once(cli, engine, family_site, registry,
                                                                          tmp_path):
    namespace = f"{registry.name}/publish"
    env = dict(os.environ, PYTHONPATH=str(family_site))
    common = ["--target", "mx-leaf", "--registry", namespace, "--date", DATE]
    for platform in ("linux/amd64", "linux/arm64"):
        proc = cli("build", *common, "--platform", platform, "--push", "--sitrep-dir", f"sitrep-{platform[6:]}",
                   "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    per_arch = {repo: set(registry.tags(repo)) for repo in ("publish/mx-root", "publish/mx-leaf")}
    multi = [(repo, tag) for repo in per_arch for tag in ("mealkit", f"mealkit-{DATE}", "latest", f"nightly-{DATE}")]

    # Publish, freeze it (and the docker CLI it runs) right after its first tag, stop the registry.
    # Unbuffered: readline takes the first line alone (several tags are made at once, so the next
    # lines may follow at once) and communicate reads every later byte.
    publish = subprocess.Popen([BAKE_PLAN, "publish", *common], cwd=tmp_path, env=env, bufsize=0,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    first_line = publish.stdout.readline().decode()
    assert first_line.startswith("published "), first_line + publish.stderr.read().decode()
    os.killpg(publish.pid, signal.SIGSTOP)
    registry.stop()
    os.killpg(publish.pid, signal.SIGCONT)
    out, err = (text.decode() for text in publish.communicate(timeout=300))
    published = [first_line] + out.splitlines()
    assert publish.returncode == 1, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    match = re.match(r"bake-plan: error: publishing stopped at (\S+): .*; (\d+) of (\d+) tags were published before "
                     r"it; rerun the same `bake-plan publish` to finish", last)
    assert match, last
    done, total = int(match.group(2)), int(match.group(3))
    assert total == len(multi) and 1 <= done < total and len(published) == done

    registry.start()
    digests = {}
    published_refs = {line.split()[1] for line in published}
    for repo, tag in multi:
        found = registry.manifest(repo, tag)
        if f"{registry.name}/{repo}:{tag}" in published_refs:
            assert found and ("index" in found[0] or "list" in found[0]), (repo, tag)
            digests[(repo, tag)] = found[1]
        else:
            assert found is None, (repo, tag)  # not created yet
    assert len(digests) == done

    proc = cli("publish", *common, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    for repo, tag in multi:
        kind, digest, index = registry.manifest(repo, tag)
        platforms = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in index["manifests"]
                           if m.get("platform", {}).get("os") != "unknown")
        assert platforms == ["linux/amd64", "linux/arm64"], (repo, tag)
        if (repo, tag) in digests:
            assert digest == digests[(repo, tag)], "a rerun made the same manifest list again, not another one"
    for repo, tags in per_arch.items():
        assert set(registry.tags(repo)) == tags | {t for r, t in multi if r == repo}, repo


def test_publish_with_the_registry_down_says_so_and_creates_nothing(cli, engine, family_site, registry, tmp_path):
    registry.stop()
    proc = cli("publish", "--target", "mx-root", "--registry", f"{registry.name}/down", "--date", DATE,
               cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(family_site)))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"bake-plan: error: cannot check {registry.name}/down/mx-root:"), lines
    assert "connection refused" in lines[0] and "missing" not in lines[0]


GATED = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE}
RUN --mount=type=bind,from=gate,target=/gate \\
    i=0; while [ -e /gate/hold ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; echo done > /slow
"""
QUICK = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE}
RUN echo quick > /quick
"""


def test_engine_going_away_mid_build_then_a_rerun_finishes(cli, engine, private_engine, registry, make_plugin,
                                                           tmp_path):
    """``slow`` waits in a RUN step while ``gate/hold`` exists; ``quick`` finishes first. The
    engine is killed during ``slow``'s step, then started again, and the same command is rerun."""
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "hold").write_text("hold")
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
HERE = os.path.dirname(__file__)
COMMON = dict(kind="single", context=HERE, base_image="busybox:1.36", platforms=("linux/amd64",))
@hookimpl
def bake_plan_stages():
    return [Stage(name="quick", image="quick", dockerfile_inline={QUICK!r}, **COMMON),
            Stage(name="slow", image="slow", dockerfile_inline={GATED!r}, contexts={{"gate": {str(gate)!r}}}, **COMMON)]
""", name="gated")
    args = ["build", "--target", "quick", "--target", "slow", "--push", "--registry", f"{registry.name}/dies",
            "--date", DATE, "--format", "json", "-o", "plan.json",
            "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest"]
    env = dict(os.environ, PYTHONPATH=str(site), DOCKER_HOST=private_engine.host)

    log = tmp_path / "first.log"
    with open(log, "w") as handle:
        build = subprocess.Popen([BAKE_PLAN, *args, "--sitrep-dir", "first"], cwd=tmp_path, env=env,
                                 stdout=subprocess.DEVNULL, stderr=handle, start_new_session=True)
    def quick_exported():  # the console shows "#N [quick] exporting to image" … "#N DONE 0.3s"
        text = log.read_text()
        numbers = re.findall(r"^#(\d+) \[quick\] exporting to image$", text, re.MULTILINE)
        return any(re.search(rf"^#{n} DONE ", text, re.MULTILINE) for n in numbers)

    deadline = time.monotonic() + 180
    while not (quick_exported() and re.search(r"^#\d+ \[slow[^\]]*\] RUN --mount=type=bind,from=gate",
                                              log.read_text(), re.MULTILINE)):
        assert build.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.2)
    private_engine.kill()  # mid-build: slow's step is running, quick is pushed
    assert build.wait(timeout=120) == 1, log.read_text()[-3000:]
    stderr = log.read_text()
    assert "Traceback" not in stderr
    first = _sitrep(tmp_path / "first")
    assert first["outcome"] == "fail"
    assert first["targets"]["quick"]["outcome"] == "pass" and first["targets"]["quick"]["digest"].startswith("sha256:")
    assert first["targets"]["slow"]["outcome"] == "fail"
    assert "slow" in first["summary"] and "quick" not in first["summary"].split("failed:")[1].split("(")[0]
    assert first["error"], first
    assert registry.tags("dies/slow") == []

    private_engine.start()
    (gate / "hold").unlink()
    proc = cli(*args, "--sitrep-dir", "again", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = _sitrep(tmp_path / "again")
    assert again["outcome"] == "pass", again["summary"]
    _assert_registry_holds_exactly(registry, _expected_tags(tmp_path / "plan.json"))
