"""Variants: a stage declared for a matrix (Python × CUDA) becomes concrete targets, tags, cache
keys and args, without bake's own ``matrix``, and children follow their parent's variants."""

from __future__ import annotations

import datetime
import json

import pytest
from conftest import expected_target

from bake import Stage, hookimpl
from bake.api import make_plan, render
from bake.errors import StageError, UsageError
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.resources import stage_dir

DATE = datetime.date(2026, 11, 29)
REPO = "ghcr.io/nvidia"


class Matrix:
    """``toolchain`` (python × cuda, on a dev image per combination) → ``trainer`` (inherits the
    matrix) → ``bench`` (adds its own ``batch`` axis)."""

    def __init__(self, **toolchain):
        self.toolchain = toolchain

    @hookimpl
    def bake_plan_stages(self):
        fields = dict(
            name="toolchain", image="toolchain", context=stage_dir("base"), registry="ghcr.io/nvidia",
            base_image="nvcr.io/dev:{python}_cuda_{cuda}",
            variants={"python": ("3.10", "3.12"), "cuda": ("12.1", "12.4")},
            variant_format="dev-{python}_cuda_{cuda}",
            variant_args={"python": "PYTHON_VERSION", "cuda": "CUDA_VERSION"},
            args={"LABEL": "py{python} ${NOT_AN_AXIS} %{ if }"},
        )
        fields.update(self.toolchain)
        return [
            Stage(**fields),
            Stage(registry="ghcr.io/nvidia", name="trainer", image="trainer", parent="toolchain", context=stage_dir("jax"),
                  args={"PYTHON_VERSION": "own value wins"}),
            Stage(registry="ghcr.io/nvidia", name="bench", image="bench", parent="trainer", context=stage_dir("jax"),
                  variants={"batch": ("8", "64")}, variant_args={"batch": "BATCH"}),
        ]


def plan_of(*targets, plugin=None, platforms=()):
    pm = get_plugin_manager(plugins=[plugin or Matrix()])
    return make_plan(PlanOptions(targets=targets, date=DATE, platforms=platforms), pm)


def test_a_matrix_becomes_one_concrete_stage_per_combination():
    plan = plan_of("toolchain").plan
    names = ["toolchain-3_10-12_1", "toolchain-3_10-12_4", "toolchain-3_12-12_1", "toolchain-3_12-12_4"]
    assert list(plan["target"]) == [n + suffix for n in names for suffix in ("-mealkit", "")]
    one = plan["target"]["toolchain-3_12-12_4"]
    assert one["tags"] == [f"{REPO}/toolchain:dev-3.12_cuda_12.4", f"{REPO}/toolchain:dev-3.12_cuda_12.4-nightly-2026-11-29"]
    assert one["args"]["CACHE_SILO"] == "cache-silo-toolchain-dev-3.12_cuda_12.4"
    assert plan["target"]["toolchain-3_12-12_4-mealkit"]["args"]["CACHE_SILO"] == "cache-silo-toolchain-dev-3.12_cuda_12.4-mealkit"
    mealkit = plan["target"]["toolchain-3_12-12_4-mealkit"]
    assert mealkit["args"]["PYTHON_VERSION"] == "3.12" and mealkit["args"]["CUDA_VERSION"] == "12.4"
    assert mealkit["args"]["BASE_IMAGE"] == "nvcr.io/dev:3.12_cuda_12.4"
    assert mealkit["args"]["LABEL"] == "py3.12 ${NOT_AN_AXIS} %{ if }"  # only {axis} is ours
    # The declared name is a group of every variant's final target; no bake matrix anywhere.
    assert plan["group"]["toolchain"] == {"targets": names}
    assert plan["group"]["toolchain-mealkit"] == {"targets": [n + "-mealkit" for n in names]}
    assert "matrix" not in json.dumps(plan)


def test_children_follow_their_parents_variants_and_add_their_own_axes():
    comp = plan_of("bench-3.10-12.1-64")
    targets = comp.plan["target"]
    assert list(targets) == ["toolchain-3_10-12_1-mealkit", "toolchain-3_10-12_1", "trainer-3_10-12_1-mealkit",
                             "trainer-3_10-12_1", "bench-3_10-12_1-64-mealkit", "bench-3_10-12_1-64"]
    assert targets["trainer-3_10-12_1-mealkit"]["contexts"] == {"base": "target:toolchain-3_10-12_1-mealkit"}
    assert targets["bench-3_10-12_1-64-mealkit"]["contexts"] == {"base": "target:trainer-3_10-12_1-mealkit"}
    trainer = targets["trainer-3_10-12_1"]
    assert trainer["tags"][0] == f"{REPO}/trainer:dev-3.10_cuda_12.1"  # the parent's variant_format
    assert trainer["args"]["PYTHON_VERSION"] == "own value wins"  # inherited axes never beat own args
    assert trainer["args"]["CUDA_VERSION"] == "12.1"
    bench = targets["bench-3_10-12_1-64"]
    assert bench["tags"][0] == f"{REPO}/bench:dev-3.10_cuda_12.1-64"  # own axes appended
    assert bench["args"]["CACHE_SILO"] == "cache-silo-bench-dev-3.10_cuda_12.1-64"
    assert bench["args"]["BATCH"] == "64"


