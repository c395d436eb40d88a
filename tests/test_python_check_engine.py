"""The Python a chain declares is checked in its first build step that has Python: a root stage
on the built-in ``base`` Dockerfile whose base image has another Python (the bookworm stand-in is
3.11.2) stops in ``bake-check-python``, right after the step that installs Python, in unlocked and
``--locked`` builds alike: no later step runs (no venv, no pip-tools, no ``bake-pip-finalize``),
and the check's one line (stage, declared and found version, what to do) is the failed step's
output, the target's ``error`` and the sitrep's ``error``, also under ``-q``.

Engine tests, amd64 only: nothing here needs the package index (the lock comes from a local
wheel), so each build stops within seconds of starting.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from conftest import ROOT, hermetic_pip_env, make_wheel

pytestmark = pytest.mark.engine

DATE = "2026-01-01"
BOOKWORM = "python:3.10-slim-bookworm"  # mapped to the stand-in, whose python3 is 3.11.2
CHECK = "bake-check-python"

PLUGIN = '''
from bake import Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [Stage(name="pc-root", image="pc-root", context=stage_dir("base"), base_image={base!r},
                  python={python!r}, requirements=("alpha",), args={{"APT_PACKAGES": {apt!r}}},
                  registry="localhost:5555/pycheck", platforms=("linux/amd64",)),
            Stage(name="pc-leaf", image="pc-leaf", parent="pc-root", context=stage_dir("base"),
                  requirements=("alpha",), registry="localhost:5555/pycheck", platforms=("linux/amd64",))]
'''


def _site(make_plugin, python: str, base: str = BOOKWORM, apt: str = "python3 python3-venv"):
    return make_plugin(PLUGIN.format(base=base, python=python, apt=apt), name="pycheck")


def _build(cli, tmp_path, site, stand_in: str, *args, sitrep: str):
    """``bake-plan build --target pc-root`` on the stand-in; expected to fail (exit 1)."""
    env = dict(os.environ, PYTHONPATH=str(site))
    namespace = f"localhost:5555/pc{uuid.uuid4().hex[:8]}"
    proc = cli("build", "--target", "pc-root", "--platform", "linux/amd64", "--registry", namespace, "--date", DATE,
               "--load", "--base-image", stand_in, "--config", os.devnull, "--sitrep-dir", str(tmp_path / sitrep),
               "-o", f"{sitrep}.hcl", *args, cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-4000:]
    return proc, json.loads((tmp_path / sitrep / "sitrep.json").read_text())


def _started_steps(rawjson: str) -> list:
    """The names of the Dockerfile steps buildx's ``--progress rawjson`` showed started (or cached)."""
    names = []
    for line in rawjson.splitlines():
        if line.startswith("{") and line.endswith("}"):
            for v in json.loads(line).get("vertexes") or ():
                if (v.get("started") or v.get("cached")) and v.get("name") not in names:
                    names.append(v.get("name", ""))
    return names


def _assert_stopped_at_the_check(report: dict, line: str) -> None:
    """The sitrep: the root's meal kit failed in the check, with ``line`` as its output, its error and
    the report's error; its final stage ran no step."""
    mealkit = report["targets"]["pc-root-mealkit"]
    assert report["outcome"] == "fail" and mealkit["outcome"] == "fail", report["summary"]
    [step] = mealkit["failed_steps"]
    assert CHECK in step["step"] and "bake-pip-finalize" not in step["step"], step
    assert step["output"][-1] == line, step["output"]
    assert mealkit["error"] == line and report["error"] == line, (mealkit["error"], report["error"])
    assert line[:150] in report["summary"]  # cut at 200 characters there
    final = report["targets"]["pc-root"]
    assert final["outcome"] == "fail" and final["failed_steps"] == [] and not final["steps_run"], final


def test_another_python_stops_unlocked_and_locked_builds_in_the_first_step_with_python(engine, cli, make_plugin,
                                                                                      tmp_path):
    site = _site(make_plugin, "3.10")
    stand_in = f"{BOOKWORM}={engine.registry}/stand-in/python:bookworm"
    line = (f"{CHECK}: stage 'pc-root' declares python = \"3.10\", but this image's python3 is 3.11.2: build on a "
            "base image of Python 3.10 (docs/plugins.md, \"A base of another Python\"), or declare python = "
            "\"3.11\" only if the family runs on it")

    proc, report = _build(cli, tmp_path, site, stand_in, "--progress", "rawjson", sitrep="unlocked")
    _assert_stopped_at_the_check(report, line)
    started = _started_steps(proc.stderr)
    assert any(CHECK in name for name in started), started
    later = [name for name in started if "-m venv" in name or "bake-write-requirements" in name
             or "bake-pip-finalize" in name]
    assert later == [], later

    # --locked: a lock for Python 3.10 (from a local wheel), the same stop before the final stage.
    house = tmp_path / "house"
    house.mkdir()
    make_wheel(house, "alpha", "1.0")
    locks = tmp_path / "locks"
    env = dict(os.environ, PYTHONPATH=str(site))
    cli("lock", "--target", "pc-root", "--locks-dir", str(locks), "--config", os.devnull, "--no-index",
        "--find-links", str(house), env=hermetic_pip_env(env), check=True)
    assert "# bake-plan python-declared: 3.10\n" in (locks / "pc-root.txt").read_text()
    proc, report = _build(cli, tmp_path, site, stand_in, "--locked", "--locks-dir", str(locks),
                          "--progress", "rawjson", sitrep="locked")
    _assert_stopped_at_the_check(report, line)
    started = _started_steps(proc.stderr)
    assert not any("bake-pip-finalize" in name or "-m venv" in name for name in started), started

    # -q: the console says only the errors; the line is among them.
    proc, report = _build(cli, tmp_path, site, stand_in, "--locked", "--locks-dir", str(locks), "-q",
                          sitrep="quiet")
    _assert_stopped_at_the_check(report, line)
    assert f"bake-plan: {line}" in proc.stderr.splitlines(), proc.stderr[-3000:]


