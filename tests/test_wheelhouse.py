"""``--wheelhouse DIR`` / ``wheelhouse = "DIR"``: every stage whose Dockerfile uses the
``wheelhouse`` context gets it, with the args that make pip use only it; the plan resolves under
the real buildx; bad values are one line, exit 2, no plan file."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest
from conftest import make_wheel
from test_plan_buildx import assert_resolves_to_plan

from bake.api import make_plan, wheelhouse_users
from bake.pip.wheelhouse import oci_layout
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
                Stage(registry="ghcr.io/nvidia", name="wh-uses", context="/", kind="single", base_image="busybox:1.36",
                      dockerfile_inline="FROM scratch AS wheelhouse\\nFROM busybox:1.36\\n"
                                        "RUN --mount=from=wheelhouse,target=/w ls /w\\n"),
                Stage(registry="ghcr.io/nvidia", name="wh-not", context="/", kind="single", parent="wh-uses",
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
    plan = _plan(tmp_path, "jax", oci_layout(str(wh)))
    assert plan["target"]["jax"]["contexts"]["wheelhouse"].startswith(f"oci-layout://{wh}/.bake-plan-oci@sha256:")
    assert_resolves_to_plan(buildx.print_plan(out, cwd=tmp_path), plan)


def test_relative_flag_is_from_the_current_directory(cli, tmp_path):
    make_wheel(tmp_path / "wh", "alpha", "1.0")
    proc = cli("--target", "base", "--date", DATE, "--format", "json", "--wheelhouse", "wh", "-o", "-",
               cwd=tmp_path, check=True)
    assert '"wheelhouse": "oci-layout://%s/.bake-plan-oci@sha256:' % (tmp_path / "wh") in proc.stdout


def test_relative_config_value_is_from_the_file(cli, tmp_path):
    make_wheel(tmp_path / "project" / "wh", "alpha", "1.0")
    (tmp_path / "project" / "bake-plan.toml").write_text('wheelhouse = "wh"\n')
    sub = tmp_path / "project" / "sub"
    sub.mkdir()
    proc = cli("--target", "base", "--date", DATE, "--format", "json", "-o", "-", cwd=sub, check=True)
    assert '"wheelhouse": "oci-layout://%s/.bake-plan-oci@sha256:' % (tmp_path / "project" / "wh") in proc.stdout
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


# `bake-plan wheelhouse`


def test_platform_tags_cover_the_manylinux_variants():
    from bake.pip.wheelhouse import platform_tags

    amd64 = platform_tags("linux/amd64")
    assert amd64[0] == "manylinux_2_36_x86_64" and amd64[-1] == "manylinux1_x86_64"
    assert {"manylinux_2_28_x86_64", "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux2010_x86_64",
            "manylinux_2_5_x86_64"} <= set(amd64)
    arm64 = platform_tags("linux/arm64")
    assert "manylinux2014_aarch64" in arm64 and "manylinux_2_17_aarch64" in arm64
    assert not any(t.startswith(("manylinux1_", "manylinux2010_", "manylinux_2_5_")) for t in arm64)


WH_PLUGIN = """
    from bake import Stage, hookimpl
    from bake.resources import stage_dir

    @hookimpl
    def bake_plan_stages():
        return [
            Stage(registry="ghcr.io/nvidia", name="wh-root", context=stage_dir("base"), base_image="busybox:1.36",
                  platforms=("linux/amd64", "linux/arm64"), requirements=("beta",)),
            Stage(registry="ghcr.io/nvidia", name="wh-leaf", context=stage_dir("base"), parent="wh-root", platforms=("linux/amd64",),
                  requirements=("alpha<2",)),
        ]
"""


@pytest.fixture
def index(tmp_path):
    """A find-links directory standing in for the package index: alpha 1.0 and 2.0, beta (needs
    alpha), and stand-ins for pip and pip-tools' wheels."""
    src = tmp_path / "index"
    for name, version, requires in [("alpha", "1.0", ()), ("alpha", "2.0", ()), ("beta", "1.0", ("alpha",)),
                                    ("pip", "25.2", ()), ("pip_tools", "7.4.1", ())]:
        make_wheel(src, name, version, requires)
    return src


def _wheelhouse(cli, site, tmp_path, index, *args):
    from conftest import hermetic_pip_env

    return cli("wheelhouse", "--config", "/dev/null", "--no-index", "--find-links", str(index), *args,
               cwd=tmp_path, env=hermetic_pip_env(), pythonpath=[site])


