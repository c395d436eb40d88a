"""pytest fixtures for plugin authors, loaded by pytest through bake-plan's ``pytest11`` entry point
(``pip install bake-plan`` is enough; nothing to import).

The plugins under test are the installed ones whose entry-point names the project declares under
``[project.entry-points.bake_plan]`` of the ``pyproject.toml`` in pytest's root directory, or the
names of the ini option ``bake_plan_plugins``. They are loaded as the command line loads them, next
to bake-plan's built-in stages and default policies and nothing else installed:

- ``bake_plan_plugin_names``: those entry-point names;
- ``bake_plan_stages``: their stages, by name (variants expanded), each with ``plugin`` set;
- ``bake_plan_composition``: the composed plan of all of them (``.plan``, ``.chain``), for the
  date :data:`bake.testing.DATE` and the registry of the ini option ``bake_plan_registry``
  (default :data:`TEST_REGISTRY`);
- ``bake_plan_plan``: its plan, buildx's JSON shape (``group``, ``target``);
- ``bake_plan_file``: that plan written as ``docker-bake.json`` in the test's ``tmp_path``;
- ``bake_plan_printed``: ``docker buildx bake -f that-file --print``, buildx's JSON; the test is
  skipped when the docker CLI or buildx is missing (failed under ``CI=true``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List

import pytest

from bake.api import collect_stages, make_plan, render
from bake.plan.compose import Composition, PlanOptions
from bake.plan.plugins import Hooks
from bake.plan.stage import Stage
from bake.testing import DATE, installed_plugin_manager, project_plugin_names

TEST_REGISTRY = "localhost:5000/bake-plan-test"
"""The registry test plans name when the ini option ``bake_plan_registry`` does not (a local
registry's usual address): stages without a registry of their own take it, as with ``--registry``."""


def pytest_addoption(parser) -> None:
    """The ini options: ``bake_plan_plugins`` (entry-point names, whitespace-separated) and
    ``bake_plan_registry``."""
    parser.addini("bake_plan_plugins", type="args", default=[],
                  help="bake-plan: entry-point names of the plugins under test "
                       "(default: [project.entry-points.bake_plan] of the rootdir's pyproject.toml)")
    parser.addini("bake_plan_registry", default=TEST_REGISTRY,
                  help=f"bake-plan: the registry of the test plans (default {TEST_REGISTRY})")


@pytest.fixture(scope="session")
def bake_plan_plugin_names(pytestconfig) -> List[str]:
    """Entry-point names of the plugins under test; the test fails when there are none."""
    names = list(pytestconfig.getini("bake_plan_plugins"))
    names = names or project_plugin_names(Path(pytestconfig.rootpath) / "pyproject.toml")
    if not names:
        pytest.fail("bake-plan fixtures: no plugin under test: declare [project.entry-points.bake_plan] in "
                    "pyproject.toml, or set the ini option bake_plan_plugins")
    return names


@pytest.fixture
def bake_plan_stages(bake_plan_plugin_names) -> Dict[str, Stage]:
    """The stages of the plugins under test, by name (variants expanded)."""
    stages = collect_stages(Hooks(installed_plugin_manager(*bake_plan_plugin_names)))
    return {name: stage for name, stage in stages.items() if stage.plugin in bake_plan_plugin_names}


@pytest.fixture
def bake_plan_composition(pytestconfig, bake_plan_plugin_names, bake_plan_stages) -> Composition:
    """The plan of every stage of the plugins under test (with the stages they build on)."""
    if not bake_plan_stages:
        pytest.fail(f"bake-plan fixtures: plugins {', '.join(bake_plan_plugin_names)} declare no stage")
    options = PlanOptions(targets=tuple(bake_plan_stages), date=DATE,
                          registry=pytestconfig.getini("bake_plan_registry") or None)
    return make_plan(options, installed_plugin_manager(*bake_plan_plugin_names))


@pytest.fixture
def bake_plan_plan(bake_plan_composition) -> dict:
    """The plan in buildx's JSON shape: ``{"group": …, "target": {name: target}}``."""
    return bake_plan_composition.plan


@pytest.fixture
def bake_plan_file(bake_plan_composition, tmp_path) -> Path:
    """The plan as bake-plan writes it, ``docker-bake.json`` in the test's ``tmp_path``."""
    path = tmp_path / "docker-bake.json"
    path.write_text(render(bake_plan_composition, "json"), encoding="utf-8")
    return path


@pytest.fixture
def bake_plan_printed(bake_plan_file) -> dict:
    """``docker buildx bake -f docker-bake.json --print``: the plan as buildx reads it (its
    ``default`` group: every target)."""
    from bake.run.engine import buildx_version, print_plan

    if buildx_version() is None:
        message = "bake-plan fixtures: no docker CLI with buildx to read the plan"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return print_plan(bake_plan_file, ["default"])
