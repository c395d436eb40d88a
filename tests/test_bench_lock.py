"""The lock benchmark works: one run of ``bench/lock.py`` on the tiny family (three small
pure-Python projects, downloaded once into ``$BAKE_PLAN_TEST_CACHE/bench``) gives a row per cache
state with the three sides' times and the ratios, and checks that ``bake-plan lock`` wrote what
``uv pip compile`` writes for the same files. Timing targets are not asserted here: the script
judges them itself (``--check``) on a full run, recorded in docs/benchmarks.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from test_jaxfamily_engine import CACHE

NUMBER = r"\d+(?:\.\d+)?"


@pytest.mark.parametrize("python, shown", [("image", r"3\.11 \(declared\)"), ("host", r"3\.\d+\.\d+ \(bake-plan's\)")])
def test_lock_bench_runs_once_on_the_tiny_family(tmp_path, python, shown):
    # The wheels are kept with the other tests' downloads ($BAKE_PLAN_TEST_CACHE), which CI keeps.
    env = dict(os.environ, BAKE_PLAN_BENCH_CACHE=str(CACHE / "bench"))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "lock.py"), "--set", "tiny", "--repeat", "1",
                           "--python", python, "--markdown"], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr  # the warm-up also compared the lock with uv's output
    out = proc.stdout
    assert ("| lock | Python | cache | pins | A: bake-plan lock ms | P: pip-compile ms | U: uv pip compile ms "
            "| F: bake-plan floor ms | A/U | (A − F)/U | A/P |") in out, out
    rows = {m.group(1): m for m in re.finditer(
        rf"^\| tiny family, 3 stages \| {shown} \| (warm|cold) \| (\d+) \| ({NUMBER}) \| ({NUMBER}) \| ({NUMBER}) "
        rf"\| ({NUMBER}) \| ({NUMBER}) \| (-?{NUMBER}) \| ({NUMBER}) \|$", out, re.M)}
    assert set(rows) == {"warm", "cold"}, out
    for row in rows.values():
        assert row.group(2) == "3"  # einops, opt-einsum, toolz: no dependencies of their own
        a, p, u, f = (float(row.group(i)) for i in (3, 4, 5, 6))
        assert a > 0 and p > 0 and u > 0 and f > 0
        # A/U from the unrounded times: within the rounding of the milliseconds shown
        assert float(row.group(7)) == pytest.approx(a / u, abs=0.01 + (a / u) * (0.5 / u + 0.5 / a))
        assert float(row.group(8)) == pytest.approx((a - f) / u, abs=0.01 + (1 + abs(a - f) / u) / u)
    for cache in ("warm", "cold"):
        # the whole process against uv alone is in the table, not checked (docs/benchmarks.md, "Targets")
        assert not re.search(rf"^- .*{cache} cache: bake-plan ≤ 1\.1 × uv", out, re.M), out
        assert re.search(rf"^- (met|\*\*missed\*\*): lock \({python} Python\), {cache} cache: the lock's own work "
                         rf"≤ 1\.1 × uv \(A − F = {NUMBER} − {NUMBER} = -?{NUMBER} ms vs {NUMBER} ms, -?{NUMBER}\)$",
                         out, re.M), out


def test_the_stack_set_gives_uv_what_bake_plan_lock_gives_it():
    # The real stack's plugin (bench/bake-plan-stackbench), as the lock composes it: U of
    # `bench/lock.py --set stack` must get the very options A gives uv, for the same two files.
    sys.path.insert(0, str(ROOT / "bench" / "bake-plan-stackbench"))
    sys.path.insert(0, str(ROOT / "bench"))
    import bake_plan_stackbench as stack
    import lock as bench_lock  # bench/lock.py
    from bake.pip.lock import UV_OPTIONS, lock_specs, targets
    from bake.testing import compose_plan

    composition = compose_plan(stack, targets=["pax-leaf"], builtins=False)
    [spec] = lock_specs(composition, "pax-leaf")
    assert [(line.stage, line.host) for line in spec.lines] == [
        ("pax-root", "jax==0.4.26"), ("pax-root", "jaxlib==0.4.26"), ("pax-root", "flax==0.8.2"),
        ("pax-leaf", "paxml==1.4.0"), ("pax-leaf", "praxis==1.4.0")]
    [target] = set(targets(spec).values())
    # resolved for the image's Python and glibc; uv builds sdists with bake-plan's own interpreter
    assert target.uv_args() == ["--python-version", "3.10.13", "--python-platform", "x86_64-manylinux_2_36",
                                "--python", sys.executable]
    ins = ["requirements-pax-root.in", "requirements-pax-leaf.in"]
    argv = bench_lock.commands("bake-plan", "pax-leaf", ins, ROOT / "wheels", "image", fam=bench_lock.family("stack"))
    assert set(argv) == {"bake-plan lock", "uv pip compile", "bake-plan floor"}  # no pip-compile for Python 3.10
    assert argv["uv pip compile"][1:] == ["pip", "compile", *UV_OPTIONS, *target.uv_args(), "--no-index",
                                          "--find-links", str(ROOT / "wheels"), "--output-file", "uv.txt", *ins]
    assert argv["bake-plan lock"][1:] == ["lock", "--quiet", "--target", "pax-leaf", "--no-index", "--find-links",
                                          str(ROOT / "wheels"), "--locks-dir", "locks"]
