"""Options and commands: each bad option or command is one line naming the option (or
the configuration key) it came from, exit status 2, nothing written; the subcommands offer only
the options they use; a plan file's name is one buildx reads in the plan's format (checked with
the real buildx); test runs keep stray installed plugins out; one reader of Dockerfile
instructions (checked against BuildKit's own reading).

The rows are in docs/errors.md, "Options and commands".
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, stray_plugins
from test_errors import one_line_error as one_line

from bake.api import dockerfile_text, make_plan
from bake.cli import COMMANDS, parse_args
from bake.plan import dockerfile
from bake.plan.compose import PlanOptions, uses_named_context
from bake.plan.stage import Stage
from bake.run.sitrep import step_owner
from bake.settings.merge import ENV_PLUGINS_DISABLE
from bake.testing import DATE, plan_for, plan_text

KNOWN = "base, jax, te, upstream-pax, upstream-t5x, xla-ci"
ALL_COMMANDS = ", ".join(COMMANDS)


# --- an unknown target says where it came from ------------------------------------------------

@pytest.mark.parametrize("command", ["plan", "matrix", "graph", "lock", "wheelhouse", "publish"])
def test_an_unknown_target_names_the_option_or_the_key_it_came_from(cli, tmp_path, command):
    flag = cli(command, "--target", "upstream-paxx", cwd=tmp_path)
    assert one_line(flag) == ("--target: unknown target 'upstream-paxx'; did you mean 'upstream-pax' or "
                              "'upstream-t5x' or 'upstream-pax-mealkit'?")
    assert list(tmp_path.iterdir()) == []

    (tmp_path / "bake-plan.toml").write_text('targets = ["jax", "nosuch"]\n')
    assert one_line(cli(command, cwd=tmp_path)) == f"bake-plan.toml: targets: unknown target 'nosuch'; known stages: {KNOWN}"
    (tmp_path / "bake-plan.toml").unlink()

    (tmp_path / "pyproject.toml").write_text('[tool.bake-plan]\ntargets = ["jaxx"]\n')
    assert one_line(cli(command, cwd=tmp_path)) == ("pyproject.toml: [tool.bake-plan] targets: unknown target 'jaxx'; "
                                                    "did you mean 'jax'?")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]


# --- an empty value is a mistake, not "not given" ----------------------------------------------

@pytest.mark.parametrize("args, line", [
    (["--target", ""], "--target: empty target name"),
    (["--target", " "], "--target: empty target name"),
    (["--target", "jax,,base"], "--target: empty target name in 'jax,,base'"),
    (["matrix", "--target", "jax,"], "--target: empty target name in 'jax,'"),
    (["--target", "jax", "-o", ""], "-o: empty path"),
    (["--target", "jax", "--output", ""], "-o: empty path"),
    (["build", "--target", "jax", "-o", ""], "-o: empty path"),
    (["graph", "--target", "jax", "-o", ""], "-o: empty path"),
    (["wheelhouse", "--target", "jax", "-o", ""], "-o: empty path"),
    (["--target", "jax", "--config", ""], "--config: empty path"),
    (["--target", "jax", "--sources", ""], "--sources: empty path"),
    (["--target", "jax", "--locks-dir", ""], "--locks-dir: empty path"),
    (["--target", "jax", "--parent-report", ""], "--parent-report: empty path"),
    (["--target", "jax", "--metadata-bake-file", ""], "--metadata-bake-file: empty path"),
    (["--target", "jax", "--metadata-targets", ""], "--metadata-targets: empty target name"),
    (["--target", "jax", "--not-secret", ""], "--not-secret: empty name"),
    (["build", "--target", "jax", "--metadata-file", ""], "--metadata-file: empty path"),
    (["build", "--target", "jax", "--sitrep-dir", ""], "--sitrep-dir: empty path"),
    (["build", "--target", "jax", "--builder", ""], "--builder: empty builder name"),
    (["lock", "--target", "jax", "--python", ""], "--python: empty interpreter"),
    (["lock", "--target", "jax", "--index-url", ""], "--index-url: empty URL"),
    (["wheelhouse", "--target", "jax", "--find-links", ""], "--find-links: empty URL"),
    (["bump", ""], "bump: empty source name"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_an_empty_option_value_is_one_line_naming_the_option(cli, tmp_path, args, line):
    assert one_line(cli(*args, cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == [], "no file may be written on error"


@pytest.mark.parametrize("value, line", [
    ("file://otherhost/x", "--find-links file://otherhost/x: a file: URL names this machine's files (file:///path), "
                           "not otherhost's"),
    ("/etc/hostname", "--find-links /etc/hostname: not a directory (pip and uv read a directory of archives, "
                      "or an HTML page of links)"),
    ("file:wheels", "--find-links file:wheels: a file: URL's path is absolute (file:///path); give a relative "
                    "directory as a plain path"),
])
def test_a_find_links_uv_cannot_read_is_one_line(cli, tmp_path, value, line):
    assert one_line(cli("lock", "--target", "jax", "--no-index", "-f", value, cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag", ["-i", "--extra-index-url"])
@pytest.mark.parametrize("value, why", [
    ("notaurl", "not a URL (http(s)://HOST/simple) nor a directory"),
    ("https://", "a URL names its host (https://HOST/simple)"),
    ("ftp://mirror.example/simple", "not a URL pip or uv reads (http, https or file)"),
])
def test_an_index_url_that_is_no_url_nor_directory_is_one_line_before_the_resolver(cli, tmp_path, flag, value, why):
    """uv took ``-i notaurl`` as a path and answered "no distribution found" (exit 1): checked with
    the other options, exit 2; a directory laid out as a simple index passes, as pip reads one."""
    option = "--index-url" if flag == "-i" else flag
    assert one_line(cli("lock", "--target", "jax", flag, value, cwd=tmp_path)) == f"{option} {value}: {why}"
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "simple").mkdir()
    proc = cli("lock", "--target", "jax", flag, "simple", "--locks-dir", "locks", cwd=tmp_path)
    assert f"{option} simple:" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["lock", "wheelhouse"])
@pytest.mark.parametrize("given", ["missing", "file:///nonexistent/wheels", "-f"])
def test_a_find_links_path_that_is_not_there_is_one_line_before_anything_runs(cli, tmp_path, command, given):
    """pip would skip it with a warning and uv stop on it in its own words (exit 1), after the
    plugins load; a local ``-f`` path, or a ``file:`` URL's, is checked with the other options."""
    flag = "-f" if given == "-f" else "--find-links"
    value = "missing" if given == "-f" else given
    assert one_line(cli(command, "--target", "jax", "--no-index", flag, value, cwd=tmp_path)) == \
        f"--find-links {value}: no such directory or file"
    assert list(tmp_path.iterdir()) == [], "no file may be written on error"
    (tmp_path / "wheels").mkdir()  # a directory that is there, by path or file: URL, passes this check
    (tmp_path / "links.html").write_text("<html></html>\n")
    wheels = tmp_path / "wheels"
    for there in ("wheels", wheels.as_uri(), f"file:{wheels}", f"file://localhost{wheels}", f"FILE://{wheels}",
                  f"file://LOCALHOST{wheels}",
                  "links.html"):
        proc = cli(command, "--target", "nosuchtarget", "--no-index", flag, there, cwd=tmp_path)
        assert proc.returncode == 2 and "--find-links" not in proc.stderr and "nosuchtarget" in proc.stderr


