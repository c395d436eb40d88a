"""Bad input: one line on stderr naming the culprit, exit status 2, no traceback, no file.

Every row of the catalogue in ``docs/errors.md`` is a test, here or in the module the row names;
``test_the_catalogue_lists_every_error_test`` keeps the two in step.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import CI, ROOT, console_script

STAGE_IMPORTS = "from bake import Stage, Source, hookimpl\nfrom bake.resources import stage_dir\n"


def assert_one_line_error(proc, *needles, cwd=None, status=2):
    assert proc.returncode == status, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("bake-plan: error: ")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    if cwd is not None:
        assert list(cwd.iterdir()) == [], "no file may be written on error"


def one_line_error(proc, status=2) -> str:
    """The one ``bake-plan: error:`` line of a run that refused its input (no traceback), without
    the prefix."""
    assert proc.returncode == status, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("bake-plan: error: "), lines[0]
    return lines[0][len("bake-plan: error: "):]


def plugin_with(make_plugin, body: str, name: str):
    """A plugin whose ``bake_plan_stages`` builds ``fields`` (a stage ``odd`` on jax) changed by ``body``."""
    return make_plugin(STAGE_IMPORTS + f"""
@hookimpl
def bake_plan_stages():
    fields = dict(name="odd", image="odd", parent="jax", context=stage_dir("jax"), registry="ghcr.io/nvidia")
{body}
    return [Stage(**fields)]