def test_wheelhouse_fills_from_the_lines_then_leaves_unchanged_wheels_alone(cli, make_plugin, tmp_path, index):
    site = make_plugin(WH_PLUGIN)
    out = tmp_path / "wh"
    first = _wheelhouse(cli, site, tmp_path, index, "--target", "wh-leaf", "-o", str(out))
    assert first.returncode == 0, first.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == [".bake-plan-written.json",  # the record of the wheels bake-plan added (bake.owned)
                     "alpha-1.0-py3-none-any.whl", "beta-1.0-py3-none-any.whl", "pip-25.2-py3-none-any.whl",
                     "pip_tools-7.4.1-py3-none-any.whl"]
    assert "4 wheels added, 0 unchanged" in first.stdout
    assert "for Python 3.11 on linux/amd64" in first.stderr
    mtimes = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    second = _wheelhouse(cli, site, tmp_path, index, "--target", "wh-leaf", "-o", str(out), "--python-version", "3.12")
    assert second.returncode == 0, second.stderr
    assert "0 wheels added, 4 unchanged" in second.stdout
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == mtimes
    assert not list(tmp_path.glob(".bake-wheelhouse-*"))


def test_wheelhouse_takes_the_lock_when_there_is_one(cli, make_plugin, tmp_path, index):
    from conftest import hermetic_pip_env

    site = make_plugin(WH_PLUGIN)
    locks = tmp_path / "locks"
    locked = cli("lock", "--config", "/dev/null", "--target", "wh-root", "--locks-dir", str(locks), "--no-index",
                 "--find-links", str(index), cwd=tmp_path, env=hermetic_pip_env(), pythonpath=[site])
    assert locked.returncode == 0, locked.stderr
    lock = locks / "wh-root.txt"
    lock.write_text(lock.read_text().replace("alpha==2.0", "alpha==1.0"))  # the lock, not the resolver, decides
    out = tmp_path / "wh"
    proc = _wheelhouse(cli, site, tmp_path, index, "--target", "wh-root", "--platform", "linux/arm64",
                       "--locks-dir", str(locks), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "pinned requirements" in proc.stderr and "on linux/arm64" in proc.stderr
    assert (out / "alpha-1.0-py3-none-any.whl").exists() and not (out / "alpha-2.0-py3-none-any.whl").exists()


@pytest.mark.parametrize("made_by_the_user, out", [(False, "wh/x"), (True, "wh/x"), (False, "wh/../wh2/x")])
def test_a_package_pip_cannot_find_is_one_line_exit_1(cli, make_plugin, tmp_path, index, made_by_the_user, out):
    site = make_plugin(WH_PLUGIN.replace('requirements=("alpha<2",)', 'requirements=("nosuch==1.0",)'))
    if made_by_the_user:
        (tmp_path / "wh" / "x").mkdir(parents=True)
    for tool in index.glob("pip*.whl"):  # nothing comes at all (what came is kept: test_wheelhouse_pins.py)
        tool.unlink()
    proc = _wheelhouse(cli, site, tmp_path, index, "--target", "wh-leaf", "-o", str(tmp_path / out))
    assert proc.returncode == 1, proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("bake-plan: error:")]
    assert len(error) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "'wh-leaf' (linux/amd64) for Python 3.11 on linux/amd64" in error[0] and "nosuch" in error[0]
    # a failed wheelhouse leaves no directory it made (bake.owned.no_empty_directory_left); the user's stays, empty
    assert (tmp_path / "wh").exists() is made_by_the_user and not (tmp_path / "wh2").exists()
    assert not made_by_the_user or list((tmp_path / "wh" / "x").iterdir()) == []


