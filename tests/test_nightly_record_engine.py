"""The nightly record round-trips through the test registry: pushed beside an image as an index
annotated with the record (bake/run/record.py), read back by tag, a large one compressed, and
``bake-plan diff --from DATE`` reads it in a new process."""

from __future__ import annotations

import datetime
import hashlib
import json
import urllib.request
import uuid

import pytest

from bake.plan import records
from bake.run import record

pytestmark = pytest.mark.engine
DATE = datetime.date(2026, 11, 29)


def push_image(registry: str, repository: str, tag: str, arch: str = "amd64") -> str:
    """An image with no layers, pushed through the registry's HTTP API; its manifest digest."""
    config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                         "config": {}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    req = urllib.request.Request(f"http://{registry}/v2/{repository}/blobs/uploads/", method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        location = resp.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    req = urllib.request.Request(f"{location}{sep}digest={config_digest}", data=config, method="PUT",
                                 headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req, timeout=30).close()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": config_digest, "size": len(config)},
                           "layers": []}).encode()
    req = urllib.request.Request(f"http://{registry}/v2/{repository}/manifests/{tag}", data=manifest, method="PUT",
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    urllib.request.urlopen(req, timeout=30).close()
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


def a_plan(repository: str, lock_dir=None, input_digest="sha256:" + "1" * 64) -> dict:
    target = {"context": "/nowhere", "args": {"URLREF_JAX": "https://github.com/google/jax.git#" + "a" * 40},
              "labels": {"io.bake-plan.input-digest": input_digest},
              "tags": [f"{repository}:nightly-{DATE}-amd64"], "platforms": ["linux/amd64"]}
    if lock_dir:
        target["contexts"] = {"pip-lock": str(lock_dir)}
    return {"group": {"default": {"targets": ["img"]}}, "target": {"img": target}}


def test_a_record_round_trips_through_the_registry(engine, tmp_path):
    repository = f"{engine.registry}/rec{uuid.uuid4().hex[:8]}/img"
    digest = push_image(engine.registry, repository.split("/", 1)[1], f"nightly-{DATE}-amd64")
    (tmp_path / "requirements.lock").write_text("numpy==1.26.4 \\\n    --hash=sha256:00\nscipy==1.12.0\n")
    plan = a_plan(repository, tmp_path)
    sitrep = {"targets": {"img": {"outcome": "pass", "digest": digest, "tags": plan["target"]["img"]["tags"],
                                  "size_bytes": {"linux/amd64": 1234},
                                  "base_images": [{"image": "docker.io/library/python:3.11", "platform": "linux/amd64",
                                                   "digest": "sha256:" + "b" * 64}]}},
              "tests": {"results": [{"target": "img", "platform": "linux/amd64", "test": "import numpy",
                                     "outcome": "pass"}]}}
    written = record.write_records(plan, sitrep, DATE)
    ref = f"{repository}:record-img-{DATE}-amd64"
    assert written == [(ref, None)]
    assert ref.rsplit(":", 1)[1] in engine.tags(repository)
    back = record.read_records(plan, DATE)
    assert back == records.make_records(plan, sitrep, DATE)
    got = back[0]
    assert got["input_digest"] == "sha256:" + "1" * 64 and got["image_digest"] == digest
    assert got["pins"] == {"numpy": "1.26.4", "scipy": "1.12.0"}
    assert got["sources"]["JAX"]["ref"] == "a" * 40
    assert got["tests"] == [{"test": "import numpy", "outcome": "pass"}] and got["size_bytes"] == 1234
    # the record pins the image it describes
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", ref).stdout)
    assert [m["digest"] for m in raw["manifests"]] == [digest]
    assert record.read_record(f"{repository}:record-img-2020-01-01-amd64") is None


def test_a_large_record_is_compressed_and_reads_back(engine, tmp_path):
    repository = f"{engine.registry}/rec{uuid.uuid4().hex[:8]}/big"
    digest = push_image(engine.registry, repository.split("/", 1)[1], f"nightly-{DATE}-amd64")
    (tmp_path / "requirements.lock").write_text("".join(f"package-number-{i}==1.0.{i}\n" for i in range(4000)))
    plan = a_plan(repository, tmp_path)
    sitrep = {"targets": {"img": {"outcome": "pass", "digest": digest}}}
    assert record.annotation_of(records.make_records(plan, sitrep, DATE)[0]).startswith(f"{record.ANNOTATION_GZ}=")
    record.write_records(plan, sitrep, DATE)
    assert len(record.read_records(plan, DATE)[0]["pins"]) == 4000


def test_a_tag_that_is_not_a_record_is_one_clear_error(engine):
    repository = f"{engine.registry}/rec{uuid.uuid4().hex[:8]}/img"
    push_image(engine.registry, repository.split("/", 1)[1], f"record-img-{DATE}-amd64")
    with pytest.raises(record.RecordError, match="holds no bake-plan record"):
        record.read_records(a_plan(repository), DATE)


def test_record_then_diff_from_a_date_reads_the_records_in_a_new_process(engine, cli, tmp_path):
    namespace = f"{engine.registry}/rec{uuid.uuid4().hex[:8]}"
    common = ("--target", "jax", "--platform", "linux/amd64", "--registry", namespace, "--date", DATE.isoformat())
    cli("plan", *common, "--format", "json", "-o", str(tmp_path / "plan.json"), cwd=tmp_path, check=True)
    plan = json.loads((tmp_path / "plan.json").read_text())
    digest = push_image(engine.registry, namespace.split("/", 1)[1] + "/jax", f"nightly-{DATE}-amd64")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sitrep.json").write_text(json.dumps({"targets": {
        "jax": {"outcome": "pass", "digest": digest, "platforms": ["linux/amd64"]},
        "jax-mealkit": {"outcome": "fail", "digest": None, "platforms": ["linux/amd64"]}}}))
    dry = cli("record", *common, "--sitrep", "reports", "--dry-run", cwd=tmp_path, check=True)
    assert dry.stdout == f"would push {namespace}/jax:record-jax-{DATE}-amd64\n"
    assert f"record-jax-{DATE}-amd64" not in engine.tags(f"{namespace}/jax")
    pushed = cli("record", *common, "--sitrep", "reports", cwd=tmp_path, check=True)
    assert pushed.stdout == f"recorded {namespace}/jax:record-jax-{DATE}-amd64\n"
    assert "no record of jax-mealkit@amd64: no pushed image (outcome 'fail')" in pushed.stderr
    out = cli("diff", *common, "--from", DATE.isoformat(), "--format", "json", cwd=tmp_path, check=True)
    statuses = {t["target"]: t["status"] for t in json.loads(out.stdout)["targets"]}
    assert statuses["jax"] == "unchanged"  # the record's input digest is this plan's
    assert statuses["jax-mealkit"] == "new"  # no record was pushed for it
    moved = cli("diff", *common, "--from", DATE.isoformat(), "--base-image",
                "nvidia/cuda:12.2.0-devel-ubuntu22.04=localhost:5555/cuda@sha256:" + "c" * 64, cwd=tmp_path, check=True)
    assert "jax (amd64): changed" in moved.stdout


