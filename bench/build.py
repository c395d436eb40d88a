#!/usr/bin/env python3
"""bake-plan's build benchmark: ``bake-plan build`` (A) against planning (P: ``bake-plan build
--dry-run``, which writes the same plan and runs no docker) plus ``docker buildx bake`` run directly
on that plan with the same flags (B), on the test engine.

The family is the reference one, ``tests/packages/bake-plan-jaxfamily`` (jax, jaxlib, flax,
einops; 4 targets for ``--target jx-child``), installed with pip into a scratch directory on
``PYTHONPATH``, locked from its wheelhouse and built offline for linux/amd64 with ``--load``, its
``python:3.11-slim-bookworm`` stood in by the test engine's. The wheelhouse is downloaded once
(``bake-plan wheelhouse``) into ``$BAKE_PLAN_TEST_CACHE`` (default ``~/.cache/bake-plan-tests``),
the cache ``tests/test_jaxfamily_engine.py`` fills, and reused.

B is the command ``bake-plan build --dry-run`` prints for the same options (the plan bake-plan
wrote; the same ``--allow``/``--load``/``--no-cache`` flags), with its own ``--metadata-file``; P is
that dry run itself (the interpreter, the plugins, the plan written, no docker call), so A − (P + B)
is what a build adds to planning and buildx: the engine probe not hidden by planning, the
python-on-whales import, reading the progress, the reports. I, in each warm rotation, is what that
import costs on the machine at that moment (a process of bake-plan's interpreter importing
``bake.cli`` and python-on-whales, less one importing ``bake.cli``): the warm target counts the
import as 0.3 s, or as I when I is more. After one warm-up of each side, alternately (A, P, B, I)
and ``--repeat`` times each:

- **warm**: nothing changed since the last build;
- **cold**: ``--no-cache`` on both sides (every step runs again; ``--cold-repeat`` times, no
  warm-up).

``--compare BAKE_PLAN`` adds C, another bake-plan (an older one), between A and B on warm builds.

Both show ``--progress plain``. It reports median wall times, A/B, A's overhead, peak memory,
and two facts of every warm A run: the Dockerfile steps that ran (the sitrep's ``steps_run``,
read by bake-plan's progress reader) and the bytes of the wheelhouse's layer sent
(:func:`bake.run.progress.bytes_sent`), then checks the targets of docs/benchmarks.md. Only the
standard library, the installed project and the test engine are needed::

    scripts/test-engine up && eval "$(scripts/test-engine env)"
    python bench/build.py --repeat 5 --cold-repeat 2 --markdown
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import http.client
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from run import Sample, _first_line, find_bake_plan, machine, median, timed

from bake.pip.lock import without_pip_configuration
from bake.pip.wheelhouse import TOOLS
from bake.run.progress import bytes_sent

ROOT = Path(__file__).resolve().parent.parent
FAMILY = ROOT / "tests" / "packages" / "bake-plan-jaxfamily"
TARGET = "jx-child"
FAMILY_BASE = "python:3.11-slim-bookworm"
STAND_IN = "stand-in/python:bookworm"  # scripts/test-engine pushes it to the registry
DATE = "2026-11-29"

# docs/benchmarks.md: the targets a run is checked against.
MAX_WARM_OVERHEAD_S = 0.5
"""Warm: A ≤ P + B + this many seconds, python-on-whales' import included: :data:`IMPORT_ALLOWED_S`
of it for the import, the rest for everything else a build adds."""
IMPORT_ALLOWED_S = 0.3
"""What the warm target counts python-on-whales' import as (what it took on the machine the target
was set on). The run measures the import (I); when it takes longer, the target is A − (P + B) ≤
I + the rest (:func:`warm_allowance`): a build may not add more than the rest beyond the import."""
MAX_COLD_RATIO = 1.02
"""Cold: A ≤ this × (P + B)."""
MAX_SENT_SHARE = 0.01


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line of the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="warm runs of A and of B (default 5)")
    parser.add_argument("--cold-repeat", type=int, help="cold (--no-cache) runs of A and of B (default: --repeat; "
                                                        "0: none)")
    parser.add_argument("--markdown", action="store_true", help="print the report as Markdown (docs/benchmarks.md)")
    parser.add_argument("--bake-plan", help="the bake-plan console script (default: beside this Python, else PATH)")
    parser.add_argument("--compare", metavar="BAKE_PLAN",
                        help="another bake-plan console script (an older version) measured as C between A and B, "
                             "warm only")
    parser.add_argument("--registry", default=os.environ.get("BAKE_PLAN_TEST_REGISTRY", "localhost:5555"),
                        help="the test engine's registry (default localhost:5555)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    args.cold_repeat = args.repeat if args.cold_repeat is None else args.cold_repeat
    if args.repeat < 1 or args.cold_repeat < 0:
        parser.error("--repeat must be at least 1, --cold-repeat at least 0")
    return args


class Run(NamedTuple):
    """One timed build: time and memory, Dockerfile steps run (A: the sitrep's; B: ``None``),
    bytes of the wheelhouse's layer sent."""

    sample: Sample
    steps_run: Optional[int]
    sent: int


class Row(NamedTuple):
    """Medians of one kind of build (warm or cold) and the facts of every run; ``p``: planning
    alone (``bake-plan build --dry-run``); ``c``: the ``--compare`` bake-plan's median, when
    measured."""

    kind: str
    a: Sample
    b: Sample
    a_runs: List[Run]
    b_runs: List[Run]
    c: Optional[Sample] = None
    p: Optional[Sample] = None
    beyond_s: Optional[float] = None
    """The median over rotations of A − (P + B), each of one rotation (steadier than a difference
    of medians on a busy machine)."""
    c_beyond_s: Optional[float] = None
    import_s: Optional[float] = None
    """The median over rotations of I: ``import bake.cli, python_on_whales`` less ``import
    bake.cli``, each a new process of bake-plan's interpreter (warm rows only)."""


def wheelhouse_stamp() -> str:
    """What a cached wheelhouse was filled for: the family's plugin module and the tools
    (``tests/test_jaxfamily_engine.py`` reads and writes the same stamp)."""
    data = (FAMILY / "bake_plan_jaxfamily" / "__init__.py").read_bytes() + repr(TOOLS).encode()
    return hashlib.sha256(data).hexdigest()


def family_wheelhouse(bake_plan: str, env: Dict[str, str]) -> Path:
    """The family's wheelhouse in the test cache, downloaded (``bake-plan wheelhouse``, pip's own
    configuration) only when its stamp is not :func:`wheelhouse_stamp`."""
    cache = Path(os.environ.get("BAKE_PLAN_TEST_CACHE", Path.home() / ".cache" / "bake-plan-tests"))
    house = cache / "jaxfamily-wheelhouse"
    stamp = house / ".bake-plan-tests-stamp"
    if not (stamp.is_file() and stamp.read_text() == wheelhouse_stamp()):
        subprocess.run([bake_plan, "wheelhouse", "--target", TARGET, "-o", str(house), "--config", os.devnull],
                       env=env, check=True, timeout=3600)
        stamp.write_text(wheelhouse_stamp())
    return house


def wheelhouse_layer(plan_file: Path) -> Tuple[str, int]:
    """The wheelhouse's layer in the plan's ``oci-layout://DIR@sha256:…`` context: its digest
    (hex) and size in bytes, from the layout's manifest."""
    found = re.search(r"oci-layout://([^@\"]+)@sha256:([0-9a-f]{64})", plan_file.read_text())
    if found is None:
        raise RuntimeError(f"{plan_file} gives the wheelhouse as no OCI layout")
    manifest = json.loads((Path(found.group(1)) / "blobs" / "sha256" / found.group(2)).read_text())
    layer = manifest["layers"][0]
    return layer["digest"].split(":", 1)[1], int(layer["size"])


def engine_bench_arguments(doc: str, repeat: int, repeat_help: str) -> argparse.ArgumentParser:
    """The command line the engine benchmarks beside this one share (``bench/publish.py``,
    ``bench/fresh_runner.py``): ``--repeat`` (default ``repeat``), ``--markdown``, ``--bake-plan``,
    ``--registry`` and ``--check``; ``doc``'s first paragraph as the description."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=repeat, help=f"{repeat_help} (default {repeat})")
    parser.add_argument("--markdown", action="store_true", help="print the report as Markdown (docs/benchmarks.md)")
    parser.add_argument("--bake-plan", help="the bake-plan console script (default: beside this Python, else PATH)")
    parser.add_argument("--registry", default=os.environ.get("BAKE_PLAN_TEST_REGISTRY", "localhost:5555"),
                        help="the test engine's registry (default localhost:5555)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a performance target is missed")
    return parser


def engine_up(registry: str) -> Optional[str]:
    """Why the test engine cannot be used (``None`` when it can): ``docker info`` and the registry."""
    try:
        if subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode:
            return "no Docker engine answers (scripts/test-engine up; eval \"$(scripts/test-engine env)\")"
        urllib.request.urlopen(f"http://{registry}/v2/", timeout=10).close()
    except (OSError, ValueError, http.client.HTTPException, subprocess.TimeoutExpired) as err:  # a registry no URL holds
        return f"the engine or the registry {registry} does not answer: {err}"
    return None


class Bench:
    """One benchmark's scratch directory, plan options and both commands."""

    def __init__(self, bake_plan: str, registry: str, tmp: Path):
        self.bake_plan, self.tmp = bake_plan, tmp
        site, self.work = tmp / "site", tmp / "work"
        self.work.mkdir()
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                        "--target", str(site), str(FAMILY)], check=True, timeout=600)
        self.env = dict(os.environ, PYTHONPATH=str(site))
        self.wheelhouse = family_wheelhouse(bake_plan, self.env)
        locks = tmp / "locks"
        subprocess.run([bake_plan, "lock", "--target", TARGET, "--locks-dir", str(locks), "--config", os.devnull,
                        "--no-index", "--find-links", str(self.wheelhouse)], env=without_pip_configuration(self.env), check=True,
                       capture_output=True, timeout=900)
        self.namespace = f"{registry}/bench{uuid.uuid4().hex[:8]}"
        self.options = ["--target", TARGET, "--locked", "--locks-dir", str(locks), "--wheelhouse", str(self.wheelhouse),
                        "--platform", "linux/amd64", "--registry", self.namespace, "--date", DATE, "--load",
                        "--base-image", f"{FAMILY_BASE}={registry}/{STAND_IN}", "--config", os.devnull,
                        "--sitrep-dir", str(tmp / "sitrep"), "--progress", "plain"]
        self.layer: Optional[Tuple[str, int]] = None

    def a_argv(self, cold: bool, bake_plan: Optional[str] = None) -> List[str]:
        """``bake-plan build …`` (``bake_plan``: another console script)."""
        return [bake_plan or self.bake_plan, "build", *self.options, *(["--no-cache"] if cold else [])]

    def p_argv(self, cold: bool) -> List[str]:
        """``bake-plan build … --dry-run``: the same plan written, the bake command printed, no
        docker run (P)."""
        return [*self.a_argv(cold), "--dry-run"]

    def b_argv(self, cold: bool) -> List[str]:
        """The ``docker buildx bake …`` command ``bake-plan build --dry-run`` prints for the same
        options, writing its own ``--metadata-file`` (bake-plan's is bake-plan's to replace)."""
        printed = subprocess.run(self.p_argv(cold), cwd=self.work, env=self.env, capture_output=True,
                                 text=True, check=True, timeout=300).stdout
        argv = shlex.split(printed)
        argv[argv.index("--metadata-file") + 1] = str(self.tmp / "direct-metadata.json")
        return argv

    def run(self, argv: Sequence[str], bake_plan: bool) -> Run:
        """One timed build; its progress log read for the layer sent, bake-plan's sitrep (the last
        ``--sitrep-dir`` of ``argv``) for the steps run."""
        with tempfile.TemporaryFile(dir=self.tmp) as err:
            sample = timed(argv, self.work, self.env, stderr=err)
            err.seek(0)
            log = err.read().decode(errors="replace")
        if self.layer is None:
            self.layer = wheelhouse_layer(self.work / "docker-bake.hcl")
        steps = None
        if bake_plan:
            sitrep_dir = argv[len(argv) - 1 - argv[::-1].index("--sitrep-dir") + 1]
            report = json.loads((Path(sitrep_dir) / "sitrep.json").read_text())
            steps = sum(entry["steps_run"] or 0 for entry in report["targets"].values())
        return Run(sample, steps, bytes_sent(log, self.layer[0]))

    def import_cost(self) -> float:
        """One I: python-on-whales' import in a new process of bake-plan's own interpreter, the
        difference of two processes run one after the other (with it, without it)."""
        python = interpreter_of(self.bake_plan)
        both = timed([python, "-c", "import bake.cli, python_on_whales"], self.work, self.env)
        alone = timed([python, "-c", "import bake.cli"], self.work, self.env)
        return both.seconds - alone.seconds

    def planned(self, argv: Sequence[str]) -> Sample:
        """One timed plan (P): the dry run, its command line on stdout, thrown away."""
        with tempfile.TemporaryFile(dir=self.tmp) as err:
            return timed(argv, self.work, self.env, stderr=err)

    def measure(self, kind: str, repeat: int, compare: Optional[str] = None) -> Row:
        """``repeat`` runs of A, (C,) P and B, alternating; warm: after one warm-up of each (a
        cold run needs none: it reads no cache)."""
        cold = kind == "cold"
        a_argv, b_argv, p_argv = self.a_argv(cold), self.b_argv(cold), self.p_argv(cold)
        # C writes its own plan (its stages' paths differ) and reports, in a directory of its own.
        c_argv = [*self.a_argv(cold, compare), "-o", "compare-bake.hcl", "--sitrep-dir", str(self.tmp / "compare")] \
            if compare else None
        if not cold:
            for argv in (a_argv, c_argv, b_argv):
                if argv:
                    self.run(argv, argv is not b_argv)
        a_runs, b_runs, c_runs, p_runs, i_runs = [], [], [], [], []
        for _ in range(repeat):
            a_runs.append(self.run(a_argv, True))
            if c_argv:
                c_runs.append(self.run(c_argv, True))
            p_runs.append(self.planned(p_argv))
            b_runs.append(self.run(b_argv, False))
            if not cold:
                i_runs.append(self.import_cost())
            print(f"bench: {kind}: A {a_runs[-1].sample.seconds:.2f} s, P {p_runs[-1].seconds:.2f} s, "
                  f"B {b_runs[-1].sample.seconds:.2f} s" + (f", I {i_runs[-1]:.2f} s" if i_runs else "")
                  + (f", C {c_runs[-1].sample.seconds:.2f} s" if c_runs else ""), file=sys.stderr)
        def beyond(runs: List[Run]) -> Optional[float]:
            return statistics.median(r.sample.seconds - p.seconds - b.sample.seconds
                                     for r, p, b in zip(runs, p_runs, b_runs)) if runs else None

        return Row(kind, median([r.sample for r in a_runs]), median([r.sample for r in b_runs]), a_runs, b_runs,
                   median([r.sample for r in c_runs]) if c_runs else None, median(p_runs), beyond(a_runs),
                   beyond(c_runs), statistics.median(i_runs) if i_runs else None)

    def remove_images(self) -> None:
        """Remove the images the runs loaded (only this benchmark's namespace; build cache kept)."""
        listed = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                                text=True, timeout=120).stdout.split()
        ours = [ref for ref in listed if ref.startswith(self.namespace + "/")]
        if ours:
            subprocess.run(["docker", "image", "rm", *ours], capture_output=True, timeout=300)


