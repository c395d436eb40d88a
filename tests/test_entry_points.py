"""Entry-point discovery without importing importlib.metadata finds exactly what importlib.metadata
finds; where it cannot look (a zip on sys.path) importlib.metadata answers. And planning imports
nothing it does not need: no importlib.metadata, no python-on-whales, no pip-tools."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

from conftest import ROOT

# Run in a fresh interpreter: what the scan finds, what importlib.metadata finds, and whether
# the scan imported importlib.metadata.
_COMPARE = """
import json, sys
from bake.plugins import _entry_points, _importlib_entry_points, _scan_entry_points
scanned = _scan_entry_points("bake_plan")
imported_metadata = "importlib.metadata" in sys.modules
print(json.dumps({
    "scanned": None if scanned is None else sorted(scanned),
    "importlib": sorted(_importlib_entry_points("bake_plan")),
    "used": sorted(_entry_points()),
    "imported_metadata": imported_metadata,
}))
"""


def _compare(pythonpath=(), tmp_path=None):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(str(p) for p in pythonpath)}
    proc = subprocess.run([sys.executable, "-c", _COMPARE], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_scan_matches_importlib_metadata_for_the_installed_plugins(tmp_path):
    got = _compare(tmp_path=tmp_path)
    assert got["scanned"] == got["importlib"]
    assert {ep[0] for ep in got["scanned"]} >= {"base", "jax", "te", "upstream-pax", "xla-ci", "default-policies"}
    assert {ep[2] for ep in got["scanned"]} == {"bake-plan"}
    assert not got["imported_metadata"]


def test_scan_matches_importlib_metadata_with_plugins_on_pythonpath(make_plugin, tmp_path):
    one = make_plugin("from bake import hookimpl\n", name="one")
    two = make_plugin("from bake import hookimpl\n", name="two")
    # The same distribution twice on sys.path: the first one wins, as in importlib.metadata.
    shadow = make_plugin("from bake import hookimpl\n", name="shadowed")
    (shadow / "bake_plan_test_plugin_3-0.0.dist-info").rename(shadow / "bake_plan_test_plugin_1-9.9.dist-info")
    # Distributions that do not take part: no entry_points.txt, another group, an egg-info file.
    (two / "other-1.0.dist-info").mkdir()
    (two / "console-1.0.dist-info").mkdir()
    (two / "console-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n")
    (two / "legacy-1.0.egg-info").write_text("Metadata-Version: 1.0\nName: legacy\n")
    (two / "spaced-1.0.dist-info").mkdir()
    (two / "spaced-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: Spaced.Out\nVersion: 1.0\n")
    (two / "spaced-1.0.dist-info" / "entry_points.txt").write_text(
        "# comment\n\n[bake_plan]\n  spaced  =  some.module:obj.attr [extra]  \n[other]\nno = thanks\n")
    got = _compare([one, two, shadow], tmp_path=tmp_path)
    assert got["scanned"] == got["importlib"]
    names = {ep[0]: ep for ep in got["scanned"]}
    assert names["spaced"][1:] == ["some.module:obj.attr [extra]", "Spaced.Out"]
    assert "shadowed" not in names and "one" in names and "two" in names


def test_a_plugin_in_a_zip_on_pythonpath_is_found_through_importlib_metadata(cli, tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_plugin.py", "from bake import Stage, hookimpl\nfrom bake.resources import stage_dir\n"
                    "@hookimpl\ndef bake_plan_stages():\n"
                    "    return [Stage(name='zipped', image='zipped', parent='jax', context=stage_dir('jax'))]\n")
        zf.writestr("zipped_plugin-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped-plugin\nVersion: 1.0\n")
        zf.writestr("zipped_plugin-1.0.dist-info/entry_points.txt", "[bake_plan]\nzipped = zipped_plugin\n")
    got = _compare([archive], tmp_path=tmp_path)
    assert got["scanned"] is None
    assert ["zipped", "zipped_plugin", "zipped-plugin"] in got["used"]
    out = cli("stages", pythonpath=[archive], check=True).stdout
    assert any(line.split()[:3] == ["zipped", "zipped", "jax"] for line in out.splitlines())


def test_a_broken_plugin_names_its_distribution(cli, make_plugin, tmp_path):
    site = make_plugin("raise ImportError('no such thing')\n", name="broken")
    proc = cli("--target", "jax", pythonpath=[site], cwd=tmp_path)
    assert proc.returncode == 2
    assert "plugin 'broken' (from bake_plan_test_plugin_" in proc.stderr
    assert "ImportError: no such thing" in proc.stderr


_IMPORTS = """
import sys
before = set(sys.modules)
from bake.cli import main
status = main(["--target", "upstream-pax", "--target", "xla-ci", "-o", sys.argv[1]])
print(" ".join(sorted(set(sys.modules) - before)))
sys.exit(status)
"""


def test_planning_imports_only_what_it_needs(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _IMPORTS, str(tmp_path / "plan.hcl")], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    imported = set(proc.stdout.split("\n")[-2].split())
    assert "bake.compose" in imported and "pluggy" in imported
    for heavy in ("importlib.metadata", "email", "python_on_whales", "piptools", "pydantic", "bake.engine", "bake.build"):
        assert heavy not in imported, heavy
    assert (tmp_path / "plan.hcl").is_file()
    assert str(ROOT)  # the tests run against the installed package, not the checkout


def test_entry_point_values_load_like_importlib_metadata():
    import os.path

    import bake.policies
    from bake.plugins import EntryPoint

    assert EntryPoint("p", "bake.policies", "d").load() is bake.policies
    assert EntryPoint("p", "bake.policies:bake_plan_tags", "d").load() is bake.policies.bake_plan_tags
    assert EntryPoint("p", "os : path.join [extra]", "d").load() is os.path.join
