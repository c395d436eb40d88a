"""A base image named by tag counts by the digest its registry gives (bake/run/build.py's
resolve_base_digests, which build --skip-unchanged runs): a new image pushed under the tag
changes the input digest of each target built from it and of those built on them, and of no
other; a registry that gives no digest makes them count as changed."""

from __future__ import annotations

import datetime
import json
import uuid

import pytest

from bake import Stage, hookimpl
from bake.api import make_plan
from bake.plan import policies
from bake.plan.compose import PlanOptions
from bake.plan.inputs import INPUT_DIGEST_LABEL, base_references
from bake.plan.plugins import get_plugin_manager
from bake.run.build import resolve_base_digests
from test_nightly_record_engine import push_image

DATE = datetime.date(2026, 11, 29)
DOCKERFILE = ("ARG BASE_IMAGE=scratch\nFROM ${BASE_IMAGE} AS base\nFROM base AS mealkit\nCOPY . /src\n"
              "FROM mealkit AS final\n")


class TwoRoots:
    """root (from base one) ← child; other (from base two): each its own context."""

    def __init__(self, tmp_path, one: str, two: str):
        self.one, self.two, self.dirs = one, two, {}
        for name in ("root", "child", "other"):
            d = tmp_path / name
            d.mkdir(exist_ok=True)
            (d / "Dockerfile").write_text(DOCKERFILE)
            self.dirs[name] = d

    @hookimpl
    def bake_plan_stages(self):
        def stage(name, **kw):
            return Stage(name=name, image=name, registry="localhost:5555/two-roots", context=str(self.dirs[name]),
                         platforms=("linux/amd64",), **kw)
        return [stage("root", base_image=self.one), stage("child", parent="root"),
                stage("other", base_image=self.two)]


def composed(family):
    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, family])
    return make_plan(PlanOptions(targets=("child", "other"), date=DATE), pm)


def resolved_digests(family, digest=None):
    composition = composed(family)
    resolved = resolve_base_digests(composition, digest)
    for name, target in composition.plan["target"].items():
        assert target["labels"][INPUT_DIGEST_LABEL] == composition.input_digests[name]
    return resolved, composition.input_digests


def test_only_the_tag_references_a_target_starts_from_are_asked(tmp_path):
    composition = composed(TwoRoots(tmp_path, "localhost:5555/x/one:1", "localhost:5555/x/two@sha256:" + "a" * 64))
    refs = {name: base_references(t) for name, t in composition.plan["target"].items()}
    assert refs["root-mealkit"] == refs["root"] == ["localhost:5555/x/one:1"]
    assert refs["child-mealkit"] == refs["child"] == []  # its base is the parent's meal kit (target:)
    assert refs["other-mealkit"] == []  # pinned by digest: the text says it
    # a named context by tag (--base-image ORIG=REPL:tag) is asked; one by digest is not
    assert base_references({"contexts": {"busybox:1.36": "docker-image://localhost:5555/x/b:1",
                                         "p": "docker-image://localhost:5555/x/p@sha256:" + "b" * 64,
                                         "t": "target:root"}, "dockerfile-inline": "FROM busybox:1.36\n"}) \
        == ["localhost:5555/x/b:1"]


@pytest.mark.engine
def test_a_new_image_under_the_base_tag_changes_that_chain_only(engine, tmp_path):
    space = f"base{uuid.uuid4().hex[:8]}"
    one, two = f"{engine.registry}/{space}/one:nightly", f"{engine.registry}/{space}/two:nightly"
    first = push_image(engine.registry, f"{space}/one", "nightly", "amd64")
    push_image(engine.registry, f"{space}/two", "nightly", "amd64")
    family = TwoRoots(tmp_path, one, two)
    unresolved = composed(family).input_digests
    resolved, before = resolved_digests(family)
    assert resolved == {one: first, two: resolved[two]} and resolved[two].startswith("sha256:")
    assert before != unresolved  # the digests count
    assert resolved_digests(family)[1] == before  # the same image: the same digests

    second = push_image(engine.registry, f"{space}/one", "nightly", "arm64")  # another image, the same tag
    assert second != first
    resolved, after = resolved_digests(family)
    assert resolved[one] == second
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"root-mealkit", "root", "child-mealkit", "child"}


def test_a_base_the_registry_does_not_give_counts_as_changed(tmp_path):
    family = TwoRoots(tmp_path, "localhost:5555/x/one:1", "localhost:5555/x/two:1")
    known = {"localhost:5555/x/one:1": "sha256:" + "1" * 64, "localhost:5555/x/two:1": "sha256:" + "2" * 64}
    resolved, before = resolved_digests(family, known.get)
    assert resolved == known
    resolved, after = resolved_digests(family, lambda ref: None if ref.endswith("two:1") else known[ref])
    assert resolved["localhost:5555/x/two:1"] is None
    assert {n for n in before if before[n] != after[n]} == {"other-mealkit", "other"}


BASE_FAMILY = '''
import os
from bake import Stage, hookimpl

ROOT = os.environ["BASE_FAMILY_DIR"]
REGISTRY = os.environ["BASE_FAMILY_REGISTRY"]


@hookimpl
def bake_plan_stages():
    def stage(name, **kw):
        return Stage(name=name, image=name, registry=REGISTRY, kind="single", context=os.path.join(ROOT, name),
                     platforms=("linux/amd64",), **kw)
    return [stage("bd-root", base_image=os.environ["BASE_FAMILY_BASE"]), stage("bd-mid", parent="bd-root"),
            stage("bd-other")]
'''