def interpreter_of(script: str) -> str:
    """The Python a console script runs with (its ``#!`` line), else this one."""
    try:
        with open(script, "rb") as handle:
            first = handle.readline().decode(errors="replace").strip()
    except OSError:
        return sys.executable
    words = first[2:].split() if first.startswith("#!") else []
    return words[0] if len(words) == 1 and os.path.isabs(words[0]) else sys.executable


def warm_allowance(import_s: Optional[float]) -> float:
    """How much a warm build may add to P + B, in seconds: :data:`MAX_WARM_OVERHEAD_S`, of which
    :data:`IMPORT_ALLOWED_S` is the import; when this run measured the import slower, its
    measure instead of that share."""
    rest = MAX_WARM_OVERHEAD_S - IMPORT_ALLOWED_S
    return rest + max(IMPORT_ALLOWED_S, import_s or 0.0)


def checks(rows: Sequence[Row], wheelhouse_bytes: int) -> List[Tuple[str, bool]]:
    """The targets this run can judge: (description with the measured value, met?)."""
    out = []
    for row in rows:
        if row.p is not None:
            a, p, b = row.a.seconds, row.p.seconds, row.b.seconds
            if row.kind == "warm":
                allowed = warm_allowance(row.import_s)
                out.append((f"warm: bake-plan build ≤ plan + buildx bake + {MAX_WARM_OVERHEAD_S:g} s, "
                            f"python-on-whales' import counted as {IMPORT_ALLOWED_S:g} s or as measured "
                            f"(I {_ms(row.import_s)} ms: allowed {_ms(allowed)} ms; A − (P + B): "
                            f"{_ms(row.beyond_s)} ms, median of each rotation's; medians {a:.2f} vs {p:.2f} + "
                            f"{b:.2f} s)", row.beyond_s <= allowed))
            else:
                out.append((f"{row.kind}: bake-plan build ≤ {MAX_COLD_RATIO:g} × (plan + buildx bake) ({a:.2f} vs "
                            f"{p:.2f} + {b:.2f} s, {a / (p + b):.3f})", a <= MAX_COLD_RATIO * (p + b)))
        if row.kind == "warm":
            steps = [r.steps_run for r in row.a_runs]
            out.append((f"warm: an unchanged rebuild runs 0 steps (steps run: {', '.join(map(str, steps))})",
                        all(s == 0 for s in steps)))
            sent = max(r.sent for r in row.a_runs + row.b_runs)
            out.append((f"warm: re-sends < {MAX_SENT_SHARE:.0%} of the wheelhouse (at most {sent} of "
                        f"{wheelhouse_bytes} bytes, {sent / wheelhouse_bytes:.2%})",
                        sent < MAX_SENT_SHARE * wheelhouse_bytes))
    return out


