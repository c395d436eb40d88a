"""The upstream-pax plan's shape: targets, contexts, tags, cache refs; the per-arch variant;
the xla-ci cache key. These read the in-memory plan that the buildx tests prove equal to the file."""

from __future__ import annotations

import datetime

import pytest

from bake.api import make_plan
from bake.pip.sources import load_manifest
from bake.plan.compose import PlanOptions

DATE = datetime.date(2026, 11, 29)
GHCR = "ghcr.io/nvidia"


def plan_for(*targets, platforms=(), registry=None):
    return make_plan(PlanOptions(targets=targets, date=DATE, platforms=platforms, registry=registry)).plan


def test_upstream_pax_targets_in_dependency_order():
    plan = plan_for("upstream-pax")
    assert list(plan["target"]) == [
        "base-mealkit", "base", "te", "jax-mealkit", "jax", "upstream-pax-mealkit", "upstream-pax",
    ]
    assert plan["group"]["default"]["targets"] == list(plan["target"])


def test_upstream_pax_contexts_build_on_parent_meal_kits():
    targets = plan_for("upstream-pax")["target"]
    assert targets["upstream-pax-mealkit"]["contexts"] == {"base": "target:jax-mealkit"}
    assert targets["upstream-pax"]["contexts"] == {"base": "target:jax-mealkit", "mealkit": "target:upstream-pax-mealkit"}
    assert targets["jax-mealkit"]["contexts"] == {"base": "target:base-mealkit", "te": "target:te"}
    assert targets["te"]["contexts"] == {"base": "target:base-mealkit"}
    assert "base" not in targets["base-mealkit"].get("contexts", {})
    assert targets["base-mealkit"]["args"]["BASE_IMAGE"] == "nvidia/cuda:12.2.0-devel-ubuntu22.04"
    for name in ("base-mealkit", "jax-mealkit", "upstream-pax-mealkit"):
        assert targets[name]["target"] == "mealkit"
    for name in ("base", "jax", "upstream-pax"):
        assert targets[name]["target"] == "final"
    assert targets["te"]["target"] == "wheel"


def test_upstream_pax_tags_and_cache_refs():
    targets = plan_for("upstream-pax")["target"]
    assert targets["upstream-pax"]["tags"] == [f"{GHCR}/upstream-pax:latest", f"{GHCR}/upstream-pax:nightly-2026-11-29"]
    assert targets["upstream-pax-mealkit"]["tags"] == [
        f"{GHCR}/upstream-pax:mealkit", f"{GHCR}/upstream-pax:mealkit-2026-11-29"]
    assert "tags" not in targets["te"]  # consumed by jax's meal kit, never published
    mk = targets["upstream-pax-mealkit"]
    assert mk["cache-from"] == [
        f"type=registry,ref={GHCR}/upstream-pax:cache-silo-upstream-pax-mealkit",
        f"type=registry,ref={GHCR}/jax:cache-silo-jax-mealkit",
    ]
    assert mk["cache-to"] == [
        f"type=registry,ref={GHCR}/upstream-pax:cache-silo-upstream-pax-mealkit,mode=max,ignore-error=true"]
    assert targets["upstream-pax"]["cache-from"] == [
        f"type=registry,ref={GHCR}/upstream-pax:cache-silo-upstream-pax-latest",
        f"type=registry,ref={GHCR}/upstream-pax:cache-silo-upstream-pax-mealkit",
    ]
    assert mk["args"]["CACHE_SILO"] == "cache-silo-upstream-pax-mealkit"
    paxml = load_manifest()["paxml"]  # stages/sources.toml: plans pass url#commit, never a branch
    assert mk["args"]["URLREF_PAXML"] == f"https://github.com/google/paxml.git#{paxml.commit}"
    assert mk["args"]["SRC_PATH_PRAXIS"] == "/opt/praxis"
    # Cache refs never coincide with image refs.
    image_refs = {t for target in targets.values() for t in target.get("tags", [])}
    cache_refs = {e.split("ref=")[1].split(",")[0] for target in targets.values() for e in target["cache-to"]}
    assert not image_refs & cache_refs
    for target in targets.values():
        assert target["platforms"] == ["linux/amd64", "linux/arm64"]


