"""The input digest of each target (bake/plan/inputs.py): a change to a file of a context, to an
arg, or to the base image reference changes the digest of that target and of the targets built
on it, and of no other; the date, the tags and the registry change none."""

from __future__ import annotations

import datetime
import json
import os

import pytest

from bake import Source, Stage, hookimpl
from bake.api import make_plan, render
from bake.plan.compose import PlanOptions
from bake.plan.inputs import INPUT_DIGEST_LABEL, Hasher, input_digests
from bake.plan import policies
from bake.plan.plugins import get_plugin_manager

DATE = datetime.date(2026, 11, 29)
DOCKERFILE = "FROM scratch AS base\nFROM base AS mealkit\nCOPY . /src\nFROM mealkit AS final\n"


class Family:
    """root ← mid ← leaf, and root ← sibling: each stage has a context directory of its own."""

    def __init__(self, tmp_path, base="python:3.11-slim", mid_args=None, tags=None, mid_ref="a" * 40, patches=()):
        self.base, self.mid_args, self.tag_list = base, mid_args or {}, tags
        self.mid_source = Source(name="MID", url="https://github.com/example/mid.git", ref=mid_ref, patches=patches)
        self.dirs = {}
        for name in ("root", "mid", "leaf", "sibling"):
            d = tmp_path / name
            if not d.exists():
                d.mkdir()
                (d / "Dockerfile").write_text(DOCKERFILE)
                (d / "script.sh").write_text(f"echo {name}\n")
            self.dirs[name] = d

    @hookimpl
    def bake_plan_stages(self):
        def stage(name, **kw):
            return Stage(name=name, image=name, registry="localhost:5555/family", context=str(self.dirs[name]),
                         platforms=("linux/amd64",), **kw)
        return [stage("root", base_image=self.base),
                stage("mid", parent="root", args=self.mid_args, sources=(self.mid_source,)),
                stage("leaf", parent="mid"), stage("sibling", parent="root")]


class Tags:
    @hookimpl
    def bake_plan_tags(self, stage, flavor, date):
        return [f"other-{flavor}"]


def digests(family, *extra, date=DATE, registry=None, base_images=()):
    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, family, *extra])
    options = PlanOptions(targets=("leaf", "sibling"), date=date, registry=registry, base_images=base_images)
    composition = make_plan(options, pm)
    for name, target in composition.plan["target"].items():
        assert target["labels"][INPUT_DIGEST_LABEL] == composition.input_digests[name]
    return composition.input_digests


MID_AND_BELOW = {"mid-mealkit", "mid", "leaf-mealkit", "leaf"}
ALL = {f"{s}{f}" for s in ("root", "mid", "leaf", "sibling") for f in ("-mealkit", "")}


def changed(before, after):
    assert set(before) == set(after) == ALL
    return {name for name in before if before[name] != after[name]}


def test_digests_are_sha256_and_the_same_for_the_same_inputs(tmp_path):
    first = digests(Family(tmp_path))
    assert all(d.startswith("sha256:") and len(d) == 71 for d in first.values())
    assert len(set(first.values())) == len(first)
    assert digests(Family(tmp_path)) == first


def test_a_file_of_a_context_changes_that_target_and_its_descendants_only(tmp_path):
    before = digests(Family(tmp_path))
    (tmp_path / "mid" / "script.sh").write_text("echo mid, changed\n")
    assert changed(before, digests(Family(tmp_path))) == MID_AND_BELOW


def test_a_new_file_a_mode_and_a_symlink_target_each_count(tmp_path):
    family = Family(tmp_path)
    before = digests(family)
    (tmp_path / "mid" / "sub").mkdir()
    (tmp_path / "mid" / "sub" / "new.txt").write_text("x")
    after_new = digests(family)
    assert changed(before, after_new) == MID_AND_BELOW
    os.chmod(tmp_path / "mid" / "sub" / "new.txt", 0o755)
    after_mode = digests(family)
    assert changed(after_new, after_mode) == MID_AND_BELOW
    os.symlink("script.sh", tmp_path / "leaf" / "link")
    after_link = digests(family)
    assert changed(after_mode, after_link) == {"leaf-mealkit", "leaf"}
    os.remove(tmp_path / "leaf" / "link")
    os.symlink("Dockerfile", tmp_path / "leaf" / "link")
    assert changed(after_link, digests(family)) == {"leaf-mealkit", "leaf"}


def test_an_arg_changes_that_target_and_its_descendants_only(tmp_path):
    before = digests(Family(tmp_path))
    assert changed(before, digests(Family(tmp_path, mid_args={"JAX_FLAGS": "-O2"}))) == MID_AND_BELOW


def test_the_base_image_reference_changes_every_target_built_on_it(tmp_path):
    before = digests(Family(tmp_path))
    assert changed(before, digests(Family(tmp_path, base="python:3.12-slim"))) == ALL


