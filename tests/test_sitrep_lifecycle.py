"""The reports of a build, before anything is built: every path checked, the previous run's
sitrep and badge taken away (a run that stops early never leaves an old "pass"), the metadata
file kept until the engine answers, and no two outputs on one file. None of this needs an engine:
each run here stops before buildx, as a run without an engine or with a bad path would."""

from __future__ import annotations

import json
import os

import pytest

from test_errors import assert_one_line_error, small_filesystem  # noqa: F401  (a fixture)

NO_ENGINE = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")


def _previous_run(sitrep):
    """The reports of a previous run, written and recorded as bake-plan does (bake.owned.Record):
    bake-plan removes only files it wrote."""
    from bake.owned import Record

    sitrep.mkdir()
    record = Record(sitrep)
    for name in ("sitrep.json", "badge.json"):
        record.write(name, json.dumps({"outcome": "pass", "message": "pass"}), name)
    record.write("sitrep.md", "## ✅ old\n", "the summary")
    (sitrep / "bake-metadata.json").write_text("{}")  # written by buildx, at bake-plan's asking
    record.adopt("bake-metadata.json", None, "the metadata file")


def test_a_run_without_an_engine_leaves_no_old_pass_behind(cli, tmp_path):
    sitrep = tmp_path / "sitrep"
    _previous_run(sitrep)
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", cwd=tmp_path, env=NO_ENGINE)
    assert_one_line_error(proc, "cannot reach a Docker engine")
    assert sorted(p.name for p in sitrep.iterdir()) == [".bake-plan-written.json", "bake-metadata.json"], \
        "only the metadata file (and the record of what bake-plan wrote) stays"


@pytest.mark.parametrize("make, needle", [
    (lambda d: (d / "sitrep.json").mkdir(), "sitrep.json: it is a directory"),
    (lambda d: os.mkfifo(d / "badge.json"), "badge.json: it is not a regular file"),
    (lambda d: (d / "bake-metadata.json").mkdir(), "bake-metadata.json: it is a directory"),
], ids=["sitrep-is-a-directory", "badge-is-a-fifo", "metadata-is-a-directory"])
def test_an_unusable_report_path_stops_before_the_plan(cli, tmp_path, make, needle):
    sitrep = tmp_path / "sitrep"
    sitrep.mkdir()
    make(sitrep)
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", cwd=tmp_path, env=NO_ENGINE)
    assert_one_line_error(proc, needle)
    assert not (tmp_path / "docker-bake.hcl").exists(), "no plan is written when the reports cannot be"


@pytest.mark.parametrize("kind", ["fifo", "missing-directory", "directory"])
def test_an_unwritable_step_summary_is_one_line_and_never_hangs(cli, tmp_path, kind):
    target = tmp_path / "summary"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "missing-directory":
        target = tmp_path / "nowhere" / "summary"
    else:
        target.mkdir()
    env = dict(NO_ENGINE, GITHUB_STEP_SUMMARY=str(target))
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", cwd=tmp_path, env=env)
    assert_one_line_error(proc, "cannot append to $GITHUB_STEP_SUMMARY")
    assert not (tmp_path / "docker-bake.hcl").exists()


@pytest.mark.parametrize("args, needle", [
    (["-o", "sitrep/sitrep.json"], "would be both the plan and the sitrep.json"),
    (["--metadata-file", "sitrep/badge.json"], "would be both --metadata-file and the badge.json"),
], ids=["plan-on-the-sitrep", "metadata-on-the-badge"])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])  # a dry run's command would meet it too
def test_two_outputs_on_one_file_are_refused(cli, tmp_path, args, needle, dry_run):
    sitrep = tmp_path / "sitrep"
    _previous_run(sitrep)
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", *args, *dry_run, cwd=tmp_path, env=NO_ENGINE)
    assert_one_line_error(proc, needle)
    assert json.loads((sitrep / "sitrep.json").read_text())["outcome"] == "pass", "nothing touched"


@pytest.mark.engine
def test_a_report_lost_after_the_build_ran_is_exit_1(cli, engine, make_plugin, tmp_path, small_filesystem):  # noqa: F811
    fs = small_filesystem()
    summary = fs / "summary.md"
    summary.write_text("")
    (fs / "filler").write_bytes(b"x" * 8192)  # the tmpfs is full: appending the summary fails
    site = make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="lost", image="lost", kind="single", context={str(tmp_path)!r}, platforms=("linux/amd64",),
                  dockerfile_inline="FROM {engine.registry}/stand-in/busybox:latest\\nRUN true\\n")]
""")
    env = dict(os.environ, PYTHONPATH=str(site), GITHUB_STEP_SUMMARY=str(summary))
    proc = cli("build", "--target", "lost", "--registry", f"{engine.registry}/lost", "--sitrep-dir", "sitrep",
               cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]  # after buildx's progress, one error line
    assert last.startswith("bake-plan: error: the build ran (lost build: 1 target built), but cannot "
                           "append to $GITHUB_STEP_SUMMARY") and last.endswith("No space left on device"), last
    assert json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())["outcome"] == "pass"


def test_the_sizes_of_pushed_images_are_asked_at_once():
    """After a build with --push, each pushed image's size is asked of the registry (a docker CLI
    run each); they are asked side by side, not one after another: here two questions must be
    open at once (a barrier of two), or the test stops at the barrier's timeout."""
    import threading

    from bake.run.build import _asked_at_once

    refs = [f"r/x{i}@sha256:{i}" for i in range(6)]
    barrier = threading.Barrier(2, timeout=30)
    asked = []

    def fetch(ref):
        asked.append(ref)
        barrier.wait()
        return {"linux/amd64": len(ref)}

    def report(sizes):
        return {ref: sizes(ref) for ref in refs}

    sizes = _asked_at_once(report, fetch)
    assert report(sizes) == {ref: {"linux/amd64": len(ref)} for ref in refs}
    assert sorted(asked) == sorted(refs), "each asked once"
    assert _asked_at_once(lambda sizes: {}, fetch)("r/x0@sha256:0") == {}
