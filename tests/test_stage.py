"""Validation of stages that share a build context: the directory is looked up once per
collection, and each stage's own Dockerfile is still checked. What a checked stage holds: the
plugin's own dicts, not copies, and (Python 3.10+) its fields in slots, not an instance dict."""

from __future__ import annotations

import sys

import pytest

from bake import Stage
from bake.errors import StageError
from bake.plan.validate import validate


def test_a_shared_context_is_checked_once_and_each_dockerfile_still_counts(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    checked = set()
    validate(Stage(name="a", context=tmp_path), "p", checked)
    assert checked == {(str(tmp_path), "Dockerfile")}
    validate(Stage(name="b", context=str(tmp_path)), "p", checked)
    with pytest.raises(StageError, match=r"stage 'c', field 'dockerfile': .*/Other\.Dockerfile does not exist"):
        validate(Stage(name="c", context=tmp_path, dockerfile="Other.Dockerfile"), "p", checked)
    validate(Stage(name="d", context=tmp_path, dockerfile="Other.Dockerfile", dockerfile_inline="FROM scratch"),
             "p", checked)
    assert checked == {(str(tmp_path), "Dockerfile"), (str(tmp_path), "")}


def test_without_a_shared_set_every_call_looks(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    validate(Stage(name="a", context=tmp_path), "p")
    (tmp_path / "Dockerfile").unlink()
    with pytest.raises(StageError, match="Dockerfile does not exist"):
        validate(Stage(name="a", context=tmp_path), "p")
    with pytest.raises(StageError, match="must be an absolute directory"):
        validate(Stage(name="a", context="relative/dir"), "p")
    with pytest.raises(StageError, match="does not exist"):
        validate(Stage(name="a", context=str(tmp_path / "missing")), "p")


def test_a_named_context_that_is_a_local_path_must_exist(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    extra = tmp_path / "extra"
    with pytest.raises(StageError) as err:
        validate(Stage(name="a", context=tmp_path, contexts={"extra": str(extra)}), "p")
    assert str(err.value) == (f"plugin 'p', stage 'a', field 'contexts': context 'extra': directory {extra} "
                              "does not exist")
    (tmp_path / "afile").write_text("x")  # a file is no context directory either
    with pytest.raises(StageError, match="context 'extra': directory .*/afile does not exist"):
        validate(Stage(name="a", context=tmp_path, contexts={"extra": str(tmp_path / "afile")}), "p")
    extra.mkdir()
    checked = set()
    validate(Stage(name="a", context=tmp_path, contexts={"extra": str(extra)}), "p", checked)
    assert (str(extra), "") in checked
    # what buildx resolves itself is not looked for on disk
    validate(Stage(name="a", context=tmp_path, contexts={"t": "target:other", "i": "docker-image://busybox:1.36",
                                                         "g": "https://example.invalid/repo.git"}), "p")
    with pytest.raises(StageError, match="context 'extra' holds an escape"):
        validate(Stage(name="a", context=tmp_path, contexts={"extra": str(extra) + "\x1b[2J"}), "p")


@pytest.mark.parametrize("labels, fault", [
    ({"org.example.note": "a\x1b[31mred"}, "an escape (U+001B)"),
    ({"org.example.note": "abc\u202edef"}, "a control character (U+202E)"),
    ({"org.example\x1b[2J": "v"}, "an escape (U+001B)"),
    ({"org.example.note\nkey": "v"}, "a line feed (U+000A)"),
    ({"org.example.note": "two\nlines\x85"}, "a next-line (U+0085)"),
])
def test_labels_holding_control_or_bidi_characters_are_refused(tmp_path, labels, fault):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(StageError) as err:
        validate(Stage(name="a", context=tmp_path, labels=labels), "p")
    assert "field 'labels': label 'org.example" in str(err.value) and str(err.value).endswith(f"holds {fault}")
    assert "\x1b" not in str(err.value) and "\u202e" not in str(err.value)
    validate(Stage(name="a", context=tmp_path, labels={"org.example.note": "plain ünïcode"}), "p")
    validate(Stage(name="a", context=tmp_path, labels={"org.example.description": "two\nlines\tand a tab"}), "p")


def test_one_collection_looks_up_a_context_its_stages_share_once(tmp_path, monkeypatch):
    from bake import hookimpl
    from bake.plan import validate as validate_module
    from bake.plan.plugins import Hooks, get_plugin_manager

    (tmp_path / "Dockerfile").write_text("FROM scratch\n")

    class Family:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(name=f"s{i}", context=str(tmp_path)) for i in range(20)]

    looked = []
    isdir = validate_module.os.path.isdir
    monkeypatch.setattr(validate_module.os.path, "isdir", lambda path: looked.append(path) or isdir(path))
    stages = Hooks(get_plugin_manager(load_entrypoints=False, plugins=[Family()])).collect_stages()
    assert len(stages) == 20
    assert looked.count(str(tmp_path)) == 1


def test_a_mapping_that_is_not_a_dict_becomes_one(tmp_path):
    from types import MappingProxyType

    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    checked = validate(Stage(name="a", context=tmp_path, labels=MappingProxyType({"l": "v"})), "p")
    assert type(checked.labels) is dict and checked.labels == {"l": "v"}
    assert checked.variants == {} and checked.variant_args == {} and checked.arch_differences == {}


@pytest.mark.skipif(sys.version_info < (3, 10), reason="dataclass slots are Python 3.10+")
def test_the_stage_model_keeps_its_fields_in_slots():
    """From 30 attributes on, an object's instance dict is one of its own (1.5 KB for a Stage's 31
    fields): a 20,000-stage plan held 30 MB more, twice over while it was collected."""
    from bake import ImageTest, Source

    for obj in (Stage(name="a", context="/ctx"), Source("A", "https://example.com/a.git"), ImageTest("true")):
        assert not hasattr(obj, "__dict__")


def test_each_checked_stage_holds_mappings_of_its_own(tmp_path):
    """A plugin that hands one dict to several stages, or changes it after returning them, changes
    no checked stage: validate copies each mapping."""
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    shared_args, shared_labels = {"MODE": "fast"}, {"org.example.team": "a"}
    first = validate(Stage(name="a", context=tmp_path, args=shared_args, labels=shared_labels), "p")
    second = validate(Stage(name="b", context=tmp_path, args=shared_args, labels=shared_labels), "p")
    first.args["MODE"] = "slow"  # in place, as a careless hook might
    shared_labels["org.example.team"] = "b"
    assert second.args == {"MODE": "fast"} and shared_args == {"MODE": "fast"}
    assert first.labels == second.labels == {"org.example.team": "a"}
