"""The example plugin's own tests: what a plugin author writes (see docs/plugins.md, "Testing a
plugin"). bake.testing gives a fresh plugin manager with bake-plan's built-in stages, so
``notebook`` can build on ``jax``; nothing is mocked."""

import datetime

import pytest

import bake_plan_example
from bake import hookimpl
from bake.errors import StageError
from bake.testing import plan_for, plan_text

REGISTRY = "ghcr.io/acme"  # the stage has none of its own: users configure theirs (--registry)
REPO = f"{REGISTRY}/jax-notebook"


def test_notebook_builds_on_the_jax_meal_kit():
    targets = plan_for(bake_plan_example, targets=["notebook"], registry=REGISTRY)["target"]
    assert list(targets)[-2:] == ["notebook-mealkit", "notebook"]
    assert targets["notebook-mealkit"]["contexts"] == {"base": "target:jax-mealkit"}
    assert targets["notebook-mealkit"]["args"]["REQUIREMENTS"] == "jupyterlab>=4,<5"
    assert targets["notebook-mealkit"]["args"]["URLREF_EXAMPLES"] == "https://github.com/google/flax.git#main"


def test_final_image_is_tagged_by_calendar_date():
    targets = plan_for(bake_plan_example, targets=["notebook"], date=datetime.date(2026, 1, 2),
                       registry=REGISTRY)["target"]
    assert targets["notebook"]["tags"] == [f"{REPO}:latest", f"{REPO}:2026.01.02"]
    # Not ours: bake-plan's default policy still answers.
    assert targets["notebook-mealkit"]["tags"] == [f"{REPO}:mealkit", f"{REPO}:mealkit-2026-01-02"]
    assert targets["jax"]["tags"][1] == f"{REGISTRY}/jax:nightly-2026-01-02"


def test_per_arch_plans_keep_the_arch_suffix():
    targets = plan_for(bake_plan_example, targets=["notebook"], platforms=["linux/arm64"],
                       registry=REGISTRY)["target"]
    assert targets["notebook"]["tags"] == [f"{REPO}:latest-arm64", f"{REPO}:2026.11.29-arm64"]


def test_another_plugin_can_build_on_the_notebook():
    class Course:
        @hookimpl
        def bake_plan_stages(self):
            from bake import Stage
            return [Stage(name="course", image="course", parent="notebook", context=bake_plan_example.CONTEXT)]

    targets = plan_for(bake_plan_example, Course(), targets=["course"], registry=REGISTRY)["target"]
    assert targets["course-mealkit"]["contexts"]["base"] == "target:notebook-mealkit"


def test_the_plan_file_is_what_buildx_reads():
    text = plan_text(bake_plan_example, targets=["notebook"], fmt="hcl", registry=REGISTRY)
    assert 'target "notebook-mealkit" {' in text


def test_a_mistake_is_a_one_line_error():
    class Twice:
        @hookimpl
        def bake_plan_stages(self):
            return bake_plan_example.bake_plan_stages()

    with pytest.raises(StageError, match="stage 'notebook' is defined twice"):
        plan_for(bake_plan_example, Twice(), targets=["notebook"], registry=REGISTRY)


def test_without_a_registry_the_plan_names_the_stage():
    with pytest.raises(StageError, match="plugin 'example-notebook', stage 'notebook': no registry"):
        plan_for(bake_plan_example, targets=["notebook"])


def test_the_fixtures_compose_the_installed_plugin(bake_plan_stages, bake_plan_plan):
    assert bake_plan_stages["notebook"].plugin == "example-notebook"  # its entry point, as on the command line
    assert bake_plan_plan["target"]["notebook-mealkit"]["contexts"]["base"] == "target:jax-mealkit"
