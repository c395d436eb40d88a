"""What a plugin author meets: a registry of their own or the configured one, the
``bake-scripts`` named context on any base, ``bake.testing`` naming plugins as the command line
does, a warning for an unmarked ``bake_plan_*`` function, and a broken plugin's error saying how
to run without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest
from test_errors import STAGE_IMPORTS, assert_one_line_error, one_line_error

from bake import Stage, hookimpl
from bake.errors import StageError
from bake.plan.plugins import PluginWarning
from bake.resources import stage_dir, stages_dir
from bake.settings.merge import ENV_PLUGINS_DISABLE
from bake.testing import compose_plan, plan_for, plugin_manager

NO_REGISTRY = STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    return [Stage(name="mine", image="mine", parent="jax", context=stage_dir("jax"))]
"""


# --- the registry -------------------------------------------------------------------------------

def test_a_third_party_stage_without_a_registry_is_refused_naming_plugin_and_stage(cli, make_plugin, tmp_path):
    site = make_plugin(NO_REGISTRY, name="noreg")
    proc = cli("--target", "mine", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'noreg', stage 'mine': no registry for its tags and cache: pass --registry "
                          "(or set registry in the configuration)", cwd=tmp_path)


def test_commands_that_name_no_image_need_no_registry(cli, make_plugin, tmp_path):
    """graph, matrix, lock and wheelhouse show no image name: a stage without a registry is no
    mistake there (and those commands take no --registry to give one)."""
    site = make_plugin(NO_REGISTRY, name="noreg")
    graph = cli("graph", "--target", "mine", cwd=tmp_path, pythonpath=[site], check=True)
    assert "mine" in graph.stdout
    matrix = cli("matrix", "--target", "mine", "--format", "json", cwd=tmp_path, pythonpath=[site], check=True)
    assert "mine" in [job["stage"] for job in json.loads(matrix.stdout)["include"]]
    listed = cli("stages", "--format", "json", cwd=tmp_path, pythonpath=[site], check=True)
    assert {s["name"]: s["image"] for s in json.loads(listed.stdout)}["mine"] == "mine"
    (tmp_path / "bake-plan.toml").write_text('registry = "ghcr.io/acme"\n')
    listed = cli("stages", "--format", "json", cwd=tmp_path, pythonpath=[site], check=True)
    assert {s["name"]: s["image"] for s in json.loads(listed.stdout)}["mine"] == "ghcr.io/acme/mine"


def test_a_third_party_stage_takes_the_configured_registry(cli, make_plugin, tmp_path):
    site = make_plugin(NO_REGISTRY, name="noreg")
    flag = cli("--target", "mine", "--registry", "localhost:5000/team", "-o", "-", "--format", "json",
               cwd=tmp_path, pythonpath=[site], check=True)
    assert json.loads(flag.stdout)["target"]["mine"]["tags"][0] == "localhost:5000/team/mine:latest"
    (tmp_path / "bake-plan.toml").write_text('registry = "ghcr.io/acme"\n')
    configured = cli("--target", "mine", "-o", "-", "--format", "json", cwd=tmp_path, pythonpath=[site], check=True)
    targets = json.loads(configured.stdout)["target"]
    assert targets["mine"]["tags"][0] == "ghcr.io/acme/mine:latest"
    assert targets["mine"]["cache-to"][0].startswith("type=registry,ref=ghcr.io/acme/mine:cache-silo-mine")


def test_built_in_stages_keep_their_registry_and_a_stage_its_own():
    class Own:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(name="mine", image="mine", parent="jax", context=stage_dir("jax"), registry="ghcr.io/acme")]

    class Bare:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(name="mine", image="mine", parent="jax", context=stage_dir("jax"))]

    targets = plan_for(Own(), targets=["mine"])["target"]
    assert targets["mine"]["tags"][0] == "ghcr.io/acme/mine:latest"
    assert targets["jax"]["tags"][0] == "ghcr.io/nvidia/jax:latest"
    with pytest.raises(StageError, match="plugin 'Bare', stage 'mine': no registry"):
        plan_for(Bare(), targets=["mine"])