def push_base(registry: str, repository: str, tag: str, label: str) -> str:
    """An image with no layers and the label ``n=label`` under ``tag``; its manifest digest."""
    import hashlib
    import json
    import urllib.request

    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                         "config": {"Labels": {"n": label}}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    with urllib.request.urlopen(urllib.request.Request(f"http://{registry}/v2/{repository}/blobs/uploads/",
                                                       method="POST"), timeout=30) as resp:
        location = resp.headers["Location"]
    location = f"http://{registry}{location}" if location.startswith("/") else location
    sep = "&" if "?" in location else "?"
    urllib.request.urlopen(urllib.request.Request(f"{location}{sep}digest={config_digest}", data=config, method="PUT",
                                                  headers={"Content-Type": "application/octet-stream"}),
                           timeout=30).close()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": config_digest, "size": len(config)}, "layers": []}).encode()
    urllib.request.urlopen(urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{tag}", data=manifest, method="PUT",
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}), timeout=30).close()
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


@pytest.mark.engine
@pytest.mark.parametrize("given", ["stage", "base-image mapping"])
def test_skip_unchanged_rebuilds_the_chain_of_a_base_tag_that_moved(cli, engine, make_plugin, tmp_path, given):
    """The base given by the stage's base_image, or by --base-image ORIG=REPL:tag (a named
    context by tag): either way a new image under the tag rebuilds that chain."""
    import os

    space = f"bd{uuid.uuid4().hex[:8]}"
    namespace, base = f"{engine.registry}/{space}", f"{engine.registry}/{space}/base:nightly"
    push_base(engine.registry, f"{space}/base", "nightly", "1")
    for name, dockerfile in (("bd-root", "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY f /root.txt\n"),
                             ("bd-mid", "FROM base\nCOPY f /mid.txt\n"),
                             ("bd-other", "FROM scratch\nCOPY f /other.txt\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(dockerfile)
        (tmp_path / name / "f").write_text(name)
    mapped = () if given == "stage" else ("--base-image", f"busybox:1.36={base}")
    env = dict(os.environ, BASE_FAMILY_DIR=str(tmp_path), BASE_FAMILY_REGISTRY=namespace,
               BASE_FAMILY_BASE=base if given == "stage" else "busybox:1.36", PYTHONPATH=str(make_plugin(BASE_FAMILY)))

    def night(date: str, record: bool = True):
        args = ("--target", "bd-mid", "--target", "bd-other", "--platform", "linux/amd64", "--date", date, *mapped)
        out = cli("build", *args, "--push", "--skip-unchanged", "--sitrep-dir", f"r-{date}", "-o", f"p-{date}.hcl",
                  cwd=tmp_path, env=env, check=True)
        if record:
            cli("record", *args, "--sitrep", f"r-{date}", cwd=tmp_path, env=env, check=True)
        return {line.split(":")[1].strip() for line in out.stdout.splitlines() if ": unchanged since" in line}

    assert night("2026-11-27") == set()  # no records yet: everything builds
    assert night("2026-11-28", record=False) == {"bd-root", "bd-mid", "bd-other"}  # the same base digest
    push_base(engine.registry, f"{space}/base", "nightly", "2")  # another image under the same tag
    assert night("2026-11-29") == {"bd-other"}  # the chain from the base builds again, nothing else
    report = json.loads((tmp_path / "r-2026-11-29" / "sitrep.json").read_text())
    assert report["targets"]["bd-root"]["digest"] and "unchanged_since" not in report["targets"]["bd-root"]


@pytest.mark.engine
def test_an_unreachable_base_registry_is_said_and_builds_as_usual(cli, engine, make_plugin, tmp_path):
    import os

    (tmp_path / "bd-root").mkdir()
    (tmp_path / "bd-root" / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    for name in ("bd-mid", "bd-other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text("FROM scratch\n")
    base = "127.0.0.1:9/nowhere/base:1"  # nothing listens on the discard port
    env = dict(os.environ, BASE_FAMILY_DIR=str(tmp_path), BASE_FAMILY_REGISTRY=f"{engine.registry}/bdx",
               BASE_FAMILY_BASE=base, PYTHONPATH=str(make_plugin(BASE_FAMILY)))
    out = cli("build", "--target", "bd-mid", "--platform", "linux/amd64", "--skip-unchanged", "--dry-run",
              cwd=tmp_path, env=env)
    assert f"bake-plan: base image {base}: its registry gave no digest; the targets built from it count as changed" \
        in out.stderr
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("text, args, expected", [
    ("ARG BASE_IMAGE=busybox:1\nFROM ${BASE_IMAGE} AS base\nFROM base AS mealkit\nFROM mealkit AS final\n", {},
     ["busybox:1"]),
    ("ARG BASE_IMAGE=busybox:1\nFROM $BASE_IMAGE\n", {"BASE_IMAGE": "localhost:5555/b:2"}, ["localhost:5555/b:2"]),
    ("FROM --platform=$BUILDPLATFORM ${IMG:-alpine:3} AS tools\nFROM scratch\nCOPY --from=tools / /\n", {},
     ["alpine:3"]),
    ("FROM ${UNSET}\nFROM python:3.11 AS py\nFROM py\nFROM python:3.11\n", {}, ["python:3.11"]),
])
def test_the_images_a_dockerfile_starts_from(text, args, expected):
    from bake.plan.dockerfile import from_images

    assert from_images(text, args) == expected
