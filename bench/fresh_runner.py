#!/usr/bin/env python3
"""bake-plan's fresh-runner benchmark: an unchanged nightly on a runner whose engine has nothing,
against the registry that has everything.

The family is the reference one ``bench/build.py`` builds (``tests/packages/bake-plan-jaxfamily``,
``--target jx-child``: 4 targets, linux/amd64, ``--locked`` from its wheelhouse), pushed with the
registry cache its cache policy gives (each target reads and writes its ``cache-…`` ref,
``mode=max``). First, not timed, the night before: ``bake-plan build --push --skip-unchanged``
(no record yet: everything is built, and the base image's digest counts in the input digests, as
in every ``--skip-unchanged`` night), then ``bake-plan record`` of its sitrep. Then, alternately
and ``--repeat`` times each, on an emptied engine (``docker buildx prune -af`` and the family's
images removed by name; the registry and its cache stay, as on a new CI runner):

- **A**: ``bake-plan build --push`` of the unchanged family (BuildKit finds every step in the
  registry cache and pushes the images);
- **B**: ``bake-plan build --push --skip-unchanged``: the newest records say every target is
  unchanged, so buildx does not run and tonight's tags are moved onto the recorded images.

Each run has a new ``--date`` (new tags to push or move). Every name the engine and buildx use
goes through a byte-counting TCP proxy on loopback in front of the test registry
(``localhost:<port>``, which Docker and buildx treat as a plain-HTTP registry as they do
``localhost:5555``), so the bytes moved between the engine and the registry are counted, both
ways, and per request (the proxy reads the HTTP/1.1 request lines of each connection and gives
the bytes that follow to the request before them). It reports median wall times, the bytes moved
against the images' bytes (each distinct blob of the 4 images once), the Dockerfile steps run, the
wheelhouse bytes sent (a context, not the registry) and the largest downloads, then checks the
targets of docs/benchmarks.md. Needs the test engine; it empties the engine's build cache, for
every user of the engine::

    scripts/test-engine up && eval "$(scripts/test-engine env)"
    python bench/fresh_runner.py --repeat 3 --markdown --check
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from build import TARGET, Bench, engine_bench_arguments, engine_up, wheelhouse_layer
from publish import engine_info
from run import Sample, find_bake_plan, median, table_report

from bake.run.progress import bytes_sent

# docs/benchmarks.md: the targets a run is checked against.
MAX_SECONDS = 10.0
MAX_MOVED_SHARE = 0.01
FIRST_NIGHT = datetime.date(2026, 9, 1)
DOCKER_TIMEOUT_S = 600


class Request(NamedTuple):
    """One HTTP request through the proxy: its method and path, bytes sent up (request and body)
    and down (the answer)."""

    method: str
    path: str
    up: int
    down: int


_REQUEST_LINE = re.compile(rb"(GET|HEAD|PUT|PATCH|POST|DELETE) (/v2/\S*) HTTP/1\.[01]\r\n")


class CountingProxy:
    """A TCP proxy on ``127.0.0.1:<free port>`` in front of ``upstream`` (``host:port``) that counts
    the bytes of each connection both ways, by HTTP request (:class:`Request`). Its asyncio loop
    runs in a thread of its own; :meth:`take` hands over what was counted since the last call."""

    def __init__(self, upstream: str):
        host, port = upstream.rsplit(":", 1)
        self.upstream = ("127.0.0.1" if host == "localhost" else host, int(port))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.requests: List[List] = []  # [method, path, up, down], appended and counted in the loop's thread
        self.tasks: set = set()  # the connections' tasks, held until they end (the loop holds them weakly)
        self.port = 0

    def __enter__(self) -> "CountingProxy":
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._connection, "127.0.0.1", 0), self.loop).result(30)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            self.server.close()
            for task in list(self.tasks):  # connections the engine left open (keep-alive) end here
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)

    @property
    def name(self) -> str:
        """The registry name through the proxy, ``localhost:<port>``."""
        return f"localhost:{self.port}"

    def take(self) -> List[Request]:
        """The requests counted since the last call (a request still under way is counted so far)."""
        async def swap() -> List[List]:
            done, self.requests = self.requests, []
            return done

        return [Request(*r) for r in asyncio.run_coroutine_threadsafe(swap(), self.loop).result(30)]

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        current = ["?", "(before any request line)", 0, 0]
        self.requests.append(current)
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(*self.upstream), 30)
        except (OSError, asyncio.TimeoutError):
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, upwards: bool) -> None:
            nonlocal current
            try:
                while True:
                    data = await src.read(1 << 16)
                    if not data:
                        break
                    if upwards:
                        found = _REQUEST_LINE.search(data)
                        if found:  # a new request on this connection: the bytes after it are its own
                            before = data[:found.start()]
                            current[2] += len(before)
                            current = [found.group(1).decode(), found.group(2).decode(errors="replace"), 0, 0]
                            self.requests.append(current)
                            data_counted = len(data) - len(before)
                        else:
                            data_counted = len(data)
                        current[2] += data_counted
                    else:
                        current[3] += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                try:
                    if dst.can_write_eof():
                        dst.write_eof()
                except (ConnectionError, OSError, RuntimeError):
                    pass

        try:
            await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))
        finally:
            for w in (writer, up_writer):
                w.close()


class Run(NamedTuple):
    """One timed build on an emptied engine: time, the registry traffic, steps run (the sitrep's),
    wheelhouse bytes sent, and the sitrep's summary."""

    sample: Sample
    requests: List[Request]
    steps_run: int
    sent: int
    summary: str
    ran: Dict[str, int]
    """Per target, the Dockerfile steps run (the sitrep's ``steps_run``), where any ran."""

    @property
    def moved(self) -> int:
        """Bytes between the engine (and buildx) and the registry, both ways."""
        return sum(r.up + r.down for r in self.requests)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line of the benchmark."""
    parser = engine_bench_arguments(__doc__, 3, "runs of A and of B, alternating")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def docker(*args: str) -> str:
    """``docker ARGS`` (bounded); its stdout. :raises RuntimeError: it failed."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S)
    if proc.returncode:
        raise RuntimeError(f"docker {shlex.join(args)} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def empty_engine(prefix: str) -> None:
    """A fresh runner's engine: the images named under ``prefix`` (``localhost:<port>/``: this
    benchmark's, through its proxy) removed, then every build cache record (``docker buildx prune
    -af``). Nothing else of the engine is touched, and the registry keeps everything."""
    names = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}").split()
    ours = sorted({n for n in names if n.startswith(prefix) and not n.endswith(":<none>")})
    if ours:
        docker("image", "rm", "-f", *ours)
    docker("buildx", "prune", "-af")


ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"))


def _manifest(registry: str, repo: str, reference: str) -> dict:
    request = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{reference}", headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def image_blobs(registry: str, ref: str) -> Dict[str, int]:
    """Digest → size of the config and layers of ``ref`` (``REPO:TAG`` on ``registry``, plain
    HTTP), its linux/amd64 image when it is an index (attestation manifests left out)."""
    repo, tag = ref.rsplit(":", 1)
    manifest = _manifest(registry, repo, tag)
    if "manifests" in manifest:
        image = [m for m in manifest["manifests"] if m.get("platform", {}).get("architecture") == "amd64"]
        manifest = _manifest(registry, repo, image[0]["digest"])
    return {d["digest"]: int(d["size"]) for d in [manifest["config"], *manifest["layers"]]}


class FreshRunner:
    """The family, its locks and wheelhouse (:class:`build.Bench`), named through the proxy."""

    def __init__(self, bake_plan: str, proxy: CountingProxy, registry: str, tmp: Path):
        self.bench = Bench(bake_plan, proxy.name, tmp)
        self.proxy, self.registry, self.tmp = proxy, registry, tmp
        options = list(self.bench.options)
        options.remove("--load")
        for flag in ("--date", "--sitrep-dir"):  # given per run
            at = options.index(flag)
            del options[at:at + 2]
        self.options = options
        self.nights = 0
        self.layer = ""  # the wheelhouse layer's digest (hex), from the first plan written

    def argv(self, skip_unchanged: bool) -> Tuple[List[str], str, Path]:
        """The next night's ``bake-plan build --push`` (B: ``--skip-unchanged``): argv, date,
        sitrep directory."""
        self.nights += 1
        date = (FIRST_NIGHT + datetime.timedelta(days=self.nights)).isoformat()
        sitrep = self.tmp / f"sitrep-{self.nights}"
        return ([self.bench.bake_plan, "build", *self.options, "--date", date, "--sitrep-dir", str(sitrep), "--push",
                 *(["--skip-unchanged"] if skip_unchanged else [])], date, sitrep)

    def seed(self) -> Tuple[Run, Dict[str, int]]:
        """The night before (not part of the figures): built with ``--skip-unchanged`` (no record
        yet) and recorded; the run and the images' blobs (digest → size)."""
        argv, date, sitrep = self.argv(True)
        run = self.timed(argv, sitrep)
        record = [self.bench.bake_plan, "record", "--target", TARGET, "--platform", "linux/amd64", "--registry",
                  self.bench.namespace, "--date", date, "--locked", "--locks-dir", str(self.tmp / "locks"),
                  "--config", os.devnull, "--sitrep", str(sitrep),
                  "--base-image", self.options[self.options.index("--base-image") + 1]]
        subprocess.run(record, cwd=self.bench.work, env=self.bench.env, check=True, capture_output=True, timeout=600)
        report = json.loads((sitrep / "sitrep.json").read_text())
        blobs: Dict[str, int] = {}
        for entry in report["targets"].values():
            for tag in (entry.get("tags") or [])[:1]:
                blobs.update(image_blobs(self.registry, tag.split("/", 1)[1]))
        return run, blobs

    def timed(self, argv: Sequence[str], sitrep: Path) -> Run:
        """One build: its time, the proxy's counts, steps run and wheelhouse bytes sent.

        :raises RuntimeError: the build failed."""
        self.proxy.take()
        with tempfile.TemporaryFile(dir=self.tmp) as err, tempfile.TemporaryFile(dir=self.tmp) as out:
            start = time.perf_counter()
            proc = subprocess.Popen(argv, cwd=self.bench.work, env=self.bench.env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            seconds = time.perf_counter() - start
            err.seek(0)
            log = err.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status):
            raise RuntimeError(f"{shlex.join(argv[:3])} … failed ({os.waitstatus_to_exitcode(status)}):\n{log[-2000:]}")
        requests = self.proxy.take()
        report = json.loads((sitrep / "sitrep.json").read_text())
        ran = {name: entry["steps_run"] for name, entry in report["targets"].items() if entry.get("steps_run")}
        if not self.layer:
            self.layer = wheelhouse_layer(self.bench.work / "docker-bake.hcl")[0]
        return Run(Sample(seconds, usage.ru_maxrss * 1024 / 2**20), requests, sum(ran.values()),
                   bytes_sent(log, self.layer), report.get("summary", ""), ran)

    def measure(self, skip_unchanged: bool) -> Run:
        """One run on an emptied engine."""
        empty_engine(self.proxy.name + "/")
        argv, _, sitrep = self.argv(skip_unchanged)
        return self.timed(argv, sitrep)


def downloads(runs: Sequence[Run], top: int = 6) -> List[str]:
    """The largest answers of the middle run of ``runs``, as ``METHOD path: N MB``."""
    requests = sorted(runs[len(runs) // 2].requests, key=lambda r: -r.down)[:top]
    return [f"{r.method} {r.path}: {r.down / 1e6:.1f} MB" for r in requests if r.down > 100_000]


def kinds(run: Run) -> Dict[str, int]:
    """The run's requests by kind: blob/manifest × method → count."""
    out: Dict[str, int] = {}
    for r in run.requests:
        what = "blob" if "/blobs/" in r.path else "manifest" if "/manifests/" in r.path else "other"
        key = f"{r.method} {what}"
        out[key] = out.get(key, 0) + 1
    return out


HEADER = ("run", "runs", "median s", "min s", "max s", "peak MB", "moved up MB", "moved down MB", "moved / images",
          "requests", "steps run", "wheelhouse sent")


def rows_of(label: str, runs: Sequence[Run], images: int) -> Tuple[str, ...]:
    """One row of the table."""
    seconds = [r.sample.seconds for r in runs]
    up = statistics.median(sum(q.up for q in r.requests) for r in runs)
    down = statistics.median(sum(q.down for q in r.requests) for r in runs)
    return (label, str(len(runs)), f"{median([r.sample for r in runs]).seconds:.2f}", f"{min(seconds):.2f}",
            f"{max(seconds):.2f}", f"{median([r.sample for r in runs]).max_rss_mb:.0f}", f"{up / 1e6:.2f}",
            f"{down / 1e6:.2f}", f"{(up + down) / images:.2%}",
            str(int(statistics.median(len(r.requests) for r in runs))),
            ", ".join(sorted({str(r.steps_run) for r in runs})), f"{max(r.sent for r in runs) / 1e6:.1f} MB")


def checks(a_runs: Sequence[Run], b_runs: Sequence[Run], images: int) -> List[Tuple[str, bool]]:
    """The targets: (description with the measured value, met?)."""
    out = []
    for label, runs in (("A: build --push", a_runs), ("B: build --push --skip-unchanged", b_runs)):
        s = median([r.sample for r in runs]).seconds
        moved = max(r.moved for r in runs)
        out.append((f"{label}: on a fresh runner in ≤ {MAX_SECONDS:g} s ({s:.2f} s)", s <= MAX_SECONDS))
        out.append((f"{label}: moves < {MAX_MOVED_SHARE:.0%} of the images' bytes (at most {moved} of {images} "
                    f"bytes, {moved / images:.2%})", moved < MAX_MOVED_SHARE * images))
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark and print the report. Exit status 1 with ``--check`` when a target is
    missed, 2 when the test engine is not there."""
    args = parse_args(argv)
    why = engine_up(args.registry)
    if why:
        print(f"bench: {why}", file=sys.stderr)
        return 2
    bake_plan = find_bake_plan(args.bake_plan)
    info = engine_info("fresh_runner.py", argv, args.markdown, bake_plan)
    with tempfile.TemporaryDirectory(prefix="bake-plan-bench-fresh-") as tmp, CountingProxy(args.registry) as proxy:
        runner = FreshRunner(bake_plan, proxy, args.registry, Path(tmp))
        try:
            seed, blobs = runner.seed()
            print(f"bench: the night before: {seed.sample.seconds:.1f} s, {seed.steps_run} steps run, "
                  f"{seed.moved / 1e6:.1f} MB moved", file=sys.stderr)
            load_before = os.getloadavg()
            a_runs, b_runs = [], []
            for _ in range(args.repeat):
                a_runs.append(runner.measure(False))
                b_runs.append(runner.measure(True))
                print(f"bench: A {a_runs[-1].sample.seconds:.2f} s, {a_runs[-1].moved / 1e6:.2f} MB; "
                      f"B {b_runs[-1].sample.seconds:.2f} s, {b_runs[-1].moved / 1e6:.2f} MB", file=sys.stderr)
            load_after = os.getloadavg()
        finally:
            empty_engine(proxy.name + "/")
    images = sum(blobs.values())
    info["family"] = (f"{TARGET} of tests/packages/bake-plan-jaxfamily, 4 targets, linux/amd64, --locked, --push "
                      f"with the registry cache; the images' bytes: {images / 1e6:.1f} MB ({len(blobs)} distinct "
                      f"blobs); the night before: {seed.sample.seconds:.1f} s, {seed.steps_run} steps run, "
                      f"{seed.moved / 1e6:.1f} MB moved")
    info["runs"] = (f"{args.repeat} of A and of B, alternating, each on an emptied engine (docker buildx prune -af, "
                    "the family's images removed) with a new --date; medians")
    info["load average (1 min)"] = f"{load_before[0]:.2f} before, {load_after[0]:.2f} after"
    info["A: requests (the middle run)"] = ", ".join(f"{k} ×{v}" for k, v in sorted(kinds(a_runs[len(a_runs) // 2]).items()))
    info["A: largest answers"] = "; ".join(downloads(a_runs)) or "none over 0.1 MB"
    info["A: steps run per target"] = "; ".join(", ".join(f"{k} {v}" for k, v in r.ran.items()) or "none"
                                                for r in a_runs)
    info["B: requests (the middle run)"] = ", ".join(f"{k} ×{v}" for k, v in sorted(kinds(b_runs[len(b_runs) // 2]).items()))
    info["B: summary"] = b_runs[-1].summary
    lines = [f"- {k}: {v}" if args.markdown else f"{k}: {v}" for k, v in info.items()]
    found = checks(a_runs, b_runs, images)
    table = [HEADER, rows_of("A: build --push", a_runs, images), rows_of("B: --skip-unchanged", b_runs, images)]
    sys.stdout.write("\n".join(lines) + "\n\n" + table_report(table, found, args.markdown))
    return 1 if args.check and not all(ok for _, ok in found) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError, subprocess.SubprocessError) as err:  # its words, no traceback
        sys.exit(f"bench: {err}")