@pytest.mark.parametrize("python, base, stand_in, apt, found", [
    # An exact declaration is compared in full: 3.11.9 is not the image's 3.11.2.
    ("3.11.9", BOOKWORM, "stand-in/python:bookworm", "python3 python3-venv",
     "but this image's python3 is 3.11.2: build on a base image of Python 3.11.9 (docs/plugins.md, \"A base of "
     "another Python\"), or declare python = \"3.11.2\" only if the family runs on it"),
    # A base with no Python at all (busybox) and nothing asked to install it.
    ("3.10", "busybox:latest", "stand-in/busybox:latest", "",
     "but this image has no python3 on PATH: build on a base image of Python 3.10 (docs/plugins.md, \"A base of "
     "another Python\"), or install it in a step before this one"),
], ids=["exact-patch", "no-python3"])
def test_the_check_says_what_it_found_in_one_line(engine, cli, make_plugin, tmp_path, python, base, stand_in, apt,
                                                  found):
    site = _site(make_plugin, python, base=base, apt=apt)
    proc, report = _build(cli, tmp_path, site, f"{base}={engine.registry}/{stand_in}", sitrep="sitrep")
    _assert_stopped_at_the_check(report, f"{CHECK}: stage 'pc-root' declares python = \"{python}\", {found}")


RECIPE = '''
from pathlib import Path

from bake import Stage, hookimpl

HERE = Path({here!r})


@hookimpl
def bake_plan_stages():
    common = dict(registry="localhost:5555/pyrecipe", platforms=("linux/amd64",))
    return [Stage(name="py-base", kind="single", base_image="python:3.11-slim-bookworm", context=HERE / "py-base",
                  **common),
            Stage(name="my-root", image="my-root", parent="py-base", python={python!r}, context=HERE / "my-root",
                  requirements=("alpha",), **common)]
'''


def test_a_base_of_the_declared_python_as_a_stage_of_the_family_passes_the_check(engine, cli, make_plugin, tmp_path):
    """docs/plugins.md, "A base of another Python": a ``kind="single"`` stage makes the base, the root
    (the quick start's template with its meal kit ``FROM base``) builds on it as its parent. The
    declared Python passes the check and the chain builds (offline, from a wheelhouse); another one
    stops in the root's meal kit, as on any base."""
    from test_jaxfamily_engine import _bake_plan  # room for a real build (the cli fixture allows 120 s)
    from test_lock_image_rules_engine import _tools

    (tmp_path / "py-base").mkdir()
    (tmp_path / "py-base" / "Dockerfile").write_text(
        "ARG BASE_IMAGE=python:3.11-slim-bookworm\nFROM ${BASE_IMAGE}\nRUN python3 -c 'import venv, ensurepip'\n")
    template = (ROOT / "examples" / "bake-plan-quickstart" / "my_plugin" / "my-root" / "Dockerfile").read_text()
    assert template.count("ARG BASE_IMAGE=python:3.11-slim-bookworm\n") == 1
    assert template.count("FROM ${BASE_IMAGE} AS mealkit\n") == 1
    root = template.replace("ARG BASE_IMAGE=python:3.11-slim-bookworm\n", "").replace(
        "FROM ${BASE_IMAGE} AS mealkit\n", "FROM base AS mealkit\n")
    (tmp_path / "my-root").mkdir()
    (tmp_path / "my-root" / "Dockerfile").write_text(root)
    house = tmp_path / "house"
    house.mkdir()
    make_wheel(house, "alpha", "1.0")
    for wheel in Path(_tools()).glob("*.whl"):
        (house / wheel.name).write_bytes(wheel.read_bytes())
    stand_in = f"python:3.11-slim-bookworm={engine.registry}/stand-in/python:bookworm"

    def build(python: str, sitrep: str):
        site = make_plugin(RECIPE.format(here=str(tmp_path), python=python), name="pyrecipe")
        namespace = f"localhost:5555/pr{uuid.uuid4().hex[:8]}"
        proc = _bake_plan("build", "--target", "my-root", "--platform", "linux/amd64", "--registry", namespace, "--date",
                          DATE, "--load", "--base-image", stand_in, "--wheelhouse", str(house), "--config",
                          os.devnull, "--sitrep-dir", str(tmp_path / sitrep), "-o", f"{sitrep}.hcl", "--progress",
                          "rawjson",
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(site)))
        return proc, json.loads((tmp_path / sitrep / "sitrep.json").read_text()), f"{namespace}/my-root:latest-amd64"

    proc, report, image = build("3.11.2", "declared")
    assert proc.returncode == 0 and report["outcome"] == "pass", proc.stderr[-4000:]
    assert any(CHECK in name for name in _started_steps(proc.stderr))
    run = engine.docker("run", "--rm", "--network", "none", image, "python", "-c",
                        "import platform, importlib.metadata as m; print(platform.python_version(), m.version('alpha'))")
    assert run.stdout.split() == ["3.11.2", "1.0"], run.stdout

    proc, report, _ = build("3.10", "other")
    assert proc.returncode == 1, proc.stderr[-4000:]
    mealkit = report["targets"]["my-root-mealkit"]
    assert mealkit["error"].startswith(f"{CHECK}: stage 'my-root' declares python = \"3.10\", but this image's "
                                       "python3 is 3.11.2: "), mealkit
    assert report["targets"]["py-base"]["failed_steps"] == []  # the base built; the root's meal kit stopped
