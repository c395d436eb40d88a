#!/usr/bin/env python3
"""bake-plan's publish benchmark: the registry work of ``bake-plan publish`` for a family of 16
multi-arch tags, on the test engine's registry.

- **A**: ``bake-plan publish --dry-run``: every per-arch image of the 16 tags (32) asked of the
  registry, each tag listed with the command that would make it; nothing written.
- **B**: ``bake-plan publish``: the same 32 checks, then the 16 manifest lists created
  (``docker buildx imagetools create``).

The family is written by the script into a scratch directory on ``PYTHONPATH`` (a plugin
distribution like any third-party one): ``pb-root`` → ``pb-mid`` → ``pb-leaf``, and ``pb-other``
on ``pb-root``, on busybox, with a label per night and no ``RUN`` step (the arm64 build needs no
emulation). Each image publishes four tags (``latest``, ``nightly-DATE`` from the final,
``mealkit``, ``mealkit-DATE`` from the meal kit): 16 tags from 32 per-arch images.

So that every run does its real work, each round is a new night: the family is built and pushed
per arch (``bake-plan build --platform linux/amd64 --push``, then arm64; a new ``NIGHT`` label
and a new ``--date``, not timed), then A and B run for that date. Every tag B makes is new (the
dated ones) or moves (the floating ones, onto the new night's images); the script checks, from
the registry, that all 16 changed digest. One warm-up round, then ``--repeat`` rounds; it reports
median wall times, CPU seconds (what the load changes least) and peak memory, and checks the
targets of docs/benchmarks.md. Needs the test engine::

    scripts/test-engine up && eval "$(scripts/test-engine env)"
    python bench/publish.py --repeat 5 --markdown --check
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from build import engine_bench_arguments, engine_up
from run import Sample, _first_line, find_bake_plan, machine, median, table_report

# docs/benchmarks.md: the targets a run is checked against.
MAX_DRY_RUN_S = 3.0
MAX_PUBLISH_S = 5.0

IMAGES = ("pb-root", "pb-mid", "pb-leaf", "pb-other")
TAGS = 16
FIRST_NIGHT = datetime.date(2026, 10, 1)
ARCHES = ("amd64", "arm64")

FAMILY = '''
import os
from pathlib import Path
from bake import Stage, hookimpl

HERE = Path(__file__).resolve().parent
NS = os.environ["PB_REGISTRY"]


@hookimpl
def bake_plan_stages():
    night = {"NIGHT": os.environ.get("PB_NIGHT", "0")}
    return [
        Stage(name="pb-root", image="pb-root", context=HERE / "pb-root-context", base_image="busybox:1.36",
              registry=NS, args=night),
        Stage(name="pb-mid", image="pb-mid", parent="pb-root", context=HERE / "pb-child-context", registry=NS,
              args={**night, "WHO": "pb-mid"}),
        Stage(name="pb-leaf", image="pb-leaf", parent="pb-mid", context=HERE / "pb-child-context", registry=NS,
              args={**night, "WHO": "pb-leaf"}),
        Stage(name="pb-other", image="pb-other", parent="pb-root", context=HERE / "pb-child-context", registry=NS,
              args={**night, "WHO": "pb-other"}),
    ]
'''

ROOT_DOCKERFILE = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE} AS mealkit
ARG NIGHT=0
LABEL pb.night=${NIGHT}

FROM mealkit AS final
"""

CHILD_DOCKERFILE = """\
FROM base AS mealkit
ARG NIGHT=0
ARG WHO=child
LABEL pb.night=${NIGHT} pb.who=${WHO}
COPY marker /etc/${WHO}

FROM mealkit AS final
"""


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line of the benchmark."""
    parser = engine_bench_arguments(__doc__, 5, "timed rounds of A and B, each a new night")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def write_family(site: Path) -> None:
    """The benchmark family's plugin distribution in ``site`` (a ``PYTHONPATH`` directory)."""
    info = site / "pb_family-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pb-family\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text("[bake_plan]\npb-family = pb_family\n")
    (site / "pb_family.py").write_text(textwrap.dedent(FAMILY))
    (site / "pb-root-context").mkdir()
    (site / "pb-root-context" / "Dockerfile").write_text(ROOT_DOCKERFILE)
    (site / "pb-child-context").mkdir()
    (site / "pb-child-context" / "Dockerfile").write_text(CHILD_DOCKERFILE)
    (site / "pb-child-context" / "marker").write_text("pb\n")