""", name=name)


# --- the command line -------------------------------------------------------------------------

def test_no_target(cli, tmp_path):
    assert_one_line_error(cli(cwd=tmp_path), "--target", cwd=tmp_path)


def test_unknown_target_names_the_nearest(cli, tmp_path):
    proc = cli("--target", "upstream-paxx", cwd=tmp_path)
    assert_one_line_error(proc, "unknown target 'upstream-paxx'", "upstream-pax", cwd=tmp_path)


@pytest.mark.parametrize("args, needle", [
    (["--format", "yaml"], "invalid choice: 'yaml'"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
    (["matrix", "--wave", "one"], "invalid int value: 'one'"),
    (["unknown-command"], "unknown command 'unknown-command' (commands: plan, build,"),
], ids=["format", "unknown-option", "wave-not-a-number", "unknown-command"])
def test_bad_option(cli, tmp_path, args, needle):
    if args[0] == "matrix":
        args = [args[0], "--target", "jax", *args[1:]]
    else:
        args = ["--target", "jax", *args] if args[0] != "unknown-command" else args + ["--target", "jax"]
    assert_one_line_error(cli(*args, cwd=tmp_path), needle, cwd=tmp_path)


@pytest.mark.parametrize("date", ["2026-13-01", "29-11-2026", "2026-02-30", "yesterday"])
def test_bad_date(cli, tmp_path, date):
    assert_one_line_error(cli("--target", "jax", "--date", date, cwd=tmp_path), "--date", date, cwd=tmp_path)


@pytest.mark.parametrize("epoch", ["soon", "1e9", "99999999999999999999"])
def test_bad_source_date_epoch(cli, tmp_path, epoch):
    env = dict(os.environ, SOURCE_DATE_EPOCH=epoch)
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, env=env), "SOURCE_DATE_EPOCH", cwd=tmp_path)


def test_source_date_epoch_sets_the_date(cli, tmp_path):
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")  # 2023-11-14 in UTC
    out = cli("--target", "jax", "-o", "-", "--format", "json", cwd=tmp_path, env=env, check=True).stdout
    assert "nightly-2023-11-14" in out


@pytest.mark.parametrize("platform", ["linux/sparc", "amd64", "windows/amd64", "linux/amd64,linux/mips", "linux//amd64",
                                      ""])
def test_bad_platform(cli, tmp_path, platform):
    assert_one_line_error(cli("--target", "jax", "--platform", platform, cwd=tmp_path), "platform", cwd=tmp_path)


def test_unsupported_platform_for_a_stage(cli, tmp_path):
    proc = cli("--target", "xla-ci", "--platform", "linux/arm64", cwd=tmp_path)
    assert_one_line_error(proc, "xla-ci", "linux/arm64", cwd=tmp_path)


@pytest.mark.parametrize("registry", ["Bad Registry/", "ghcr.io/NVIDIA", "https://ghcr.io/nvidia", "ghcr.io/nvidia/"])
def test_bad_registry(cli, tmp_path, registry):
    assert_one_line_error(cli("--target", "jax", "--registry", registry, cwd=tmp_path), "--registry", cwd=tmp_path)


def test_image_name_over_255_characters(cli, tmp_path):
    registry = "registry.example.com/" + "/".join(["namespace"] * 25)
    proc = cli("--target", "jax", "--registry", registry, cwd=tmp_path)
    assert_one_line_error(proc, "stage 'base'", "with --registry", "characters long; registries take at most 255",
                          cwd=tmp_path)


@pytest.mark.parametrize("value, needle", [
    ("python:3.11", "is not ORIGINAL=REPLACEMENT"),
    ("python:3.11=", "'' is not an image reference"),
    ("Python:3.11=localhost:5555/python", "'Python:3.11' is not an image reference"),
    ("python:3.11=localhost:5555/py thon", "is not an image reference"),
    ("python:3.11=localhost:5555/python:a:b", "is not an image reference"),
], ids=["no-equals", "empty-replacement", "upper-case", "space", "two-tags"])
def test_bad_base_image(cli, tmp_path, value, needle):
    proc = cli("--target", "jax", "--base-image", value, cwd=tmp_path)
    assert_one_line_error(proc, "--base-image", needle, cwd=tmp_path)


@pytest.mark.parametrize("content, needle", [
    (None, "No such file or directory"),
    ("{not json", "Expecting property name"),
    ('["a", "list"]', "neither a sitrep.json nor a buildx metadata file"),
], ids=["missing", "not-json", "wrong-shape"])
def test_bad_parent_report(cli, tmp_path, content, needle):
    report = tmp_path.parent / f"{tmp_path.name}-report.json"
    if content is not None:
        report.write_text(content)
    proc = cli("--target", "jax", "--from-registry", "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, "--parent-report", needle, cwd=tmp_path)


def test_from_registry_without_a_digest(cli, tmp_path):
    proc = cli("--target", "jax", "--platform", "linux/amd64", "--from-registry", cwd=tmp_path)
    assert_one_line_error(proc, "--from-registry: no digest for 'base-mealkit' (stage 'base')", "--parent-report",
                          cwd=tmp_path)


def test_build_to_stdout(cli, tmp_path):
    assert_one_line_error(cli("build", "--target", "jax", "-o", "-", cwd=tmp_path), "-o - is for `bake-plan plan`",
                          cwd=tmp_path)
    # nor to a device buildx cannot read the plan back from (a plan may be written there)
    assert_one_line_error(cli("build", "--target", "jax", "-o", os.devnull, cwd=tmp_path),
                          f"build needs a plan file: -o {os.devnull} is not a regular file", cwd=tmp_path)
    assert cli("--target", "jax", "-o", os.devnull, cwd=tmp_path).returncode == 0


# --- where the plan and reports go ------------------------------------------------------------

def test_unwritable_output(cli, tmp_path):
    proc = cli("--target", "jax", "-o", str(tmp_path / "missing-dir" / "plan.hcl"), cwd=tmp_path)
    assert_one_line_error(proc, "cannot write the plan", "missing-dir", "No such file or directory", cwd=tmp_path)


def test_output_is_a_directory(cli, tmp_path):
    (tmp_path / "d").mkdir()
    assert_one_line_error(cli("--target", "jax", "-o", "d", cwd=tmp_path), "is a directory")


def test_output_parent_is_a_file(cli, tmp_path):
    (tmp_path / "f").write_text("a file\n")
    assert_one_line_error(cli("--target", "jax", "-o", "f/plan.hcl", cwd=tmp_path), "f/plan.hcl", "Not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.fixture
def small_filesystem(tmp_path):
    """A tmpfs of 8 kB mounted in ``tmp_path`` (root only), unmounted afterwards."""

    def mount(*options):
        mountpoint = tmp_path / "fs"
        mountpoint.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=8k",) + options), "tmpfs",
                               str(mountpoint)], capture_output=True, text=True)
        if proc.returncode:
            if CI:
                pytest.fail(f"cannot mount a tmpfs under CI=true: {proc.stderr}")
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounted.append(mountpoint)
        return mountpoint

    mounted = []
    yield mount
    for mountpoint in mounted:
        subprocess.run(["umount", str(mountpoint)], check=True)


def test_output_on_a_full_disk_leaves_the_old_plan_whole(cli, tmp_path, small_filesystem):
    """The plan (40 kB) does not fit: the old one stays as it was, no temporary file is left."""
    fs = small_filesystem()
    old = "# docker-bake.hcl: written by bake-plan 0.0 (an old plan of its own)\n"
    (fs / "docker-bake.hcl").write_text(old)
    proc = cli("--target", "upstream-pax", "--target", "xla-ci", "-o", str(fs / "docker-bake.hcl"), cwd=tmp_path)
    assert_one_line_error(proc, "cannot write the plan", "No space left on device")
    assert [p.name for p in fs.iterdir()] == ["docker-bake.hcl"]
    assert (fs / "docker-bake.hcl").read_text() == old


def test_output_on_a_read_only_filesystem(cli, tmp_path, small_filesystem):
    fs = small_filesystem("ro")
    proc = cli("--target", "jax", "-o", str(fs / "docker-bake.hcl"), cwd=tmp_path)
    assert_one_line_error(proc, "cannot write the plan", "Read-only file system")


def test_existing_plan_kept_on_error(cli, tmp_path):
    plan = tmp_path / "docker-bake.hcl"
    plan.write_text("old plan\n")
    proc = cli("--target", "nope", cwd=tmp_path)
    assert proc.returncode == 2
    assert plan.read_text() == "old plan\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"]


def test_output_through_a_symlink_replaces_the_file_it_points_to(cli, tmp_path):
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "real.hcl").write_text("# docker-bake.hcl: written by bake-plan 0.0\n")
    (tmp_path / "docker-bake.hcl").symlink_to("plans/real.hcl")
    cli("--target", "jax", cwd=tmp_path, check=True)
    assert (tmp_path / "docker-bake.hcl").is_symlink()
    assert (tmp_path / "plans" / "real.hcl").read_text().startswith("# docker-bake.hcl: written by bake-plan")


def test_output_onto_a_loop_of_symlinks_is_refused_and_the_links_stay(cli, tmp_path):
    """``-o`` naming a link in a loop (a -> b -> a): which file was meant cannot be known, so
    nothing replaces the link; one line, exit 2, before any plan is made."""
    (tmp_path / "a.hcl").symlink_to("b.hcl")
    (tmp_path / "b.hcl").symlink_to("a.hcl")
    proc = cli("--target", "jax", "-o", "a.hcl", cwd=tmp_path)
    line = one_line_error(proc)
    assert line.startswith("cannot write the plan to a.hcl: ") and "a loop of symbolic links" in line
    assert (tmp_path / "a.hcl").is_symlink() and (tmp_path / "b.hcl").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hcl", "b.hcl"]


def test_a_write_through_a_symlink_that_fails_names_the_link_and_its_target(tmp_path):
    """The user named the link: the error line says it, and where it points."""
    from bake.errors import OutputError
    from bake.output import write_atomic

    (tmp_path / "afile").write_text("a file, not a directory\n")
    (tmp_path / "plan.hcl").symlink_to(tmp_path / "afile" / "real.hcl")
    with pytest.raises(OutputError) as caught:
        write_atomic(str(tmp_path / "plan.hcl"), "new\n")
    assert str(caught.value) == (f"cannot write the plan to {tmp_path / 'plan.hcl'} (a symbolic link to "
                                 f"{os.path.realpath(tmp_path / 'plan.hcl')}): Not a directory")
    assert (tmp_path / "plan.hcl").is_symlink() and (tmp_path / "afile").read_text() == "a file, not a directory\n"


def test_output_to_a_pipe_is_written_through(cli, tmp_path):
    """A FIFO (or /dev/stdout, /dev/null) is written to, not replaced by a regular file."""
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    proc = cli("--target", "jax", "--format", "json", "-o", str(fifo), cwd=tmp_path)
    reader.join(timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert fifo.is_fifo() and received and received[0].startswith("{")


def test_output_reader_leaving_early_is_quiet(tmp_path):
    """``bake-plan -o - | head -1``: no traceback when the reader closes the pipe."""
    exe = console_script()
    proc = subprocess.run(f"'{exe}' --target upstream-pax --target xla-ci --format json -o - | head -c 10",
                          shell=True, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.stdout == '{\n  "//": '  # the plan's first key says who wrote it
    assert "Traceback" not in proc.stderr and "Error" not in proc.stderr


def test_sitrep_dir_is_a_file(cli, tmp_path):
    (tmp_path / "reports").write_text("a file\n")
    proc = cli("build", "--target", "jax", "--sitrep-dir", "reports", cwd=tmp_path)
    assert_one_line_error(proc, "--sitrep-dir reports: is not a directory")


# --- plugins ----------------------------------------------------------------------------------

def test_plugin_that_fails_to_import(cli, make_plugin, tmp_path):
    site = make_plugin("import not_a_module_anywhere\n", name="broken")
    proc = cli("stages", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'broken'", "failed to load", "not_a_module_anywhere")


def test_plugin_misspelling_a_hook(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stage():
    return []
""", name="typo")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'typo'", "bake_plan_stage", cwd=tmp_path)


