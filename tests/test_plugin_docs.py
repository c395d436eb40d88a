"""docs/plugins.md is the plugin contract: it fails here when a hook spec is missing from it, its
arguments differ, its firstresult-ness is described wrongly, a Stage field or a bake.testing helper
is undocumented, or a hook has no test (datasette's checks)."""

from __future__ import annotations

import dataclasses
import inspect
import re

import pytest
from conftest import ROOT

from bake import Stage, testing
from bake.plan import hookspecs

DOC = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
SPECS = {name: f for name, f in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("bake_plan_")}
HEADINGS = dict(re.findall(r"^### (bake_plan_\w+)\(([^)]*)\)$", DOC, re.M))


def _section(name: str) -> str:
    start = DOC.index(f"### {name}(")
    end = DOC.find("\n## ", start)
    nxt = DOC.find("\n### ", start + 1)
    return DOC[start:min(i for i in (end, nxt, len(DOC)) if i != -1)]


def test_every_hook_has_a_heading_and_no_heading_is_stale():
    assert set(HEADINGS) == set(SPECS)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_documented_arguments_match_the_spec(name):
    documented = [a.strip() for a in HEADINGS[name].split(",") if a.strip()]
    assert documented == list(inspect.signature(SPECS[name]).parameters), name
    section = _section(name)
    for arg in documented:
        assert f"`{arg}`" in section, f"{name}: argument {arg} is not described"
    assert "Returns" in section, f"{name}: no return shape"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_documented_call_style_matches_firstresult(name):
    firstresult = SPECS[name].bake_plan_spec["firstresult"]
    section = _section(name)
    assert ("One answer wins" in section) == firstresult, name
    assert ("Every\nimplementation is called" in section or "Every implementation is called" in section) == (not firstresult)


def test_every_stage_field_is_documented():
    rows = set(re.findall(r"^\| `(\w+)` \|", DOC, re.M))
    assert rows == {f.name for f in dataclasses.fields(Stage)}


def test_every_testing_helper_is_documented():
    public = {n for n, v in vars(testing).items() if not n.startswith("_") and getattr(v, "__module__", "") == testing.__name__}
    public.add("DATE")
    for name in public:
        assert f"`{name}" in DOC, name


def test_every_hook_has_a_test():
    tests = (ROOT / "tests" / "test_hooks.py").read_text(encoding="utf-8")
    for name in SPECS:
        assert re.search(rf"def {name}\(", tests), f"no test implements {name}"
