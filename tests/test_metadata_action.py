"""``--metadata-bake-file``: chosen targets inherit the target docker/metadata-action writes, the way
docker/bake-action users pass both files; checked with the real buildx on both files together."""

from __future__ import annotations

import json
import os
import uuid

import pytest
from conftest import expected_target
from test_errors import assert_one_line_error

DATE = "2026-11-29"
GHCR = "ghcr.io/nvidia"
ENV = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}


def meta_file(path, tags=("ghcr.io/acme/pax:1.2.3", "ghcr.io/acme/pax:latest"), target="docker-metadata-action",
              parts=("tags", "labels", "annotations")):
    """A bake file of docker/metadata-action's shape (its `bake-file` output, or one part of it)."""
    body = {}
    if "tags" in parts:
        body["tags"] = list(tags)
        body["args"] = {"DOCKER_META_IMAGES": "ghcr.io/acme/pax", "DOCKER_META_VERSION": "1.2.3"}
    if "labels" in parts:
        body["labels"] = {
            "org.opencontainers.image.title": "pax",
            "org.opencontainers.image.version": "1.2.3",
            "org.opencontainers.image.created": "2026-11-29T03:04:05.000Z",
            "org.opencontainers.image.revision": "90dd6032fac8bda1b6c4436a2e65de27961ed071",
            "org.opencontainers.image.source": "https://github.com/acme/pax",
        }
    if "annotations" in parts:
        body["annotations"] = ["manifest:org.opencontainers.image.version=1.2.3"]
    path.write_text(json.dumps({"target": {target: body}}, indent=2))
    return path


def write_plan(cli, tmp_path, *args, fmt="json"):
    out = tmp_path / f"docker-bake.{fmt}"
    cli("--target", "upstream-pax", "--date", DATE, "--format", fmt, "-o", str(out), *args,
        cwd=tmp_path, env=ENV, check=True)
    return out


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_final_target_inherits_tags_labels_annotations_and_args(cli, buildx, tmp_path, fmt):
    meta = meta_file(tmp_path / "docker-metadata-action-bake.json")
    out = write_plan(cli, tmp_path, "--metadata-bake-file", str(meta), fmt=fmt)
    plan = json.loads(cli("--target", "upstream-pax", "--date", DATE, "--format", "json", "-o", "-",
                          "--metadata-bake-file", str(meta), cwd=tmp_path, env=ENV, check=True).stdout)
    assert plan["target"]["docker-metadata-action"] == {}
    assert plan["target"]["upstream-pax"]["inherits"] == ["docker-metadata-action"]
    assert "tags" not in plan["target"]["upstream-pax"]
    printed = buildx.print_plan(out, ["upstream-pax"], cwd=tmp_path, extra_files=[meta])
    final = printed["target"]["upstream-pax"]
    assert final["tags"] == ["ghcr.io/acme/pax:1.2.3", "ghcr.io/acme/pax:latest"]
    assert final["labels"]["org.opencontainers.image.version"] == "1.2.3"
    assert final["labels"]["org.opencontainers.image.created"] == "2026-11-29T03:04:05.000Z"  # theirs, not ours
    assert final["labels"]["org.opencontainers.image.title"] == "pax"
    assert final["annotations"] == ["manifest:org.opencontainers.image.version=1.2.3"]
    assert final["args"]["DOCKER_META_VERSION"] == "1.2.3"
    assert final["args"]["CACHE_SILO"] == "cache-silo-upstream-pax-latest"
    for key, value in expected_target(plan["target"]["upstream-pax"]).items():
        if key not in ("inherits", "labels", "args"):
            assert final[key] == value, key
    # Everything else keeps bake-plan's own tags.
    assert printed["target"]["upstream-pax-mealkit"]["tags"][0] == f"{GHCR}/upstream-pax:mealkit"
    # The plan alone still resolves: the target it inherits from is declared, empty.
    alone = buildx.print_plan(out, ["upstream-pax"], cwd=tmp_path)
    assert "tags" not in alone["target"]["upstream-pax"]
    if fmt == "hcl":
        assert f"docker buildx bake -f {out.name} -f {meta}" in out.read_text()