@pytest.mark.parametrize("version", ["3", "3.11.2", "py311", ""])
def test_bad_python_version_is_one_line_exit_2(cli, tmp_path, version):
    proc = cli("wheelhouse", "--config", "/dev/null", "--target", "jax", "--python-version", version, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--python-version" in proc.stderr
    assert not (tmp_path / "wheelhouse").exists()


def test_a_pin_without_a_wheel_is_built_from_its_sdist(tmp_path, monkeypatch):
    """pip's side is faked (the real one is in tests/test_wheelhouse_pins.py): every pin in one
    ``pip download --prefer-binary --no-deps``, which brings the pin with no wheel as its sdist;
    then one ``pip wheel`` of the sdists, no download per pin."""
    import subprocess

    from bake.pip.lock import LockSpec, header
    from bake.pip.wheelhouse import fill

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # pip-tools' wheels not from a cache
    locks = tmp_path / "locks"
    locks.mkdir()
    spec = LockSpec("t", ("linux/amd64",), False, [])
    (locks / "t.txt").write_text(header(spec, "3.11") + "haswheel==1.0\n    # via -r x.in\nsdistonly==2.0\n")
    calls = []

    def runner(argv, **kwargs):
        calls.append(argv)
        value = lambda flag: argv[argv.index(flag) + 1]  # noqa: E731
        if argv[-1] == "--version":
            return subprocess.CompletedProcess(argv, 0, "pip 25.2 from /x (python 3.11)\n", "")
        if "wheel" in argv:
            make_wheel(Path(value("--wheel-dir")), "sdistonly", "2.0")
            return subprocess.CompletedProcess(argv, 0, "", "")
        dest = Path(value("--dest"))
        if "--no-deps" in argv:
            assert Path(value("-r")).read_text().split() == ["haswheel==1.0", "sdistonly==2.0"]
            make_wheel(dest, "haswheel", "1.0")
            (dest / "sdistonly-2.0.tar.gz").write_bytes(b"sdist")
        return subprocess.CompletedProcess(argv, 0, "", "")

    counts = fill([spec], tmp_path / "wh", "3.11", locks_dir=locks, runner=runner)
    assert counts["built"] == 1
    assert {p.name for p in (tmp_path / "wh").iterdir()} >= {"haswheel-1.0-py3-none-any.whl",
                                                              "sdistonly-2.0-py3-none-any.whl"}
    downloads = [argv for argv in calls if "download" in argv]
    assert len(downloads) == 2 and sum("--no-deps" in argv for argv in downloads) == 1
    assert sum("wheel" in argv for argv in calls) == 1


def test_the_layout_is_made_again_only_when_the_wheels_change(tmp_path):
    import tarfile

    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    first = oci_layout(str(wh))
    blobs = wh / ".bake-plan-oci" / "blobs" / "sha256"
    made = {p.name: p.stat().st_mtime_ns for p in blobs.iterdir()}
    assert oci_layout(str(wh)) == first
    assert {p.name: p.stat().st_mtime_ns for p in blobs.iterdir()} == made
    make_wheel(wh, "beta", "1.0")
    second = oci_layout(str(wh))
    assert second != first and len(list(blobs.iterdir())) == 3  # the old blobs are gone
    index = json.loads((wh / ".bake-plan-oci" / "index.json").read_text())
    assert "@" + index["manifests"][0]["digest"] == second[second.index("@"):]
    manifest = json.loads((blobs / second.split(":")[-1]).read_text())
    layer = blobs / manifest["layers"][0]["digest"].split(":")[1]
    with tarfile.open(layer) as tar:
        assert sorted(tar.getnames()) == ["alpha-1.0-py3-none-any.whl", "beta-1.0-py3-none-any.whl"]
        assert {m.mtime for m in tar.getmembers()} == {0}
    os.utime(wh / "alpha-1.0-py3-none-any.whl", ns=(1, 1))  # same bytes, new mtime: same digest
    assert oci_layout(str(wh)) == second


def test_a_read_only_wheelhouse_is_one_line(cli, tmp_path):
    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    os.chmod(wh, 0o555)
    try:
        if os.access(wh, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        proc = cli("--target", "base", "--wheelhouse", str(wh), "-o", str(tmp_path / "plan.hcl"), cwd=tmp_path)
    finally:
        os.chmod(wh, 0o755)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "cannot write the wheelhouse's image layout" in proc.stderr


def test_markers_hold_for_the_images_python_not_the_hosts(cli, make_plugin, tmp_path):
    """pip evaluates markers for the Python running it, whatever --python-version says: for a
    stage on Python 3.9 on this (newer) host, a line and a dependency whose markers hold only
    before 3.10 are fetched too, with their own dependencies; for the host's Python they are not."""
    import sys

    if sys.version_info[:2] < (3, 10):
        pytest.skip("needs a host Python of 3.10 or later")
    index = tmp_path / "index"
    for name, version, requires in [("alpha", "1.0", ()), ("beta", "1.0", ('alpha; python_version < "3.10"',)),
                                    ("gamma", "1.0", ("delta",)), ("delta", "1.0", ()),
                                    ("pip", "25.2", ()), ("pip_tools", "7.4.1", ())]:
        make_wheel(index, name, version, requires)
    for python, want in [("3.9", {"alpha", "beta", "gamma", "delta"}),
                         (".".join(map(str, sys.version_info[:2])), {"beta"})]:
        site = make_plugin(WH_PLUGIN.replace(
            'requirements=("alpha<2",)', f"""requirements=("beta", 'gamma; python_version < "3.10"'), python={python!r}"""))
        out = tmp_path / f"wh{python}"
        proc = _wheelhouse(cli, site, tmp_path, index, "--target", "wh-leaf", "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        assert f"for Python {python} on linux/amd64" in proc.stderr
        assert {p.name.split("-")[0] for p in out.glob("*.whl")} == want | {"pip", "pip_tools"}, python