def _ms(seconds: Optional[float]) -> str:
    """Seconds as whole milliseconds (``""`` for ``None``; never ``-0``)."""
    return "" if seconds is None else str(int(round(seconds * 1000)))


HEADER = ("build", "runs", "A: bake-plan build s", "P: plan s", "B: buildx bake s", "A/B", "A − B ms",
          "A − (P + B) ms", "I: python-on-whales import ms", "A peak MB", "B peak MB", "A steps run", "wheelhouse sent, max of A and B")


def rows_of(rows: Sequence[Row], wheelhouse_bytes: int) -> List[Tuple[str, ...]]:
    """One table row per kind of build."""
    out = []
    for row in rows:
        steps = sorted({r.steps_run for r in row.a_runs})
        sent = max(r.sent for r in row.a_runs + row.b_runs)
        plan = row.p.seconds if row.p is not None else None
        out.append((row.kind, str(len(row.a_runs)), f"{row.a.seconds:.2f}", "" if plan is None else f"{plan:.2f}",
                    f"{row.b.seconds:.2f}", f"{row.a.seconds / row.b.seconds:.2f}",
                    f"{(row.a.seconds - row.b.seconds) * 1000:.0f}", _ms(row.beyond_s), _ms(row.import_s),
                    f"{row.a.max_rss_mb:.0f}", f"{row.b.max_rss_mb:.0f}", ", ".join(map(str, steps)),
                    f"{sent} B ({sent / wheelhouse_bytes:.2%})"))
        if row.c is not None:
            out.append((f"{row.kind}, C: --compare", str(len(row.a_runs)), f"{row.c.seconds:.2f}", "",
                         f"{row.b.seconds:.2f}", f"{row.c.seconds / row.b.seconds:.2f}",
                         f"{(row.c.seconds - row.b.seconds) * 1000:.0f}", _ms(row.c_beyond_s), "",
                         f"{row.c.max_rss_mb:.0f}", f"{row.b.max_rss_mb:.0f}", "", ""))
    return out