SCRATCH_FAMILY = '''
import os
from bake import Stage, hookimpl

ROOT = os.environ["SKIP_FAMILY_DIR"]
REGISTRY = os.environ["SKIP_FAMILY_REGISTRY"]


@hookimpl
def bake_plan_stages():
    def stage(name, **kw):
        return Stage(name=name, image=name, registry=REGISTRY, kind="single", context=os.path.join(ROOT, name),
                     platforms=("linux/amd64",), **kw)
    return [stage("sk-root"), stage("sk-mid", parent="sk-root"), stage("sk-leaf", parent="sk-mid"),
            stage("sk-side", parent="sk-root")]
'''


def test_skip_unchanged_builds_only_what_changed_since_the_record(cli, engine, make_plugin, tmp_path):
    namespace = f"{engine.registry}/sk{uuid.uuid4().hex[:8]}"
    for name, dockerfile in (("sk-root", "FROM scratch\nCOPY f /root.txt\n"),
                             ("sk-mid", "FROM base\nCOPY f /mid.txt\n"),
                             ("sk-leaf", "FROM base\nCOPY f /leaf.txt\n"),
                             ("sk-side", "FROM base\nCOPY f /side.txt\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(dockerfile)
        (tmp_path / name / "f").write_text(name)
    site = make_plugin(SCRATCH_FAMILY)
    env = dict(__import__("os").environ, SKIP_FAMILY_DIR=str(tmp_path), SKIP_FAMILY_REGISTRY=namespace,
               PYTHONPATH=str(site))
    first = ("--target", "sk-leaf", "--target", "sk-side", "--platform", "linux/amd64", "--date", "2026-11-28")
    cli("build", *first, "--push", "--sitrep-dir", "r1", "-o", "p1.hcl", cwd=tmp_path, env=env, check=True)
    cli("record", *first, "--sitrep", "r1", cwd=tmp_path, env=env, check=True)
    (tmp_path / "sk-mid" / "f").write_text("sk-mid, changed")
    second = ("--target", "sk-leaf", "--target", "sk-side", "--platform", "linux/amd64", "--date", "2026-11-29")
    out = cli("build", *second, "--push", "--skip-unchanged", "--sitrep-dir", "r2", "-o", "p2.hcl",
              cwd=tmp_path, env=env, check=True)
    assert "bake-plan: sk-root: unchanged since nightly-2026-11-28 (input sha256:" in out.stdout
    assert "bake-plan: sk-side: unchanged since nightly-2026-11-28" in out.stdout
    assert "sk-mid: unchanged" not in out.stdout and "sk-leaf: unchanged" not in out.stdout
    report = json.loads((tmp_path / "r2" / "sitrep.json").read_text())
    assert report["outcome"] == "pass"
    assert report["targets"]["sk-root"]["unchanged_since"] == "nightly-2026-11-28"
    assert "unchanged_since" not in report["targets"]["sk-mid"] and report["targets"]["sk-mid"]["digest"]
    assert "2 targets unchanged since nightly-2026-11-28" in report["summary"]
    # tonight's tags of the unchanged images point at last night's images
    for name in ("sk-root", "sk-side"):
        assert "nightly-2026-11-29-amd64" in engine.tags(f"{namespace}/{name}")
        old = engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}",
                            f"{namespace}/{name}:nightly-2026-11-28-amd64").stdout
        new = engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}",
                            f"{namespace}/{name}:nightly-2026-11-29-amd64").stdout
        assert json.loads(old)["digest"] == json.loads(new)["digest"]
    # recorded again, a third run builds nothing
    cli("record", *second, "--sitrep", "r2", cwd=tmp_path, env=env, check=True)
    third = ("--target", "sk-leaf", "--target", "sk-side", "--platform", "linux/amd64", "--date", "2026-11-30")
    out = cli("build", *third, "--push", "--skip-unchanged", "--sitrep-dir", "r3", "-o", "p3.hcl",
              cwd=tmp_path, env=env, check=True)
    report = json.loads((tmp_path / "r3" / "sitrep.json").read_text())
    assert report["summary"].endswith(
        "nothing to build, 4 targets unchanged since nightly-2026-11-28, nightly-2026-11-29")
    assert report["targets"]["sk-mid"]["unchanged_since"] == "nightly-2026-11-29"
