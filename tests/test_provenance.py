"""Provenance and SBOM in the plan: ``--provenance``, ``--sbom`` and ``--sbom-generator`` (and their
configuration keys) set bake's ``attest`` on every target that exports an image, read back by the
real buildx (0.29 and 0.13), never on a cache-only target; bad values are one line, exit 2."""

from __future__ import annotations

import datetime
import json
import os

import pytest
from test_errors import assert_one_line_error, one_line_error

from bake.api import make_plan
from bake.plan.compose import DEFAULT_SBOM_GENERATOR, PlanOptions, attestations

DATE = "2026-11-29"
GENERATOR = "localhost:5555/acme/sbom-generator:1"
PROVENANCE = "type=provenance,mode=max"
SBOM = f"type=sbom,generator={GENERATOR}"


def _plan(cli, cwd, *args, env=None) -> dict:
    proc = cli("plan", "--date", DATE, "--format", "json", "-o", "-", *args, cwd=cwd, env=env, check=True)
    return json.loads(proc.stdout)


def test_attestations_are_bakes_attest_entries():
    assert attestations(False, None) == ()
    assert attestations(True, None) == (PROVENANCE,)
    assert attestations(False, GENERATOR) == (SBOM,)
    assert attestations(True, GENERATOR) == (PROVENANCE, SBOM)


def test_without_the_flags_no_target_has_attest(cli, tmp_path):
    plan = _plan(cli, tmp_path, "--target", "jax")
    assert not [name for name, target in plan["target"].items() if "attest" in target]


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_provenance_and_sbom_reach_every_image_target_through_buildx(buildx, cli, tmp_path, fmt):
    """The built-in jax chain: every target is tagged but te (a wheel builder used through
    ``uses``), which builds cache-only and gets no attest; buildx reads back what was written."""
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "jax", "--date", DATE, "--provenance", "--sbom", "--sbom-generator", GENERATOR,
        "--format", fmt, "-o", str(out), cwd=tmp_path, check=True)
    printed = buildx.print_plan(out, cwd=tmp_path)["target"]
    as_dicts = [dict(sorted(p.split("=", 1) for p in entry.split(","))) for entry in (PROVENANCE, SBOM)]
    tagged = {name for name, target in printed.items() if target.get("tags")}
    assert tagged == {"base-mealkit", "base", "jax-mealkit", "jax"}
    for name in tagged:
        assert printed[name]["attest"] == as_dicts, name
    assert printed["te"]["output"] == [{"type": "cacheonly"}]
    assert "attest" not in printed["te"]


def test_the_same_plan_through_the_library():
    plan = make_plan(PlanOptions(targets=("jax",), date=datetime.date.fromisoformat(DATE),
                                 attest=attestations(True, None))).plan
    assert {n for n, t in plan["target"].items() if "attest" in t} == {"base-mealkit", "base", "jax-mealkit", "jax"}
    assert plan["target"]["jax"]["attest"] == [PROVENANCE]


