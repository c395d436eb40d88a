"""The wheelhouse benchmark works: one run of ``bench/wheelhouse.py`` on the tiny family (three
small pure-Python projects and pip and pip-tools' wheels, downloaded once into
``$BAKE_PLAN_TEST_CACHE/bench``) gives one row with both sides' times and their ratio, and its
warm-up checks that the wheelhouse holds every wheel the plain ``pip download`` fetched. The timing
target is not asserted here: the script judges it itself (``--check``), recorded in
docs/benchmarks.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_jaxfamily_engine import CACHE

NUMBER = r"\d+(?:\.\d+)?"


def test_wheelhouse_bench_runs_once_on_the_tiny_family(tmp_path):
    env = dict(os.environ, BAKE_PLAN_BENCH_CACHE=str(CACHE / "bench"))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "wheelhouse.py"), "--set", "tiny", "--repeat", "1",
                           "--markdown"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "| wheelhouse | pins | A: bake-plan wheelhouse ms | P: pip download ms | A/P |" in out, out
    row = re.search(rf"^\| tiny family lock \| (\d+) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \|$", out, re.M)
    assert row, out
    assert row.group(1) == "3"  # einops, opt-einsum, toolz
    a, p = float(row.group(2)), float(row.group(3))
    assert a > 0 and p > 0
    assert float(row.group(4)) == pytest.approx(a / p, abs=0.01 + (a / p) * (0.5 / p + 0.5 / a))
    assert re.search(rf"^- (met|\*\*missed\*\*): wheelhouse of a lock \(3 pins\): bake-plan ≤ 1\.5 × one pip "
                     rf"download \({NUMBER} vs {NUMBER} ms, {NUMBER}\)$", out, re.M), out


def test_a_real_family_needs_both_its_directory_and_its_target(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "wheelhouse.py"), "--project", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "--project and --target go together" in proc.stderr


def test_a_real_family_is_downloaded_for_the_python_its_lock_was_made_for(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import wheelhouse
    finally:
        sys.path.remove(str(ROOT / "bench"))
    lock = tmp_path / "pax-leaf.txt"
    lock.write_text("# bake-plan target: pax-leaf\n# bake-plan python: 3.10.13\n"
                    "# bake-plan python-declared: 3.10.13\nabsl-py==1.4.0\n")
    assert wheelhouse._lock_python(lock) == "3.10"
    assert wheelhouse.pins(lock) == ["absl-py==1.4.0"]
    lock.write_text("absl-py==1.4.0\n")
    with pytest.raises(RuntimeError, match="no '# bake-plan python:' header line"):
        wheelhouse._lock_python(lock)
