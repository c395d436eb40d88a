"""Nightly multi-arch publishing on the real engine and registry, arm64 under qemu: per-arch
builds in separate runs, the manifest merge, caches that survive a wiped engine, per-job mode."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
TAGS = ["latest", f"nightly-{DATE}", "mealkit", f"mealkit-{DATE}"]


@pytest.fixture
def mx(cli, engine, family_site, tmp_path):
    """Run bake-plan on the multi-arch pair mx-root → mx-leaf in a fresh registry namespace."""
    namespace = f"{engine.registry}/mx{uuid.uuid4().hex[:8]}"
    busybox = f"busybox:1.36={engine.registry}/stand-in/busybox:latest"

    def run(command, *args, leaf_input="1", sitrep="sitrep", target="mx-leaf", docker_host=None):
        env = dict(os.environ, PYTHONPATH=str(family_site), BAKE_PLAN_TESTFAMILY_LEAF_INPUT=leaf_input)
        if docker_host:
            env["DOCKER_HOST"] = docker_host
        extra = ["--base-image", busybox, "--sitrep-dir", str(tmp_path / sitrep), "--push"] if command == "build" else []
        proc = cli(command, "--target", target, "--registry", namespace, "--date", DATE, *extra, *args,
                   cwd=tmp_path, env=env)
        report = tmp_path / sitrep / "sitrep.json"
        return proc, (json.loads(report.read_text()) if command == "build" and report.exists() else None)

    run.namespace = namespace
    run.tmp = tmp_path
    return run


def _platforms(engine, ref):
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", ref).stdout)
    assert raw["mediaType"] in ("application/vnd.oci.image.index.v1+json",
                                "application/vnd.docker.distribution.manifest.list.v2+json"), ref
    return sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]
                  if m.get("platform", {}).get("os") != "unknown")  # attestation manifests


def test_per_arch_builds_then_publish_gives_multi_arch_tags(engine, mx):
    for platform in ("linux/amd64", "linux/arm64"):
        proc, sitrep = mx("build", "--platform", platform, sitrep=f"sitrep-{platform[-5:]}")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sitrep["outcome"] == "pass"
    proc, _ = mx("publish")
    assert proc.returncode == 0, proc.stderr
    for image in ("mx-root", "mx-leaf"):
        for tag in TAGS:
            assert _platforms(engine, f"{mx.namespace}/{image}:{tag}") == ["linux/amd64", "linux/arm64"], (image, tag)
    arch = engine.docker("run", "--rm", "--platform", "linux/arm64", f"{mx.namespace}/mx-leaf:latest",
                         "cat", "/opt/leaf-arch").stdout.strip()
    assert arch == "aarch64"
    # A rerun is harmless: same tags, same platforms.
    proc, _ = mx("publish")
    assert proc.returncode == 0, proc.stderr
    assert _platforms(engine, f"{mx.namespace}/mx-leaf:latest") == ["linux/amd64", "linux/arm64"]


def test_publish_with_an_arch_missing_creates_nothing(engine, mx):
    proc, _ = mx("build", "--platform", "linux/amd64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, _ = mx("publish")
    assert proc.returncode == 1
    assert "no tag was created" in proc.stderr
    for image in ("mx-root", "mx-leaf"):
        for tag in TAGS:
            assert f"missing {mx.namespace}/{image}:{tag}-arm64" in proc.stderr
    for image in ("mx-root", "mx-leaf"):
        tags = engine.tags(f"{mx.namespace}/{image}")
        assert not set(TAGS) & set(tags), tags
        assert {f"{t}-amd64" for t in TAGS} <= set(tags)
    # The one buildx run that asks about many images: yes only when every one is there.
    from bake.run.engine import all_resolve

    there = [f"{mx.namespace}/{image}:{tag}-amd64" for image in ("mx-root", "mx-leaf") for tag in TAGS]
    assert all_resolve(there) is True
    assert all_resolve([*there, f"{mx.namespace}/mx-leaf:latest-arm64"]) is False


def _wipe(host):
    """Wipe an engine's build cache and images: only ever a private engine's (others' tests run on
    the shared one)."""
    env = dict(os.environ, DOCKER_HOST=host)

    def docker(*args):
        proc = subprocess.run(["docker", *args], env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    docker("buildx", "prune", "-af")
    images = docker("image", "ls", "-q").split()
    if images:
        docker("image", "rm", "-f", *sorted(set(images)))


def test_cache_survives_a_wiped_engine_and_only_changed_steps_run(mx, private_engine):
    host = private_engine.host  # an engine of this module's own: wiping it disturbs no other test
    leaf_input = uuid.uuid4().hex  # new to the engine's cache, so the leaf's steps run first
    proc, first = mx("build", "--platform", "linux/amd64", leaf_input=leaf_input, sitrep="first", docker_host=host)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sum(t["steps_run"] for t in first["targets"].values()) > 0

    _wipe(host)
    proc, again = mx("build", "--platform", "linux/amd64", leaf_input=leaf_input, sitrep="again", docker_host=host)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert {n: t["steps_run"] for n, t in again["targets"].items()} == {n: 0 for n in again["targets"]}
    assert sum(t["steps_cached"] for t in again["targets"].values()) > 0

    _wipe(host)
    proc, changed = mx("build", "--platform", "linux/amd64", leaf_input=leaf_input + "-changed", sitrep="changed",
                       docker_host=host)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ran = {n for n, t in changed["targets"].items() if t["steps_run"]}
    assert ran and ran <= {"mx-leaf-mealkit", "mx-leaf"}, changed["targets"]


def test_per_job_mode_builds_on_the_parent_pinned_by_digest(engine, mx):
    proc, root = mx("build", "--platform", "linux/amd64", target="mx-root", sitrep="root")
    assert proc.returncode == 0, proc.stderr[-3000:]
    digest = root["targets"]["mx-root-mealkit"]["digest"]
    report = str(mx.tmp / "root" / "sitrep.json")

    proc, _ = mx("plan", "--platform", "linux/amd64", "--from-registry", "--parent-report", report,
                 "--format", "json", "-o", "leaf.json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads((mx.tmp / "leaf.json").read_text())
    assert list(plan["target"]) == ["mx-leaf-mealkit", "mx-leaf"]
    assert plan["target"]["mx-leaf-mealkit"]["contexts"]["base"] == \
        f"docker-image://{mx.namespace}/mx-root:mealkit-amd64@{digest}"

    proc, leaf = mx("build", "--platform", "linux/amd64", "--from-registry", "--parent-report", report, sitrep="leaf")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(leaf["targets"]) == {"mx-leaf-mealkit", "mx-leaf"}
    for ref in (f"{mx.namespace}/mx-root:mealkit-amd64", f"{mx.namespace}/mx-leaf:mealkit-amd64"):
        engine.docker("pull", "--quiet", "--platform", "linux/amd64", ref)
    layers = [json.loads(engine.docker("image", "inspect", "-f", "{{json .RootFS.Layers}}", r).stdout)
              for r in (f"{mx.namespace}/mx-root:mealkit-amd64", f"{mx.namespace}/mx-leaf:mealkit-amd64")]
    assert layers[1][: len(layers[0])] == layers[0]


def test_per_job_mode_without_the_parent_report_is_one_line(mx):
    proc, _ = mx("plan", "--platform", "linux/amd64", "--from-registry")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "bake-plan: error: --from-registry: no digest for 'mx-root-mealkit' (stage 'mx-root'); pass the "
        "sitrep.json or buildx metadata file of the job that pushed it with --parent-report")


def test_publish_merges_metadata_action_tags_and_a_dry_run_creates_nothing(engine, mx):
    from test_metadata_action import meta_file

    leaf = f"{mx.namespace}/mx-leaf"
    for platform in ("linux/amd64", "linux/arm64"):
        arch = platform[6:]
        meta = meta_file(mx.tmp / f"meta-{arch}.json", tags=(f"{leaf}:v1.2.3-{arch}",))
        proc, sitrep = mx("build", "--platform", platform, "--metadata-bake-file", str(meta), sitrep=f"sitrep-{arch}")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sitrep["targets"]["mx-leaf"]["tags"] == [f"{leaf}:v1.2.3-{arch}"]
    publish_meta = meta_file(mx.tmp / "meta.json", tags=(f"{leaf}:v1.2.3",))  # the publish job's: no suffix
    proc, _ = mx("publish", "--metadata-bake-file", str(publish_meta), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert f"would publish {leaf}:v1.2.3 <- v1.2.3-amd64, v1.2.3-arm64" in proc.stdout
    assert "published " not in proc.stdout and "v1.2.3" not in engine.tags(leaf), "a dry run creates nothing"
    # Under each tag, the command that would make it: run in bash, it makes that multi-arch tag.
    lines = proc.stdout.splitlines()
    command = lines[lines.index(f"would publish {leaf}:v1.2.3 <- v1.2.3-amd64, v1.2.3-arm64") + 1]
    assert command == f"  docker buildx imagetools create --tag {leaf}:v1.2.3 {leaf}:v1.2.3-amd64 {leaf}:v1.2.3-arm64"
    assert sum(line.startswith("  docker buildx imagetools create --tag ") for line in lines) == \
        sum(line.startswith("would publish ") for line in lines)
    subprocess.run(["bash", "-c", command], check=True, capture_output=True, timeout=300)
    assert _platforms(engine, f"{leaf}:v1.2.3") == ["linux/amd64", "linux/arm64"]
    proc, _ = mx("publish", "--metadata-bake-file", str(publish_meta), "-v")
    assert proc.returncode == 0, proc.stderr
    asked = [line for line in proc.stderr.splitlines()
             if line.startswith("bake-plan: running: docker buildx imagetools create --dry-run ")]
    assert len(asked) == 1 and f" {leaf}:v1.2.3-arm64" in asked[0], proc.stderr  # every per-arch image, one run
    assert f"bake-plan: running: {command.strip()}\n" in proc.stderr
    assert _platforms(engine, f"{leaf}:v1.2.3") == ["linux/amd64", "linux/arm64"]
    assert _platforms(engine, f"{mx.namespace}/mx-root:latest") == ["linux/amd64", "linux/arm64"]