def test_configuration_keys_and_flags_beating_them(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text(
        f'targets = ["base"]\nprovenance = true\nsbom = true\nsbom-generator = "{GENERATOR}"\n')
    plan = _plan(cli, tmp_path)
    assert plan["target"]["base"]["attest"] == [PROVENANCE, SBOM]
    assert _plan(cli, tmp_path, "--no-provenance")["target"]["base"]["attest"] == [SBOM]
    assert "attest" not in _plan(cli, tmp_path, "--no-provenance", "--no-sbom")["target"]["base"]
    other = "localhost:5555/other/generator:2"
    assert _plan(cli, tmp_path, "--sbom-generator", other)["target"]["base"]["attest"] == \
        [PROVENANCE, f"type=sbom,generator={other}"]
    shown = json.loads(cli("config", "--format", "json", cwd=tmp_path, check=True).stdout)["settings"]
    assert shown["provenance"] == {"value": True, "source": "bake-plan.toml"}
    assert shown["sbom-generator"] == {"value": GENERATOR, "source": "bake-plan.toml"}


def test_the_default_generator_is_buildkits_own(cli, tmp_path):
    plan = _plan(cli, tmp_path, "--target", "base", "--sbom")
    assert plan["target"]["base"]["attest"] == [f"type=sbom,generator={DEFAULT_SBOM_GENERATOR}"]
    assert DEFAULT_SBOM_GENERATOR == "docker/buildkit-syft-scanner"


def test_a_plugins_own_attest_is_kept(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(stage, name, flavor, target):
    if name == "base":
        target["attest"] = ["type=provenance,mode=min"]
""", name="attester")
    env = dict(os.environ, PYTHONPATH=str(site))
    plan = _plan(cli, tmp_path, "--target", "base", "--provenance", env=env)
    assert plan["target"]["base"]["attest"] == ["type=provenance,mode=min"]
    assert plan["target"]["base-mealkit"]["attest"] == [PROVENANCE]


def test_a_plugin_leaving_an_attest_bake_cannot_read_is_one_line(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(stage, name, flavor, target):
    if name == "base":
        target["attest"] = "type=provenance,mode=max"
""", name="attester")
    proc = cli("--target", "base", "--provenance", cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(site)))
    assert_one_line_error(proc, "plugin 'attester'", "target 'base'", "attest", "is not a list", cwd=tmp_path)


def test_sbom_generator_without_an_sbom_is_one_line(cli, tmp_path):
    proc = cli("--target", "base", "--sbom-generator", GENERATOR, cwd=tmp_path)
    assert_one_line_error(proc, "--sbom-generator is only used with an SBOM: add --sbom", cwd=tmp_path)


@pytest.mark.parametrize("value", ["Acme/Scanner", "localhost:5555/scanner:", "a b"])
def test_a_bad_sbom_generator_is_one_line(cli, tmp_path, value):
    proc = cli("--target", "base", "--sbom", "--sbom-generator", value, cwd=tmp_path)
    assert_one_line_error(proc, "--sbom-generator", "is not an image reference", cwd=tmp_path)


def test_bad_provenance_keys_in_the_configuration_name_the_file_and_key(cli, tmp_path):
    config = tmp_path / "bake-plan.toml"
    config.write_text('targets = ["base"]\nsbom-generator = "Not/An/Image"\n')
    assert "bake-plan.toml: sbom-generator: 'Not/An/Image' is not an image reference" in \
        one_line_error(cli("plan", cwd=tmp_path))
    config.write_text('targets = ["base"]\nprovenance = "yes"\n')
    assert one_line_error(cli("plan", cwd=tmp_path)) == "bake-plan.toml: provenance: expected true or false, got a string"


def test_the_sitrep_does_not_take_the_sbom_generator_for_a_base_image():
    """BuildKit pulls the generator, so buildx's provenance lists it among the materials."""
    from bake.plan.compose import sbom_generators
    from bake.run.sitrep import base_images

    def material(name, version, digest):
        return {"uri": f"pkg:docker/{name}@{version}?platform=linux%2Famd64", "digest": {"sha256": digest}}

    meta = {"buildx.build.provenance": {"materials": [
        material("localhost:5555/stand-in/busybox", "latest", "a" * 64),
        material("docker/buildkit-syft-scanner", "latest", "b" * 64)]}}
    target = {"attest": [PROVENANCE, f"type=sbom,generator={DEFAULT_SBOM_GENERATOR}"]}
    assert sbom_generators(target) == ["docker.io/docker/buildkit-syft-scanner:latest"]
    assert base_images(meta, sbom_generators(target)) == [
        {"image": "localhost:5555/stand-in/busybox:latest", "platform": "linux/amd64", "digest": "sha256:" + "a" * 64}]
    assert len(base_images(meta)) == 2
