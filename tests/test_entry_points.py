"""Entry-point discovery (importlib.metadata, through pluggy's entry-point group): a plugin in a
zip on sys.path is found, a broken one names its distribution, and planning imports nothing it
does not need: no python-on-whales, no pip-tools, no execution modules."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from bake.plan.plugins import ENV_PLUGINS_DISABLE


def test_a_plugin_in_a_zip_on_pythonpath_is_found(cli, tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_plugin.py", "from bake import Stage, hookimpl\nfrom bake.resources import stage_dir\n"
                    "@hookimpl\ndef bake_plan_stages():\n"
                    "    return [Stage(name='zipped', image='zipped', parent='jax', context=stage_dir('jax'))]\n")
        zf.writestr("zipped_plugin-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plugin\nVersion: 1.0\n")
        zf.writestr("zipped_plugin-1.0.dist-info/entry_points.txt", "[bake_plan]\nzipped = zipped_plugin\n")
    out = cli("stages", pythonpath=[archive], check=True).stdout
    assert any(line.split()[:3] == ["zipped", "zipped", "jax"] for line in out.splitlines())


def test_a_broken_plugin_names_its_distribution(cli, make_plugin, tmp_path):
    site = make_plugin("raise ImportError('no such thing')\n", name="broken")
    proc = cli("--target", "jax", pythonpath=[site], cwd=tmp_path)
    assert proc.returncode == 2
    assert "plugin 'broken' (from distribution bake_plan_test_plugin_" in proc.stderr
    assert "ImportError: no such thing" in proc.stderr


def test_two_entry_points_naming_one_module_is_one_short_line(cli, make_plugin, tmp_path):
    """pluggy's own message for this spells out every registered plugin's repr (1,500 characters):
    bake-plan's names the two entry points and the module."""
    from test_errors import one_line_error

    site = make_plugin("from bake import hookimpl\n", name="first-name")
    (entry_points,) = site.glob("*.dist-info/entry_points.txt")
    module = entry_points.read_text().split("= ")[1].strip()
    entry_points.write_text(f"[bake_plan]\nfirst-name = {module}\nsecond-name = {module}\n")
    proc = cli("--target", "jax", pythonpath=[site], cwd=tmp_path)
    line = one_line_error(proc)
    assert line.startswith(f"plugin 'second-name' could not be registered: module {module} is already plugin "
                           "'first-name' (two entry points name one plugin)"), line
    assert len(line) < 300 and "<module" not in line


_IMPORTS = """
import sys
before = set(sys.modules)
from bake.cli import main
status = main(["--target", "upstream-pax", "--target", "xla-ci", "-o", sys.argv[1]])
print(" ".join(sorted(set(sys.modules) - before)))
sys.exit(status)
"""