@pytest.mark.buildx
def test_split_files_with_a_custom_target_name_and_chosen_targets(cli, buildx, tmp_path):
    """metadata-action's bake-file-tags / bake-file-labels outputs, its bake-target input set."""
    tags = meta_file(tmp_path / "tags.json", target="meta", parts=("tags",))
    labels = meta_file(tmp_path / "labels.json", target="meta", parts=("labels",))
    out = write_plan(cli, tmp_path, "--metadata-bake-file", str(tags), "--metadata-bake-file", str(labels),
                     "--metadata-targets", "jax-mealkit")
    printed = buildx.print_plan(out, ["default"], cwd=tmp_path, extra_files=[tags, labels])
    assert printed["target"]["jax-mealkit"]["tags"] == ["ghcr.io/acme/pax:1.2.3", "ghcr.io/acme/pax:latest"]
    assert printed["target"]["jax-mealkit"]["labels"]["org.opencontainers.image.source"] == "https://github.com/acme/pax"
    assert printed["target"]["upstream-pax"]["tags"][0] == f"{GHCR}/upstream-pax:latest"
    assert "meta" not in printed["target"]  # not in the default group: never built on its own


def test_labels_only_file_keeps_the_plans_tags_on_every_chosen_target(cli, tmp_path):
    labels = meta_file(tmp_path / "labels.json", parts=("labels",))
    (tmp_path / "bake-plan.toml").write_text('metadata-targets = ["upstream-pax", "jax"]\n')
    plan = json.loads(cli("--target", "upstream-pax", "--date", DATE, "--format", "json", "-o", "-",
                          "--metadata-bake-file", str(labels), cwd=tmp_path, env=ENV, check=True).stdout)
    for name in ("upstream-pax", "jax"):
        assert plan["target"][name]["inherits"] == ["docker-metadata-action"]
        assert plan["target"][name]["tags"][0] == f"{GHCR}/{name}:latest"
        assert "org.opencontainers.image.created" not in plan["target"][name]["labels"]
    assert "inherits" not in plan["target"]["upstream-pax-mealkit"]


def test_per_arch_plan_takes_tags_with_the_arch_suffix(cli, tmp_path):
    good = meta_file(tmp_path / "good.json", tags=("ghcr.io/acme/pax:1.2.3-arm64",))
    cli("--target", "upstream-pax", "--platform", "linux/arm64", "--metadata-bake-file", str(good),
        "-o", "plan.hcl", cwd=tmp_path, env=ENV, check=True)
    bad = meta_file(tmp_path / "bad.json", tags=("ghcr.io/acme/pax:1.2.3",))
    proc = cli("--target", "upstream-pax", "--platform", "linux/arm64", "--metadata-bake-file", str(bad),
               "-o", "other.hcl", cwd=tmp_path, env=ENV)
    assert_one_line_error(proc, "tags ending in -arm64", "'ghcr.io/acme/pax:1.2.3'", "suffix=-arm64")
    assert not (tmp_path / "other.hcl").exists()


def _bad_json(directory):
    path = directory / "m.json"
    path.write_text("{not json")
    return path


def _two_targets(directory):
    path = directory / "m.json"
    path.write_text(json.dumps({"target": {"a": {}, "b": {}}}))
    return path


def _tags_string(directory):
    path = directory / "m.json"
    path.write_text(json.dumps({"target": {"docker-metadata-action": {"tags": "x:1"}}}))
    return path


def _value(directory, body):
    path = directory / "m.json"
    path.write_text(json.dumps({"target": {"docker-metadata-action": body}}))
    return path