def test_a_base_image_mapped_to_a_digest_counts_by_that_digest(tmp_path):
    family = Family(tmp_path)
    one = digests(family, base_images=(("python:3.11-slim", "mirror.example/python@sha256:" + "a" * 64),))
    same = digests(family, base_images=(("python:3.11-slim", "other.example/py@sha256:" + "a" * 64),))
    other = digests(family, base_images=(("python:3.11-slim", "mirror.example/python@sha256:" + "b" * 64),))
    assert one == same  # where the image was found is not an input: its digest is
    assert changed(one, other) == ALL


def test_the_date_the_tags_and_the_registry_change_nothing(tmp_path):
    before = digests(Family(tmp_path))
    assert digests(Family(tmp_path), date=datetime.date(2027, 1, 2)) == before
    assert digests(Family(tmp_path), registry="ghcr.io/elsewhere") == before
    assert digests(Family(tmp_path), Tags()) == before
    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, Family(tmp_path), Tags()])
    tagged = make_plan(PlanOptions(targets=("leaf",), date=DATE), pm).plan["target"]["leaf"]["tags"]
    assert tagged == ["localhost:5555/family/leaf:other-final"]  # the tags did change


def test_plan_json_shows_the_label(tmp_path):
    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, Family(tmp_path)])
    composition = make_plan(PlanOptions(targets=("leaf",), date=DATE), pm)
    shown = json.loads(render(composition, "json"))
    assert shown["target"]["leaf"]["labels"][INPUT_DIGEST_LABEL] == composition.input_digests["leaf"]


def test_a_pinned_context_counts_by_digest_and_a_target_context_by_its_digest():
    targets = {
        "a": {"context": "https://example.com/a.git", "args": {"SOURCE_DATE_EPOCH": "1"}},
        "b": {"context": "https://example.com/b.git", "contexts": {"base": "target:a"},
              "cache-to": ["type=registry,ref=x"], "tags": ["x:1"]},
    }
    first = input_digests(targets)
    targets["a"]["args"]["SOURCE_DATE_EPOCH"] = "2"
    targets["b"]["tags"] = ["y:2"]
    assert input_digests(targets) == first
    targets["a"]["args"]["X"] = "1"
    second = input_digests(targets)
    assert second["a"] != first["a"] and second["b"] != first["b"]
    one = input_digests({"c": {"contexts": {"base": "docker-image://r.example/x:1@sha256:" + "c" * 64}}})
    two = input_digests({"c": {"contexts": {"base": "docker-image://q.example/y:2@sha256:" + "c" * 64}}})
    assert one == two


def test_each_directory_is_walked_once_per_plan(tmp_path, monkeypatch):
    import bake.plan.inputs as inputs

    walks = []
    real = inputs._tree
    monkeypatch.setattr(inputs, "_tree", lambda root, matcher=None: walks.append(root) or real(root, matcher))
    (tmp_path / "f").write_text("x")
    targets = {f"t{i}": {"context": str(tmp_path), "args": {"I": str(i)}} for i in range(50)}
    hasher = Hasher()
    input_digests(targets, hasher)
    assert walks == [str(tmp_path)]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_still_gives_a_digest(tmp_path):
    (tmp_path / "secret").write_text("x")
    os.chmod(tmp_path / "secret", 0)
    assert input_digests({"t": {"context": str(tmp_path)}})["t"].startswith("sha256:")


def test_a_source_commit_or_patch_changes_that_target_and_its_descendants_only(tmp_path):
    before = digests(Family(tmp_path))
    assert changed(before, digests(Family(tmp_path, mid_ref="b" * 40))) == MID_AND_BELOW
    assert changed(before, digests(Family(tmp_path, patches=("pull/12/head",)))) == MID_AND_BELOW


def test_the_lock_a_locked_final_installs_changes_that_final_only(tmp_path):
    lock = tmp_path / "lock"
    lock.mkdir()
    (lock / "requirements.lock").write_text("numpy==1.26.4\n")
    targets = {
        "m": {"context": "https://example.com/m.git"},
        "f": {"context": "https://example.com/m.git", "contexts": {"mealkit": "target:m", "pip-lock": str(lock)}},
        "child": {"context": "https://example.com/c.git", "contexts": {"base": "target:m"}},
    }
    first = input_digests(targets)
    (lock / "requirements.lock").write_text("numpy==2.0.0\n")
    second = input_digests(targets)
    assert {n for n in first if first[n] != second[n]} == {"f"}


def test_the_sitrep_gives_each_target_its_input_digest(tmp_path):
    from bake.run.sitrep import make_sitrep

    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, Family(tmp_path)])
    composition = make_plan(PlanOptions(targets=("leaf",), date=DATE), pm)
    report = make_sitrep(composition.plan, "leaf build", 0, [], {}, {})
    assert {n: t["input_digest"] for n, t in report["targets"].items()} == composition.input_digests
