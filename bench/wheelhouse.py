#!/usr/bin/env python3
"""bake-plan's wheelhouse benchmark: ``bake-plan wheelhouse`` of a lock (A) against one plain
``pip download`` of the same pins (P), in the same run.

The family is ``bench/bake-plan-lockbench`` (the lock benchmark's three stages, Python 3.11 on
linux/amd64), a real plugin installed into a scratch directory on ``PYTHONPATH``. Its lock is
made once with ``bake-plan lock``; then, alternately and ``--repeat`` times each, into a new
directory every run:

- A: ``bake-plan wheelhouse --target lockbench-ckpt --locks-dir locks -o …``: a new process that
  composes the chain, checks the lock, downloads every pin in one ``pip download`` and pip and
  pip-tools (which the image needs) in another, side by side, and moves the wheels in;
- P: ``python -m pip download --no-deps --only-binary=:all:`` of the lock's pins, for the same
  Python, platform tags and implementation: what the wheelhouse of a lock cannot do with less.

Offline: the wheels (the family's, with their dependencies, and pip and pip-tools') are
downloaded once, with pip's own configuration, into ``~/.cache/bake-plan-bench/``
(``$BAKE_PLAN_BENCH_CACHE``), and both sides run with ``--no-index --find-links DIR``, pip's
configuration left out and pip's cache the benchmark's own (warm after the warm-up). The target
(docs/benchmarks.md): A ≤ :data:`MAX_RATIO` × P.

Standalone (``bench/run.py`` calls :func:`measure`, :func:`report` and :func:`checks` too)::

    python bench/wheelhouse.py --repeat 5 --markdown --check
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from lock import CACHE_ROOT, family_lines, install_family  # bench/lock.py, beside this script
from run import table_report, timed  # bench/run.py: the one timer of the benchmarks

MAX_RATIO = 1.5
"""docs/benchmarks.md: ``bake-plan wheelhouse`` of a lock takes at most 1.5 × one ``pip download``
of the same pins."""
SIDES = ("bake-plan wheelhouse", "pip download")
TARGET = "lockbench-ckpt"
PLATFORM = "linux/amd64"
PYTHON = "3.11"


class WheelhouseResult(NamedTuple):
    """Medians of A and P, and how many pins the lock has."""

    set_name: str
    pins: int
    medians: Dict[str, float]


def wheels(set_name: str, lines: Sequence[str]) -> Path:
    """The find-links directory: every wheel ``lines`` need, and pip and pip-tools with theirs,
    for CPython 3.11 on linux/amd64 (the wheelhouse's manylinux tags), downloaded once with pip's
    own configuration.

    :raises RuntimeError: pip could not download them.
    """
    from bake.pip.wheelhouse import TOOLS, download_argv

    dest = CACHE_ROOT / f"wheelhouse-wheels-{set_name}"
    done = dest / ".complete"
    want = "\n".join(sorted([*lines, *TOOLS])) + "\n"
    if done.is_file() and done.read_text() == want:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    for group in (list(lines), list(TOOLS)):
        proc = subprocess.run(download_argv(PYTHON, PLATFORM, dest) + group, capture_output=True, text=True,
                              timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"pip download for the wheelhouse benchmark failed:\n{proc.stderr[-2000:]}")
    done.write_text(want)
    return dest


def _environment(site: Path, set_name: str, caches: Path) -> Dict[str, str]:
    from bake.pip.lock import without_pip_configuration

    env = {k: v for k, v in without_pip_configuration(os.environ).items()
           if not k.startswith("UV_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME")}
    env.update(PYTHONPATH=str(site), BAKE_PLAN_LOCKBENCH_SET=set_name, UV_CACHE_DIR=str(caches / "uv"),
               PIP_CACHE_DIR=str(caches / "pip"), XDG_CACHE_HOME=str(caches / "xdg"))
    return env


def pins(lock: Path) -> List[str]:
    """The pinned lines of a lock (no header, comments or options)."""
    return [row.split(" #", 1)[0].strip() for row in lock.read_text().splitlines()
            if row and not row[0].isspace() and not row.startswith(("#", "-"))]


def commands(bake_plan: str, house: Path, out: str, pin_file: str) -> Dict[str, List[str]]:
    """Each side's command line, writing into ``out`` (a new directory per run)."""
    from bake.pip.wheelhouse import download_argv

    index = ["--no-index", "--find-links", str(house)]
    return {
        SIDES[0]: [bake_plan, "wheelhouse", "--quiet", "--target", TARGET, "--locks-dir", "locks", *index, "-o", out],
        SIDES[1]: download_argv(PYTHON, PLATFORM, Path(out), index) + ["--no-deps", "-r", pin_file],
    }


def measure(bake_plan: str, repeat: int, set_name: str = "jax", workdir: Optional[Path] = None) -> List[WheelhouseResult]:
    """Download the wheels (once), lock the family, then time A and P alternately, ``repeat`` runs
    each after one warm-up of each (which also checks A's wheelhouse holds every wheel P fetched).

    :raises RuntimeError: a side failed, or A lacks a wheel of the lock.
    """
    with tempfile.TemporaryDirectory(prefix="bake-plan-wheelbench-", dir=workdir) as tmp:
        root = Path(tmp)
        site = root / "site"
        install_family(site)
        lines = family_lines(site, set_name)
        house = wheels(set_name, [line for stage in lines.values() for line in stage])
        work = root / "work"
        work.mkdir()
        env = _environment(site, set_name, root / "caches")
        timed([bake_plan, "lock", "--quiet", "--target", TARGET, "--no-index", "--find-links", str(house),
               "--locks-dir", "locks"], work, env)
        pinned = pins(work / "locks" / f"{TARGET}.txt")
        (work / "pins.txt").write_text("".join(p + "\n" for p in pinned))
        runs: Dict[str, List[float]] = {side: [] for side in SIDES}
        for i in range(repeat + 1):  # the first round warms pip's cache and checks the outputs
            argv = commands(bake_plan, house, f"out-{i}", "pins.txt")
            for side in SIDES:
                out = work / f"out-{i}"
                seconds = timed(argv[side], work, env).seconds
                if i == 0 and side == SIDES[1]:
                    fetched = {p.name for p in out.glob("*.whl")}
                    made = {p.name for p in (work / "out-0-a").glob("*.whl")}
                    if not fetched <= made or len(fetched) != len(pinned):
                        raise RuntimeError(f"the wheelhouse lacks wheels pip download fetched: {sorted(fetched - made)}")
                if i == 0 and side == SIDES[0]:
                    out.rename(work / "out-0-a")
                if i:
                    runs[side].append(seconds)
                shutil.rmtree(out, ignore_errors=True)
        result = WheelhouseResult(set_name, len(pinned), {s: statistics.median(t) for s, t in runs.items()})
        print("bench: wheelhouse: " + ", ".join(f"{s} {_ms(t)} ms" for s, t in result.medians.items()),
              file=sys.stderr)
    return [result]


def _lock_python(lock: Path) -> str:
    """The Python a lock was made for (its ``# bake-plan python:`` header line), as ``3.N``."""
    for row in lock.read_text().splitlines():
        if row.startswith("# bake-plan python:"):
            return ".".join(row.split(":", 1)[1].strip().split(".")[:2])
    raise RuntimeError(f"{lock}: no '# bake-plan python:' header line")


def measure_project(bake_plan: str, project: Path, target: str, repeat: int,
                    workdir: Optional[Path] = None) -> List[WheelhouseResult]:
    """A real family, online: in ``project`` (a directory with the family's ``bake-plan.toml``,
    its plugin installed where ``bake_plan`` runs), lock ``target`` once, timed with an empty uv
    cache, then alternately, ``repeat`` times each into a new empty directory: A, ``bake-plan
    wheelhouse --target TARGET``, and P, one ``pip download --no-deps --prefer-binary`` of the
    lock's pins (the call A makes, sdists left unbuilt). Both use pip's own configuration (the
    machine's index) and pip's cache (shared, so every run after the first of each finds it warm).

    :returns: one result; the lock's seconds are printed on stderr.
    :raises RuntimeError: a side failed, or A lacks a wheel P fetched.
    """
    from bake.pip.wheelhouse import download_argv

    with tempfile.TemporaryDirectory(prefix="bake-plan-wheelbench-", dir=workdir) as tmp:
        root = Path(tmp)
        env = dict(os.environ, UV_CACHE_DIR=str(root / "uv"))
        locks = root / "locks"
        lock_s = timed([bake_plan, "lock", "--quiet", "--target", target, "--locks-dir", str(locks)], project, env)
        lock = locks / f"{target}.txt"
        pinned = pins(lock)
        (root / "pins.txt").write_text("".join(p + "\n" for p in pinned))
        python = _lock_python(lock)
        print(f"bench: wheelhouse: lock of {target} ({len(pinned)} pins), empty uv cache: {lock_s.seconds:.1f} s, "
              f"load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        argv = {SIDES[0]: [bake_plan, "wheelhouse", "--quiet", "--target", target, "--locks-dir", str(locks), "-o"],
                SIDES[1]: None}
        runs: Dict[str, List[float]] = {side: [] for side in SIDES}
        for i in range(repeat):
            for side in SIDES:
                out = root / f"out-{i}-{side.split()[0]}"
                cmd = argv[side] + [str(out)] if argv[side] else (
                    download_argv(python, PLATFORM, out, only_binary=False) + ["-r", str(root / "pins.txt")])
                load = os.getloadavg()[0]
                seconds = timed(cmd, project, os.environ.copy()).seconds
                runs[side].append(seconds)
                print(f"bench: wheelhouse: {side} {seconds:.1f} s (load {load:.1f} before)", file=sys.stderr)
            fetched = {p.name for p in (root / f"out-{i}-pip").glob("*.whl")}
            made = {p.name for p in (root / f"out-{i}-bake-plan").glob("*.whl")}
            if not fetched <= made:
                raise RuntimeError(f"the wheelhouse lacks wheels pip download fetched: {sorted(fetched - made)}")
            for out in root.glob(f"out-{i}-*"):
                shutil.rmtree(out, ignore_errors=True)
        return [WheelhouseResult(target, len(pinned), {s: statistics.median(t) for s, t in runs.items()})]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def checks(results: Sequence[WheelhouseResult]) -> List[Tuple[str, bool]]:
    """A ≤ :data:`MAX_RATIO` × P: (description with the values, met?)."""
    out = []
    for r in results:
        a, p = (r.medians[s] for s in SIDES)
        out.append((f"wheelhouse of a lock ({r.pins} pins): bake-plan ≤ {MAX_RATIO:g} × one pip download "
                    f"({_ms(a)} vs {_ms(p)} ms, {a / p:.2f})", a <= MAX_RATIO * p))
    return out


HEADER = ("wheelhouse", "pins", "A: bake-plan wheelhouse ms", "P: pip download ms", "A/P")


def report(results: Sequence[WheelhouseResult], markdown: bool) -> str:
    """The table and the checks, as text or Markdown (docs/benchmarks.md)."""
    table = [HEADER] + [(f"{r.set_name} family lock", str(r.pins), _ms(r.medians[SIDES[0]]), _ms(r.medians[SIDES[1]]),
                         f"{r.medians[SIDES[0]] / r.medians[SIDES[1]]:.2f}") for r in results]
    return table_report(table, checks(results), markdown)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the wheelhouse benchmark alone. Exit status 1 with ``--check`` when the target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each side (default 5)")
    parser.add_argument("--set", default="jax", choices=("jax", "tiny"), help="the family's requirements (default jax)")
    parser.add_argument("--bake-plan", help="the bake-plan console script (default: beside this Python)")
    parser.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    parser.add_argument("--project", type=Path, help="a real family instead, online: the directory of its "
                        "bake-plan.toml (its plugin installed beside --bake-plan); pip's own configuration")
    parser.add_argument("--target", help="with --project: the stage to lock and fill the wheelhouse of")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if (args.project is None) != (args.target is None):
        parser.error("--project and --target go together")
    bake_plan = args.bake_plan or str(Path(sys.executable).parent / "bake-plan")
    if args.project is not None:
        results = measure_project(bake_plan, args.project.resolve(), args.target, args.repeat)
    else:
        results = measure(bake_plan, args.repeat, args.set)
    sys.stdout.write(report(results, args.markdown))
    return 1 if args.check and not all(ok for _, ok in checks(results)) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as err:  # a side that cannot run or failed: its words, no traceback
        sys.exit(f"bench: {err}")