def test_plugin_that_raises(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    raise RuntimeError("registry credentials missing\\nsecond line")
""", name="boom")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'boom' raised RuntimeError", "registry credentials missing second line",
                          cwd=tmp_path)


@pytest.mark.parametrize("hook, body, needle", [
    ("bake_plan_tags", "raise KeyError('flavor')", "plugin 'policy' raised KeyError in bake_plan_tags for stage 'base'"),
    ("bake_plan_cache_key", "raise ValueError('no key')",
     "plugin 'policy' raised ValueError in bake_plan_cache_key for stage 'base'"),
    ("bake_plan_platforms", "raise OSError('x')", "plugin 'policy' raised OSError in bake_plan_platforms"),
    ("bake_plan_adjust_target", "raise TypeError('y')", "plugin 'policy' raised TypeError in bake_plan_adjust_target"),
], ids=["tags", "cache-key", "platforms", "adjust-target"])
def test_plugin_raising_in_a_policy_hook(cli, make_plugin, tmp_path, hook, body, needle):
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def {hook}(stage):
    {body}
""", name="policy")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, pythonpath=[site]), needle, cwd=tmp_path)


def test_a_platform_policy_answering_a_platform_nobody_asked_for_is_blamed_on_it(cli, make_plugin, tmp_path):
    """Not "stage 'base' does not support linux/sparc" (the user asked for no such platform)."""
    site = make_plugin("""
from bake import hookimpl
@hookimpl(tryfirst=True)
def bake_plan_platforms(stage, requested):
    return ["linux/sparc"]
""", name="sparcy")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, pythonpath=[site]),
                          "plugin 'sparcy': bake_plan_platforms for stage 'base' answered linux/sparc, which the stage "
                          "does not support (it supports linux/amd64, linux/arm64) and no --platform asked for",
                          cwd=tmp_path)
    # one policy narrowing the parent only: the child's plugin is named, and the policy that chose
    narrow = make_plugin("""
from bake import hookimpl
@hookimpl(tryfirst=True)
def bake_plan_platforms(stage, requested):
    return ["linux/amd64"] if stage.name == "base" else None
""", name="narrower")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, pythonpath=[narrow]),
                          "builds for linux/arm64 but stage 'base' it builds on does not (plugin "
                          "'narrower' chose stage 'base''s platforms: bake_plan_platforms)", cwd=tmp_path)
    # asked for by the user: the user's mistake, as before
    assert_one_line_error(cli("--target", "jax", "--platform", "linux/s390x", cwd=tmp_path),
                          "stage 'base' (plugin 'base') does not support linux/s390x", cwd=tmp_path)


