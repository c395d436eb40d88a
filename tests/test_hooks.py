"""Each hook, implemented by an inline plugin on a fresh plugin manager (pluggy's own test style),
changes the plan the way its docstring says."""

from __future__ import annotations

import datetime
import inspect

import pytest

from bake import Stage, hookimpl
from bake.api import make_plan
from bake.errors import PluginError
from bake.plan import hookspecs
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.resources import stage_dir

DATE = datetime.date(2026, 11, 29)


def plan_with(*plugins, targets=("upstream-pax",), platforms=()):
    pm = get_plugin_manager(plugins=plugins)
    return make_plan(PlanOptions(targets=targets, date=DATE, platforms=platforms), pm).plan["target"]


def test_every_hook_spec_is_documented():
    specs = [f for name, f in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("bake_plan_")]
    assert {f.__name__ for f in specs} == {
        "bake_plan_stages", "bake_plan_adjust_target", "bake_plan_tags", "bake_plan_cache_key", "bake_plan_platforms"}
    for spec in specs:
        doc = inspect.getdoc(spec) or ""
        assert "Fires" in doc, f"{spec.__name__} does not say when it fires"
        assert ":returns:" in doc, f"{spec.__name__} does not give its return shape"


def test_stages_hook_adds_a_stage():
    class Plugin:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(registry="ghcr.io/nvidia", name="extra", image="extra", parent="base", context=stage_dir("jax"))]

    targets = plan_with(Plugin(), targets=("extra",))
    assert list(targets) == ["base-mealkit", "base", "extra-mealkit", "extra"]
    assert targets["extra-mealkit"]["contexts"] == {"base": "target:base-mealkit"}


def test_tag_policy_replaces_the_default_and_keeps_the_arch_suffix():
    class Plugin:
        @hookimpl
        def bake_plan_tags(self, stage, flavor, date):
            return [f"{flavor}-{date:%Y%m%d}"] if stage.name == "jax" else None

    targets = plan_with(Plugin(), platforms=("linux/amd64",))
    assert targets["jax"]["tags"] == ["ghcr.io/nvidia/jax:final-20261129-amd64"]
    assert targets["jax-mealkit"]["tags"] == ["ghcr.io/nvidia/jax:mealkit-20261129-amd64"]
    assert targets["base"]["tags"][0] == "ghcr.io/nvidia/base:latest-amd64"  # None: the default answers


def test_cache_key_policy_replaces_the_default():
    class Plugin:
        @hookimpl
        def bake_plan_cache_key(self, stage, flavor):
            return f"cache-{stage.name}-{flavor}-v2"

    targets = plan_with(Plugin())
    assert targets["jax"]["args"]["CACHE_SILO"] == "cache-jax-final-v2"
    assert targets["jax"]["cache-to"] == [
        "type=registry,ref=ghcr.io/nvidia/jax:cache-jax-final-v2,mode=max,ignore-error=true"]


def test_platform_policy_replaces_the_default():
    class Plugin:
        @hookimpl
        def bake_plan_platforms(self, stage, requested):
            return ["linux/amd64"]

    for target in plan_with(Plugin()).values():
        assert target["platforms"] == ["linux/amd64"]


def test_platform_policy_cannot_exceed_the_parent():
    class Plugin:
        @hookimpl
        def bake_plan_platforms(self, stage, requested):
            return ["linux/amd64"] if stage.name == "base" else ["linux/amd64", "linux/arm64"]

    with pytest.raises(Exception, match="linux/arm64 but stage 'base' it builds on does not"):
        plan_with(Plugin(), targets=("jax",))


def test_adjust_target_mutates_the_generated_target():
    class Plugin:
        @hookimpl
        def bake_plan_adjust_target(self, stage, name, flavor, target):
            if flavor == "final":
                target["labels"]["org.opencontainers.image.vendor"] = "ACME"
                target["args"]["EXTRA"] = name

    targets = plan_with(Plugin())
    assert targets["upstream-pax"]["labels"]["org.opencontainers.image.vendor"] == "ACME"
    assert targets["upstream-pax"]["args"]["EXTRA"] == "upstream-pax"
    assert "org.opencontainers.image.vendor" not in targets["upstream-pax-mealkit"]["labels"]


def test_adjust_target_returning_a_new_target_is_a_plugin_error():
    """The hook changes the target in place; a returned copy would be lost without a word."""
    class Plugin:
        @hookimpl
        def bake_plan_adjust_target(self, stage, name, flavor, target):
            return {**target, "labels": {"x": "y"}}

    with pytest.raises(PluginError, match=r"plugin 'Plugin' returned dict from bake_plan_adjust_target for stage "
                                          r"'base', target 'base-mealkit': the hook changes the target it is handed "
                                          r"in place and returns nothing"):
        plan_with(Plugin())


def test_policy_hook_with_the_wrong_shape_is_a_plugin_error():
    class Plugin:
        @hookimpl
        def bake_plan_tags(self, stage, flavor, date):
            return "latest"  # a string, not a list

    with pytest.raises(PluginError, match="bake_plan_tags for stage 'base'.*expected a list of strings"):
        plan_with(Plugin())


def test_tag_a_registry_would_refuse_is_an_error():
    class Plugin:
        @hookimpl
        def bake_plan_tags(self, stage, flavor, date):
            return ["x" * 129]

    with pytest.raises(Exception, match=r"plugin 'Plugin', stage 'base', mealkit tag: tag 'x+'… is 129 characters long"):
        plan_with(Plugin())