@pytest.mark.parametrize("make, args, needles", [
    (lambda p: p / "missing.json", [], ["--metadata-bake-file", "missing.json", "No such file"]),
    # buildx reads the file itself: a value bake-plan does not use is checked as the plan's are
    (lambda p: _value(p, {"args": {"DOCKER_META_VERSION": "a\x00b"}}), [],
     ["target 'docker-metadata-action', args['DOCKER_META_VERSION']: holds a NUL"]),
    (lambda p: _value(p, {"annotations": ["index:org.opencontainers.image.title=e\u0301"]}), [],
     ["annotations[0]: not in Unicode NFC"]),
    (_bad_json, [], ["not JSON"]),
    (_two_targets, [], ["expected one target"]),
    (_tags_string, [], ["tags must be a list of strings"]),
    # a tag no registry takes is bad input before publish asks the registry about it
    (lambda p: _value(p, {"tags": ["ghcr.io/acme/pax:pr-1$(id)"]}), [],
     ["target 'docker-metadata-action', tags: 'ghcr.io/acme/pax:pr-1$(id)' is not an image reference"]),
    (lambda p: _value(p, {"tags": ["ghcr.io/acme/pax:" + "v" * 129]}), [],
     ["target 'docker-metadata-action', tags: 'ghcr.io/acme/pax:vvv", "is not an image reference"]),
    (lambda p: meta_file(p / "m.json", target="jax"), [], ["target 'jax' is also a target or group of the plan"]),
    (lambda p: meta_file(p / "m.json"), ["--target", "upstream-t5x"], ["2 targets (upstream-pax, upstream-t5x)",
                                                                       "--metadata-targets"]),
    (lambda p: meta_file(p / "m.json"), ["--metadata-targets", "upstream-paxx"],
     ["'upstream-paxx' is not a target of this plan", "'upstream-pax'"]),
])
def test_bad_metadata_input(cli, tmp_path, make, args, needles):
    path = make(tmp_path)
    proc = cli("--target", "upstream-pax", "--metadata-bake-file", str(path), *args, "-o", "plan.hcl",
               cwd=tmp_path, env=ENV)
    assert_one_line_error(proc, *needles)
    assert not (tmp_path / "plan.hcl").exists()


def test_files_naming_different_targets(cli, tmp_path):
    one = meta_file(tmp_path / "one.json", target="meta-a")
    two = meta_file(tmp_path / "two.json", target="meta-b", parts=("labels",))
    proc = cli("--target", "upstream-pax", "--metadata-bake-file", str(one), "--metadata-bake-file", str(two),
               cwd=tmp_path, env=ENV)
    assert_one_line_error(proc, "two.json", "defines target 'meta-b'", "'meta-a'")


@pytest.mark.engine
def test_build_pushes_the_metadata_tags(cli, engine, tmp_path):
    """bake-plan build passes the metadata-action file to buildx with the plan."""
    import subprocess
    import sys

    from conftest import ROOT

    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                    str(ROOT / "tests" / "packages" / "bake-plan-testfamily")], check=True, timeout=300)
    namespace = f"{engine.registry}/meta{uuid.uuid4().hex[:8]}"
    meta = meta_file(tmp_path / "meta.json", tags=(f"{namespace}/mx-leaf:v1.2.3-amd64",))
    env = dict(os.environ, PYTHONPATH=str(site))  # DOCKER_HOST as the engine fixture set it
    proc = cli("build", "--target", "mx-leaf", "--platform", "linux/amd64", "--registry", namespace, "--date", DATE,
               "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest", "--push",
               "--metadata-bake-file", str(meta), "--sitrep-dir", str(tmp_path / "sitrep"), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The final carries metadata-action's tag instead of latest/nightly; its meal kit keeps its own.
    images = lambda repo: sorted(t for t in engine.tags(repo) if not t.startswith("cache-silo-"))  # noqa: E731
    assert images(f"{namespace}/mx-leaf") == sorted(["v1.2.3-amd64", "mealkit-amd64", f"mealkit-{DATE}-amd64"])
    assert images(f"{namespace}/mx-root") == sorted(
        [f"{t}-amd64" for t in ("latest", f"nightly-{DATE}", "mealkit", f"mealkit-{DATE}")])
    sitrep = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
    assert sitrep["outcome"] == "pass" and "docker-metadata-action" not in sitrep["targets"]
    assert sitrep["targets"]["mx-leaf"]["tags"] == [f"{namespace}/mx-leaf:v1.2.3-amd64"]  # inherited, as pushed
    assert sitrep["targets"]["mx-leaf"]["platforms"] == ["linux/amd64"]


def test_metadata_targets_without_a_file(cli, tmp_path):
    proc = cli("--target", "upstream-pax", "--metadata-targets", "jax", cwd=tmp_path, env=ENV)
    assert_one_line_error(proc, "--metadata-targets needs --metadata-bake-file", cwd=tmp_path)