def timed_output(argv: Sequence[str], cwd: Path, env: Dict[str, str]) -> Tuple[Sample, float, str]:
    """Run ``argv`` once: wall time, peak memory, CPU seconds (user + system; the process and
    what it waited for: the docker CLI and buildx processes) and stdout.

    :raises RuntimeError: the command failed (its stderr is in the message).
    """
    with tempfile.TemporaryFile(dir=cwd) as out, tempfile.TemporaryFile(dir=cwd) as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{shlex.join(argv[:6])} … failed ({os.waitstatus_to_exitcode(status)}):\n"
                               f"{err.read().decode(errors='replace')[-2000:]}")
        out.seek(0)
        text = out.read().decode(errors="replace")
    return Sample(seconds, usage.ru_maxrss * 1024 / 2**20), usage.ru_utime + usage.ru_stime, text


ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"))


def tag_digest(ref: str) -> Optional[str]:
    """The digest ``ref`` (``host:port/repo:tag`` on a plain-HTTP registry) points to, from the
    registry's ``Docker-Content-Digest`` header; ``None`` when it has no such tag."""
    host, rest = ref.split("/", 1)
    repo, tag = rest.rsplit(":", 1)
    request = urllib.request.Request(f"http://{host}/v2/{repo}/manifests/{tag}", method="HEAD",
                                     headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.headers.get("Docker-Content-Digest")
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise


class Round(NamedTuple):
    """One night: A's and B's runs (and CPU seconds), and how many of B's tags changed digest."""

    a: Sample
    b: Sample
    a_cpu: float
    b_cpu: float
    listed: int
    published: int
    moved: int


class Bench:
    """The benchmark family in a scratch directory and its registry namespace."""

    def __init__(self, bake_plan: str, registry: str, tmp: Path):
        self.bake_plan, self.registry, self.tmp = bake_plan, registry, tmp
        self.site = tmp / "site"
        write_family(self.site)
        self.namespace = f"{registry}/pb{uuid.uuid4().hex[:8]}"
        self.targets = [w for image in IMAGES for w in ("--target", image)]
        self.nights = 0

    def env(self, night: int) -> Dict[str, str]:
        """The environment of one night's commands."""
        return dict(os.environ, PYTHONPATH=str(self.site), PB_REGISTRY=self.namespace, PB_NIGHT=str(night))

    def build_night(self) -> str:
        """Build and push the next night, per arch (not timed); its date."""
        self.nights += 1
        date = (FIRST_NIGHT + datetime.timedelta(days=self.nights)).isoformat()
        for arch in ARCHES:
            proc = subprocess.run([self.bake_plan, "build", *self.targets, "--config", os.devnull, "--platform",
                                   f"linux/{arch}", "--date", date, "--push", "--base-image",
                                   f"busybox:1.36={self.registry}/stand-in/busybox:latest", "--sitrep-dir",
                                   str(self.tmp / f"sitrep-{self.nights}-{arch}")],
                                  cwd=self.tmp, env=self.env(self.nights), capture_output=True, text=True, timeout=900)
            if proc.returncode:
                raise RuntimeError(f"building night {self.nights} for {arch} failed:\n{proc.stderr[-2000:]}")
        return date

    def publish_argv(self, date: str, dry_run: bool) -> List[str]:
        """``bake-plan publish`` of the family for ``date`` (A: ``--dry-run``)."""
        return [self.bake_plan, "publish", *self.targets, "--config", os.devnull, "--date", date,
                *(["--dry-run"] if dry_run else [])]

    def round(self) -> Round:
        """A new night built, then A and B timed on it; the tags checked in the registry."""
        date = self.build_night()
        env = self.env(self.nights)
        a, a_cpu, listed = timed_output(self.publish_argv(date, True), self.tmp, env)
        tags = [line.split()[2] for line in listed.splitlines() if line.startswith("would publish ")]
        before = {tag: tag_digest(tag) for tag in tags}
        b, b_cpu, published = timed_output(self.publish_argv(date, False), self.tmp, env)
        made = [line.split()[1] for line in published.splitlines() if line.startswith("published ")]
        after = {tag: tag_digest(tag) for tag in tags}
        moved = sum(1 for tag in tags if after[tag] is not None and after[tag] != before[tag])
        if sorted(made) != sorted(tags) or len(tags) != TAGS:
            raise RuntimeError(f"night {self.nights}: {len(tags)} tags listed, {len(made)} published; "
                               f"expected {TAGS} of each")
        return Round(a, b, a_cpu, b_cpu, len(tags), len(made), moved)


    def remove_images(self) -> None:
        """Remove the images the nights' builds left in the engine's image store (only this
        benchmark's namespace; the registry keeps them)."""
        listed = subprocess.run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}}"], capture_output=True,
                                text=True, timeout=120).stdout.split()
        ours = [ref for ref in listed if ref.startswith(self.namespace + "/") and not ref.endswith(":<none>")]
        if ours:
            subprocess.run(["docker", "image", "rm", *ours], capture_output=True, timeout=600)


