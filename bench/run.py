#!/usr/bin/env python3
"""bake-plan's benchmark: writing a plan (A) against buildx reading it (B).

For ``upstream-pax`` and for synthetic families of N stages (``bench/bake-plan-bench``, a real
plugin installed with pip into a scratch directory on ``PYTHONPATH``), it runs, alternately and
``--repeat`` times each:

- A: ``bake-plan --target …`` as a new process (cold start: interpreter, imports, entry points,
  plugins, composition, rendering, writing the file);
- B: ``docker buildx bake --print …`` on the plan A wrote: ``upstream-pax`` for upstream-pax, the
  ``default`` group (every target of the plan) for the synthetic families, which A plans by
  requesting every leaf stage (``--target`` once per leaf). B runs only up to ``--print-up-to``
  stages (2,000): above, buildx takes minutes and GBs, and the table shows "—".

The ``--config-sizes`` families (2,000 and 20,000 stages) are planned a second time with their
targets from the configuration (a ``bake-plan.toml`` with ``targets = [...]`` in the case's
directory) instead of flags.

It reports median wall times, A/B, each side's peak memory (max RSS of the process) and how A's
time grows from one size to the next, then checks the targets of docs/benchmarks.md. Only the
standard library and the installed project are needed (and buildx for B)::

    python bench/run.py --sizes 20,200,2000,20000 --repeat 15 --markdown

Its counterparts, each on its own (docs/benchmarks.md): ``bench/lock.py`` and
``bench/wheelhouse.py`` (run from here unless ``--no-lock``/``--no-wheelhouse``), and on the test
engine ``bench/build.py`` (``bake-plan build`` against ``docker buildx bake``),
``bench/publish.py`` (``bake-plan publish`` and its ``--dry-run`` for 16 multi-arch tags) and
``bench/fresh_runner.py`` (an unchanged nightly on an emptied engine, with and without
``--skip-unchanged``: time and bytes moved to and from the registry).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Dict, List, NamedTuple, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
BENCH_PACKAGE = ROOT / "bench" / "bake-plan-bench"
DATE = "2026-11-29"

# docs/benchmarks.md: the targets a run is checked against.
LARGE, SMALL = 2000, 200
MAX_LARGE_SECONDS = 1.0
MAX_GROWTH = 12.0
MAX_LARGE_RSS_MB = 150.0
MAX_UPSTREAM_RATIO = 0.8  # A ≤ 0.8 × B for upstream-pax
HUGE = 20000  # linear to 20,000 stages, with targets from flags or from the configuration
MAX_HUGE_GROWTH = 11.0
MAX_HUGE_RSS_MB = 250.0
CONFIG = "config"  # the label suffix of a case whose targets come from bake-plan.toml


class Sample(NamedTuple):
    """One timed run of one command."""

    seconds: float
    max_rss_mb: float


class Case(NamedTuple):
    """One plan to measure: A's arguments, B's targets and the environment both run in."""

    label: str
    stages: int
    plan_args: Tuple[str, ...]
    print_targets: Tuple[str, ...]
    env: Dict[str, str]
    config: Optional[str] = None  # bake-plan.toml written in the case's directory
    printed: bool = True  # B runs (buildx --print); False above --print-up-to stages

    @property
    def from_config(self) -> bool:
        """Whether A's targets come from the configuration (bake-plan.toml), not flags."""
        return self.config is not None


