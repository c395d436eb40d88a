"""Files bake-plan did not write, and the pip side's options.

bake-plan replaces or deletes a file only when it is its own: a lock (or its copy in the
``pip-lock`` context) whose header names the stage, or a file listed with its content's hash in
the directory's record ``.bake-plan-written.json`` (reports, wheels, the wheelhouse's OCI layout;
``bake.owned``). It follows no symbolic link inside the directories it makes for itself. Anything
else in the way is left as it is, and the command stops with one line, exit status 2.

Every case runs the installed CLI (or the library function that owns the files) on real files;
none needs an engine: the build's reports are checked before buildx runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import hermetic_pip_env, make_wheel
from test_errors import one_line_error as one_line

from bake.errors import OutputError

NO_ENGINE = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")

# A stage with no requirement lines: `bake-plan lock` makes its lock at once (no index is asked),
# so the locks and the pip-lock context are real ones, written by bake-plan.
OWNED_PLUGIN = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")
    base = dict(context=ctx, base_image="python:3.11-slim-bookworm")
    stages = [Stage(registry="ghcr.io/nvidia", name="ow", image="ow", **base)]
    if os.environ.get("OWNED_COLLIDE"):
        stages += [Stage(registry="ghcr.io/nvidia", name="cx", image="cx", requirements=('zeta; platform_machine == "aarch64"',), **base),
                   Stage(registry="ghcr.io/nvidia", name="cx-amd64", image="cx-amd64", **base)]
    return stages
"""


@pytest.fixture
def owned_cli(cli, make_plugin):
    site = make_plugin(OWNED_PLUGIN, name="owned")

    def run(*args, extra_env=None, **kw):
        env = hermetic_pip_env(NO_ENGINE)
        env.update(extra_env or {})
        return cli(*args, env=env, pythonpath=[site], **kw)

    return run


def error_line(proc, status=2) -> str:
    """The one error line of a command that printed progress first (``lock``): the last line."""
    assert proc.returncode == status, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("bake-plan: error: ")]
    assert len(errors) == 1 and proc.stderr.strip().splitlines()[-1] == errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    return errors[0][len("bake-plan: error: "):]


def _victim(directory: Path) -> dict:
    """A directory of someone else's files (a lock among them), and its content to compare after."""
    directory.mkdir(parents=True)
    (directory / "keep.lock").write_text("# not bake-plan's\nalpha==1.0\n")
    (directory / "precious.txt").write_text("precious\n")
    return _tree(directory)