@pytest.mark.parametrize("returned, needle", [
    ('[{"name": "dict-stage"}]', "bake_plan_stages returned dict"),
    ('Stage(name="bare", context=stage_dir("jax"))', "bake_plan_stages returned Stage, expected a list"),
    ('"a-stage"', "bake_plan_stages returned str, expected a list"),
    ("[None]", "bake_plan_stages returned NoneType"),
    ('(s for s in [])', "bake_plan_stages returned generator"),
], ids=["dict", "bare-stage", "string", "none-item", "generator"])
def test_plugin_returning_the_wrong_shape(cli, make_plugin, tmp_path, returned, needle):
    site = make_plugin(STAGE_IMPORTS + f"""
@hookimpl
def bake_plan_stages():
    return {returned}
""", name="shapes")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, pythonpath=[site]), "plugin 'shapes'", needle,
                          cwd=tmp_path)


@pytest.mark.parametrize("answer, needle", [
    ('"latest"', "bake_plan_tags for stage 'base' returned 'latest', expected a list of strings"),
    ("[1, 2]", "bake_plan_tags for stage 'base' returned [1, 2]"),
], ids=["string", "numbers"])
def test_policy_returning_the_wrong_shape(cli, make_plugin, tmp_path, answer, needle):
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_tags():
    return {answer}
