"""A third-party plugin distribution (tests/packages/bake-plan-leaf), installed with pip, adds a
stage through the ``bake_plan`` entry point: it shows in ``bake-plan stages`` and in a plan."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.fixture(scope="module")
def leaf_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("leaf-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
         str(ROOT / "tests" / "packages" / "bake-plan-leaf")],
        check=True, timeout=300,
    )
    return site


def test_installed_plugin_shows_in_stages(cli, leaf_site):
    out = cli("stages", pythonpath=[leaf_site], check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("my-leaf "))
    assert row.split() == ["my-leaf", "leaf", "jax", "linux/amd64,linux/arm64"]
    assert "upstream-pax" in out


@pytest.mark.buildx
def test_installed_plugin_stage_in_a_plan(cli, leaf_site, buildx, tmp_path):
    out = tmp_path / "plan.json"
    cli("--target", "my-leaf", "--format", "json", "-o", str(out), "--date", "2026-11-29",
        pythonpath=[leaf_site], check=True)
    plan = json.loads(out.read_text())
    assert list(plan["target"])[-2:] == ["my-leaf-mealkit", "my-leaf"]
    printed = buildx.print_plan(out, ["my-leaf"], cwd=tmp_path)
    leaf = printed["target"]["my-leaf-mealkit"]
    assert leaf["contexts"] == {"base": "target:jax-mealkit"}
    assert leaf["args"]["LEAF_GREETING"] == "hello ${USER} %{ if } from the leaf"
    assert leaf["args"]["REQUIREMENTS"] == "numpy<2"
    assert leaf["tags"] == ["ghcr.io/acme/my-leaf:mealkit", "ghcr.io/acme/my-leaf:mealkit-2026-11-29"]  # its own registry
    assert printed["target"]["jax-mealkit"]["tags"][0] == "ghcr.io/nvidia/jax:mealkit"  # the built-ins keep theirs
    assert leaf["context"] == str(leaf_site / "bake_plan_leaf" / "context")
    assert "jax-mealkit" in printed["target"]
