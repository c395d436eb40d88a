"""The plugin authors' example (examples/bake-plan-example-plugin) installs with pip, adds its stage
and tag policy to real plans read back by buildx, and its own pytest suite (what docs/plugins.md
tells authors to write, on bake.testing) passes against the installed package."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

EXAMPLE = ROOT / "examples" / "bake-plan-example-plugin"
REGISTRY = "ghcr.io/acme"
REPO = f"{REGISTRY}/jax-notebook"


@pytest.fixture(scope="module")
def example_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("example-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(EXAMPLE)],
                   check=True, timeout=300)
    return site


def test_example_plugin_shows_in_stages(cli, example_site):
    out = cli("stages", pythonpath=[example_site], check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("notebook "))
    assert row.split() == ["notebook", "example-notebook", "jax", "linux/amd64,linux/arm64"]


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_example_plugin_in_a_plan_read_by_buildx(cli, buildx, example_site, tmp_path, fmt):
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "notebook", "--date", "2026-11-29", "--format", fmt, "-o", str(out), "--registry", REGISTRY,
        pythonpath=[example_site], cwd=tmp_path, check=True)
    printed = buildx.print_plan(out, ["notebook"], cwd=tmp_path)
    final, mealkit = printed["target"]["notebook"], printed["target"]["notebook-mealkit"]
    assert final["tags"] == [f"{REPO}:latest", f"{REPO}:2026.11.29"]  # the plugin's tag policy
    assert mealkit["tags"] == [f"{REPO}:mealkit", f"{REPO}:mealkit-2026-11-29"]  # the default policy
    assert mealkit["contexts"] == {"base": "target:jax-mealkit"}
    assert mealkit["context"] == str(example_site / "bake_plan_example" / "context")  # shipped in the wheel
    assert mealkit["args"]["REQUIREMENTS"] == "jupyterlab>=4,<5"
    assert final["target"] == "final" and mealkit["target"] == "mealkit"
    assert "jax-mealkit" in printed["target"]


def test_example_plugins_own_tests_pass(example_site, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(example_site), PYTHONDONTWRITEBYTECODE="1")  # leave the tree clean
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "8 passed" in proc.stdout  # the last one through bake-plan's pytest fixtures (pytest11)
    installed = subprocess.run([sys.executable, "-c", "import bake_plan_example; print(bake_plan_example.__file__)"],
                               env=env, capture_output=True, text=True, check=True).stdout
    assert installed.startswith(str(example_site))  # the tests ran against the installed package