""", name="tagger")
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, pythonpath=[site]), "plugin 'tagger'", needle,
                          cwd=tmp_path)


@pytest.mark.parametrize("tags, needle", [
    ('["has space"]', "tag 'has space' contains ' '"),
    ('["ok", "a/b"]', "tag 'a/b' contains '/'"),
    ('["x" * 129]', "is 129 characters long"),
    ('[".hidden"]', "tag '.hidden' starts with '.'"),
    ('[""]', "a tag is empty"),
    ('["café"]', "contains 'é'"),
    ('["t" * 125]', "(with the per-arch suffix '-amd64')"),
], ids=["space", "slash", "too-long", "leading-dot", "empty", "non-ascii", "too-long-with-arch"])
def test_tag_policy_returns_a_tag_registries_refuse(cli, make_plugin, tmp_path, tags, needle):
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_tags(stage):
    return {tags} if stage.name == "jax" else None
""", name="tagger")
    args = ["--platform", "linux/amd64"] if "arch" in needle else []
    proc = cli("--target", "jax", *args, cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'tagger', stage 'jax'", "tag", needle, "registries take 1 to 128",
                          cwd=tmp_path)


# --- stages -----------------------------------------------------------------------------------

def test_unknown_stage_field(cli, make_plugin, tmp_path):
    site = plugin_with(make_plugin, "    fields['imagee'] = 'x'", name="typo-field")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'typo-field': Stage() has no field 'imagee' (did you mean 'image'?)",
                          cwd=tmp_path)


def test_missing_stage_field(cli, make_plugin, tmp_path):
    site = plugin_with(make_plugin, "    del fields['context']", name="no-context")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'no-context': Stage() needs the field(s) 'context'",
                          'to run without it: plugins.disable = ["no-context"]', cwd=tmp_path)


def test_unknown_source_field(cli, make_plugin, tmp_path):
    site = plugin_with(make_plugin, "    fields['sources'] = (Source('X', 'https://x.example/x.git', branch='b'),)",
                       name="src-typo")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "Source() has no field 'branch'", cwd=tmp_path)


@pytest.mark.parametrize("field, value, needle", [
    ("name", "123", "stage name 123 must match"),
    ("name", '"has space"', "stage name 'has space' must match"),
    ("image", '"Upper/Case"', "field 'image'"),
    ("image", "42", "field 'image': expected a non-empty string, got int"),
    ("registry", '""', "field 'registry': expected a non-empty string, got str"),
    ("registry", '"https://ghcr.io"', "field 'registry'"),
    ("base_image", '"Not An Image!"', "field 'base_image'"),
    ("platforms", '("linux/amd64", "plan9/386")', "field 'platforms'"),
    ("platforms", '"linux/amd64"', "field 'platforms': expected a list or tuple, got str"),
    ("platforms", "()", "field 'platforms': at least one platform is needed"),
    ("args", '{"GOOD": 1}', "field 'args': value of 'GOOD' is int, expected str"),
    ("args", '{"bad name": "x"}', "field 'args': key 'bad name' is not a valid name"),
    ("args", '["A=1"]', "field 'args': expected a mapping of str to str, got list"),
    ("labels", '{"k": None}', "field 'labels'"),
    ("kind", '"triple"', "field 'kind'"),
    ("context", '"relative/dir"', "field 'context'"),
    ("context", '"/no/such/directory"', "field 'context': directory /no/such/directory does not exist"),
    ("dockerfile", '"Dockerfile.missing"', "field 'dockerfile'"),
    ("variant", '"has space"', "field 'variant'"),
    ("requirements", '("a\\nb",)', "field 'requirements'"),
    ("sources", '({"name": "X"},)', "field 'sources': item {'name': 'X'} is dict, expected Source"),
    ("sources", '(Source("lower", "https://x.example/x.git"),)', "source 'lower': name must be upper-case"),
    ("uses", '{"base": "te"}', "field 'contexts': the named context 'base' is reserved"),
    ("contexts", '{"ctx": "relative"}', "field 'contexts'"),
], ids=["name-int", "name-space", "image-upper-case", "image-int", "registry-empty", "registry-url",
        "base-image-bad-ref", "platforms-unknown", "platforms-a-string", "platforms-empty", "args-int-value",
        "args-bad-name", "args-a-list", "labels-none-value", "kind", "context-relative", "context-missing",
        "dockerfile-missing", "variant-space", "requirements-newline", "sources-dict", "sources-lower-case",
        "uses-reserved", "contexts-relative"])
