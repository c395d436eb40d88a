"""docs/plugins.md is the plugin contract: it fails here when a hook spec is missing from it, its
arguments differ, its firstresult-ness is described wrongly, a Stage field or a bake.testing helper
is undocumented, or a hook has no test (datasette's checks)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys

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


# --- the quick start, word for word ---------------------------------------------------------------

QUICKSTART = DOC[DOC.index("## Quick start"):DOC.index("## How hooks are called")]
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", QUICKSTART, re.S)
EXAMPLE = ROOT / "examples" / "bake-plan-quickstart"


def _files() -> dict:
    """Every quick-start block that names its file on its first line (``# my-plugin/…``,
    ``# bake-plan.toml``): path → text, exactly as the guide shows it."""
    out = {}
    for _, body in BLOCKS:
        match = re.match(r"# ([\w./-]+)\n", body)
        if match and ("/" in match.group(1) or "." in match.group(1)):
            out[match.group(1)] = body
    return out


def _commands() -> str:
    """The quick start's shell block: what a user types, in order."""
    return next(body for lang, body in BLOCKS if lang == "sh")


def test_the_quickstart_names_every_file_it_shows():
    assert sorted(_files()) == ["bake-plan.toml", "my-plugin/my_plugin/__init__.py",
                                "my-plugin/my_plugin/my-leaf/Dockerfile", "my-plugin/my_plugin/my-root/Dockerfile",
                                "my-plugin/pyproject.toml", "my-plugin/tests/test_my_plugin.py"]
    assert "[build-system]" in _files()["my-plugin/pyproject.toml"]
    assert "pip install /path/to/bake-plan" in _commands()


def test_the_quickstart_example_is_the_guide():
    """examples/bake-plan-quickstart holds the guide's files as they are (the templates users copy)."""
    for path, text in _files().items():
        if path.startswith("my-plugin/"):
            assert (EXAMPLE / path.split("/", 1)[1]).read_text(encoding="utf-8") == text, path
    shipped = {str(p.relative_to(EXAMPLE)) for p in EXAMPLE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert shipped == {p.split("/", 1)[1] for p in _files() if p.startswith("my-plugin/")}


@pytest.mark.engine
def test_a_plugin_made_from_the_guide_word_for_word_installs_plans_builds_and_tests(engine, tmp_path):
    """The quick start's blocks copied into a directory, and its shell block run line by line in a
    fresh virtual environment: bake-plan from this checkout, the plugin with pip, ``stages``, a plan
    buildx prints, an offline build on the test engine (the only additions: the stand-in for the
    Python image and the test registry), and the plugin's own pytest suite on bake-plan's fixtures."""
    import uuid

    namespace = f"{engine.registry}/qs{uuid.uuid4().hex[:8]}"
    for path, text in _files().items():
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text.replace("localhost:5000/me", namespace) if path == "bake-plan.toml" else text)
    stand_in = f"python:3.11-slim-bookworm={engine.registry}/stand-in/python:bookworm"
    script = []
    for line in _commands().splitlines():
        line = line.replace("/path/to/bake-plan", str(ROOT))
        if line.startswith("bake-plan build"):
            line = line.split("  #")[0] + f" --base-image {stand_in}"
        script.append(line)
    script.append(f"docker run --rm --network none {namespace}/my-leaf:latest-amd64 "
                  "python -c 'import click, tomli; print(\"imports fine\")'")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "BAKE_PLAN_PLUGINS", "PYTEST"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(sys.prefix))
    proc = subprocess.run(["bash", "-euxo", "pipefail", "-c", "\n".join(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    stages = [line.split() for line in proc.stdout.splitlines() if line.startswith("my-")]
    assert [row[:3] for row in stages] == [["my-leaf", "my-plugin", "my-root"],
                                           ["my-root", "my-plugin", "image"]]
    assert '"my-leaf-mealkit"' in proc.stdout and '"bake-scripts"' in proc.stdout  # buildx --print
    assert "imports fine" in proc.stdout
    assert re.search(r"\b4 passed\b", proc.stdout), out[-3000:]  # the plugin's tests, on the fixtures
    sitrep = json.loads((tmp_path / "sitrep.json").read_text())
    assert sitrep["outcome"] == "pass"
    assert sitrep["targets"]["my-root-mealkit"]["outcome"] == "pass"
