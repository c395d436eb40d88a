"""``bake-plan lock`` with the real pip-compile against a wheelhouse made here: conflicts between
stages exit 1 naming both stages; otherwise the lock is what pip-compile gives for the same
inputs; in-image paths, per-arch lines, and ``--locked`` plans that take the lock as a context."""

from __future__ import annotations

import json
import os
import re
import platform
import subprocess
import sys

import pytest
from conftest import hermetic_pip_env, make_wheel
from hypothesis import given, settings
from hypothesis import strategies as st

from bake.plan.requirement_lines import SIMPLE_REQUIREMENT, requirement_fault

PLUGIN = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir

LOCAL = os.environ.get("LOCKTEST_LOCAL_WHEELS", "/nonexistent")


@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")

    def stage(name, parent=None, lines=(), **kw):
        where = dict(parent=parent) if parent else dict(base_image="python:3.11-slim-bookworm")
        return Stage(registry="ghcr.io/nvidia", name=name, image=name, context=ctx, requirements=tuple(lines), **where, **kw)

    return [
        stage("lt-a", lines=["beta"]),
        stage("lt-b", "lt-a", ["alpha<2"]),            # beta needs alpha>=2
        stage("lt-c", lines=["gamma"]),                # gamma needs beta, which needs alpha>=2
        stage("lt-d", "lt-c", ["alpha<2"]),
        stage("lt-e", "lt-a", os.environ.get("LOCKTEST_E", "gamma|zeta>=1").split("|")),
        stage("lt-img", "lt-a", ["omega @ file:///opt/wheels/omega-1.0-py3-none-any.whl"],
              host_paths={"/opt/wheels": LOCAL}),
        stage("lt-nohost", "lt-a", ["-e file:///opt/nowhere"]),
        stage("lt-arch", "lt-a", ['zeta; platform_machine == "aarch64"']),
        stage("lt-missing", "lt-a", ["zeta>5"]),
    ]
"""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    """``alpha`` 1.0 and 2.0; ``beta`` needs ``alpha>=2``; ``gamma`` needs ``beta``; ``zeta``; and
    ``omega`` (needs ``alpha``) in a directory of its own, standing for a wheel built in the image."""
    root = tmp_path_factory.mktemp("lock-wheels")
    house, local = root / "wheelhouse", root / "local"
    for name, version, requires in [("alpha", "1.0", ()), ("alpha", "2.0", ()), ("beta", "1.0", ("alpha>=2",)),
                                    ("gamma", "1.0", ("beta",)), ("zeta", "1.0", ())]:
        make_wheel(house, name, version, requires)
    make_wheel(local, "omega", "1.0", ("alpha",))
    return house, local


@pytest.fixture
def lock_cli(cli, make_plugin, wheels):
    site = make_plugin(PLUGIN, name="locktest")
    house, local = wheels

    def run(*args, extra_env=None, index=True, **kw):
        env = hermetic_pip_env()
        env.update({"LOCKTEST_LOCAL_WHEELS": str(local), **(extra_env or {})})
        if args and args[0] == "lock" and index:
            args = args + ("--no-index", "--find-links", str(house))
        return cli(*args, env=env, pythonpath=[site, *kw.pop("pythonpath", ())], **kw)

    return run


def _body(text: str) -> str:
    """A lock without bake-plan's header: what pip-compile wrote, plus any index options."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# bake-plan "))


