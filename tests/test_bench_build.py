"""The build benchmark works against the test engine: one run at its smallest setting (one warm
build of each side after a warm-up; no cold build, which takes minutes for this family) gives its
table, and its two facts about an unchanged rebuild hold: bake-plan's sitrep counts 0 Dockerfile steps run, and under 1 % of the wheelhouse
is sent again. Timing targets are not asserted here: the script checks them itself
(``--check``) on a full run, recorded in docs/benchmarks.md."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT



NUMBER = r"\d+(?:\.\d+)?"


@pytest.mark.engine
def test_build_bench_runs_once_against_the_engine(engine, tmp_path):
    env = dict(os.environ, BAKE_PLAN_TEST_REGISTRY=engine.registry)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "build.py"), "--repeat", "1", "--cold-repeat", "0",
                           "--markdown"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert ("| build | runs | A: bake-plan build s | B: buildx bake s | A/B | A − B ms | A peak MB | B peak MB "
            "| A steps run | wheelhouse sent, max of A and B |") in out
    rows = {m.group(1): m for m in re.finditer(
        rf"^\| (warm|cold) \| 1 \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) \| (-?\d+) \| (\d+) \| (\d+) \| ([\d, ]+) "
        rf"\| (\d+) B \(({NUMBER})%\) \|$", out, re.M)}
    assert set(rows) == {"warm"}, out
    for row in rows.values():
        assert float(row.group(2)) > 0 and float(row.group(3)) > 0
    # An unchanged rebuild: every step cached, the wheelhouse's layer not sent again.
    assert rows["warm"].group(8) == "0"
    assert float(rows["warm"].group(10)) < 1.0
    assert "- met: warm: an unchanged rebuild runs 0 steps (steps run: 0)" in out
    assert re.search(r"^- met: warm: re-sends < 1% of the wheelhouse", out, re.M), out
    assert re.search(r"^- (met|\*\*missed\*\*): warm: bake-plan build ≤ 1.05 × buildx bake", out, re.M), out
    assert "- runs: 1 warm (after one warm-up each) and 0 cold (--no-cache) of A and of B, alternating; medians" in out
    assert "- bake-plan: bake-plan " in out and "- buildx: " in out and "- load average (1 min): " in out


def test_nanoseconds_are_exact():
    from bake.run.engine import _nanoseconds

    assert _nanoseconds("2026-12-01T13:23:09.328916412Z") - _nanoseconds("2026-12-01T13:23:08.453852729Z") == 875063683
    assert _nanoseconds("1970-01-01T01:00:00.5+01:00") == 500_000_000
    assert _nanoseconds("1970-01-01T00:00:01Z") == 10**9
    assert _nanoseconds("0001-01-01T00:00:00Z") is None and _nanoseconds("yesterday") is None


@pytest.mark.engine
def test_build_records_listed_at_once_are_each_inspected_record(engine, tmp_path):
    """One ``history ls`` gives the durations ``history inspect`` gives, record by record."""
    from bake.run.engine import build_record, build_records

    (tmp_path / "Dockerfile").write_text(f"FROM {engine.registry}/stand-in/busybox:latest\nRUN echo {tmp_path.name}\n")
    for n in range(2):
        engine.docker("buildx", "build", "--build-arg", f"N={n}", "--metadata-file", str(tmp_path / f"m{n}.json"),
                      str(tmp_path))
    refs = [json.loads((tmp_path / f"m{n}.json").read_text())["buildx.build.ref"] for n in range(2)]
    listed = build_records(refs + ["default/default/nosuchbuild0000000000000"])
    assert set(listed) == {*refs, "default/default/nosuchbuild0000000000000"}
    assert listed["default/default/nosuchbuild0000000000000"] is None
    for ref in refs:
        inspected = build_record(ref)
        assert inspected is not None and listed[ref]["Duration"] == inspected["Duration"] > 0
        assert listed[ref]["Status"] == inspected["Status"].lower()