def test_planning_imports_only_what_it_needs(tmp_path):
    # A BAKE_PLAN_* variable that is not a setting (the test engine's BAKE_PLAN_TEST_REGISTRY) is
    # compared with the settings' names through difflib: none here, as for most users.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAKE_PLAN_") or k == ENV_PLUGINS_DISABLE}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    cwd = tmp_path / "cwd"  # first on sys.path (python -c): unchanged, so the second plan finds the cache valid
    cwd.mkdir()

    def plan() -> set:
        proc = subprocess.run([sys.executable, "-c", _IMPORTS, str(tmp_path / "plan.hcl")], capture_output=True,
                              text=True, cwd=cwd, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return set(proc.stdout.split("\n")[-2].split())

    imported = plan()  # scans the entry points (importlib.metadata) and remembers them
    assert "bake.plan.compose" in imported and "pluggy" in imported
    for heavy in ("python_on_whales", "piptools", "pydantic", "bake.run.engine", "bake.run.build"):
        assert heavy not in imported, heavy
    # Cold start: what only other commands, error lines or pytest need stays out of a plan (hashlib is
    # needed: every target's input digest is a sha256 of its inputs).
    for lazy in ("subprocess", "difflib", "bake.pip.lock", "bake.pip.requirements", "bake.pip.wheelhouse",
                 "bake.run", "bake.completion", "shtab", "bake.plan.workflow", "bake.plan.matrix", "bake.plan.graph",
                 "bake.plan.metadata", "bake.settings.show", "bake.pytest_plugin", "pytest", "bake.testing",
                 "bake.plan.gate", "bake.plan.overrides"):
        assert lazy not in imported, lazy
    assert "bake.pip.lockfiles" in imported  # the one lock check a plan makes
    assert (tmp_path / "plan.hcl").is_file()
    # With the entry points remembered, neither what importlib.metadata brings (tempfile, csv…) nor
    # those modules for bake-plan's own use: the plan file is written without tempfile.
    imported = plan()
    for lazy in ("importlib.metadata", "tempfile", "csv", "bake.plan.gate", "subprocess"):
        assert lazy not in imported, lazy


def test_the_installed_entry_points_are_read_once_per_plan(monkeypatch, tmp_path):
    """Every distribution's ``entry_points.txt`` is read once (loading the plugins), not again to
    check ``plugins.enable``/``disable`` when the configuration names none; and not at all while
    the cache of the last scan holds (bake/plan/entrypoints.py)."""
    from importlib import metadata

    from bake.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []
    scan = metadata.entry_points
    monkeypatch.setattr(metadata, "entry_points", lambda *a, **k: calls.append(1) or scan(*a, **k))
    monkeypatch.chdir(tmp_path)
    assert main(["--target", "jax", "-q", "-o", "plan.hcl"]) == 0
    assert len(calls) == 1
    calls.clear()
    assert main(["--target", "jax", "-q", "-o", "plan.hcl", "--config", str(_config(tmp_path, 'disable = ["xla-ci"]'))]) == 0
    assert calls == []  # both from the cache the first plan wrote
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-cache"))
    assert main(["--target", "jax", "-q", "-o", "plan.hcl"]) == 0
    assert len(calls) == 1


def _plan_imports(tmp_path, cache, pythonpath=()):
    """Plan --target jax in a new process with ``cache`` as XDG_CACHE_HOME: (its stages, whether it
    imported importlib.metadata)."""
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=os.pathsep.join(map(str, pythonpath)))
    code = ("import sys; from bake.cli import main; status = main(['stages']);"
            "print('METADATA', 'importlib.metadata' in sys.modules, file=sys.stderr); sys.exit(status)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    stages = {line.split()[0] for line in proc.stdout.splitlines()[1:] if line.strip()}
    return stages, "METADATA True" in proc.stderr


def test_a_plugin_installed_or_removed_is_seen_by_the_next_run_despite_the_cache(tmp_path, make_plugin):
    site = make_plugin("from bake import Stage, hookimpl\nfrom bake.resources import stage_dir\n"
                       "@hookimpl\ndef bake_plan_stages():\n"
                       "    return [Stage(name='cached-one', image='c', parent='jax', context=stage_dir('jax'))]\n",
                       name="cached-one")
    cache = tmp_path / "cache"
    stages, scanned = _plan_imports(tmp_path, cache, [site])
    assert "cached-one" in stages and scanned
    assert _plan_imports(tmp_path, cache, [site]) == (stages, False)  # the cache holds: no scan
    # pip install: a new *.dist-info directory beside the first (the directory's mtime changes)
    module = site / "bake_plan_second.py"
    module.write_text("from bake import Stage, hookimpl\nfrom bake.resources import stage_dir\n"
                      "@hookimpl\ndef bake_plan_stages():\n"
                      "    return [Stage(name='cached-two', image='c2', parent='jax', context=stage_dir('jax'))]\n")
    dist = site / "bake_plan_second-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bake-plan-second\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[bake_plan]\ncached-two = bake_plan_second\n")
    stages, scanned = _plan_imports(tmp_path, cache, [site])
    assert {"cached-one", "cached-two"} <= stages and scanned
    # an entry point edited in place (same directory entries): its entry_points.txt is stamped
    (dist / "entry_points.txt").write_text("[bake_plan]\n")
    stages, scanned = _plan_imports(tmp_path, cache, [site])
    assert "cached-two" not in stages and "cached-one" in stages and scanned
    assert _plan_imports(tmp_path, cache, [site]) == (stages, False)
    # ... and added back in place, to a distribution that now gives none (`setup.py egg_info`
    # rewrites an egg-info's entry_points.txt so): every entry_points.txt on sys.path is stamped
    directory_times = os.stat(dist).st_atime_ns, os.stat(dist).st_mtime_ns
    (dist / "entry_points.txt").write_text("[console_scripts]\nx = y\n[bake_plan]\ncached-two = bake_plan_second\n")
    os.utime(dist, ns=directory_times)
    stages, scanned = _plan_imports(tmp_path, cache, [site])
    assert {"cached-one", "cached-two"} <= stages and scanned
    # another PYTHONPATH is another sys.path
    stages, scanned = _plan_imports(tmp_path, cache)
    assert "cached-one" not in stages and scanned