def test_conflict_between_two_stages_exits_1_naming_both(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-b", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "conflicting requirements for 'lt-b'" in err and "between stages 'lt-a' and 'lt-b'" in err, err
    assert "stage 'lt-b' (plugin 'locktest') asks for alpha: alpha<2" in err, err
    assert "stage 'lt-a' (plugin 'locktest') asks for beta: beta" in err, err
    assert "beta depend on alpha>=2" in err, err  # uv's explanation follows, on a line of its own
    assert "Traceback" not in err
    assert not (tmp_path / "locks").exists()


def test_conflict_through_a_dependency_names_the_stage_that_brings_it_in(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-d", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "between stages 'lt-c' and 'lt-d'" in proc.stderr, proc.stderr
    assert "stage 'lt-c' (plugin 'locktest') brings beta in" in proc.stderr, proc.stderr


def test_lock_is_what_pip_compile_gives_for_the_same_inputs(lock_cli, wheels, tmp_path):
    proc = lock_cli("lock", "--target", "lt-e", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote locks/lt-e.txt" in proc.stdout
    lock = (tmp_path / "locks" / "lt-e.txt").read_text()

    # The same inputs by hand: each stage's lines in requirements-<stage>.in, root first.
    ref = tmp_path / "by-hand"
    ref.mkdir()
    (ref / "requirements-lt-a.in").write_text("beta\n")
    (ref / "requirements-lt-e.in").write_text("gamma\nzeta>=1\n")
    subprocess.run([sys.executable, "-m", "piptools", "compile", "--quiet", "--no-header", "--strip-extras",
                    "--allow-unsafe", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
                    "--no-index", "--find-links", str(wheels[0]), "--output-file", "out.txt",
                    "requirements-lt-a.in", "requirements-lt-e.in"],
                   cwd=ref, env=hermetic_pip_env(), check=True, capture_output=True, timeout=300)
    assert _body(lock) == (ref / "out.txt").read_text()
    assert "alpha==2.0" in lock.splitlines() and "-r requirements-lt-a.in" in lock
    header = [line for line in lock.splitlines() if line.startswith("# bake-plan ")]
    assert "# bake-plan target: lt-e" in header
    assert "# bake-plan platforms: linux/amd64, linux/arm64" in header  # no line differs by arch


def test_in_image_paths_resolve_through_the_stages_host_paths(lock_cli, wheels, tmp_path):
    proc = lock_cli("lock", "--target", "lt-img", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "lt-img.txt").read_text()
    assert "omega @ file:///opt/wheels/omega-1.0-py3-none-any.whl" in lock.splitlines()
    assert "alpha==2.0" in lock.splitlines()  # omega's own dependency, read from the host's wheel
    assert str(wheels[1]) not in lock


def test_in_image_path_without_a_host_path_is_skipped_with_a_note(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-nohost", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "note: skipped '-e file:///opt/nowhere' of stage 'lt-nohost' (plugin 'locktest')" in proc.stderr
    lock = (tmp_path / "locks" / "lt-nohost.txt").read_text()
    assert "# bake-plan skipped: -e file:///opt/nowhere (stage 'lt-nohost'" in lock
    assert "beta==1.0" in lock.splitlines()
    # A locked build would miss the skipped line: refused before anything is built.
    proc = lock_cli("--target", "lt-nohost", "--locked", "-o", "plan.json", cwd=tmp_path)
    assert proc.returncode == 2 and "leaves out 1 in-image line(s)" in proc.stderr, proc.stderr
    assert not (tmp_path / "plan.json").exists()


def test_lines_that_differ_by_arch_give_one_lock_per_arch(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-arch", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    amd = (tmp_path / "locks" / "lt-arch-amd64.txt").read_text().splitlines()
    arm = (tmp_path / "locks" / "lt-arch-arm64.txt").read_text().splitlines()
    assert "zeta==1.0" in arm and "zeta==1.0" not in amd
    assert "# bake-plan platforms: linux/arm64" in arm and "beta==1.0" in arm and "beta==1.0" in amd
    assert not (tmp_path / "locks" / "lt-arch.txt").exists()

    # The locked plan's context holds one lock per arch, which bake-pip-finalize picks by uname -m.
    proc = lock_cli("--target", "lt-arch", "--locked", "--format", "json", "-o", "plan.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    context = json.loads((tmp_path / "plan.json").read_text())["target"]["lt-arch"]["contexts"]["pip-lock"]
    names = sorted(p.name for p in __import__("pathlib").Path(context).iterdir())
    assert names == ["requirements-amd64.lock", "requirements-arm64.lock"]

    # Locking for one platform only covers that one.
    proc = lock_cli("lock", "--target", "lt-arch", "--platform", "linux/amd64", "--locks-dir", "one", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["lt-arch-amd64.txt"]


def test_locked_plan_gives_the_final_target_its_lock(lock_cli, tmp_path):
    assert lock_cli("lock", "--target", "lt-e", cwd=tmp_path).returncode == 0
    proc = lock_cli("--target", "lt-e", "--locked", "--format", "json", "-o", "plan.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads((tmp_path / "plan.json").read_text())["target"]
    context = tmp_path / "locks" / ".pip-lock" / "lt-e"
    assert targets["lt-e"]["contexts"]["pip-lock"] == str(context.resolve())
    assert (context / "requirements.lock").read_text() == (tmp_path / "locks" / "lt-e.txt").read_text()
    # Only the requested stage's final stage is locked; meal kits and ancestors compile as before.
    for name in ("lt-e-mealkit", "lt-a-mealkit", "lt-a"):
        assert "pip-lock" not in targets[name].get("contexts", {}), name


def test_locked_plan_refuses_a_lock_made_from_other_lines(lock_cli, tmp_path):
    assert lock_cli("lock", "--target", "lt-e", cwd=tmp_path).returncode == 0
    proc = lock_cli("--target", "lt-e", "--locked", cwd=tmp_path, extra_env={"LOCKTEST_E": "gamma|zeta>=1|alpha"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "locks/lt-e.txt is out of date" in lines[0], proc.stderr
    assert "bake-plan lock --target lt-e" in lines[0]
    assert not (tmp_path / "docker-bake.hcl").exists()


def test_locked_plan_without_a_lock_is_one_line(lock_cli, tmp_path):
    proc = lock_cli("--target", "lt-e", "--locked", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("bake-plan: error: --locked: no lock locks/lt-e.txt for 'lt-e' "
                                   "(linux/amd64, linux/arm64): run `bake-plan lock --target lt-e`")


def test_a_host_path_that_does_not_exist_is_one_line(lock_cli, tmp_path):
    missing = tmp_path / "no-wheels"
    proc = lock_cli("lock", "--target", "lt-img", cwd=tmp_path, extra_env={"LOCKTEST_LOCAL_WHEELS": str(missing)})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"bake-plan: error: stage 'lt-img' (plugin 'locktest'): host path {missing}/omega-1.0-py3-none-any.whl "
        "for 'omega @ file:///opt/wheels/omega-1.0-py3-none-any.whl' does not exist")
    assert not (tmp_path / "locks").exists()


def test_a_requirement_no_index_has_names_its_stage(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-missing", cwd=tmp_path)
    assert proc.returncode == 1
    first = next(row for row in proc.stderr.splitlines() if row.startswith("bake-plan: error:"))
    assert ("no distribution found for zeta>5 (stage 'lt-missing' (plugin 'locktest') asks for it: zeta>5); "
            "versions that exist: 1.0, locking 'lt-missing'") in first, proc.stderr


def test_the_versions_hint_asks_the_index_uv_asked_not_pips_configuration(lock_cli, wheels, tmp_path):
    """uv reads no pip configuration: the "versions that exist" hint (``pip index versions``) must
    not find versions through ``PIP_FIND_LINKS`` or a pip.conf when uv was told ``--no-index``."""
    house, _ = wheels
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {house}\n")
    proc = lock_cli("lock", "--target", "lt-missing", "--no-index", cwd=tmp_path, index=False,
                    extra_env={"PIP_FIND_LINKS": str(house), "PIP_CONFIG_FILE": str(conf)})
    assert proc.returncode == 1
    first = next(row for row in proc.stderr.splitlines() if row.startswith("bake-plan: error:"))
    # uv stops at the first project it cannot find (beta, of the parent stage); pip, with the
    # configuration uv ignores, would have listed the house's versions of it
    assert "no distribution found for beta (stage 'lt-a' (plugin 'locktest') asks for it: beta); " \
        "versions that exist: none, locking 'lt-missing'" in first, first


def test_the_locking_line_counts_in_words_that_agree(lock_cli, tmp_path):
    one = lock_cli("lock", "--target", "lt-a", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    assert "bake-plan: locking 'lt-a' (linux/amd64, linux/arm64): 1 requirement line from 1 stage\n" in one.stderr
    two = lock_cli("lock", "--target", "lt-b", cwd=tmp_path)
    assert ": 2 requirement lines from 2 stages\n" in two.stderr, two.stderr


def test_a_lock_resolved_with_the_hosts_markers_for_another_arch_says_so(lock_cli, tmp_path):
    """lt-a declares no Python, so uv resolves it with bake-plan's interpreter's markers for both of
    its platforms: the other arch's lock gets a note; --quiet keeps it out."""
    machine = os.uname().machine
    other = "linux/arm64" if machine == "x86_64" else "linux/amd64"
    proc = lock_cli("lock", "--target", "lt-a", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # the interpreter is named as bake-plan's own sys.executable: the console script's shebang, which may
    # name another link (python3) to the interpreter running these tests (python)
    note = re.search(rf"bake-plan: note: the lock for {other} is resolved with the markers and wheel tags of (\S+) "
                     rf"\({machine}\), so its dependencies are {machine}'s; declare the chain's Python", proc.stderr)
    assert note, proc.stderr
    assert os.path.realpath(note.group(1)) == os.path.realpath(sys.executable), note.group(1)
    assert "note: the lock for" not in lock_cli("lock", "--target", "lt-a", "--quiet", cwd=tmp_path).stderr


def test_a_one_target_stage_has_nothing_to_lock(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "xla-ci", cwd=tmp_path)
    assert proc.returncode == 2
    assert "stage 'xla-ci' (plugin 'xla-ci') is a one-target stage" in proc.stderr


def test_a_second_conflicting_target_writes_no_lock(lock_cli, tmp_path):
    proc = lock_cli("lock", "--target", "lt-e", "--target", "lt-b", cwd=tmp_path)
    assert proc.returncode == 1
    assert not (tmp_path / "locks").exists()


def test_index_options_pass_through_to_pip_compile(lock_cli, wheels, tmp_path):
    # Without --find-links the wheelhouse is not seen: the same lock then fails.
    proc = lock_cli("lock", "--target", "lt-a", "--no-index", cwd=tmp_path, index=False)
    assert proc.returncode == 1 and "no distribution found for beta" in proc.stderr
    proc = lock_cli("lock", "--target", "lt-a", "--no-index", "-f", str(wheels[0]), cwd=tmp_path, index=False)
    assert proc.returncode == 0, proc.stderr


UNPINNED = """
from bake import Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="vcs", image="vcs", parent="base", context=stage_dir("jax"),
                  requirements=("numpy<2", "{line}"))]
"""


def _refused_line(cli, make_plugin, tmp_path, line) -> str:
    """The one error line ``plan`` and ``lock`` give (the same) for a stage with ``line``, which
    both refuse with exit 2 and nothing written."""
    site = make_plugin(UNPINNED.format(line=line), name="vcs-plugin")
    said = set()
    for args in (("--target", "vcs"), ("lock", "--target", "vcs")):
        proc = cli(*args, cwd=tmp_path, pythonpath=[site])
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert list(tmp_path.iterdir()) == []
        said.add(lines[0])
    assert len(said) == 1, said
    return said.pop()


@pytest.mark.parametrize("line", ["tool @ git+https://example.com/tool.git@main",
                                  "tool @ git+https://example.com/tool.git",
                                  "-e git+https://example.com/tool.git@v1.0#egg=tool"])
def test_an_unpinned_git_requirement_is_refused(cli, make_plugin, tmp_path, line):
    said = _refused_line(cli, make_plugin, tmp_path, line)
    assert "plugin 'vcs-plugin', stage 'vcs', field 'requirements'" in said
    assert "not pinned to a 40-hex commit" in said


@pytest.mark.parametrize("line, why", [
    ("six=1.17", "Expected semicolon (after name with no version specifier) or end (a version is pinned with ==)"),
    ('six; python_version < 3.11', "Expected a marker variable or quoted string"),
    ("six>=", "Expected semicolon (after name with no version specifier) or end"),
    ("six==1.17 --bogus-option", "'--bogus-option' is no option pip reads after a requirement "
                                 "(only --hash, --config-settings, -C, --global-option)"),
    ("six'; rm -rf /", "'-rf' is no option pip reads after a requirement "
                       "(only --hash, --config-settings, -C, --global-option)"),
    ("six==1.17 --hash=md5", "--hash=md5: not ALGORITHM:HEX with sha256, sha384 or sha512"),
    ("-e", "-e needs a value"),
    ("--no-such-flag", "--no-such-flag is no option pip reads in a requirements file"),
])
def test_a_requirement_pip_cannot_read_is_refused_when_planning(cli, make_plugin, tmp_path, line, why):
    """A malformed line is one line at plan time naming the plugin, the stage and the field, not
    a resolver error at lock time or a failed pip install in the build."""
    assert _refused_line(cli, make_plugin, tmp_path, line) == (
        f"bake-plan: error: plugin 'vcs-plugin', stage 'vcs', field 'requirements': {line!r} "
        f"is not a line pip can read: {why}")


@pytest.mark.parametrize("line, ref", [("six @ file://${PIP_FIND_LINKS}/six-1.17.0-py2.py3-none-any.whl", "${PIP_FIND_LINKS}"),
                                       ("x @ https://host.example/${PIP_INDEX_URL}", "${PIP_INDEX_URL}"),
                                       ("--extra-index-url https://h.example/$TOKEN/simple", "$TOKEN")])
def test_a_requirement_pip_would_expand_is_refused_when_planning(cli, make_plugin, tmp_path, line, ref):
    """The image's pip-compile expands ``${NAME}`` from the build's environment: refused by ``plan``
    as by ``lock``, in one line naming the plugin, the stage and the field."""
    assert _refused_line(cli, make_plugin, tmp_path, line) == (
        f"bake-plan: error: plugin 'vcs-plugin', stage 'vcs', field 'requirements': {line!r} holds {ref!r}, "
        "which uv and pip replace by the environment variable's value: the image's pip-compile would send the "
        "build's value (an index URL with its credentials, a token) to the host the line names; write the value itself")


@pytest.mark.parametrize("line", [
    "numpy<2", "jax[cuda12]>=0.4, <0.5", "x==1.*", "x~=1.2", "a-b[c]==1.0rc1", "torch==2.1+cpu", "numpy<2  # why",
    'six; python_version < "3.11"', "fiddle @ git+https://github.com/google/fiddle.git@" + "c0" * 20,
    "-e file:///opt/jax", "-r other.txt", "--pre", "--extra-index-url=https://example.com/simple", "./local/pkg",
    "six==1.0 --hash=sha256:" + "ab" * 32, "x --config-settings a=b", "pkg @ file:///opt/${X}/x.whl", "# a comment",
])
def test_every_shape_pip_reads_passes(line):
    assert requirement_fault(line) is None


@given(st.from_regex(SIMPLE_REQUIREMENT.compiled, fullmatch=True))
@settings(max_examples=100, deadline=None)  # drawing from the regular expression is the cost: 0.06 s an example
def test_every_line_planning_passes_without_packaging_is_one_packaging_reads(line):
    """The fast path of the requirement check never lets through a line pip's parser refuses."""
    from packaging.requirements import Requirement

    Requirement(line)


def test_a_git_requirement_pinned_to_a_commit_is_accepted(cli, make_plugin, tmp_path):
    line = "tool @ git+https://example.com/tool.git@" + "a1" * 20
    site = make_plugin(UNPINNED.format(line=line), name="vcs-plugin")
    proc = cli("--target", "vcs", "--format", "json", "-o", "-", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["target"]["vcs-mealkit"]["args"]["REQUIREMENTS"] == "numpy<2\n" + line


def _finalize(tmp_path, ins, locks, arch="amd64", python_says="", **extra_env):
    """Run the image's bake-pip-finalize on the host, up to its checks of a pre-made lock."""
    from pathlib import Path

    from bake.resources import stages_dir

    pip_tools_d, lock_dir = tmp_path / "pip-tools.d", tmp_path / "pip-lock"
    pip_tools_d.mkdir()
    lock_dir.mkdir()
    for name, text in ins.items():
        (pip_tools_d / name).write_text(text)
    for name, text in locks.items():
        (lock_dir / name).write_text(text)
    # The environment to sync is a stand-in that fails: these tests stop at the checks, and a
    # check that wrongly passed must never sync (uninstall from) a real environment.
    target = tmp_path / "not-a-python"
    target.write_text(f'#!/bin/sh\n[ "$1" = -c ] && [ -n "{python_says}" ] && echo "{python_says}" && exit 0\nexit 3\n')
    target.chmod(0o755)
    env = hermetic_pip_env()
    env.update(BAKE_PIP_TOOLS_D=str(pip_tools_d), BAKE_PIP_LOCK_DIR=str(lock_dir), BAKE_ARCH=arch,
               BAKE_PIP_TOOLS=str(Path(sys.executable).parent.parent), BAKE_PYTHON=str(target), **extra_env)
    return subprocess.run(["bash", str(stages_dir() / "scripts" / "pip-finalize.sh")], env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_locked_final_stage_refuses_a_lock_that_misses_an_image_line(tmp_path):
    ins = {"requirements-jax.in": "numpy<2\n-e file:///opt/jax\n", "requirements-pax.in": "alpha>=2\n"}
    lock = "numpy==1.26.4\n    # via -r requirements-jax.in\nalpha==1.0\n"
    proc = _finalize(tmp_path, ins, {"requirements.lock": lock})
    assert proc.returncode == 1
    assert "requirements-jax.in:2: -e file:///opt/jax: not in the lock" in proc.stderr
    assert "requirements-pax.in:1: alpha>=2: the lock pins alpha==1.0" in proc.stderr
    assert "requirements-jax.in:1" not in proc.stderr  # numpy==1.26.4 satisfies numpy<2


def test_a_locked_final_stage_needs_the_lock_of_its_arch(tmp_path):
    proc = _finalize(tmp_path, {"requirements-a.in": "alpha\n"}, {"requirements-amd64.lock": "alpha==1.0\n"}, arch="arm64")
    assert proc.returncode == 1
    assert "has per-arch locks but none for arm64" in proc.stderr


def test_a_locked_final_stage_takes_the_lock_of_its_arch(tmp_path):
    locks = {"requirements-amd64.lock": "alpha==1.0\n", "requirements-arm64.lock": "beta==1.0\n"}
    proc = _finalize(tmp_path, {"requirements-a.in": "beta\n"}, locks, arch="arm64")
    assert "using pre-made lock" in proc.stdout and "not in the lock" not in proc.stderr, proc.stderr
    assert (tmp_path / "pip-tools.d" / "requirements.lock").read_text() == "beta==1.0\n"
    assert proc.returncode != 0  # it went on to sync, into the stand-in, which fails


PY_PLUGIN = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")

    def stage(name, parent=None, lines=(), **kw):
        where = dict(parent=parent) if parent else dict(base_image="python:3.9-slim-bookworm")
        return Stage(registry="ghcr.io/nvidia", name=name, image=name, context=ctx, requirements=tuple(lines), **where, **kw)

    return [
        stage("py-a", lines=['alpha<2; python_version < "3.10"'], python="3.9"),
        stage("py-b", "py-a", ["alpha>=2"]),                       # inherits python 3.9
        stage("py-c", lines=["delta", "eta"], python="3.9"),
        stage("py-c11", "py-c", [], python="3.11"),
        stage("py-p", lines=["paxml"], python="3.9"),
    ] + ([stage("py-bad", lines=["alpha"], python="three")] if os.environ.get("PY_BAD") else [])
"""


@pytest.fixture(scope="module")
def py_wheels(tmp_path_factory):
    """``alpha`` 1.0/2.0; ``delta`` 2.0 needs Python >= 3.10 (1.0 any); ``eta`` needs ``zeta`` only on
    aarch64 and ``alpha<2`` only before Python 3.10; ``paxml`` needs a ``lingvo`` that does not exist."""
    house = tmp_path_factory.mktemp("py-wheels")
    for name, version, requires, python in [
            ("alpha", "1.0", (), None), ("alpha", "2.0", (), None), ("zeta", "1.0", (), None),
            ("delta", "1.0", (), ">=3.8"), ("delta", "2.0", (), ">=3.10"),
            ("eta", "1.0", ('zeta; platform_machine == "aarch64"', 'alpha<2; python_version < "3.10"'), None),
            ("paxml", "1.4.0", ("lingvo==0.12.7",), None), ("lingvo", "0.12.5", (), None),
            ("lingvo", "0.12.6", (), None)]:
        make_wheel(house, name, version, requires, requires_python=python)
    return house


@pytest.fixture
def py_cli(cli, make_plugin, py_wheels):
    site = make_plugin(PY_PLUGIN, name="pytest-family")

    def run(*args, extra_env=None, **kw):
        if args and args[0] == "lock":
            args = args + ("--no-index", "--find-links", str(py_wheels))
        return cli(*args, env={**hermetic_pip_env(), **(extra_env or {})}, pythonpath=[site], **kw)

    return run


def test_a_conflict_only_under_the_images_python_is_caught_without_that_python(py_cli, tmp_path):
    # alpha<2 applies only before Python 3.10; the host is newer, the image is 3.9.
    assert sys.version_info[:2] != (3, 9)
    proc = py_cli("lock", "--target", "py-b", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert "conflicting requirements for 'py-b'" in err and "Python 3.9.0 on x86_64-manylinux_2_28" in err, err
    assert "between stages 'py-a' and 'py-b'" in err, err
    assert "stage 'py-a' (plugin 'pytest-family') asks for alpha" in err, err
    assert "Traceback" not in err and not (tmp_path / "locks").exists()


def test_a_lock_for_another_python_has_that_pythons_pins(py_cli, tmp_path):
    proc = py_cli("lock", "--target", "py-c", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # eta pulls zeta only on aarch64: one lock per arch.
    amd = (tmp_path / "locks" / "py-c-amd64.txt").read_text()
    arm = (tmp_path / "locks" / "py-c-arm64.txt").read_text()
    assert "# bake-plan python: 3.9.0" in amd.splitlines() and "# bake-plan resolver: uv" in amd.splitlines()
    # "3.9" is resolved as 3.9.0 (uv's reading), and the header says so and how to give the patch
    assert ('# bake-plan python-patch: assumed 3.9.0: the chain declares python = "3.9"; declare the image\'s '
            'exact Python (python = "3.9.N") to lock for it') in amd.splitlines(), amd
    assert "# bake-plan python-platform: x86_64-manylinux_2_28" in amd.splitlines()
    assert "# bake-plan python-platform: aarch64-manylinux_2_28" in arm.splitlines()
    assert "zeta==1.0" in arm.splitlines() and "zeta==1.0" not in amd.splitlines()

    # For Python 3.9: delta 2.0 needs Python >= 3.10, and eta's alpha<2 applies before 3.10 (the
    # host's own pip would pick delta 2.0 and no alpha).
    pins = lambda text: sorted(r for r in text.splitlines() if r and not r[0].isspace() and not r.startswith("#"))
    assert pins(amd) == ["alpha==1.0", "delta==1.0", "eta==1.0"], amd
    assert pins(arm) == ["alpha==1.0", "delta==1.0", "eta==1.0", "zeta==1.0"], arm
    assert "delta==1.0" in amd.splitlines() and "alpha==1.0" in amd.splitlines()


def test_the_childs_python_replaces_the_parents(py_cli, tmp_path):
    proc = py_cli("lock", "--target", "py-c11", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "py-c11-amd64.txt").read_text().splitlines()
    assert "# bake-plan python: 3.11.0" in lock and "delta==2.0" in lock and "alpha==1.0" not in lock


def test_a_missing_version_names_the_chain_and_what_exists(py_cli, tmp_path):
    proc = py_cli("lock", "--target", "py-p", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    first = next(row for row in proc.stderr.splitlines() if row.startswith("bake-plan: error:"))
    assert ("no distribution found for lingvo==0.12.7 (lingvo==0.12.7 <- paxml 1.4.0 <- stage 'py-p' "
            "(plugin 'pytest-family')); versions that exist: 0.12.6, 0.12.5") in first, proc.stderr
    assert "for Python 3.9.0 on x86_64-manylinux_2_28" in first


def test_python_must_be_a_version(py_cli, tmp_path):
    proc = py_cli("--target", "py-c", cwd=tmp_path, extra_env={"PY_BAD": "1"})
    assert proc.returncode == 2
    assert "stage 'py-bad', field 'python': 'three' is not a Python version" in proc.stderr.strip(), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_explicit_python_of_another_version_is_refused(py_cli, tmp_path):
    proc = py_cli("lock", "--target", "py-c", "--python", sys.executable, cwd=tmp_path)
    assert proc.returncode == 2
    assert "the image of 'py-c' has Python 3.9" in proc.stderr, proc.stderr


def test_a_relative_python_path_works(lock_cli, tmp_path):
    import os
    rel = os.path.relpath(sys.executable, tmp_path)
    proc = lock_cli("lock", "--target", "lt-e", "--python", rel, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    head = [row for row in (tmp_path / "locks" / "lt-e.txt").read_text().splitlines() if row.startswith("# bake-plan ")]
    # uv resolves for that interpreter's markers (uv's --python); the lock names its version.
    assert "# bake-plan resolver: uv" in head and f"# bake-plan python: {platform.python_version()}" in head, head
    assert not any(row.startswith("# bake-plan python-platform:") for row in head), head


def test_a_locked_final_stage_without_the_lock_mounted_fails_in_one_line(tmp_path):
    proc = _finalize(tmp_path, {"requirements-a.in": "alpha\n"}, {}, BAKE_PIP_LOCKED="1")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"bake-pip-finalize: a --locked build (BAKE_PIP_LOCKED=1) but no lock in {tmp_path / 'pip-lock'}: the "
        "final stage must mount the pip-lock context (RUN --mount=type=bind,from=pip-lock,target="
        f"{tmp_path / 'pip-lock'} bake-pip-finalize)"], proc.stderr
    assert "compiling" not in proc.stdout


def test_a_lock_for_another_python_is_refused_first_in_one_line(tmp_path):
    lock = "# bake-plan python: 3.10\n# bake-plan target: x\nalpha==1.0\n"
    proc = _finalize(tmp_path, {"requirements-a.in": "beta\n"}, {"requirements.lock": lock}, python_says="3.11")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"bake-pip-finalize: the lock {tmp_path / 'pip-lock' / 'requirements.lock'} was made for Python 3.10, this "
        'image has Python 3.11: build on a base image of Python 3.10 (docs/plugins.md, "A base of another Python"), '
        'or, only if the family runs on it, declare python = "3.11" and run bake-plan lock again'], proc.stderr
    # The same lock for the image's Python goes on to its checks (beta is not in it).
    proc = _finalize(tmp_path / "again", {"requirements-a.in": "beta\n"}, {"requirements.lock": lock},
                     python_says="3.10") if (tmp_path / "again").mkdir() is None else None
    assert "requirements-a.in:1: beta: not in the lock" in proc.stderr, proc.stderr


@pytest.mark.parametrize("declared, image, refused", [
    ("3.11.2", "3.11.7", True), ("3.11.2", "3.11.2", False), ("3.11", "3.11.7", False), (None, "3.11.7", False)])
def test_a_lock_python_is_compared_at_the_declared_precision(tmp_path, declared, image, refused):
    lock = ("# bake-plan python: 3.11.2\n" + (f"# bake-plan python-declared: {declared}\n" if declared else "")
            + "# bake-plan target: x\nalpha==1.0\n")
    proc = _finalize(tmp_path, {"requirements-a.in": "beta\n"}, {"requirements.lock": lock}, python_says=image)
    assert proc.returncode == 1
    if refused:
        assert proc.stderr.strip().splitlines() == [
            f"bake-pip-finalize: the lock {tmp_path / 'pip-lock' / 'requirements.lock'} was made for Python 3.11.2, "
            'this image has Python 3.11.7: build on a base image of Python 3.11.2 (docs/plugins.md, "A base of another '
            'Python"), or, only if the family runs on it, declare python = "3.11.7" and run bake-plan lock again'], proc.stderr
    else:
        assert "requirements-a.in:1: beta: not in the lock" in proc.stderr, proc.stderr


def test_a_lock_header_names_the_declared_python():
    import dataclasses

    from bake.pip.lock import header, lock_specs
    from bake.testing import compose_plan

    spec = lock_specs(compose_plan(targets=["jax"], platforms=["linux/amd64"]), "jax")[0]
    assert "# bake-plan python-declared:" not in header(dataclasses.replace(spec, python=None), "3.11.9")
    assert "# bake-plan python-declared: 3.11.2\n" in header(dataclasses.replace(spec, python="3.11.2"), "3.11.2")


def test_a_locked_plan_passes_the_locked_arg_to_the_final_target_only(lock_cli, tmp_path):
    assert lock_cli("lock", "--target", "lt-e", cwd=tmp_path).returncode == 0
    proc = lock_cli("--target", "lt-e", "--locked", "--format", "json", "-o", "plan.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads((tmp_path / "plan.json").read_text())["target"]
    assert targets["lt-e"]["args"]["BAKE_PIP_LOCKED"] == "1"
    assert all("BAKE_PIP_LOCKED" not in targets[t]["args"] for t in ("lt-e-mealkit", "lt-a", "lt-a-mealkit"))
    # the ancestor's final image is built unlocked: the plan says so, and how to lock it too
    assert "bake-plan: note: --locked locks the requested stages only; the final image of 'lt-a' is built too" \
        in proc.stderr and "`bake-plan lock --target lt-a --target lt-e`" in proc.stderr, proc.stderr
    proc = lock_cli("lock", "--target", "lt-a", "--target", "lt-e", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = lock_cli("--target", "lt-a", "--target", "lt-e", "--locked", "-o", "plan.hcl", cwd=tmp_path)
    assert proc.returncode == 0 and "note: --locked" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("dockerfile, lacking", [
    ("FROM busybox AS mealkit\nFROM mealkit AS final\nRUN bake-pip-finalize\n", "does not mount the pip-lock context"),
    ("FROM busybox AS mealkit\nFROM scratch AS pip-lock\nFROM mealkit AS final\n"
     "RUN --mount=type=bind,from=pip-lock,target=/opt/pip-lock bake-pip-finalize\n",
     "does not declare ARG BAKE_PIP_LOCKED"),
    # The placeholder alone: the named context replaces it, but no step reads the lock.
    ("FROM busybox AS mealkit\nFROM scratch AS pip-lock\nFROM mealkit AS final\nARG BAKE_PIP_LOCKED\n"
     "RUN bake-pip-finalize\n",
     "declares the pip-lock stage but never mounts it (RUN --mount=…,from=pip-lock)"),
], ids=["no-mount", "no-arg", "placeholder-only"])
def test_locked_is_refused_for_a_final_stage_that_would_ignore_the_lock(cli, make_plugin, tmp_path, dockerfile, lacking):
    site = make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="nolock", image="nolock", base_image="busybox", context={str(tmp_path)!r},
                  platforms=("linux/amd64",), dockerfile_inline={dockerfile!r})]
""", name="nolock-plugin")
    assert cli("lock", "--target", "nolock", cwd=tmp_path, pythonpath=[site]).returncode == 0
    proc = cli("--target", "nolock", "--locked", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.strip() == (f"bake-plan: error: plugin 'nolock-plugin', stage 'nolock': --locked, but its "
                                   f"Dockerfile {lacking}, so its final stage would compile afresh and ignore the "
                                   "lock (docs/plugins.md has the final-stage template)")
    assert not (tmp_path / "docker-bake.hcl").exists()


def test_locked_refuses_a_lock_made_for_another_python_than_the_stage_declares(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import Stage, hookimpl
from bake.resources import stage_dir
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="py-other", image="py-other", base_image="python:3.11-slim", python="3.11",
                  context=str(stage_dir("base")), platforms=("linux/amd64",))]
""", name="py-other")
    assert cli("lock", "--target", "py-other", cwd=tmp_path, pythonpath=[site]).returncode == 0
    lock = tmp_path / "locks" / "py-other.txt"
    assert "# bake-plan python: 3.11" in lock.read_text()
    lock.write_text(lock.read_text().replace("# bake-plan python: 3.11", "# bake-plan python: 3.9"))
    proc = cli("--target", "py-other", "--locked", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "bake-plan: error: --locked: locks/py-other.txt was made for Python 3.9.0, the image of 'py-other' has "
        "Python 3.11 (the stage's python): run `bake-plan lock --target py-other`"), proc.stderr
    assert not (tmp_path / "docker-bake.hcl").exists()


def test_a_python_without_pip_tools_locks_for_its_own_markers(lock_cli, tmp_path):
    # uv resolves for the interpreter (uv pip compile --python): it needs no pip-tools, no pip even.
    import venv
    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")
    bare = tmp_path / "bare" / "bin" / "python"
    probe = subprocess.run([str(bare), "-c", "import piptools"], capture_output=True)
    assert probe.returncode != 0  # really without pip-tools
    proc = lock_cli("lock", "--target", "lt-e", "--python", str(bare), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "lt-e.txt").read_text().splitlines()
    assert f"# bake-plan python: {platform.python_version()}" in lock and "# bake-plan resolver: uv" in lock
    assert "alpha==2.0" in lock and "gamma==1.0" in lock


def test_a_line_without_a_marker_is_taken_as_is_without_packaging():
    # A PEP 508 marker needs a ';': lines without one skip the parse (and packaging's import).
    code = ("import sys; from bake.pip import requirements as r; "
            "out = [r.for_platform(l, 'linux/arm64', '3.11') for l in ('numpy<2', 'jax[cpu]==0.4.30', '-e file:///opt/x')]; "
            "print(out, 'packaging' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "['numpy<2', 'jax[cpu]==0.4.30', '-e file:///opt/x'] False", proc.stderr
    # With a marker it is still evaluated for the platform.
    from bake.pip import requirements as reqs
    assert reqs.for_platform('zeta; platform_machine == "aarch64"', "linux/amd64") is None
    assert reqs.for_platform('zeta; platform_machine == "aarch64"', "linux/arm64") in ("zeta", 'zeta; platform_machine == "aarch64"')


def test_an_ancestor_given_as_a_target_too_installs_its_own_lock(lock_cli, tmp_path):
    # docs/plugins.md: `--target my-root --target my-leaf` to lock, fill and build locks both finals.
    assert lock_cli("lock", "--target", "lt-a", "--target", "lt-e", cwd=tmp_path).returncode == 0
    proc = lock_cli("--target", "lt-a", "--target", "lt-e", "--locked", "--format", "json", "-o", "plan.json",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    targets = json.loads((tmp_path / "plan.json").read_text())["target"]
    for name in ("lt-a", "lt-e"):
        assert targets[name]["args"]["BAKE_PIP_LOCKED"] == "1", name
        context = tmp_path / "locks" / ".pip-lock" / name
        assert targets[name]["contexts"]["pip-lock"] == str(context.resolve())
        assert (context / "requirements.lock").read_text() == (tmp_path / "locks" / f"{name}.txt").read_text()
    assert "pip-lock" not in targets["lt-a-mealkit"].get("contexts", {})


def test_a_lock_against_an_index_that_never_answers_stops_at_its_bound(lock_cli, tmp_path):
    """A real uv against a loopback index that takes connections and never answers: the lock is
    stopped at uv's time bound (lowered for the test by a ``sitecustomize`` beside the plugin) in
    one line, and no uv is left running."""
    import socket
    import threading

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def take() -> None:
        try:
            for _ in range(16):
                held.append(server.accept())
        except OSError:  # the socket closed at the test's end
            pass

    threading.Thread(target=take, daemon=True).start()
    site = tmp_path / "bound"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import bake.pip.lock\nbake.pip.lock.UV_TIMEOUT_S = 3\n")
    port = server.getsockname()[1]
    proc = lock_cli("lock", "--target", "lt-a", "--index-url", f"http://127.0.0.1:{port}/simple", index=False,
                    cwd=tmp_path, pythonpath=[site], extra_env={"UV_HTTP_TIMEOUT": "600"})
    server.close()
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "bake-plan: error: uv pip compile did not finish in 3 s, locking 'lt-a': an index that does not answer, "
        "or a source package whose build hangs"), proc.stderr
    assert held, "uv never reached the index"
    running = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            running.append(open(f"/proc/{pid}/cmdline", "rb").read())
        except OSError:
            pass
    assert not [c for c in running if f"127.0.0.1:{port}".encode() in c]