# --- bake-scripts -------------------------------------------------------------------------------

ROOT_USING_SCRIPTS = """ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE} AS mealkit
COPY --from=bake-scripts --chmod=0755 pip-finalize.sh /usr/local/bin/bake-pip-finalize
FROM mealkit AS final
"""


def test_bake_scripts_go_to_every_stage_whose_dockerfile_uses_them(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "Dockerfile").write_text(ROOT_USING_SCRIPTS)
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "Dockerfile").write_text(ROOT_USING_SCRIPTS)

    class Family:
        @hookimpl
        def bake_plan_stages(self):
            common = dict(registry="localhost:5000/fam", base_image="python:3.11-slim-bookworm")
            return [Stage(name="r", image="r", context=tmp_path / "root", **common),
                    Stage(name="leaf", image="leaf", parent="r", context=stage_dir("jax"), registry="localhost:5000/fam"),
                    Stage(name="own", image="own", context=tmp_path / "own", contexts={"bake-scripts": str(tmp_path)},
                          **common)]

    targets = plan_for(Family(), targets=["leaf", "own"], builtins=False)["target"]
    scripts = str(stages_dir() / "scripts")
    assert targets["r-mealkit"]["contexts"]["bake-scripts"] == scripts
    assert targets["r"]["contexts"]["bake-scripts"] == scripts
    assert "bake-scripts" not in targets["leaf-mealkit"]["contexts"]  # the jax Dockerfile does not use them
    assert targets["own-mealkit"]["contexts"]["bake-scripts"] == str(tmp_path)  # its own copy wins
    assert sorted(p.name for p in (stages_dir() / "scripts").iterdir()) == [
        "check-python.sh", "fetch-source.sh", "pip-finalize.sh", "write-requirements.sh"]


def test_the_built_in_base_takes_its_scripts_from_bake_scripts():
    targets = plan_for(targets=["base"])["target"]
    assert targets["base-mealkit"]["contexts"] == {"bake-scripts": str(stages_dir() / "scripts")}
    assert "COPY --from=bake-scripts" in (stage_dir("base") / "Dockerfile").read_text()


# --- bake.testing names plugins as the command line does ----------------------------------------

def test_bake_testing_names_an_installed_plugin_by_its_entry_point(cli, make_plugin, tmp_path):
    site = make_plugin(NO_REGISTRY, name="named-by-ep")
    module = next(p.stem for p in site.glob("*.py"))
    code = (f"import {module} as m\nfrom bake.testing import compose_plan\n"
            "c = compose_plan(m, targets=['mine'], registry='localhost:5000/x')\n"
            "print(c.stages['mine'].plugin)\n"
            "from bake.testing import plugin_manager\n"
            "print(plugin_manager(m).get_name(m))\n")
    env = dict(os.environ, PYTHONPATH=str(site))
    env.pop(ENV_PLUGINS_DISABLE, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["named-by-ep", "named-by-ep"]
    row = next(line for line in cli("stages", pythonpath=[site], check=True).stdout.splitlines()
               if line.startswith("mine "))
    assert row.split()[1] == "named-by-ep"  # the same name on the command line


def test_an_inline_plugin_is_named_by_its_class():
    class Vendor:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(name="v", image="v", parent="jax", context=stage_dir("jax"))]

    assert compose_plan(Vendor(), targets=["v"], registry="localhost:5000/x").stages["v"].plugin == "Vendor"


# --- an unmarked bake_plan_* function -----------------------------------------------------------

UNMARKED = STAGE_IMPORTS + """
def bake_plan_stages():
    return [Stage(name="never", image="never", parent="jax", context=stage_dir("jax"))]
"""


