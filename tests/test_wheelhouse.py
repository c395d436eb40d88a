"""``--wheelhouse DIR`` / ``wheelhouse = "DIR"``: every stage whose Dockerfile uses the
``wheelhouse`` context gets it, with the args that make pip use only it; the plan resolves under
the real buildx; bad values are one line, exit 2, no plan file."""

from __future__ import annotations

import datetime

import pytest
from conftest import make_wheel
from test_plan_buildx import assert_resolves_to_plan

from bake.api import make_plan, wheelhouse_users
from bake.plan.compose import WHEELHOUSE_ARGS, PlanOptions, uses_named_context

DATE = "2026-11-29"


@pytest.mark.parametrize("text", [
    "FROM scratch AS wheelhouse\nFROM base\n",
    "from scratch as WheelHouse\n",
    "FROM --platform=$BUILDPLATFORM scratch AS wheelhouse\n",
    "RUN --mount=type=bind,from=wheelhouse,target=/w pip install x\n",
    "RUN --mount=from=wheelhouse,type=bind pip install x\n",
    "COPY --from=wheelhouse / /w\n",
])
def test_dockerfile_that_uses_the_context(text):
    assert uses_named_context(text, "wheelhouse")


@pytest.mark.parametrize("text", [
    "FROM scratch AS wheelhouses\n",
    "# FROM scratch AS wheelhouse\nFROM base\n",
    "RUN --mount=type=bind,from=wheelhouse2,target=/w true\n",
    "COPY --from=other / /w\n",
    "",
])
def test_dockerfile_that_does_not(text):
    assert not uses_named_context(text, "wheelhouse")


def _plan(tmp_path, target="jax", wheelhouse=None):
    options = PlanOptions(targets=(target,), date=datetime.date.fromisoformat(DATE), wheelhouse=wheelhouse)
    return make_plan(options).plan


def test_every_builtin_stage_that_mounts_it_gets_it(tmp_path):
    wh = str(make_wheel(tmp_path / "wh", "alpha", "1.0").parent)
    plan = _plan(tmp_path, "jax", wh)
    assert set(plan["target"]) == {"base-mealkit", "base", "te", "jax-mealkit", "jax"}
    for name, target in plan["target"].items():
        assert target["contexts"]["wheelhouse"] == wh, name
        for key, value in WHEELHOUSE_ARGS.items():
            assert target["args"][key] == value, name


def test_without_it_nothing_changes(tmp_path):
    for target in _plan(tmp_path, "jax")["target"].values():
        assert "wheelhouse" not in target.get("contexts", {})
        assert "PIP_NO_INDEX" not in target["args"]


def test_only_stages_whose_dockerfile_uses_it(make_plugin, tmp_path):
    from bake.plan.plugins import Hooks, get_plugin_manager

    site = make_plugin("""
        from bake import Stage, hookimpl

        @hookimpl
        def bake_plan_stages():
            return [
                Stage(name="wh-uses", context="/", kind="single", base_image="busybox:1.36",
                      dockerfile_inline="FROM scratch AS wheelhouse\\nFROM busybox:1.36\\n"
                                        "RUN --mount=from=wheelhouse,target=/w ls /w\\n"),
                Stage(name="wh-not", context="/", kind="single", parent="wh-uses",
                      dockerfile_inline="FROM base\\nRUN true\\n"),
            ]
    """)
    import sys

    sys.path.insert(0, str(site))
    try:
        import importlib

        module = importlib.import_module(sorted(p.stem for p in site.glob("*.py"))[0])
        pm = get_plugin_manager(load_entrypoints=False, plugins=[module])
        from bake.api import collect_stages

        users = wheelhouse_users(collect_stages(Hooks(pm)))
    finally:
        sys.path.remove(str(site))
    assert "wh-uses" in users and "wh-not" not in users


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_wheelhouse_plan_resolves_to_itself(buildx, cli, tmp_path, fmt):
    wh = make_wheel(tmp_path / "wheels" / "dir with space", "alpha", "1.0").parent
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "jax", "--date", DATE, "--format", fmt, "--wheelhouse", str(wh), "-o", str(out),
        cwd=tmp_path, check=True)
    plan = _plan(tmp_path, "jax", str(wh))
    assert_resolves_to_plan(buildx.print_plan(out, cwd=tmp_path), plan)


def test_relative_flag_is_from_the_current_directory(cli, tmp_path):
    make_wheel(tmp_path / "wh", "alpha", "1.0")
    proc = cli("--target", "base", "--date", DATE, "--format", "json", "--wheelhouse", "wh", "-o", "-",
               cwd=tmp_path, check=True)
    assert '"wheelhouse": "%s"' % (tmp_path / "wh") in proc.stdout


def test_relative_config_value_is_from_the_file(cli, tmp_path):
    make_wheel(tmp_path / "project" / "wh", "alpha", "1.0")
    (tmp_path / "project" / "bake-plan.toml").write_text('wheelhouse = "wh"\n')
    sub = tmp_path / "project" / "sub"
    sub.mkdir()
    proc = cli("--target", "base", "--date", DATE, "--format", "json", "-o", "-", cwd=sub, check=True)
    assert '"wheelhouse": "%s"' % (tmp_path / "project" / "wh") in proc.stdout
    shown = cli("config", cwd=sub, check=True).stdout
    assert f'wheelhouse = "{tmp_path / "project" / "wh"}"' in shown


@pytest.mark.parametrize("setup, args, words", [
    (None, ["--wheelhouse", "missing"], "--wheelhouse: {tmp}/missing: no such directory"),
    ("empty", ["--wheelhouse", "empty"], "--wheelhouse: {tmp}/empty: holds no wheel"),
    (None, ["--wheelhouse", ""], "--wheelhouse: empty string"),
    ('wheelhouse = "missing"\n', [], "bake-plan.toml: wheelhouse: {tmp}/missing: no such directory"),
    ('wheelhouse = ""\n', [], "bake-plan.toml: wheelhouse: empty string"),
    ("wheelhouse = 3\n", [], "bake-plan.toml"),
])
def test_bad_wheelhouse_is_one_line_exit_2_no_file(cli, tmp_path, setup, args, words):
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    elif setup:
        (tmp_path / "bake-plan.toml").write_text(setup)
    proc = cli("--target", "base", "-o", "plan.hcl", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert words.format(tmp=tmp_path) in lines[0]
    assert not (tmp_path / "plan.hcl").exists()


def test_other_commands_do_not_need_it_to_exist(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('wheelhouse = "not-yet"\n')
    assert cli("stages", cwd=tmp_path).returncode == 0
    assert cli("matrix", "--target", "base", cwd=tmp_path).returncode == 0