HEADER = ("command", "runs", "median s", "min s", "max s", "CPU s (median)", "peak MB", "tags", "tags moved (each run)")


def rows_of(rounds: Sequence[Round]) -> List[Tuple[str, ...]]:
    """The table: A's and B's medians."""
    out = []
    for label, runs, cpu, tags in (("A: publish --dry-run", [r.a for r in rounds], [r.a_cpu for r in rounds],
                                    rounds[0].listed),
                                   ("B: publish", [r.b for r in rounds], [r.b_cpu for r in rounds], rounds[0].published)):
        seconds = [s.seconds for s in runs]
        moved = ", ".join(str(r.moved) for r in rounds) if label.startswith("B") else "—"
        out.append((label, str(len(runs)), f"{median(runs).seconds:.2f}", f"{min(seconds):.2f}",
                    f"{max(seconds):.2f}", f"{statistics.median(cpu):.2f}", f"{median(runs).max_rss_mb:.0f}", str(tags),
                    moved))
    return out


def checks(rounds: Sequence[Round]) -> List[Tuple[str, bool]]:
    """The targets: (description with the measured value, met?)."""
    a, b = median([r.a for r in rounds]).seconds, median([r.b for r in rounds]).seconds
    moved = [r.moved for r in rounds]
    return [
        (f"publish --dry-run of {TAGS} tags under {MAX_DRY_RUN_S:g} s ({a:.2f} s)", a < MAX_DRY_RUN_S),
        (f"publish of {TAGS} tags under {MAX_PUBLISH_S:g} s ({b:.2f} s)", b < MAX_PUBLISH_S),
        (f"every publish moved all {TAGS} tags (moved: {', '.join(map(str, moved))})",
         all(m == TAGS for m in moved)),
    ]


def engine_info(script: str, argv: Optional[Sequence[str]], markdown: bool, bake_plan: str) -> Dict[str, str]:
    """The header of an engine benchmark's report: the command (``python bench/SCRIPT …``), the
    date, the machine, bake-plan, buildx and the engine."""
    command = f"python bench/{script} " + shlex.join(sys.argv[1:] if argv is None else list(argv))
    return {
        "command": f"`{command}`" if markdown else command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **machine(),
        "bake-plan": _first_line([bake_plan, "--version"]),
        "buildx": _first_line(["docker", "buildx", "version"]),
        "engine": _first_line(["docker", "version", "--format", "dockerd {{.Server.Version}}, {{.Server.Os}}/"
                                                               "{{.Server.Arch}}"]),
    }


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
    info = engine_info("publish.py", argv, args.markdown, bake_plan)
    with tempfile.TemporaryDirectory(prefix="bake-plan-bench-publish-") as tmp:
        bench = Bench(bake_plan, args.registry, Path(tmp))
        load_before = os.getloadavg()
        rounds = []
        try:
            bench.round()  # warm-up: the first night also fills the build cache
            for _ in range(args.repeat):
                rounds.append(bench.round())
                print(f"bench: night {bench.nights}: A {rounds[-1].a.seconds:.2f} s, B {rounds[-1].b.seconds:.2f} s, "
                      f"{rounds[-1].moved} tags moved", file=sys.stderr)
            load_after = os.getloadavg()
        finally:
            bench.remove_images()
    info["family"] = (f"{len(IMAGES)} busybox images × 4 tags = {TAGS} multi-arch tags from {2 * TAGS} per-arch "
                      "images (linux/amd64, linux/arm64), built and pushed per arch")
    info["runs"] = (f"{args.repeat} rounds after one warm-up, each a new night (built and pushed, not timed), then A "
                    "and B on it; medians")
    info["load average (1 min)"] = f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
    lines = [f"- {k}: {v}" if args.markdown else f"{k}: {v}" for k, v in info.items()]
    found = checks(rounds)
    sys.stdout.write("\n".join(lines) + "\n\n" + table_report([HEADER, *rows_of(rounds)], found, args.markdown))
    return 1 if args.check and not all(ok for _, ok in found) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as err:  # a side that cannot run or failed: its words, no traceback
        sys.exit(f"bench: {err}")