def test_an_empty_name_in_the_configuration_names_the_key(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('targets = ["jax,,base"]\n')
    assert one_line(cli(cwd=tmp_path)) == "bake-plan.toml: targets: empty target name in 'jax,,base'"
    assert [p.name for p in tmp_path.iterdir()] == ["bake-plan.toml"]


# --- the plan file's name and format -----------------------------------------------------------

@pytest.mark.parametrize("args, line", [
    (["--format", "json", "-o", "x.hcl"],
     "-o x.hcl: buildx reads a file ending in .hcl as HCL, but --format json writes JSON "
     "(name it x.json or pass --format hcl)"),
    (["--format", "hcl", "-o", "x.json"],
     "-o x.json: buildx reads a file ending in .json as JSON, but --format hcl writes HCL "
     "(name it x.hcl or pass --format json)"),
    (["-o", "plan.yaml"],
     "-o plan.yaml: buildx reads a file ending in .yaml as a Compose file, but --format hcl writes HCL "
     "(name it plan.hcl)"),
    (["build", "--format", "json", "-o", "ci/plan.yml"],
     "-o ci/plan.yml: buildx reads a file ending in .yml as a Compose file, but --format json writes JSON "
     "(name it ci/plan.json)"),
], ids=["json-as-hcl", "hcl-as-json", "yaml", "build-yml"])
def test_a_plan_file_name_buildx_would_read_as_another_format_is_refused(cli, tmp_path, args, line):
    args = args if args[0] == "build" else ["plan", *args]
    assert one_line(cli(args[0], "--target", "jax", *args[1:], cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == []


def _buildx_print(buildx, path, cwd):
    return subprocess.run(buildx.argv + ["bake", "-f", str(path), "--print"], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_buildx_reads_a_plan_by_its_name_ending(buildx, tmp_path):
    """Why the names above are refused, from the real buildx (0.29 and 0.13): a .hcl file is read
    only as HCL, a .json file only as JSON, a .yaml file as Compose; any other name either way."""
    texts = {fmt: plan_text(targets=["base"], fmt=fmt) for fmt in ("hcl", "json")}
    for name, readable in [("x.hcl", {"hcl"}), ("x.json", {"json"}), ("x.yaml", set()), ("x.yml", set()),
                           ("plan", {"hcl", "json"}), ("x.txt", {"hcl", "json"}), ("x.HCL", {"hcl", "json"})]:
        for fmt, text in texts.items():
            path = tmp_path / name
            path.write_text(text)
            proc = _buildx_print(buildx, path, tmp_path)
            assert (proc.returncode == 0) == (fmt in readable), (name, fmt, proc.stderr)


def test_the_plan_file_name_picks_the_format_and_buildx_reads_it(cli, buildx, tmp_path):
    cli("--target", "base", "-o", "p.json", cwd=tmp_path, check=True)  # no --format: the name says JSON
    assert json.loads((tmp_path / "p.json").read_text())["group"]["default"]["targets"] == ["base-mealkit", "base"]
    cli("--target", "base", "--format", "json", "-o", "plan", cwd=tmp_path, check=True)
    cli("--target", "base", "-o", "plan.txt", cwd=tmp_path, check=True)
    assert (tmp_path / "plan.txt").read_text().startswith("# docker-bake.hcl")
    for name in ("p.json", "plan", "plan.txt"):
        printed = buildx.print_plan(tmp_path / name, cwd=tmp_path)
        assert sorted(printed["target"]) == ["base", "base-mealkit"], name


# --- --builder ----------------------------------------------------------------------------------

QUICK = "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nRUN echo built > /built\n"


@pytest.mark.engine
def test_an_unknown_builder_is_exit_2_before_anything_is_built(cli, engine, make_plugin, tmp_path):
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="quick", image="quick", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline={QUICK!r})]
""", name="builder-check")
    args = ["build", "--target", "quick", "--format", "json", "-o", "plan.json", "--sitrep-dir", "sitrep",
            "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest"]
    proc = cli(*args, "--builder", "nosuch", cwd=tmp_path, pythonpath=[site])
    line = one_line(proc)
    assert line.startswith("--builder 'nosuch': no builder \"nosuch\" found (builders: "), line
    assert "default" in line.split("(builders: ", 1)[1]
    assert not (tmp_path / "sitrep" / "sitrep.json").exists(), "nothing was built, so no sitrep"
    # buildx's own variable for the builder: the same mistake, the same one line (not a failed build)
    proc = cli(*args, cwd=tmp_path, pythonpath=[site], env=dict(os.environ, BUILDX_BUILDER="nosuch"))
    assert one_line(proc).startswith("BUILDX_BUILDER 'nosuch': no builder \"nosuch\" found (builders: ")
    assert not (tmp_path / "sitrep" / "sitrep.json").exists()
    # publish's registry checks run buildx too (as do an image test's, through the same engine.image_digest)
    proc = cli("publish", "--target", "quick", "--registry", f"{engine.registry}/nowhere", cwd=tmp_path,
               pythonpath=[site], env=dict(os.environ, BUILDX_BUILDER="nosuch"))
    assert one_line(proc).startswith("BUILDX_BUILDER 'nosuch': no builder \"nosuch\" found")
    # lock --in-image builds too: the same check, the same one line, before anything is built
    proc = cli("lock", "--in-image", "--target", "jax", "--builder", "nosuch", "--locks-dir", "locks",
               cwd=tmp_path, pythonpath=[site])
    assert one_line(proc).startswith("--builder 'nosuch': no builder \"nosuch\" found (builders: "), proc.stderr
    assert not (tmp_path / "locks").exists()

    done = cli(*args, "--builder", "default", cwd=tmp_path, pythonpath=[site])
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())["outcome"] == "pass"


# --- commands -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, line", [
    (["completions"], f"unknown command 'completions'; did you mean 'completion'? (commands: {ALL_COMMANDS})"),
    (["bulid", "--target", "jax"], f"unknown command 'bulid'; did you mean 'build'? (commands: {ALL_COMMANDS})"),
    (["jax"], f"unknown command 'jax' (commands: {ALL_COMMANDS})"),
], ids=["completions", "misspelt", "a-target-without---target"])
def test_an_unknown_command_is_named_with_the_commands(cli, tmp_path, args, line):
    assert one_line(cli(*args, cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == []


def test_options_first_still_mean_plan(cli, tmp_path):
    proc = cli("--target", "base", "-o", "-", cwd=tmp_path, check=True)
    assert proc.stdout.startswith("# docker-bake.hcl")
    assert parse_args(["-t", "jax"]).command == "plan" and parse_args([]).command == "plan"


@pytest.mark.parametrize("args, line", [
    (["--wave", "99"], "--wave 99: the plan has waves 0–2"),
    (["--wave", "-1"], "--wave -1: the plan has waves 0–2"),
    (["--wave", "3", "--format", "json"], "--wave 3: the plan has waves 0–2"),
])
def test_matrix_wave_outside_the_plan_is_one_line_not_an_empty_matrix(cli, tmp_path, args, line):
    proc = cli("matrix", "--target", "upstream-pax", *args, cwd=tmp_path)
    assert one_line(proc) == line
    assert proc.stdout == ""


def test_matrix_wave_of_a_one_wave_plan(cli, tmp_path):
    assert one_line(cli("matrix", "--target", "base", "--wave", "1", cwd=tmp_path)) == "--wave 1: the plan has only wave 0"
    jobs = json.loads(cli("matrix", "--target", "base", "--wave", "0", cwd=tmp_path, check=True).stdout)["include"]
    assert [j["id"] for j in jobs] == ["base/amd64", "base/arm64"]


@pytest.mark.parametrize("args, line", [
    (["graph", "--target", "jax", "--date", "2026-11-29"], "graph: unrecognized arguments: --date 2026-11-29"),
    (["graph", "--target", "jax", "--registry", "localhost:5555/x"], "graph: unrecognized arguments: --registry localhost:5555/x"),
    (["graph", "--target", "jax", "--cache-from-branch", "main"], "graph: unrecognized arguments: --cache-from-branch main"),
    (["config", "--not-secret", "PAD_TOKEN"], "config: unrecognized arguments: --not-secret PAD_TOKEN"),
    (["stages", "--target", "jax"], "stages: unrecognized arguments: --target jax"),
], ids=["graph-date", "graph-registry", "graph-cache-from-branch", "config-not-secret", "stages-target"])
def test_a_command_refuses_an_option_it_does_not_use(cli, tmp_path, args, line):
    assert one_line(cli(*args, cwd=tmp_path)) == line
    assert list(tmp_path.iterdir()) == []


def test_every_command_that_plans_takes_not_secret():
    """A credential-looking arg stops every command that composes the plan and says to pass
    --not-secret: each of them takes it (lock and wheelhouse did not)."""
    for command in ("plan", "build", "publish", "matrix", "lock", "wheelhouse", "graph"):
        assert parse_args([command, "--target", "t", "--not-secret", "PAD_TOKEN"]).not_secret == ["PAD_TOKEN"], command


# --- stray installed plugins stay out of the tests -----------------------------------------------

STRAY = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    # a second 'jax': any plan with the stray loaded fails ("defined twice")
    return [Stage(name="jax", image="stray-jax", context=stage_dir("jax"))]
"""


def test_a_stray_plugin_is_kept_out_by_bake_plan_plugins_disable(cli, make_plugin, tmp_path):
    site = make_plugin(STRAY, name="stray")
    env = {k: v for k, v in os.environ.items() if k != ENV_PLUGINS_DISABLE}
    assert "is defined twice" in one_line(cli("--target", "jax", "-o", "-", cwd=tmp_path, env=env, pythonpath=[site]))
    env[ENV_PLUGINS_DISABLE] = "stray"
    cli("--target", "jax", "-o", "-", cwd=tmp_path, env=env, pythonpath=[site], check=True)
    shown = json.loads(cli("config", "--format", "json", cwd=tmp_path, env=env, pythonpath=[site], check=True).stdout)["settings"]
    assert shown["plugins.disable"] == {"value": ["stray"], "source": f"env {ENV_PLUGINS_DISABLE}"}
    env[ENV_PLUGINS_DISABLE] = "strayy"
    assert one_line(cli("--target", "jax", cwd=tmp_path, env=env, pythonpath=[site])) == (
        f"env {ENV_PLUGINS_DISABLE}: disable: no installed plugin 'strayy'; did you mean 'stray'?")


def test_bake_testing_and_the_fixtures_see_only_bake_plans_own_plugins(make_plugin, monkeypatch):
    from bake.plan.plugins import entry_point_names

    site = make_plugin(STRAY, name="stray")
    assert "stray" not in entry_point_names()  # the conftest fixture: in this process, only bake-plan's own
    monkeypatch.undo()  # ... taken away: the stray, "installed" on sys.path, is found
    monkeypatch.syspath_prepend(str(site))
    module = next(site.glob("*.py")).stem
    try:
        assert "stray" in {ep.name for ep in importlib.metadata.entry_points(group="bake_plan")}
        assert "stray" in entry_point_names()
        with pytest.raises(Exception, match="is defined twice"):
            make_plan(PlanOptions(targets=("jax",), date=DATE))
        assert plan_for(targets=["jax"])["target"]["jax"]["tags"][0].endswith("/jax:latest")  # bake.testing
    finally:  # make_plugin's module names repeat from test to test: leave no module imported
        sys.modules.pop(module, None)


def test_a_test_run_with_a_stray_plugin_installed_still_passes(make_plugin, tmp_path):
    """The conftest blocks stray plugins for in-process plans and for the CLI the tests run."""
    site = make_plugin(STRAY, name="stray")
    env = {k: v for k, v in os.environ.items() if k != ENV_PLUGINS_DISABLE}
    env["PYTHONPATH"] = str(site)
    tests = ["tests/test_compose.py::test_upstream_pax_targets_in_dependency_order",
             "tests/test_errors.py::test_unknown_target_names_the_nearest"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout
    assert stray_plugins() == []  # this run has none of its own


# --- one reader of Dockerfile instructions ------------------------------------------------------

TRICKY = textwrap.dedent("""\
    # escape=`
    # a comment before anything
    ARG BASE_IMAGE=scratch
    FROM ${BASE_IMAGE} `
      AS base
    # a comment between stages
    FROM scratch AS `
    # a comment inside one instruction

      wheelhouse
    FROM base AS final
    RUN --mount=type=bind,`
    from=wheelhouse,target=/w `
        echo   one   two
    """)


def test_instructions_are_read_as_buildkit_does():
    assert dockerfile.instructions(TRICKY) == [
        "ARG BASE_IMAGE=scratch",
        "FROM ${BASE_IMAGE} AS base",
        "FROM scratch AS wheelhouse",
        "FROM base AS final",
        "RUN --mount=type=bind,from=wheelhouse,target=/w echo one two",
    ]
    assert dockerfile.instructions("FROM a \\\n  AS b\n# syntax=late is a comment\nRUN x \\\n") == ["FROM a AS b", "RUN x"]
    assert dockerfile.instructions("# syntax=x\n# escape=\\\n\n# escape=`\nRUN a `\n") == ["RUN a `"]


def test_every_dockerfile_check_uses_the_one_reader(tmp_path):
    (tmp_path / "Dockerfile").write_text(TRICKY)
    stage = Stage(name="s", context=str(tmp_path))
    assert dockerfile_text(stage) == dockerfile.read(str(tmp_path), "Dockerfile") == TRICKY
    assert uses_named_context(TRICKY, "wheelhouse")  # a FROM … AS continued over lines
    assert not uses_named_context("# FROM scratch AS wheelhouse\nFROM x\n", "wheelhouse")
    assert dockerfile.read("https://github.com/x/y.git", "Dockerfile") is None
    assert dockerfile.read(str(tmp_path), "missing") is None
    assert dockerfile.read("anything", None, inline="FROM a") == "FROM a"
    # sitrep: a step BuildKit shows joined and expanded is found in the target whose Dockerfile holds it
    plan = {"target": {
        "leaf": {"target": "final", "dockerfile-inline": "FROM scratch AS final\nRUN other\n",
                 "contexts": {"base": "target:root"}},
        "root": {"target": "final", "context": str(tmp_path)},
    }}
    step = "RUN --mount=type=bind,from=wheelhouse,target=/w echo one two"
    assert step_owner(plan, "leaf", "final", step) == "root"
    assert step_owner(plan, "leaf", "final", "RUN other") == "leaf"


@pytest.mark.engine
def test_the_stage_names_read_are_buildkits(engine, tmp_path):
    """BuildKit's own list of a Dockerfile's stages (``--call targets``) is the one read here."""
    (tmp_path / "Dockerfile").write_text(TRICKY)
    proc = subprocess.run(["docker", "buildx", "build", "--quiet", "--call", "targets,format=json", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    theirs = [t["name"] for t in json.loads(proc.stdout)["targets"]]
    ours = [line.split()[-1] for line in dockerfile.instructions(TRICKY) if line.upper().startswith("FROM ")]
    assert sorted(theirs) == sorted(ours) == ["base", "final", "wheelhouse"]