def test_an_unmarked_hook_function_is_one_warning_line(cli, make_plugin, tmp_path):
    site = make_plugin(UNMARKED, name="unmarked")
    proc = cli("stages", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "bake-plan: warning: plugin 'unmarked': bake_plan_stages is not marked @hookimpl, so bake-plan never "
        "calls it (from bake import hookimpl; @hookimpl above the def)"]
    assert "never " not in proc.stdout


def test_an_unmarked_method_warns_in_tests_too():
    class Half:
        @hookimpl
        def bake_plan_stages(self):
            return []

        def bake_plan_tags(self, stage, flavor, date):
            return ["forgotten"]

    with pytest.warns(PluginWarning, match="plugin 'Half': bake_plan_tags is not marked @hookimpl"):
        plugin_manager(Half())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plugin_manager()  # bake-plan's own plugins mark every hook


# --- a broken plugin says how to run without it -------------------------------------------------

HINT = ' (to run without it: plugins.disable = ["{0}"] in the configuration, or {1}={0})'


@pytest.mark.parametrize("source, needle", [
    ("import not_a_module_anywhere\n", "failed to load: ModuleNotFoundError"),
    (STAGE_IMPORTS + "@hookimpl\ndef bake_plan_stages():\n    raise RuntimeError('no network')\n",
     "raised RuntimeError in bake_plan_stages: no network"),
    (STAGE_IMPORTS + "@hookimpl\ndef bake_plan_tags(stage):\n    raise KeyError('x')\n",
     "raised KeyError in bake_plan_tags for stage 'base'"),
], ids=["import-error", "raises-in-stages", "raises-in-a-policy"])
def test_a_broken_plugin_names_how_to_disable_it(cli, make_plugin, tmp_path, source, needle):
    site = make_plugin(source, name="broken")
    env = {k: v for k, v in os.environ.items() if k != ENV_PLUGINS_DISABLE}
    command = ("--target", "base") if "policy" in needle or "tags" in needle else ("stages",)
    line = one_line_error(cli(*command, cwd=tmp_path, pythonpath=[site], env=env))
    assert needle in line
    assert line.startswith("plugin 'broken'") and line.endswith(HINT.format("broken", ENV_PLUGINS_DISABLE)), line
    # What the line says works: the same command, with the plugin disabled through the environment.
    proc = cli(*command, cwd=tmp_path, pythonpath=[site], env=dict(env, **{ENV_PLUGINS_DISABLE: "broken"}))
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "docker-bake.hcl").unlink(missing_ok=True)
    (tmp_path / "bake-plan.toml").write_text('[plugins]\ndisable = ["broken"]\n')
    assert cli(*command, cwd=tmp_path, pythonpath=[site], env=env).returncode == 0


# --- the pytest fixtures ----------------------------------------------------------------------

def _pytest_in(directory, ini: str) -> str:
    """Run pytest (with bake-plan's fixtures, loaded through the pytest11 entry point) on a test
    asking for ``bake_plan_plan`` in a project whose ``pyproject.toml`` holds ``ini``."""
    (directory / "pyproject.toml").write_text(ini)
    (directory / "test_it.py").write_text("def test_plan(bake_plan_plan):\n    assert bake_plan_plan['target']\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", ENV_PLUGINS_DISABLE))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_it.py"],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:]
    return proc.stdout


def test_the_fixtures_say_what_is_missing(tmp_path):
    (tmp_path / "none").mkdir()
    out = _pytest_in(tmp_path / "none", "[project]\nname = 'x'\n\n[tool.pytest.ini_options]\n")
    assert ("bake-plan fixtures: no plugin under test: declare [project.entry-points.bake_plan] in pyproject.toml, "
            "or set the ini option bake_plan_plugins") in out
    (tmp_path / "missing").mkdir()
    out = _pytest_in(tmp_path / "missing", "[tool.pytest.ini_options]\nbake_plan_plugins = ['not-installed']\n")
    assert "no installed bake_plan entry point named not-installed" in out
    assert "pip install the plugin first" in out
