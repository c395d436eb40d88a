"""Entry-point discovery (importlib.metadata, through pluggy's entry-point group): a plugin in a
zip on sys.path is found, a broken one names its distribution, and planning imports nothing it
does not need: no python-on-whales, no pip-tools, no execution modules."""

from __future__ import annotations

import subprocess
import sys
import zipfile


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
    assert "bake.plan.compose" in imported and "pluggy" in imported
    for heavy in ("python_on_whales", "piptools", "pydantic", "bake.run.engine", "bake.run.build"):
        assert heavy not in imported, heavy
    assert (tmp_path / "plan.hcl").is_file()