def report(rows: Sequence[Row], info: Dict[str, str], wheelhouse_bytes: int, markdown: bool) -> str:
    """The run as text: what it ran on, the table and the targets."""
    table = [HEADER, *rows_of(rows, wheelhouse_bytes)]
    found = checks(rows, wheelhouse_bytes)
    lines = []
    if markdown:
        lines += [f"- {key}: {value}" for key, value in info.items()]
        lines += ["", "| " + " | ".join(table[0]) + " |", "|" + "---|" * len(table[0])]
        lines += ["| " + " | ".join(row) + " |" for row in table[1:]]
        lines += [""] + [f"- {'met' if ok else '**missed**'}: {text}" for text, ok in found]
    else:
        lines += [f"{key}: {value}" for key, value in info.items()]
        widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
        lines += [""] + ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
        lines += [""] + [f"{'met   ' if ok else 'MISSED'} {text}" for text, ok in found]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark and print the report. Exit status 1 with ``--check`` when a target is
    missed, 2 when the test engine is not there."""
    args = parse_args(argv)
    # bake-plan writes its bytecode, as a pip-installed one has it: with PYTHONDONTWRITEBYTECODE
    # set, a module changed since its .pyc was written compiles from source on every run (A alone)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    why = engine_up(args.registry)
    if why:
        print(f"bench: {why}", file=sys.stderr)
        return 2
    bake_plan = find_bake_plan(args.bake_plan)
    command = "python bench/build.py " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    info = {
        "command": f"`{command}`" if args.markdown else command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **machine(),
        "bake-plan": _first_line([bake_plan, "--version"]),
        **({"C: --compare": f"{args.compare} ({_first_line([args.compare, '--version'])})"} if args.compare else {}),
        "buildx": _first_line(["docker", "buildx", "version"]),
        "engine": _first_line(["docker", "version", "--format", "dockerd {{.Server.Version}}, {{.Server.Os}}/"
                                                               "{{.Server.Arch}}"]),
    }
    with tempfile.TemporaryDirectory(prefix="bake-plan-bench-build-") as tmp:
        bench = Bench(bake_plan, args.registry, Path(tmp))
        load_before = os.getloadavg()
        try:
            rows = [bench.measure("warm", args.repeat, args.compare)]
            if args.cold_repeat:
                rows.append(bench.measure("cold", args.cold_repeat))
        finally:
            bench.remove_images()
        load_after = os.getloadavg()
        wheelhouse_bytes = bench.layer[1]
    info["family"] = (f"{TARGET} of tests/packages/bake-plan-jaxfamily, 4 targets, linux/amd64, --load; its "
                      f"wheelhouse layer {wheelhouse_bytes / 1e6:.1f} MB")
    info["runs"] = (f"{args.repeat} warm (after one warm-up each) and {args.cold_repeat} cold (--no-cache) of A, "
                    f"{'C, ' if args.compare else ''}P and B, alternating; medians")
    info["load average (1 min)"] = f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
    sys.stdout.write(report(rows, info, wheelhouse_bytes, args.markdown))
    return 1 if args.check and not all(ok for _, ok in checks(rows, wheelhouse_bytes)) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as err:  # a side that cannot run or failed: its words, no traceback
        sys.exit(f"bench: {err}")
