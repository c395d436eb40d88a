"""Every plan bake-plan writes is read back by the real buildx (0.29 and 0.13), in HCL and JSON,
and every attribute bake-plan set must come back with the same value."""

from __future__ import annotations

import datetime

import pytest
from conftest import expected_target

from bake.api import make_plan
from bake.plan.compose import PlanOptions

BUILTIN_TARGETS = ["base", "te", "jax", "upstream-t5x", "upstream-pax", "xla-ci"]
DATE = "2026-11-29"


def _options(target, platforms=()):
    return PlanOptions(targets=(target,), date=datetime.date.fromisoformat(DATE), platforms=platforms)


def assert_resolves_to_plan(printed: dict, plan: dict):
    assert set(printed["target"]) == set(plan["target"])
    for name, target in plan["target"].items():
        got = printed["target"][name]
        for key, value in expected_target(target).items():
            assert got.get(key) == value, f"{name}.{key}"
    # buildx 0.29 sorts a group's targets; the order carries no meaning to bake.
    assert sorted(printed["group"]["default"]["targets"]) == sorted(plan["group"]["default"]["targets"])


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
@pytest.mark.parametrize("target", BUILTIN_TARGETS)
def test_every_builtin_plan_resolves_to_itself(buildx, cli, tmp_path, target, fmt):
    plan = make_plan(_options(target)).plan
    out = tmp_path / f"plan.{fmt}"
    cli("--target", target, "--date", DATE, "--format", fmt, "-o", str(out), cwd=tmp_path, check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    printed = buildx.print_plan(out, cwd=elsewhere)
    assert_resolves_to_plan(printed, plan)


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_per_arch_plan_resolves_to_itself(buildx, cli, tmp_path, fmt):
    plan = make_plan(_options("upstream-pax", ("linux/arm64",))).plan
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "upstream-pax", "--platform", "linux/arm64", "--date", DATE, "--format", fmt,
        "-o", str(out), cwd=tmp_path, check=True)
    assert_resolves_to_plan(buildx.print_plan(out, cwd=tmp_path), plan)


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_a_plan_with_mirrors_patches_and_modes_resolves_to_itself(buildx, cli, tmp_path, fmt):
    """A manifest with a mirror, a ref and a file patch (the ``patches`` context, ``PATCHES_*``)
    and a pip-vcs source (``MODE_*``)."""
    import os

    from bake.pip.sources import use_manifest
    from bake.resources import stages_dir

    (tmp_path / "patches" / "praxis").mkdir(parents=True)
    (tmp_path / "patches" / "praxis" / "fix.patch").write_text("")
    manifest = tmp_path / "sources.toml"
    text = (stages_dir() / "sources.toml").read_text()
    text = text.replace("[praxis]\n", '[praxis]\nmirror_url = "https://example.com/mirror/praxis.git"\n'
                                      'patches = ["pull/36/head", "file://patches/praxis/fix.patch"]\n')
    head, _, rest = text.partition("[t5x]")
    manifest.write_text(head + "[t5x]" + rest.replace('mode = "git-clone"', 'mode = "pip-vcs"', 1))
    use_manifest(manifest)
    try:
        plan = make_plan(PlanOptions(targets=("upstream-pax", "upstream-t5x"),
                                     date=datetime.date.fromisoformat(DATE))).plan
    finally:
        use_manifest(None)
    assert plan["target"]["upstream-pax-mealkit"]["contexts"]["patches"] == str(tmp_path)
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "upstream-pax", "--target", "upstream-t5x", "--date", DATE, "--format", fmt, "-o", str(out),
        cwd=tmp_path, check=True, env=dict(os.environ, BAKE_PLAN_SOURCES=str(manifest)))
    assert_resolves_to_plan(buildx.print_plan(out, cwd=tmp_path), plan)


@pytest.mark.buildx
def test_hcl_and_json_resolve_identically(buildx, cli, tmp_path):
    for fmt in ("hcl", "json"):
        cli("--target", "upstream-pax", "--target", "xla-ci", "--date", DATE, "--format", fmt,
            "-o", str(tmp_path / f"plan.{fmt}"), cwd=tmp_path, check=True)
    assert buildx.print_plan(tmp_path / "plan.hcl") == buildx.print_plan(tmp_path / "plan.json")


@pytest.mark.buildx
def test_acceptance_print_upstream_pax_from_default_file(buildx_new, cli, tmp_path):
    """The first plan: bake-plan in an empty directory, then `docker buildx bake --print upstream-pax`."""
    cli("--target", "upstream-pax", cwd=tmp_path, check=True)
    assert (tmp_path / "docker-bake.hcl").is_file()
    printed = buildx_new.print_plan(tmp_path / "docker-bake.hcl", ["upstream-pax"], cwd=tmp_path)
    names = set(printed["target"])
    assert {"base-mealkit", "jax-mealkit", "upstream-pax-mealkit", "upstream-pax"} <= names
    assert printed["target"]["upstream-pax"]["target"] == "final"
    assert printed["target"]["upstream-pax-mealkit"]["contexts"]["base"] == "target:jax-mealkit"


HOSTILE = {
    "DOLLAR_BRACE": "${HOME} and $${HOME} and $$${HOME}",
    "PERCENT_BRACE": "%{ if true }x%{ endif } %%{",
    "QUOTES": 'say "hi" \'there\'',
    "BACKSLASHES": "C:\\path\\n\\\\ end\\",
    "NEWLINES": "line one\nline two\r\n\ttabbed",
    "UNICODE": "naïve ☃ 日本",
    "LONE": "$ % { } $$ %%",
}


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_hostile_strings_come_back_exactly(buildx, cli, make_plugin, tmp_path, fmt):
    site = make_plugin(f"""
from bake import Stage, hookimpl
from bake.resources import stage_dir
HOSTILE = {HOSTILE!r}
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="hostile-0.1", image="hostile", parent="jax", context=stage_dir("jax"),
                  args=HOSTILE, labels={{"org.example." + k.lower(): v for k, v in HOSTILE.items()}},
                  requirements=("numpy<2", "--extra-index-url https://x.example/TOKENISH"))]
""", name="hostile")
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "hostile-0.1", "--format", fmt, "-o", str(out), pythonpath=[site], check=True)
    printed = buildx.print_plan(out, ["hostile-0_1"], cwd=tmp_path)
    target = printed["target"]["hostile-0_1-mealkit"]  # "." sanitised: buildx takes [a-zA-Z0-9_-]+
    for key, value in HOSTILE.items():
        assert target["args"][key] == value, key
        assert target["labels"]["org.example." + key.lower()] == value, key
    assert target["args"]["REQUIREMENTS"] == "numpy<2\n--extra-index-url https://x.example/TOKENISH"
    assert printed["target"]["hostile-0_1"]["contexts"]["mealkit"] == "target:hostile-0_1-mealkit"