def test_requesting_a_declared_name_plans_every_variant():
    comp = plan_of("trainer")
    assert comp.requested == [f"trainer-{p}-{c}" for p in ("3.10", "3.12") for c in ("12.1", "12.4")]
    assert comp.plan["group"]["trainer"]["targets"] == [f"trainer-{p}-{c}" for p in ("3_10", "3_12") for c in ("12_1", "12_4")]
    assert len(comp.plan["group"]["toolchain"]["targets"]) == 4


def test_an_axis_with_one_value_adds_nothing_to_the_name():
    comp = plan_of("toolchain", plugin=Matrix(variants={"python": ("3.10", "3.12"), "cuda": ("12.4",)}))
    assert list(comp.plan["group"]) == ["default", "toolchain", "toolchain-mealkit"]
    assert comp.plan["group"]["toolchain"]["targets"] == ["toolchain-3_10", "toolchain-3_12"]
    assert comp.plan["target"]["toolchain-3_12"]["tags"][0].endswith(":dev-3.12_cuda_12.4")


def test_a_matrix_of_one_keeps_the_stage_name():
    comp = plan_of("toolchain", plugin=Matrix(variants={"python": ("3.11",), "cuda": ("12.4",)}))
    assert list(comp.plan["target"]) == ["toolchain-mealkit", "toolchain"]
    assert list(comp.plan["group"]) == ["default"]
    assert comp.plan["target"]["toolchain"]["args"]["CACHE_SILO"] == "cache-silo-toolchain-dev-3.11_cuda_12.4"


def test_the_default_variant_format_names_every_axis():
    comp = plan_of("toolchain", plugin=Matrix(variant_format=None))
    assert comp.plan["target"]["toolchain-3_10-12_4"]["tags"][0].endswith(":python3.10_cuda12.4")


def test_xla_ci_is_a_matrix_of_one():
    target = make_plan(PlanOptions(targets=("xla-ci",), date=DATE)).plan["target"]["xla-ci"]
    assert target["args"]["CACHE_SILO"] == "cache-silo-ci-dev-3.8_cuda_12.1"
    assert target["args"]["python_version"] == "3.8" and target["args"]["CUDA_VERSION"] == "12.1"
    assert target["args"]["cuda"] == "1"  # XLA_CUDA's switch, untouched by the CUDA axis


@pytest.mark.parametrize("toolchain, needle", [
    ({"variant_format": "dev-{python}"}, "both get the variant tag 'dev-3.10'"),
    ({"variant_format": "dev-{pyhton}"}, "'{pyhton}' is not an axis"),
    ({"variants": {"python": ("3.10", "3 12")}}, "value '3 12'"),
    ({"variants": {"python": "3.10"}}, "expected a non-empty list"),
    ({"variants": {"python": ("3.10", "3.10")}}, "lists a value twice"),
    ({"variant_args": {"gcc": "GCC"}}, "'gcc' is not an axis"),
    ({"variant": "dev"}, "field 'variant'"),
    ({"variant_format": "{python}+{cuda}"}, "contains '+'"),
])
def test_malformed_matrix_is_a_stage_error(toolchain, needle):
    with pytest.raises(StageError, match="toolchain") as err:
        plan_of("toolchain", plugin=Matrix(**toolchain))
    assert needle in str(err.value)


def test_a_child_may_not_repeat_an_inherited_axis():
    class Child:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(registry="ghcr.io/nvidia", name="kid", image="kid", parent="toolchain", context=stage_dir("jax"),
                          variants={"cuda": ("12.1",)})]

    pm = get_plugin_manager(plugins=[Matrix(), Child()])
    with pytest.raises(StageError, match="stage 'kid'.*axis 'cuda' is inherited from stage 'toolchain'"):
        make_plan(PlanOptions(targets=("kid",), date=DATE), pm)


def test_a_variant_name_taken_by_another_stage_is_an_error():
    class Clash:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(registry="ghcr.io/nvidia", name="toolchain-3.10-12.1", image="other", parent="jax", context=stage_dir("jax"))]

    pm = get_plugin_manager(plugins=[Matrix(), Clash()])
    with pytest.raises(StageError, match="toolchain-3.10-12.1"):
        make_plan(PlanOptions(targets=("jax",), date=DATE), pm)


def test_an_unknown_variant_is_an_unknown_target():
    with pytest.raises(UsageError, match="unknown target 'toolchain-3.11-12.1'.*toolchain-3.1"):
        plan_of("toolchain-3.11-12.1")


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_variant_plan_resolves_to_itself_and_its_group_prints_every_variant(buildx, tmp_path, fmt):
    comp = plan_of("bench")
    path = tmp_path / f"plan.{fmt}"
    path.write_text(render(comp, fmt))
    printed = buildx.print_plan(path, ["bench"], cwd=tmp_path)
    finals = [f"bench-{p}-{c}-{b}" for p in ("3_10", "3_12") for c in ("12_1", "12_4") for b in ("8", "64")]
    assert set(finals) <= set(printed["target"])
    for name, target in printed["target"].items():
        for key, value in expected_target(comp.plan["target"][name]).items():
            assert target.get(key) == value, f"{name}.{key}"
    # A group named like the declared stage, and no target of that name (a group would win).
    assert "bench" not in comp.plan["target"] and "toolchain" not in comp.plan["target"]
    mealkits = buildx.print_plan(path, ["toolchain-mealkit"], cwd=tmp_path)
    assert sorted(mealkits["target"]) == sorted(f"toolchain-{p}-{c}-mealkit" for p in ("3_10", "3_12") for c in ("12_1", "12_4"))