def test_per_arch_plan_suffixes_every_tag_and_writable_cache_ref():
    targets = plan_for("upstream-pax", platforms=("linux/arm64",), registry="localhost:5555/ci")["target"]
    assert targets["upstream-pax"]["tags"] == [
        "localhost:5555/ci/upstream-pax:latest-arm64", "localhost:5555/ci/upstream-pax:nightly-2026-11-29-arm64"]
    assert targets["jax-mealkit"]["tags"] == [
        "localhost:5555/ci/jax:mealkit-arm64", "localhost:5555/ci/jax:mealkit-2026-11-29-arm64"]
    for name, target in targets.items():
        assert target["platforms"] == ["linux/arm64"]
        for tag in target.get("tags", []):
            assert tag.endswith("-arm64"), tag
        for entry in target["cache-to"] + target["cache-from"]:
            assert ",mode=" in entry or entry.endswith("-arm64"), entry
            assert "-arm64" in entry
        assert target["args"]["CACHE_SILO"].endswith("-arm64")


def test_per_arch_plans_for_two_arches_share_no_writable_cache_ref():
    amd = plan_for("upstream-pax", platforms=("linux/amd64",))["target"]
    arm = plan_for("upstream-pax", platforms=("linux/arm64",))["target"]
    writes = lambda targets: {e for t in targets.values() for e in t["cache-to"]}  # noqa: E731
    assert not writes(amd) & writes(arm)


def test_xla_ci_default_plan_cache_key():
    plan = plan_for("xla-ci")
    assert list(plan["target"]) == ["xla-ci"]
    target = plan["target"]["xla-ci"]
    key = "cache-silo-ci-dev-3.8_cuda_12.1"
    assert target["args"]["CACHE_SILO"] == key
    assert target["cache-to"] == [f"type=registry,ref=gcr.io/tpu-pytorch/xla_base:{key},mode=max,ignore-error=true"]
    assert target["cache-from"] == [f"type=registry,ref=gcr.io/tpu-pytorch/xla_base:{key}"]
    assert target["tags"][0] == "gcr.io/tpu-pytorch/xla_base:dev-3.8_cuda_12.1"
    assert target["platforms"] == ["linux/amd64"]
    assert target["args"]["base_image"].endswith("development:3.8_cuda_12.1")
    assert "target" not in target


def test_requesting_a_mealkit_target_plans_its_stage():
    assert "jax-mealkit" in plan_for("jax-mealkit")["target"]


def test_plan_is_deterministic():
    from bake.api import render
    comp = lambda: make_plan(PlanOptions(targets=("upstream-pax", "xla-ci"), date=DATE))  # noqa: E731
    assert render(comp(), "hcl") == render(comp(), "hcl")
    assert render(comp(), "json") == render(comp(), "json")


@pytest.mark.parametrize("platform", ["linux/arm64"])
def test_xla_ci_refuses_a_platform_it_does_not_support(platform):
    from bake.errors import UsageError
    with pytest.raises(UsageError, match="xla-ci.*does not support linux/arm64"):
        plan_for("xla-ci", platforms=(platform,))


def test_every_builtin_source_is_pinned_to_the_manifest_commit():
    manifest = {entry.name: entry for entry in load_manifest().values()}
    assert set(manifest) == {"JAX", "XLA", "FLAX", "TRANSFORMER_ENGINE", "T5X", "PAXML", "PRAXIS", "FIDDLE"}
    seen = set()
    for target in plan_for("upstream-pax", "upstream-t5x")["target"].values():
        for arg, value in target["args"].items():
            if arg.startswith("URLREF_"):
                entry = manifest[arg[len("URLREF_"):]]
                assert value == f"{entry.url}#{entry.commit}", arg
                assert len(entry.commit) == 40 and entry.commit != "0" * 40
                seen.add(entry.name)
    assert seen == set(manifest)
