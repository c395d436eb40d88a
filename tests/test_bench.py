"""The benchmark script works: one tiny run (upstream-pax, 5 and 10 synthetic stages, 10 more
planned from the configuration, one repetition, buildx ``--print`` up to 5 stages) gives a table
with both A (bake-plan) and B (buildx --print) numbers, "—" where B did not run. Timing targets
are not asserted here: they are checked by the script itself (``--check``) on a full run, recorded
in docs/benchmarks.md. The lock and wheelhouse benchmarks have tests of their own
(test_bench_lock.py, test_bench_wheelhouse.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import run as bench  # noqa: E402  bench/run.py

NUMBER = r"\d+(?:\.\d+)?"


@pytest.fixture(scope="module")
def tiny_run(buildx_new, tmp_path_factory):
    """The benchmark's report (Markdown) of one tiny run, shared by the tests below: no 2,000 or
    20,000-stage plans (``--config-sizes 10``), no lock or wheelhouse benchmark."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--sizes", "5,10", "--config-sizes", "10",
                           "--print-up-to", "5", "--repeat", "1", "--markdown", "--no-lock", "--no-wheelhouse"],
                          capture_output=True, text=True, cwd=tmp_path_factory.mktemp("bench"), env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.buildx
def test_bench_runs_once_at_a_tiny_size(tiny_run):
    out = tiny_run
    assert "| plan | stages | targets | A: bake-plan ms | B: buildx --print ms | A/B |" in out
    rows = {m.group(1): m for m in re.finditer(
        rf"^\| (upstream-pax|synthetic 5) \| (\S+) \| (\d+) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \|",
        out, re.M)}
    assert set(rows) == {"upstream-pax", "synthetic 5"}, out
    assert rows["upstream-pax"].group(3) == "7"
    assert rows["synthetic 5"].group(3) == "10"  # 5 meal-kit stages: two targets each
    for row in rows.values():
        assert float(row.group(4)) > 0 and float(row.group(5)) > 0
    assert "upstream-pax: bake-plan ≤ 0.8 × buildx" in out
    assert "- bake-plan: bake-plan " in out and "- buildx: " in out
    speed = re.search(r"^- speed \(10⁷ additions in a Python loop, best of 3\): ([\d.]+) s before, ([\d.]+) s after$",
                      out, re.M)
    assert speed and 0 < float(speed.group(1)) < 60 and 0 < float(speed.group(2)) < 60, out


@pytest.mark.buildx
def test_bench_skips_b_above_print_up_to_and_plans_from_the_configuration(tiny_run):
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(r"^\| (synthetic [^|]+?) \| (.+) \|$", tiny_run, re.M)}
    assert set(rows) == {"synthetic 5", "synthetic 10", "synthetic 10, config"}, tiny_run
    cells = {label: row[0].split(" | ") for label, row in rows.items()}
    # stages, targets, A ms, B ms, A/B, A peak, B peak, growth
    assert cells["synthetic 5"][3] != "—" and float(cells["synthetic 5"][3]) > 0
    assert cells["synthetic 10"][3:5] == ["—", "—"] and cells["synthetic 10"][6] == "—"
    assert cells["synthetic 10"][7].startswith("×") and cells["synthetic 10"][7].endswith("for ×2 stages")
    assert cells["synthetic 10, config"][:2] == cells["synthetic 10"][:2] == ["10", "19"]  # the same plan (one single-target wheel builder)
    assert cells["synthetic 10, config"][3:5] == ["—", "—"] and float(cells["synthetic 10, config"][2]) > 0
    assert cells["synthetic 10, config"][7] == "—"  # the first size planned from the configuration


def _result(label, stages, seconds, rss, config=False, b=None):
    case = bench.Case(label, stages, (), (), {}, config="targets = []\n" if config else None, printed=b is not None)
    return bench.Result(case, 2 * stages, bench.Sample(seconds, rss), bench.Sample(b, 400.0) if b else None)


def test_bench_checks_the_20000_stage_targets_for_flags_and_configuration():
    results = [_result("upstream-pax", 0, 0.07, 20, b=0.1),
               _result("synthetic 2000", 2000, 0.8, 50, b=6.0), _result("synthetic 20000", 20000, 8.0, 240),
               _result("synthetic 2000, config", 2000, 0.7, 50, config=True),
               _result("synthetic 20000, config", 20000, 8.4, 260, config=True)]
    checks = dict(bench.checks(results))
    assert checks["upstream-pax: bake-plan ≤ 0.8 × buildx (70.0 vs 100 ms, A/B 0.70)"] is True
    assert checks["--target flags: time(20000) / time(2000) ≤ 11 (10.0)"] is True
    assert checks["--target flags: 20000 stages, peak memory under 250 MB (240 MB)"] is True
    assert checks["targets from bake-plan.toml: time(20000) / time(2000) ≤ 11 (12.0)"] is False
    assert checks["targets from bake-plan.toml: 20000 stages, peak memory under 250 MB (260 MB)"] is False
    assert checks["2000 stages: bake-plan ≤ buildx (800 vs 6000 ms)"] is True
    rows = {row[0]: row for row in bench.rows(results)}
    assert rows["synthetic 20000"][4:6] == ("—", "—") and rows["synthetic 20000"][8] == "×10.0 for ×10 stages"
    assert rows["synthetic 20000, config"][8] == "×12.0 for ×10 stages"