@pytest.mark.parametrize("content", ["{not json", '{"format": 1}', '{"format": 1, "stamp": [], "entry_points": [[1]]}',
                                     '{"format": 99, "stamp": [], "entry_points": []}'])
def test_a_broken_or_foreign_cache_file_means_a_scan(tmp_path, content):
    cache = tmp_path / "cache"
    stages, _ = _plan_imports(tmp_path, cache)
    (written,) = (cache / "bake-plan").glob("entry-points-*.json")
    written.write_text(content)
    assert _plan_imports(tmp_path, cache) == (stages, True)
    assert _plan_imports(tmp_path, cache) == (stages, False)  # written again by that scan


def test_an_unwritable_cache_directory_is_no_error(tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache directory would be")
    stages, scanned = _plan_imports(tmp_path, blocker)
    assert "jax" in stages and scanned


def test_a_home_directory_that_is_not_there_gets_no_cache(tmp_path):
    """``HOME=/nonexistent`` (a service user's) and no ``XDG_CACHE_HOME``: no cache, nothing made there."""
    home = tmp_path / "nonexistent" / "home"
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"}
    env["HOME"] = str(home)
    proc = subprocess.run([sys.executable, "-c", "import sys; from bake.cli import main; sys.exit(main(['stages']))"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert proc.returncode == 0 and "jax" in proc.stdout, proc.stderr
    assert not (tmp_path / "nonexistent").exists()


def _config(where, plugins_line: str):
    path = where / "bake-plan.toml"
    path.write_text(f"[plugins]\n{plugins_line}\n")
    return path


def test_a_command_line_builds_only_its_commands_parser():
    from bake.cli import COMMANDS, build_parser, parse_args

    assert set(build_parser()._subparsers._group_actions[0].choices) == set(COMMANDS)
    assert set(build_parser("plan")._subparsers._group_actions[0].choices) == {"plan"}
    full, one = build_parser(), build_parser("lock")
    argv = ["lock", "--target", "jax", "-f", "wheels", "--no-index", "-q"]
    assert vars(one.parse_args(argv)) == vars(full.parse_args(argv))
    assert parse_args(["--target", "jax", "-v"]).command == "plan"


_FROZEN = """
import atexit, gc, sys
from bake.cli import main
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0))
status = main({argv})
print("frozen after main:", gc.get_freeze_count() > 0)
sys.exit(status)
"""


@pytest.mark.parametrize("argv, at_exit", [("None", True), ("sys.argv[1:]", False)])
def test_only_the_bake_plan_process_skips_the_last_collection(tmp_path, argv, at_exit):
    """The console script (``main()``) freezes every object at exit, so Python's last garbage
    collection has nothing to walk; a caller in-process (``main([...])``: tests, a library user)
    keeps its collector as it was."""
    proc = subprocess.run([sys.executable, "-c", _FROZEN.format(argv=argv), "--target", "jax", "-q", "-o", "p.hcl"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["frozen after main: False", f"frozen at exit: {at_exit}"]