def test_malformed_stage_field(cli, make_plugin, tmp_path, field, value, needle):
    body = f"    fields[{field!r}] = {value}"
    if field == "base_image":
        body += "\n    del fields['parent']"
    site = plugin_with(make_plugin, body, name="odd-plugin")
    target = "odd" if field != "name" else "jax"
    proc = cli("--target", target, cwd=tmp_path, pythonpath=[site])
    expect = ["plugin 'odd-plugin'", needle] + ([] if field == "name" else ["stage 'odd'"])
    assert_one_line_error(proc, *expect, cwd=tmp_path)


def test_adjust_target_leaving_a_value_bake_files_cannot_hold(cli, make_plugin, tmp_path):
    site = make_plugin("""
from pathlib import Path
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "jax":
        target["context"] = Path("/tmp")
""", name="adjuster")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "stage 'jax', target 'jax', context: PosixPath", "is not a string, number or boolean",
                          cwd=tmp_path)


@pytest.mark.parametrize("value, needle", [("5", "int 5 is not a string"),
                                           ("float('nan')", "float nan is not a string")],
                         ids=["int", "nan"])
def test_adjust_target_adding_a_bad_arg_is_blamed_on_that_plugin(cli, make_plugin, tmp_path, value, needle):
    """The value one plugin adds to another plugin's target names the plugin that added it (a
    wrong type in args was blamed on the stage's own plugin)."""
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "jax":
        target.setdefault("args", {{}})["X_ADDED"] = {value}
""", name="adder")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'adder', stage 'jax', target 'jax', args", "X_ADDED", needle, cwd=tmp_path)


def test_a_target_context_naming_no_target_of_the_plan_is_blamed_on_the_plugin_that_set_it(cli, make_plugin, tmp_path):
    """buildx would stop the whole bake ("failed to find target") and every target would be marked
    failed though none was attempted: refused when planning, naming the plugin that set it."""
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "jax":
        target.setdefault("contexts", {})["extra"] = "target:jax-mealkitt"
""", name="linker")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'linker', stage 'jax', target 'jax', contexts['extra']: 'target:jax-mealkitt' "
                                "names no target of the plan; did you mean 'jax-mealkit'?", cwd=tmp_path)


@pytest.mark.parametrize("links, needle", [
    ({"jax": "jax"}, "target 'jax', contexts['extra']: 'target:jax' is the target itself"),
    ({"base-mealkit": "jax"}, "target 'base-mealkit', contexts['extra']: 'target:jax' closes a loop of targets "
                              "(base-mealkit -> jax -> base-mealkit)"),
], ids=["itself", "loop"])
def test_target_contexts_that_link_to_themselves_or_loop_are_refused(cli, make_plugin, tmp_path, links, needle):
    """buildx would stop the bake ("cannot link to itself", "infinite loop") with every target
    marked failed: refused when planning, naming the plugin that made the link."""
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(name, target):
    links = {links!r}
    if name in links:
        target.setdefault("contexts", {{}})["extra"] = "target:" + links[name]
""", name="looper")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'looper'", needle, cwd=tmp_path)


@pytest.mark.parametrize("value, needle", [
    ('"cafe\\u0301"', "not in Unicode NFC"),
    ('"\\udcff"', "not valid Unicode text (a lone surrogate"),
], ids=["not-nfc", "lone-surrogate"])
def test_text_buildx_would_change(cli, make_plugin, tmp_path, value, needle):
    site = plugin_with(make_plugin, f"    fields['labels'] = {{'org.example.name': {value}}}", name="texts")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'texts', stage 'odd', target 'odd-mealkit', labels['org.example.name']", needle,
                          cwd=tmp_path)


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


# --- the catalogue ----------------------------------------------------------------------------

def test_the_catalogue_lists_every_error_test():
    """Every test the catalogue names exists, and every test in this module is in the catalogue."""
    doc = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", doc)
    assert len(named) >= 40
    for module, test in named:
        source = (ROOT / "tests" / module).read_text(encoding="utf-8")
        assert re.search(rf"^def {test}\(", source, re.MULTILINE), f"docs/errors.md names {module}::{test}"
    here = re.findall(r"^def (test_\w+)\(", Path(__file__).read_text(encoding="utf-8"), re.MULTILINE)
    missing = [t for t in here if ("test_errors.py", t) not in named and t != "test_the_catalogue_lists_every_error_test"]
    assert not missing, f"tests missing from docs/errors.md: {missing}"
