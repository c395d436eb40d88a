"""Bad input: one line on stderr naming the culprit, exit status 2, no traceback, no file."""

from __future__ import annotations

import pytest

STAGE_IMPORTS = "from bake import Stage, Source, hookimpl\nfrom bake.resources import stage_dir\n"


def assert_one_line_error(proc, *needles, cwd=None):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("bake-plan: error: ")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    if cwd is not None:
        assert list(cwd.iterdir()) == [], "no file may be written on error"


def test_unknown_target_names_the_nearest(cli, tmp_path):
    proc = cli("--target", "upstream-paxx", cwd=tmp_path)
    assert_one_line_error(proc, "unknown target 'upstream-paxx'", "upstream-pax", cwd=tmp_path)


@pytest.mark.parametrize("date", ["2026-13-01", "29-11-2026", "2026-02-30", "yesterday"])
def test_bad_date(cli, tmp_path, date):
    assert_one_line_error(cli("--target", "jax", "--date", date, cwd=tmp_path), "--date", date, cwd=tmp_path)


def test_bad_source_date_epoch(cli, tmp_path):
    import os
    env = dict(os.environ, SOURCE_DATE_EPOCH="soon")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, env=env), "SOURCE_DATE_EPOCH", cwd=tmp_path)


def test_source_date_epoch_sets_the_date(cli, tmp_path):
    import os
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")  # 2023-11-14 in UTC
    out = cli("--target", "jax", "-o", "-", "--format", "json", cwd=tmp_path, env=env, check=True).stdout
    assert "nightly-2023-11-14" in out


@pytest.mark.parametrize("platform", ["linux/sparc", "amd64", "windows/amd64", "linux/amd64,linux/mips"])
def test_bad_platform(cli, tmp_path, platform):
    assert_one_line_error(cli("--target", "jax", "--platform", platform, cwd=tmp_path), "platform", cwd=tmp_path)


def test_unsupported_platform_for_a_stage(cli, tmp_path):
    proc = cli("--target", "xla-ci", "--platform", "linux/arm64", cwd=tmp_path)
    assert_one_line_error(proc, "xla-ci", "linux/arm64", cwd=tmp_path)


def test_bad_registry(cli, tmp_path):
    assert_one_line_error(cli("--target", "jax", "--registry", "Bad Registry/", cwd=tmp_path), "--registry", cwd=tmp_path)


def test_no_target(cli, tmp_path):
    assert_one_line_error(cli(cwd=tmp_path), "--target", cwd=tmp_path)


def test_unwritable_output(cli, tmp_path):
    proc = cli("--target", "jax", "-o", str(tmp_path / "missing-dir" / "plan.hcl"), cwd=tmp_path)
    assert_one_line_error(proc, "cannot write the plan", "missing-dir")


def test_output_is_a_directory(cli, tmp_path):
    (tmp_path / "d").mkdir()
    assert_one_line_error(cli("--target", "jax", "-o", "d", cwd=tmp_path), "is a directory")


def test_output_to_a_device_or_fifo_writes_through_it(cli, tmp_path):
    """``-o /dev/null`` must not replace the device with a file; a FIFO stands in for it here."""
    import os
    import stat
    import threading

    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    proc = cli("--target", "jax", "--format", "json", "-o", str(fifo), cwd=tmp_path)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert got and '"jax-mealkit"' in got[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.fifo"]


def test_existing_plan_kept_on_error(cli, tmp_path):
    plan = tmp_path / "docker-bake.hcl"
    plan.write_text("old plan\n")
    proc = cli("--target", "nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert plan.read_text() == "old plan\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"]


def test_cycle_names_every_stage(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")
    return [Stage(name="a", image="a", parent="b", context=ctx), Stage(name="b", image="b", parent="c", context=ctx),
            Stage(name="c", image="c", parent="a", context=ctx)]
""", name="loop")
    proc = cli("--target", "a", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "cycle", "a -> b -> c -> a", "plugin 'loop'", cwd=tmp_path)


def test_two_plugins_defining_one_stage(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    return [Stage(name="jax", image="jax", parent="base", context=stage_dir("jax"))]
""", name="my-jax")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "stage 'jax' is defined twice", "'jax'", "'my-jax'", cwd=tmp_path)


def test_missing_parent(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    return [Stage(name="orphan", image="orphan", parent="jaxx", context=stage_dir("jax"))]
""", name="orphans")
    proc = cli("--target", "orphan", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'orphans'", "stage 'orphan'", "'parent'", "'jaxx' does not exist", "'jax'",
                          cwd=tmp_path)


def test_plugin_that_raises(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    raise RuntimeError("registry credentials missing")
""", name="boom")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'boom' raised RuntimeError", "registry credentials missing", cwd=tmp_path)


def test_plugin_that_fails_to_import(cli, make_plugin, tmp_path):
    site = make_plugin("import not_a_module_anywhere\n", name="broken")
    proc = cli("stages", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'broken'", "failed to load", "not_a_module_anywhere")


def test_plugin_returning_the_wrong_shape(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    return [{"name": "dict-stage"}]
""", name="dicts")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'dicts'", "expected bake.Stage", cwd=tmp_path)


def test_plugin_misspelling_a_hook(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stage():
    return []
""", name="typo")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'typo'", "bake_plan_stage", cwd=tmp_path)


@pytest.mark.parametrize("field, value, needle", [
    ("image", '"Upper/Case"', "field 'image'"),
    ("platforms", '("linux/amd64", "plan9/386")', "field 'platforms'"),
    ("platforms", '"linux/amd64"', "field 'platforms'"),
    ("args", '{"GOOD": 1}', "field 'args'"),
    ("args", '{"bad name": "x"}', "field 'args'"),
    ("kind", '"triple"', "field 'kind'"),
    ("context", '"relative/dir"', "field 'context'"),
    ("variant", '"has space"', "field 'variant'"),
    ("requirements", '("a\\nb",)', "field 'requirements'"),
])
def test_malformed_stage_field(cli, make_plugin, tmp_path, field, value, needle):
    site = make_plugin(STAGE_IMPORTS + f"""
@hookimpl
def bake_plan_stages():
    fields = dict(name="odd", image="odd", parent="jax", context=stage_dir("jax"))
    fields[{field!r}] = {value}
    return [Stage(**fields)]
""", name="odd-plugin")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'odd-plugin'", "stage 'odd'", needle, cwd=tmp_path)


def test_target_names_that_sanitise_onto_each_other(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")
    return [Stage(name="jax-0.4", image="a", parent="jax", context=ctx),
            Stage(name="jax-0_4", image="b", parent="jax", context=ctx)]
""", name="dots")
    proc = cli("--target", "jax-0.4", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "jax-0.4", "jax-0_4", "both become bake target", cwd=tmp_path)
