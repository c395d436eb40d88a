"""A base image named by tag counts by the digest its registry gives (bake/run/build.py's
resolve_base_digests, which build --skip-unchanged runs): a new image pushed under the tag
changes the input digest of each target built from it and of those built on them, and of no
other; a registry that gives no digest makes them count as changed."""

from __future__ import annotations

import datetime
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