def _tree(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# ---- the pip-lock context ------------------------------------------------------------------


def test_a_symlinked_pip_lock_context_is_refused_and_its_target_untouched(owned_cli, tmp_path):
    assert owned_cli("lock", "--target", "ow", cwd=tmp_path).returncode == 0
    victim = _victim(tmp_path / "elsewhere")
    (tmp_path / "locks" / ".pip-lock").mkdir()
    (tmp_path / "locks" / ".pip-lock" / "ow").symlink_to(tmp_path / "elsewhere")
    proc = owned_cli("--target", "ow", "--locked", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == ("locks/.pip-lock/ow is a symbolic link: bake-plan makes the pip-lock context of 'ow' "
                              "there itself and follows no link out of it; remove the link")
    assert _tree(tmp_path / "elsewhere") == victim, "no file of the link's target is deleted or written"
    assert not (tmp_path / "plan.hcl").exists()


def test_a_symlinked_pip_lock_directory_is_refused_too(owned_cli, tmp_path):
    assert owned_cli("lock", "--target", "ow", cwd=tmp_path).returncode == 0
    victim = _victim(tmp_path / "elsewhere" / "ow")
    (tmp_path / "locks" / ".pip-lock").symlink_to(tmp_path / "elsewhere")
    proc = owned_cli("--target", "ow", "--locked", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == ("locks/.pip-lock is a symbolic link: bake-plan makes the pip-lock context of 'ow' "
                              "there itself and follows no link out of it; remove the link")
    assert _tree(tmp_path / "elsewhere" / "ow") == victim


def test_a_file_bake_plan_did_not_put_in_the_pip_lock_context_is_refused_not_sent_or_deleted(owned_cli, tmp_path):
    assert owned_cli("lock", "--target", "ow", cwd=tmp_path).returncode == 0
    assert owned_cli("--target", "ow", "--locked", "-o", "plan.hcl", cwd=tmp_path).returncode == 0
    context = tmp_path / "locks" / ".pip-lock" / "ow"
    assert sorted(p.name for p in context.iterdir()) == ["requirements.lock"]
    (context / "requirements-arm64.lock").write_text("alpha==1.0\n")  # no header: not bake-plan's
    proc = owned_cli("--target", "ow", "--locked", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == (f"{context.relative_to(tmp_path)}/requirements-arm64.lock: bake-plan did not put this "
                              "file in the pip-lock context of 'ow', which is sent to the build whole; remove it "
                              "(bake-plan keeps only its lock copies there)")
    assert (context / "requirements-arm64.lock").read_text() == "alpha==1.0\n"


@pytest.mark.parametrize("output, why", [("docker-bake.hcl", "docker-bake.hcl: bake-plan did not write this file"),
                                         ("missing/plan.hcl", "cannot write the plan to missing/plan.hcl: No such file"),
                                         ("dangling.hcl", "cannot write the plan to dangling.hcl (a symbolic link to "
                                                          "nowhere/plan.hcl): No such file")])
def test_a_locked_plan_refused_for_its_output_writes_no_pip_lock_context(owned_cli, tmp_path, output, why):
    """The plan file's place is checked before the plan is made: a refused ``--locked`` plan has
    copied no lock into its pip-lock context (exit 2 writes nothing)."""
    assert owned_cli("lock", "--target", "ow", cwd=tmp_path).returncode == 0
    (tmp_path / "docker-bake.hcl").write_text("# the user's own\n")
    (tmp_path / "dangling.hcl").symlink_to("nowhere/plan.hcl")  # written through: its directory is missing
    proc = owned_cli("--target", "ow", "--locked", "-o", output, cwd=tmp_path)
    assert one_line(proc).startswith(why)
    assert not (tmp_path / "locks" / ".pip-lock").exists()


def test_a_stale_lock_copy_bake_plan_wrote_is_removed(owned_cli, tmp_path):
    assert owned_cli("lock", "--target", "ow", cwd=tmp_path).returncode == 0
    context = tmp_path / "locks" / ".pip-lock" / "ow"
    context.mkdir(parents=True)
    lock = (tmp_path / "locks" / "ow.txt").read_text()
    (context / "requirements-arm64.lock").write_text(lock)  # a copy of an earlier form: its header is 'ow'
    assert owned_cli("--target", "ow", "--locked", "-o", "plan.hcl", cwd=tmp_path).returncode == 0
    assert sorted(p.name for p in context.iterdir()) == ["requirements.lock"]


# ---- lock files ----------------------------------------------------------------------------


def test_stage_names_whose_lock_files_collide_are_refused_at_plan_and_lock_time(owned_cli, tmp_path):
    env = {"OWNED_COLLIDE": "1"}
    want = ("stages 'cx' (plugin 'owned') and 'cx-amd64' (plugin 'owned') would both write the lock file "
            "cx-amd64.txt in the locks directory (a lock per arch is <stage>-<arch>.txt); rename one of them")
    assert one_line(owned_cli("--target", "ow", "-o", "plan.hcl", cwd=tmp_path, extra_env=env)) == want
    assert one_line(owned_cli("lock", "--target", "cx", cwd=tmp_path, extra_env=env)) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "no plan, no lock"


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_lock_name_taken_by_a_file_bake_plan_did_not_write_is_refused(owned_cli, tmp_path, kind):
    locks = tmp_path / "locks"
    locks.mkdir()
    (tmp_path / "mine.txt").write_text("my notes\n")
    if kind == "file":
        (locks / "ow.txt").write_text("my notes\n")
        want = ("locks/ow.txt: not a lock bake-plan wrote for 'ow' (no `# bake-plan target: ow` header), so it "
                "will not replace or delete it; move it away (bake-plan writes the lock of 'ow' there)")
    else:
        (locks / "ow.txt").symlink_to(tmp_path / "mine.txt")
        want = ("locks/ow.txt is a symbolic link: bake-plan writes the lock of 'ow' there only as a file of its "
                "own and follows no link; remove the link")
    assert error_line(owned_cli("lock", "--target", "ow", cwd=tmp_path)) == want
    assert (tmp_path / "mine.txt").read_text() == "my notes\n"
    assert (locks / "ow.txt").read_text() == "my notes\n"


# ---- a build's reports -----------------------------------------------------------------------


@pytest.mark.parametrize("name, what", [("sitrep.md", "the summary"), ("sitrep.json", "the sitrep"),
                                        ("badge.json", "the badge")])
def test_a_report_file_bake_plan_did_not_write_is_kept_and_refused(cli, tmp_path, name, what):
    sitrep = tmp_path / "sitrep"
    sitrep.mkdir()
    (sitrep / name).write_text("the user's own\n")
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == (f"sitrep/{name}: bake-plan did not write this file (or it changed since), so it will "
                              f"not replace or delete it; move it away (bake-plan writes {what} there)")
    assert (sitrep / name).read_text() == "the user's own\n"
    assert not (tmp_path / "docker-bake.hcl").exists()


def test_a_symlinked_report_is_refused_and_its_target_kept(cli, tmp_path):
    sitrep = tmp_path / "sitrep"
    sitrep.mkdir()
    (tmp_path / "victim.json").write_text("{}\n")
    (sitrep / "sitrep.json").symlink_to(tmp_path / "victim.json")
    proc = cli("build", "--target", "jax", "--sitrep-dir", "sitrep", cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == ("sitrep/sitrep.json is a symbolic link: bake-plan writes the sitrep there only as a "
                              "file of its own and follows no link; remove the link")
    assert (tmp_path / "victim.json").read_text() == "{}\n" and (sitrep / "sitrep.json").is_symlink()


def test_a_metadata_file_bake_plan_did_not_have_written_is_kept_and_refused(cli, tmp_path):
    (tmp_path / "notes.json").write_text('{"mine": true}\n')
    proc = cli("build", "--target", "jax", "--metadata-file", "notes.json", cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == ("notes.json: bake-plan did not write this file (or it changed since), so it will not "
                              "replace or delete it; move it away (bake-plan writes buildx's --metadata-file there)")
    assert (tmp_path / "notes.json").read_text() == '{"mine": true}\n'


@pytest.mark.parametrize("command, why", [
    (["build", "--target", "jax", "-o", "hand.hcl"], "hand.hcl: bake-plan did not write this file"),
    (["build", "--target", "jax"], "cannot reach a Docker engine"),
    (["test", "--target", "jax"], "cannot reach a Docker engine"),
])
@pytest.mark.parametrize("sitrep_dir, metadata_dir", [("a/b/c", "m/n"), ("a/../a2/c", "m/../m2")])
def test_a_command_stopped_by_an_error_leaves_no_directory_it_made(cli, tmp_path, command, why, sitrep_dir,
                                                                   metadata_dir):
    """``--sitrep-dir`` and the metadata file's directory are made before the plan is written and
    the engine asked; a refusal there removes them again (``bake.owned.no_empty_directory_left``),
    ``..`` included, and a directory the user made is kept."""
    (tmp_path / "hand.hcl").write_text("# the user's own bake file\n")
    (tmp_path / "mine").mkdir()
    before = {p.name for p in tmp_path.iterdir()}
    proc = cli(*command, "--sitrep-dir", sitrep_dir,
               *(["--metadata-file", f"{metadata_dir}/meta.json"] if command[0] == "build" else []),
               cwd=tmp_path, env=NO_ENGINE)
    assert proc.returncode == 2 and why in one_line(proc), proc.stderr
    assert {p.name for p in tmp_path.iterdir()} - {"docker-bake.hcl"} == before  # the plan is written first
    again = cli(*command, "--sitrep-dir", "mine", cwd=tmp_path, env=NO_ENGINE)
    assert again.returncode == 2 and (tmp_path / "mine").is_dir()


def test_no_empty_directory_is_left_and_paths_are_walked_as_mkdir_walks_them(tmp_path, monkeypatch):
    """``bake.owned.no_empty_directory_left``: what the block made and left empty (or holding only
    bake-plan's record) goes, however the block ends; ``..`` after a symbolic link is the link's
    target's parent, as for ``mkdir``; a directory with anything else in it stays."""
    from bake.owned import RECORD, no_empty_directory_left

    monkeypatch.chdir(tmp_path)
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "deep")

    def tree():
        return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    before = tree()
    for given in ["a/b", "p/../q/r", "link/../x/y", str(tmp_path / "abs" / "one")]:
        with pytest.raises(RuntimeError):
            with no_empty_directory_left(given):
                Path(given).mkdir(parents=True)
                raise RuntimeError("the command stopped")
        assert tree() == before, given
    with no_empty_directory_left("rec/only"):  # ended well, but holds only the record
        Path("rec/only").mkdir(parents=True)
        (tmp_path / "rec" / "only" / RECORD).write_text("{}")
    assert tree() == before
    with no_empty_directory_left("kept/one"):
        Path("kept/one").mkdir(parents=True)
        (tmp_path / "kept" / "one" / "report").write_text("x")
    assert (tmp_path / "kept" / "one" / "report").exists()


def test_reports_bake_plan_wrote_are_removed_and_a_changed_one_is_kept(tmp_path):
    from bake.owned import Record
    from bake.run.build import Reports
    from bake.run.sitrep import make_sitrep

    sitrep = tmp_path / "sitrep"
    reports = Reports(sitrep, sitrep / "bake-metadata.json", None)
    reports.prepare(tmp_path / "plan.hcl")
    plan = {"group": {"default": {"targets": []}}, "target": {}}
    reports.write(make_sitrep(plan, "x build", 0, [], {}, {}))
    assert {p.name for p in sitrep.iterdir()} == {".bake-plan-written.json", "sitrep.json", "badge.json", "sitrep.md"}
    reports.prepare(tmp_path / "plan.hcl")  # the next run takes them away: bake-plan wrote them
    assert {p.name for p in sitrep.iterdir()} == {".bake-plan-written.json"}
    Record(sitrep).write("sitrep.md", "ours\n", "the summary")
    (sitrep / "sitrep.md").write_text("edited by hand\n")  # changed since: no longer bake-plan's
    with pytest.raises(OutputError, match="bake-plan did not write this file"):
        reports.prepare(tmp_path / "plan.hcl")
    assert (sitrep / "sitrep.md").read_text() == "edited by hand\n"


# ---- the wheelhouse and its OCI layout -----------------------------------------------------


def test_a_symlinked_oci_layout_is_refused_and_its_target_untouched(cli, tmp_path):
    make_wheel(tmp_path / "wh", "alpha", "1.0")
    victim = _victim(tmp_path / "elsewhere")
    (tmp_path / "wh" / ".bake-plan-oci").symlink_to(tmp_path / "elsewhere")
    proc = cli("--target", "base", "--wheelhouse", "wh", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == (f"{tmp_path}/wh/.bake-plan-oci is a symbolic link: bake-plan makes the wheelhouse's "
                              "image layout there itself and follows no link out of it; remove the link")
    assert _tree(tmp_path / "elsewhere") == victim
    assert not (tmp_path / "plan.hcl").exists()


def test_the_oci_layout_removes_only_the_blobs_bake_plan_wrote(tmp_path):
    from bake.pip.wheelhouse import oci_layout

    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    first = oci_layout(str(wh))
    blobs = wh / ".bake-plan-oci" / "blobs" / "sha256"
    ours = {p.name for p in blobs.iterdir()}
    foreign = "f" * 64
    (blobs / foreign).write_text("not bake-plan's\n")
    (blobs / "notes").write_text("mine\n")
    make_wheel(wh, "beta", "1.0")
    second = oci_layout(str(wh))
    assert second != first
    left = {p.name for p in blobs.iterdir()}
    assert not ours & left - {second.rsplit(":", 1)[-1]}, "bake-plan's old blobs are gone"
    assert {foreign, "notes"} <= left, "files bake-plan did not write stay"
    assert (blobs / foreign).read_text() == "not bake-plan's\n"


def test_an_oci_layout_file_bake_plan_did_not_write_is_refused(tmp_path):
    from bake.pip.wheelhouse import oci_layout

    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    (wh / ".bake-plan-oci").mkdir()
    (wh / ".bake-plan-oci" / "index.json").write_text("{}\n")
    with pytest.raises(OutputError) as err:
        oci_layout(str(wh))
    assert str(err.value) == (f"{wh}/.bake-plan-oci/index.json: bake-plan did not write this file (or it changed "
                              "since), so it will not replace or delete it; move it away (bake-plan writes the "
                              "wheelhouse's image layout there)")
    assert (wh / ".bake-plan-oci" / "index.json").read_text() == "{}\n"


def _fill(out: Path, requires=()):
    """``fill`` with pip faked: every download yields ``alpha-1.0`` (its metadata from ``requires``)."""
    import subprocess

    from bake.pip.lock import LockSpec
    from bake.pip.wheelhouse import fill

    def runner(argv, **kwargs):
        make_wheel(Path(argv[argv.index("--dest") + 1]), "alpha", "1.0", requires)
        return subprocess.CompletedProcess(argv, 0, "", "")

    spec = LockSpec("t", ("linux/amd64",), False, [])
    return fill([spec], out, "3.11", runner=runner)


def test_a_wheel_bake_plan_added_may_be_replaced_but_not_the_users(tmp_path):
    out = tmp_path / "wh"
    assert _fill(out)["added"] == 1
    assert _fill(out, ("beta",))["added"] == 1, "bake-plan's own wheel, replaced by a new build of it"
    mine = tmp_path / "mine"
    make_wheel(mine, "alpha", "1.0", ("gamma",))
    other = tmp_path / "wh2"
    other.mkdir()
    (other / "alpha-1.0-py3-none-any.whl").write_bytes((mine / "alpha-1.0-py3-none-any.whl").read_bytes())
    with pytest.raises(OutputError) as err:
        _fill(other)
    assert str(err.value) == (f"{other}/alpha-1.0-py3-none-any.whl: bake-plan did not write this file (or it "
                              "changed since), so it will not replace or delete it; move it away (bake-plan writes "
                              "a wheel of the wheelhouse there)")
    assert (other / "alpha-1.0-py3-none-any.whl").read_bytes() == (mine / "alpha-1.0-py3-none-any.whl").read_bytes()


# ---- options of the pip side -----------------------------------------------------------------


@pytest.mark.parametrize("value, want", [
    ("", "-o: empty path"),
    ("-", "-o -: bake-plan wheelhouse fills a directory, not stdout; give -o DIR"),
    ("afile", "-o afile: is not a directory"),
], ids=["empty", "stdout", "a-file"])
def test_wheelhouse_output_that_is_not_a_directory_is_refused(cli, tmp_path, value, want):
    (tmp_path / "afile").write_text("x\n")
    proc = cli("wheelhouse", "--config", "/dev/null", "--target", "jax", "-o", value, cwd=tmp_path)
    assert one_line(proc) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"], "no directory '-' or other is made"


@pytest.mark.parametrize("version", ["3.011", "3.01", "03.11", "3.11 ", "3.١١"])
def test_a_python_version_with_leading_zeros_is_refused(cli, tmp_path, version):
    proc = cli("wheelhouse", "--config", "/dev/null", "--target", "jax", "--python-version", version, cwd=tmp_path)
    assert one_line(proc) == (f"--python-version: {version!r} is not a Python version like 3.11 "
                              "(MAJOR.MINOR, no leading zeros)")


@pytest.mark.parametrize("command", [["--target", "ow", "--locked", "-o", "plan.hcl"],
                                     ["wheelhouse", "--target", "ow", "-o", "wh"]], ids=["plan-locked", "wheelhouse"])
def test_a_missing_locks_dir_is_one_line_naming_the_option(owned_cli, tmp_path, command):
    proc = owned_cli(*command, "--locks-dir", "nolocks", cwd=tmp_path)
    assert one_line(proc) == ("--locks-dir nolocks: no such directory (make the locks there: "
                              "bake-plan lock --target T --locks-dir nolocks)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value, want", [("", "--locks-dir: empty path"),
                                         ("afile", "--locks-dir afile: is not a directory"),
                                         ("afile/x", "--locks-dir afile/x: afile is not a directory"),
                                         ("dangling/x", "--locks-dir dangling/x: dangling is a symbolic link to "
                                                        "nowhere/x, which is not there"),
                                         ("new/../dangling/x", "--locks-dir new/../dangling/x: dangling is a symbolic "
                                                               "link to nowhere/x, which is not there")])
def test_a_locks_dir_that_cannot_be_one_is_refused(owned_cli, tmp_path, value, want):
    """Refused before anything is resolved (the one gate for a directory option, values._makeable)."""
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "dangling").symlink_to("nowhere/x")
    proc = owned_cli("lock", "--target", "ow", "--locks-dir", value, cwd=tmp_path)
    assert one_line(proc) == want and "locking" not in proc.stderr


@pytest.mark.parametrize("value, want", [
    ("m/", "--metadata-file m/: names a directory; give the file buildx writes (DIR/meta.json)"),
    ("adir", "--metadata-file adir: names a directory; give the file buildx writes (DIR/meta.json)"),
    ("afile/meta.json", "--metadata-file afile/meta.json: afile is not a directory"),
    ("new/../afile/meta.json", "--metadata-file new/../afile/meta.json: afile is not a directory"),
    ("dangling/meta.json", "--metadata-file dangling/meta.json: dangling is a symbolic link to nowhere/x, which is "
                           "not there"),
])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
def test_a_metadata_file_that_cannot_be_one_is_refused_before_the_plan(cli, tmp_path, value, want, dry_run):
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "adir").mkdir()
    (tmp_path / "dangling").symlink_to("nowhere/x")
    proc = cli("build", "--target", "jax", "--metadata-file", value, *dry_run, cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile", "dangling"], "no plan, no directory"


@pytest.mark.parametrize("python, want", [
    ("/bin/true", "--python /bin/true: not a Python interpreter (`/bin/true -c ...` exited 0 and printed no version)"),
    ("/bin/false", "--python /bin/false: not a Python interpreter (`/bin/false -c ...` exited 1 and printed no version)"),
    ("", "--python: empty interpreter"),
    ("/nonexistent/python", "--python /nonexistent/python: cannot run it: No such file or directory"),
    ("3.11", "--python 3.11: cannot run it: No such file or directory (--python takes an interpreter, not a "
             "version: python3.11, or its path)"),
])
def test_lock_with_a_python_that_is_not_an_interpreter_is_one_line(owned_cli, tmp_path, python, want):
    assert error_line(owned_cli("lock", "--target", "ow", "--python", python, cwd=tmp_path)) == want
    assert not (tmp_path / "locks").exists()


def test_lock_checks_python_before_checking_out_the_chains_sources(cli, tmp_path):
    env = dict(NO_ENGINE, BAKE_PLAN_CHECKOUTS=str(tmp_path / "checkouts"))
    proc = cli("lock", "--target", "jax", "--python", "/bin/true", cwd=tmp_path, env=env)
    assert one_line(proc) == ("--python /bin/true: not a Python interpreter (`/bin/true -c ...` exited 0 and "
                              "printed no version)")
    assert list(tmp_path.iterdir()) == [], "no checkout was started, no lock written"


def test_a_wheelhouse_that_is_a_file_says_so(cli, tmp_path):
    (tmp_path / "wh").write_text("x\n")
    proc = cli("--target", "base", "--wheelhouse", "wh", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == f"--wheelhouse: {tmp_path}/wh: is not a directory (a wheelhouse is a directory of wheels)"


@pytest.mark.parametrize("name, content, why", [
    ("alpha-1.0-py3-none-any.whl", b"not a zip", "not a zip archive"),
    ("garbage.whl", None, "its name: Invalid wheel filename (wrong number of parts): 'garbage'"),
])
def test_a_wheelhouse_file_that_is_not_a_wheel_is_refused_naming_it(cli, tmp_path, name, content, why):
    wh = tmp_path / "wh"
    make_wheel(wh, "beta", "1.0")
    if content is None:
        (wh / name).write_bytes((wh / "beta-1.0-py3-none-any.whl").read_bytes())
    else:
        (wh / name).write_bytes(content)
    proc = cli("--target", "base", "--wheelhouse", "wh", "-o", "plan.hcl", cwd=tmp_path)
    assert one_line(proc) == (f"--wheelhouse: {wh}/{name}: not a wheel ({why}); remove it or fill the wheelhouse "
                              f"again: bake-plan wheelhouse --target T -o {wh}")
    assert not (tmp_path / "plan.hcl").exists()


@pytest.mark.parametrize("value, want", [("", "--sitrep-dir: empty path"),
                                         ("afile", "--sitrep-dir afile: is not a directory"),
                                         ("dangling", "--sitrep-dir dangling: a symbolic link to nowhere/x, which is "
                                                      "not there"),
                                         ("dangling/sub", "--sitrep-dir dangling/sub: dangling is a symbolic link to "
                                                          "nowhere/x, which is not there"),
                                         ("afile/sub", "--sitrep-dir afile/sub: afile is not a directory"),
                                         ("new/../afile/x", "--sitrep-dir new/../afile/x: afile is not a directory")])
@pytest.mark.parametrize("command", ["build", "test"])
def test_a_sitrep_dir_that_cannot_be_one_names_the_option(cli, tmp_path, value, want, command):
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "dangling").symlink_to("nowhere/x")
    proc = cli(command, "--target", "jax", "--sitrep-dir", value, cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "dangling"]


# ---- the sources manifest: a bad entry fails only the plans that use it ----------------------


def _manifest(tmp_path: Path, key: str, old: str, new: str) -> Path:
    from bake.resources import stages_dir

    text = (stages_dir() / "sources.toml").read_text()
    head, _, rest = text.partition(f"[{key}]")
    path = tmp_path / "sources.toml"
    path.write_text(head + f"[{key}]" + rest.replace(old, new, 1))
    return path


def test_a_bad_manifest_entry_fails_only_the_plans_that_use_it(cli, tmp_path):
    path = _manifest(tmp_path, "paxml", 'mode = "git-clone"', 'mode = "svn"')
    ok = cli("--target", "upstream-t5x", "--format", "json", "-o", "-", "--sources", str(path), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "bake-plan-refused-source" not in ok.stdout
    proc = cli("--target", "upstream-pax", "-o", "plan.hcl", "--sources", str(path), cwd=tmp_path)
    assert one_line(proc) == (f"{path}: [paxml]: mode 'svn' is not one of git-clone, pip-vcs "
                              "(stage 'upstream-pax' builds with source PAXML)")
    assert not (tmp_path / "plan.hcl").exists()


def test_a_placeholder_commit_fails_only_the_plans_that_use_it(cli, tmp_path):
    path = _manifest(tmp_path, "t5x", "", "")
    path.write_text(re.sub(r'(\[t5x\][^\[]*commit = ")[0-9a-f]{40}', r"\g<1>" + "0" * 40, path.read_text()))
    assert cli("--target", "upstream-pax", "-o", "-", "--sources", str(path), cwd=tmp_path).returncode == 0
    proc = cli("--target", "upstream-t5x", "-o", "-", "--sources", str(path), cwd=tmp_path)
    assert one_line(proc) == (f"{path}: [t5x]: commit is a placeholder (all zeros), not a commit that exists: run "
                              "`bake-plan bump t5x` or write the commit (stage 'upstream-t5x' builds with source T5X)")


def test_a_manifest_that_is_not_toml_fails_every_plan_naming_the_file_not_a_plugin(cli, tmp_path):
    path = tmp_path / "sources.toml"
    path.write_text("[jax\n")
    proc = cli("--target", "base", "-o", "plan.hcl", "--sources", str(path), cwd=tmp_path)
    line = one_line(proc)
    assert line.startswith(f"{path}: not valid TOML: ") and "plugin" not in line, line
    assert not (tmp_path / "plan.hcl").exists()


def test_bump_refuses_only_the_bad_entries_it_would_touch(tmp_path):
    from bake.errors import SourcesError
    from bake.pip.sources import bump

    path = _manifest(tmp_path, "paxml", 'mode = "git-clone"', 'mode = "svn"')
    head = "a" * 40
    results = bump(["t5x"], path, resolve=lambda url, ref: [(head, "refs/heads/main")])
    assert [r.new for r in results] == [head]
    with pytest.raises(SourcesError, match=r"\[paxml\]: mode 'svn'"):
        bump(["paxml"], path, resolve=lambda url, ref: [(head, "refs/heads/main")])