class Result(NamedTuple):
    """Medians of one case."""

    case: Case
    targets: int
    a: Sample
    b: Optional[Sample]  # None: B not run (too large for buildx --print)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line of the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20,200,2000,20000",
                        help="comma-separated sizes of the synthetic family, in stages (default 20,200,2000,20000)")
    parser.add_argument("--config-sizes", default="2000,20000",
                        help="sizes also planned with their targets from bake-plan.toml (default 2000,20000)")
    parser.add_argument("--print-up-to", type=int, default=LARGE, metavar="STAGES",
                        help=f"run B (buildx --print) only for plans of at most this many stages (default {LARGE})")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of A and of B per case (default 7)")
    parser.add_argument("--markdown", action="store_true", help="print the report as Markdown (docs/benchmarks.md)")
    parser.add_argument("--no-upstream", action="store_true", help="skip the upstream-pax case")
    parser.add_argument("--bake-plan", help="the bake-plan console script (default: beside this Python, else PATH)")
    parser.add_argument("--buildx", default="docker buildx",
                        help="the buildx command, e.g. /path/to/docker-buildx (default: docker buildx)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--lock", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the lock benchmark, bench/lock.py (default: yes)")
    parser.add_argument("--lock-set", default="jax", choices=("jax", "tiny"), help="the lock family's requirements")
    parser.add_argument("--wheelhouse", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the wheelhouse benchmark, bench/wheelhouse.py, on the lock family (default: yes)")
    args = parser.parse_args(argv)
    for option in ("sizes", "config_sizes"):
        text = getattr(args, option)
        try:
            setattr(args, option, [int(s) for s in text.split(",") if s.strip()])
        except ValueError:
            parser.error(f"--{option.replace('_', '-')} {text!r}: expected comma-separated integers")
    if any(size < 1 for size in args.sizes + args.config_sizes) or args.repeat < 1:
        parser.error("sizes and --repeat must be at least 1")
    return args


def find_bake_plan(explicit: Optional[str]) -> str:
    """The ``bake-plan`` console script to measure."""
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "bake-plan"
    if beside.exists():
        return str(beside)
    found = shutil.which("bake-plan")
    if found is None:
        sys.exit("bench: bake-plan is not installed (pip install . first)")
    return found


def install_bench_plugin(site: Path) -> None:
    """``pip install`` the synthetic family's plugin distribution into ``site`` (for PYTHONPATH)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--target", str(site), str(BENCH_PACKAGE)], check=True)


def cases(sizes: Sequence[int], site: Path, upstream: bool, config_sizes: Sequence[int] = (),
          print_up_to: int = LARGE) -> List[Case]:
    """upstream-pax (the built-in family, no bench plugin), then one synthetic family per size
    (targets as flags), then one per config size (targets from bake-plan.toml)."""
    base_env = {k: v for k, v in os.environ.items() if k not in ("BAKE_PLAN_BENCH_STAGES", "PYTHONPATH")}
    out = []
    if upstream:
        out.append(Case("upstream-pax", 0, ("--target", "upstream-pax"), ("upstream-pax",), base_env))
    sys.path.insert(0, str(site))
    from bake_plan_bench import ENV, leaves  # the installed plugin: its tree shape

    for size in sizes:
        env = dict(base_env, PYTHONPATH=str(site), **{ENV: str(size)})
        plan_args = tuple(arg for leaf in leaves(size) for arg in ("--target", leaf))
        out.append(Case(f"synthetic {size}", size, plan_args, (), env, printed=size <= print_up_to))
    for size in config_sizes:
        env = dict(base_env, PYTHONPATH=str(site), **{ENV: str(size)})
        config = "targets = [" + ", ".join(json.dumps(leaf) for leaf in leaves(size)) + "]\n"
        out.append(Case(f"synthetic {size}, {CONFIG}", size, (), (), env, config=config, printed=size <= print_up_to))
    return out


def table_report(table: Sequence[Sequence[str]], checked: Sequence[Tuple[str, bool]], markdown: bool) -> str:
    """A benchmark's table (its first row the header) and its checks (text, met), as aligned text or
    Markdown (docs/benchmarks.md), ending in a newline."""
    if markdown:
        lines = ["| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
        lines += [""] + [f"- {'met' if ok else '**missed**'}: {text}" for text, ok in checked]
    else:
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        lines += [""] + [f"{'met   ' if ok else 'MISSED'} {text}" for text, ok in checked]
    return "\n".join(lines) + "\n"


def timed(argv: Sequence[str], cwd: Path, env: Dict[str, str], stderr: Optional[IO[bytes]] = None) -> Sample:
    """Run ``argv`` once with its stdout discarded: wall time and the process's peak memory.
    Its stderr goes to ``stderr`` when given (a file the caller reads after), else is dropped.

    :raises RuntimeError: the command failed (its stderr is in the message).
    """
    with (contextlib.nullcontext(stderr) if stderr is not None else tempfile.TemporaryFile()) as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{shlex.join(argv[:6])} … failed ({proc.returncode}):\n"
                               f"{err.read().decode(errors='replace')[-2000:]}")
    rss_bytes = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return Sample(seconds, rss_bytes / 2**20)


def median(samples: Sequence[Sample]) -> Sample:
    """The median time and the median peak memory of some runs."""
    return Sample(statistics.median(s.seconds for s in samples), statistics.median(s.max_rss_mb for s in samples))


def measure(case: Case, bake_plan: str, buildx: Sequence[str], repeat: int, workdir: Path) -> Result:
    """Warm up once (and check both sides handle the same plan), then alternate A and B."""
    workdir.mkdir()
    if case.config is not None:
        (workdir / "bake-plan.toml").write_text(case.config, encoding="utf-8")
    plan_argv = [bake_plan, *case.plan_args, "--date", DATE, "-o", "docker-bake.hcl"]
    print_argv = [*buildx, "bake", "-f", "docker-bake.hcl", "--print", *case.print_targets]

    # Warm-up: also proves the plan is complete and buildx reads every target of it.
    planned = subprocess.run(plan_argv, cwd=workdir, env=case.env, capture_output=True, text=True)
    if planned.returncode != 0:
        raise RuntimeError(f"bake-plan failed for {case.label}:\n{planned.stderr}")
    targets = int(planned.stdout.split(" targets for ", 1)[0].rsplit(" ", 1)[-1])
    if not case.printed:
        return Result(case, targets, median([timed(plan_argv, workdir, case.env) for _ in range(repeat)]), None)
    printed = subprocess.run(print_argv, cwd=workdir, env=case.env, capture_output=True, text=True)
    if printed.returncode != 0:
        raise RuntimeError(f"buildx bake --print failed for {case.label}:\n{printed.stderr}")
    resolved = json.loads(printed.stdout)["target"]
    if not case.print_targets and len(resolved) != targets:
        raise RuntimeError(f"{case.label}: buildx resolved {len(resolved)} targets, bake-plan wrote {targets}")

    a_runs, b_runs = [], []
    for _ in range(repeat):
        a_runs.append(timed(plan_argv, workdir, case.env))
        b_runs.append(timed(print_argv, workdir, case.env))
    return Result(case, targets, median(a_runs), median(b_runs))


def _first_line(argv: Sequence[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except OSError:
        return "?"
    return out.splitlines()[0] if out else "?"


def machine() -> Dict[str, str]:
    """What the numbers were measured on."""
    cpu, memory = platform.processor() or platform.machine(), ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f", {int(line.split()[1]) / 2**20:.0f} GiB RAM"
    except OSError:
        pass
    return {
        "machine": f"{cpu}, {os.cpu_count()} CPUs{memory}; {platform.system()} {platform.release()}",
        "python": platform.python_implementation() + " " + platform.python_version(),
    }


def loop_seconds(best_of: int = 3) -> float:
    """How fast this machine runs Python right now: the best of ``best_of`` timings of a loop of
    10⁷ additions in a function, in seconds. Targets that are wall times (2,000 stages under 1 s)
    scale with it. (The same loop at module level, as figures of earlier days were taken, is
    about 2.6 times slower: it moved between 0.94 s and 1.67 s on this machine within two days.)"""
    best = float("inf")
    for _ in range(best_of):
        start, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - start)
    return best


def checks(results: Sequence[Result]) -> List[Tuple[str, bool]]:
    """The targets this run can judge: (description with the measured value, met?)."""
    by_stages = {r.case.stages: r for r in results if r.case.stages and not r.case.from_config}
    from_config = {r.case.stages: r for r in results if r.case.from_config}
    out = []
    upstream = next((r for r in results if r.case.label == "upstream-pax"), None)
    if upstream and upstream.b:
        out.append((f"upstream-pax: bake-plan ≤ {MAX_UPSTREAM_RATIO:g} × buildx ({_ms(upstream.a.seconds)} vs "
                    f"{_ms(upstream.b.seconds)} ms, A/B {upstream.a.seconds / upstream.b.seconds:.2f})",
                    upstream.a.seconds <= MAX_UPSTREAM_RATIO * upstream.b.seconds))
    large = by_stages.get(LARGE)
    if large and large.b:
        out.append((f"{LARGE} stages: bake-plan ≤ buildx ({_ms(large.a.seconds)} vs {_ms(large.b.seconds)} ms)",
                    large.a.seconds <= large.b.seconds))
    if large:
        out.append((f"{LARGE} stages in under {MAX_LARGE_SECONDS:g} s ({large.a.seconds:.2f} s)",
                    large.a.seconds < MAX_LARGE_SECONDS))
        out.append((f"{LARGE} stages: peak memory under {MAX_LARGE_RSS_MB:g} MB ({large.a.max_rss_mb:.0f} MB)",
                    large.a.max_rss_mb < MAX_LARGE_RSS_MB))
        small = by_stages.get(SMALL)
        if small:
            growth = large.a.seconds / small.a.seconds
            out.append((f"time({LARGE}) / time({SMALL}) ≤ {MAX_GROWTH:g} ({growth:.1f})", growth <= MAX_GROWTH))
    for how, sized in (("--target flags", by_stages), ("targets from bake-plan.toml", from_config)):
        huge, large = sized.get(HUGE), sized.get(LARGE)
        if huge and large:
            growth = huge.a.seconds / large.a.seconds
            out.append((f"{how}: time({HUGE}) / time({LARGE}) ≤ {MAX_HUGE_GROWTH:g} ({growth:.1f})",
                        growth <= MAX_HUGE_GROWTH))
        if huge:
            out.append((f"{how}: {HUGE} stages, peak memory under {MAX_HUGE_RSS_MB:g} MB ({huge.a.max_rss_mb:.0f} MB)",
                        huge.a.max_rss_mb < MAX_HUGE_RSS_MB))
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if seconds >= 0.1 else f"{seconds * 1000:.1f}"


HEADER = ("plan", "stages", "targets", "A: bake-plan ms", "B: buildx --print ms", "A/B",
          "A peak MB", "B peak MB", "A growth")


def rows(results: Sequence[Result]) -> List[Tuple[str, ...]]:
    """One table row per case; growth is A's time over the previous (smaller) synthetic size's with
    its targets given the same way (flags, or the configuration); "—" where B did not run."""
    out, previous = [], {}
    for r in results:
        growth = "—"
        if r.case.stages:
            before = previous.get(r.case.from_config)
            if before is not None:
                growth = f"×{r.a.seconds / before.a.seconds:.1f} for ×{r.case.stages / before.case.stages:g} stages"
            previous[r.case.from_config] = r
        b = ((_ms(r.b.seconds), f"{r.a.seconds / r.b.seconds:.2f}", f"{r.b.max_rss_mb:.0f}") if r.b
             else ("—", "—", "—"))
        out.append((r.case.label, str(r.case.stages or "—"), str(r.targets), _ms(r.a.seconds), b[0], b[1],
                    f"{r.a.max_rss_mb:.0f}", b[2], growth))
    return out


def report(results: Sequence[Result], info: Dict[str, str], markdown: bool) -> str:
    """The run as text: what it ran on, the table and the targets."""
    table = [HEADER, *rows(results)]
    lines = []
    if markdown:
        lines += [f"- {key}: {value}" for key, value in info.items()]
        lines += ["", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
        lines += [""] + [f"- {'met' if ok else '**missed**'}: {text}" for text, ok in checks(results)]
    else:
        lines += [f"{key}: {value}" for key, value in info.items()]
        widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
        lines += [""] + ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        lines += [""] + [f"{'met   ' if ok else 'MISSED'} {text}" for text, ok in checks(results)]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark and print the report. Exit status 1 with ``--check`` when a target is missed."""
    args = parse_args(argv)
    # bake-plan writes its bytecode, as a pip-installed one has it: with PYTHONDONTWRITEBYTECODE
    # set, a module changed since its .pyc was written compiles from source on every run (A alone)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    bake_plan = find_bake_plan(args.bake_plan)
    buildx = shlex.split(args.buildx)
    command = "python bench/run.py " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    info = {
        "command": f"`{command}`" if args.markdown else command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **machine(),
        "bake-plan": _first_line([bake_plan, "--version"]),
        "buildx": _first_line([*buildx, "version"]),
        "runs": f"{args.repeat} of A and {args.repeat} of B per plan, alternating, after one warm-up each; medians",
    }
    load_before, speed_before = os.getloadavg(), loop_seconds()
    with tempfile.TemporaryDirectory(prefix="bake-plan-bench-") as tmp:
        site = Path(tmp) / "site"
        install_bench_plugin(site)
        results = []
        for i, case in enumerate(cases(args.sizes, site, upstream=not args.no_upstream,
                                       config_sizes=args.config_sizes, print_up_to=args.print_up_to)):
            results.append(measure(case, bake_plan, buildx, args.repeat, Path(tmp) / f"case-{i}"))
            b = results[-1].b
            print(f"bench: {case.label}: A {_ms(results[-1].a.seconds)} ms, B {_ms(b.seconds) + ' ms' if b else '—'}",
                  file=sys.stderr)
    import lock as lock_bench  # bench/lock.py, beside this script

    import wheelhouse as wheelhouse_bench  # bench/wheelhouse.py, beside this script

    locks = lock_bench.measure(bake_plan, args.repeat, args.lock_set) if args.lock else []
    houses = wheelhouse_bench.measure(bake_plan, args.repeat, args.lock_set) if args.wheelhouse else []
    load_after, speed_after = os.getloadavg(), loop_seconds()
    info["load average (1 min)"] = f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
    info["speed (10⁷ additions in a Python loop, best of 3)"] = f"{speed_before:.2f} s before, {speed_after:.2f} s after"
    sys.stdout.write(report(results, info, args.markdown) + ("\n" + lock_bench.report(locks, args.markdown) if locks else "")
                     + ("\n" + wheelhouse_bench.report(houses, args.markdown) if houses else ""))
    met = checks(results) + lock_bench.checks(locks) + wheelhouse_bench.checks(houses)
    return 1 if args.check and not all(ok for _, ok in met) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as err:  # a side that cannot run or failed: its words, no traceback
        sys.exit(f"bench: {err}")
