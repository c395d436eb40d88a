"""The benchmark script works: one tiny run (5 synthetic stages, one repetition) gives a table with
both A (bake-plan) and B (buildx --print) numbers. Timing targets are not asserted here: they are
checked by the script itself (``--check``) on a full run, recorded in docs/benchmarks.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

NUMBER = r"\d+(?:\.\d+)?"


@pytest.mark.buildx
def test_bench_runs_once_at_a_tiny_size(buildx_new, tmp_path):
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--sizes", "5", "--repeat", "1",
                           "--markdown", "--no-lock"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "| plan | stages | targets | A: bake-plan ms | B: buildx --print ms | A/B |" in out
    rows = {m.group(1): m for m in re.finditer(
        rf"^\| (upstream-pax|synthetic 5) \| (\S+) \| (\d+) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \|",
        out, re.M)}
    assert set(rows) == {"upstream-pax", "synthetic 5"}, out
    assert rows["upstream-pax"].group(3) == "7"
    assert rows["synthetic 5"].group(3) == "10"  # 5 meal-kit stages: two targets each
    for row in rows.values():
        assert float(row.group(4)) > 0 and float(row.group(5)) > 0
    assert "upstream-pax: bake-plan ≤ buildx" in out
    assert "- bake-plan: bake-plan " in out and "- buildx: " in out
