"""Image tests: ``bake-plan test`` runs each requested stage's smoke tests (``Stage.tests``) in its
final image, once per platform, and adds the outcomes to the sitrep.

Which image: the final target's first tag in the plan of the same options the build had (a
per-arch plan's ``latest-arm64``, a multi-platform plan's ``latest``), taken from the registry
(pulled for the platform just before its tests, so a stale copy in the engine is never tested),
or with ``local`` from the engine's image store as ``build --load`` left it (never pulled). Every
image is checked before any test runs: a missing one is bad input (exit 2) naming the image and
the build that makes it.

The Docker calls are :mod:`bake.run.engine`'s, passed in as callables (as ``publish`` takes them).
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional, Sequence, Tuple

from bake.documents import DocumentError, read_json
from bake.errors import OutputError, ReportUnreadable, RunError, UsageError
from bake.owned import Record
from bake.plan.compose import Composition, target_names
from bake.plan.names import arch_of
from bake.plan.secrets import shown
from bake.plan.stage import ImageTest
from bake.run import sitrep
from bake.run.build import _appendable  # the one check that $GITHUB_STEP_SUMMARY can be appended to
from bake.run.engine import TEST_LINE_BYTES, TEST_OUTPUT_BYTES, ContainerRun

TAIL_LINES = 20
"""How many last output lines of each test the sitrep keeps (each at most
:data:`bake.run.engine.TEST_LINE_BYTES` bytes, all at most :data:`bake.run.engine.TEST_OUTPUT_BYTES`)."""

_WHAT = {"sitrep.json": "the sitrep", sitrep.TESTS_BADGE: "the tests badge", "sitrep.md": "the summary"}


@dataclass(frozen=True)
class Case:
    """The tests of one stage on one platform, and the image they run in.

    :param per_arch: the plan is per-arch (its tags end in ``-<arch>``).
    """

    stage: str
    target: str
    platform: str
    image: str
    tests: Tuple[ImageTest, ...]
    per_arch: bool = False


def cases(composition: Composition, date: Optional[datetime.date] = None, date_from: str = "--date") -> List[Case]:
    """The tests to run: per requested stage with tests, per platform its final target builds for,
    the tests that run there (an :class:`ImageTest` with ``platforms`` runs only on those), in the
    image of the target's first tag (or the first it inherits from docker/metadata-action); with
    ``date`` (a day the user named), of its first tag that names that day (``nightly-2026-11-29``,
    ``nightly-2026-11-29-amd64``), so the image of that night is tested, not ``latest``.

    :param date_from: where ``date`` came from, for the message (``--date``, ``env BAKE_PLAN_DATE``).
    :raises UsageError: ``date`` is given and a stage to test has no tag naming it.
    """
    out = []
    for name in composition.requested:
        stage = composition.stages[name]
        if not stage.tests:
            continue
        final = target_names(stage)[-1][0]
        target = composition.plan["target"][final]
        tags = list(target.get("tags") or composition.inherited_tags.get(final) or ())
        platforms = list(target.get("platforms") or stage.platforms)
        if date is not None and tags:
            tags = _dated(tags, date, date_from, stage.name)
        per_arch = len(platforms) == 1 and bool(tags) and tags[0].endswith("-" + arch_of(platforms[0]))
        for platform in platforms:
            tests = tuple(t for t in stage.tests if not t.platforms or platform in t.platforms)
            if tests and tags:
                out.append(Case(stage.name, final, platform, tags[0], tests, per_arch))
    return out


def _dated(tags: List[str], date: datetime.date, date_from: str, stage: str) -> List[str]:
    """``tags`` from the first whose tag (after the repository) names ``date`` on.
    :raises UsageError: none does."""
    day = date.isoformat()
    for i, tag in enumerate(tags):
        if day in tag.rsplit("/", 1)[-1].partition(":")[2]:
            return tags[i:]
    raise UsageError(f"{date_from} {day}: stage '{stage}' has no tag naming that date (its tags: "
                     f"{', '.join(t.rsplit('/', 1)[-1] for t in tags)}); without {date_from} its first tag is tested")


def missing_images(found: Sequence[Case], exists: Callable[[str], bool], local: bool,
                   build_flags: str = "") -> None:
    """Check every image is there before any test runs.

    :param exists: image reference → whether it is there (the registry, or with ``local`` the
        engine's image store); each reference is asked once.
    :param build_flags: flags the hint's ``bake-plan build`` needs besides the target
        (``--registry R``).
    :raises UsageError: one line naming the first missing image, its stage and platform and the
        build that makes it; ``details`` name the others.
    """
    seen = {}
    for case in found:
        if case.image not in seen:
            seen[case.image] = exists(case.image)
    missing = [c for c in found if not seen[c.image]]
    if not missing:
        return
    first = missing[0]
    where = "the engine's image store" if local else "the registry"
    how = "--load" if local else "--push"
    platform = f" --platform {first.platform}" if first.per_arch else ""
    more = {c.image for c in missing} - {first.image}
    raise UsageError(
        f"no image to test for stage '{first.stage}' ({first.platform}): {first.image} is not in {where}; "
        f"build it first: bake-plan build --target {first.stage}{platform}{build_flags} {how}"
        + ("" if local else " (or, for an image built with --load, bake-plan test --local)")
        + (f" ({len(more)} more image(s) missing)" if more else ""),
        details=[f"missing {image}" for image in sorted(more)])


def run_cases(found: Sequence[Case], run: Callable[..., ContainerRun], pull: Optional[Callable[[str, str], None]],
              echo: Callable[[str], None] = lambda line: None) -> List[dict]:
    """Run every test of every case, in order, and return one result per test and platform
    (:func:`bake.run.sitrep.make_tests` lists the keys).

    :param run: :func:`bake.run.engine.run_in_image`-shaped: ``(ref, platform, argv, timeout_s,
        keep=, echo=)`` → :class:`~bake.run.engine.ContainerRun`.
    :param pull: ``(ref, platform)``, called once per case before its tests (``None``: the
        engine's image store is used as it is). A pull that fails fails that case's tests,
        with the pull's error as their output; the others still run.
    :param echo: gets each output line, prefixed ``[stage platform test]``, and each outcome.
    """
    results = []
    for case in found:
        pulled: Optional[str] = None
        if pull is not None:
            try:
                pull(case.image, case.platform)
            except RunError as err:
                pulled = clip_bytes(str(err), TEST_LINE_BYTES)
        for test in case.tests:
            prefix = f"[{case.stage} {case.platform} {test.label}]"
            entry = {"stage": case.stage, "target": case.target, "platform": case.platform, "test": test.label,
                     "command": test.command if isinstance(test.command, str) else list(test.command),
                     "image": case.image}
            if pulled is not None:
                entry.update(outcome=sitrep.FAIL, exit_code=None, duration_s=None, timed_out=False, output=[pulled])
            else:
                echo(f"{prefix} running")
                ran = run(case.image, case.platform, test.argv, test.timeout_s, keep=TAIL_LINES,
                          echo=lambda line, p=prefix: echo(f"{p} {line}"))
                output = bounded(ran.tail)
                if ran.timed_out:
                    output.append(f"bake-plan: stopped after {test.timeout_s:g} s (the test's timeout_s)")
                entry.update(outcome=sitrep.PASS if ran.exit_code == 0 and not ran.timed_out else sitrep.FAIL,
                             exit_code=ran.exit_code, duration_s=ran.duration_s, timed_out=ran.timed_out,
                             output=output)
            ending = f" (timed out after {test.timeout_s:g} s)" if entry["timed_out"] else \
                (f" (exit {entry['exit_code']})" if entry["exit_code"] else "")
            echo(f"{prefix} {entry['outcome']}" + ending
                 + (f" in {entry['duration_s']:g} s" if entry["duration_s"] is not None else ""))
            results.append(entry)
    return results


def clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` bytes (UTF-8) and ``… [line cut: N bytes]`` when it
    was longer, as :class:`bake.run.engine.OutputTail` cuts a line."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + f"… [line cut: {len(data)} bytes]"


def bounded(lines: Sequence[str], line_bytes: int = TEST_LINE_BYTES, total: int = TEST_OUTPUT_BYTES) -> List[str]:
    """The last of ``lines`` that fit in ``total`` bytes, each cut at ``line_bytes``
    (:func:`clip_bytes`): the output of one test as a report keeps it."""
    out: List[str] = []
    size = 0
    for line in reversed(lines):
        line = clip_bytes(line, line_bytes)
        size += len(line.encode("utf-8", "replace")) + 1
        if out and size > total:
            break
        out.append(line)
    return out[::-1]


def merged_tests(earlier: dict, tests: dict, ran: Optional[Sequence[Tuple[str, str]]] = None,
                 requested: Sequence[str] = ()) -> dict:
    """The ``tests`` block of a later run merged into an earlier one's: the earlier results (and
    ``installed`` and ``sizes`` entries) of the ``(target, platform)`` pairs in ``ran`` (default: the pairs of
    ``tests``' results) dropped, this run's added after the rest; the summary, counts, outcome and
    badge label made again of them all (:func:`bake.run.sitrep.make_tests`). A malformed earlier
    entry is dropped."""
    pairs = set(ran) if ran is not None else {(r.get("target"), r.get("platform")) for r in tests["results"]}

    def kept(entries) -> List[dict]:
        return [e for e in entries or [] if isinstance(e, dict) and isinstance(e.get("target"), str) and isinstance(e.get("platform"), str)
                and (e["target"], e["platform"]) not in pairs]

    old = [r for r in kept(earlier.get("results")) if isinstance(r.get("stage"), str) and isinstance(r.get("test"), str)
           and all(k in r for k in ("outcome", "timed_out", "exit_code", "duration_s"))
           and isinstance(r.get("output"), list)]
    if not old:
        return tests
    stages = list(dict.fromkeys([r["stage"] for r in old] + list(requested)))
    label = f"{', '.join(stages)} tests" if requested else tests["badge_label"]
    block = sitrep.make_tests(label, old + list(tests["results"]))
    for key in ("installed", "sizes"):
        if key in tests:
            block[key] = kept(earlier.get(key)) + list(tests[key])
    return block


class TestReports:
    """Where ``bake-plan test`` reports: the ``tests`` block merged into ``sitrep.json`` of the
    sitrep directory (the build's, when bake-plan wrote one there: its other keys are kept;
    else a sitrep of the tests alone, with no targets), ``tests-badge.json``, ``sitrep.md``
    rewritten whole, and the tests section appended to ``$GITHUB_STEP_SUMMARY``."""

    __test__ = False  # not a pytest class

    @classmethod
    def from_environment(cls, sitrep_dir: Path) -> "TestReports":
        """The reports, with ``$GITHUB_STEP_SUMMARY`` when GitHub Actions sets it."""
        return cls(sitrep_dir, os.environ.get("GITHUB_STEP_SUMMARY"))

    def __init__(self, sitrep_dir: Path, step_summary: Optional[str]):
        self.sitrep_dir, self.step_summary = sitrep_dir, step_summary

    def prepare(self) -> None:
        """Check the reports can be written, and take the previous tests badge away (a run that
        stops early never leaves an old "6/6 passed" behind).

        :raises OutputError: the directory cannot be made, a report path is taken by a file
            bake-plan did not write, or ``$GITHUB_STEP_SUMMARY`` cannot be appended to.
        :raises ReportUnreadable: the ``sitrep.json`` there cannot be read (:meth:`earlier`).
        """
        try:
            self.sitrep_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OutputError(f"cannot prepare {err.filename}: {err.strerror}") from None
        if not os.access(self.sitrep_dir, os.W_OK):
            raise OutputError(f"cannot write reports in {self.sitrep_dir}: Permission denied")
        record = Record(self.sitrep_dir)
        for name, what in _WHAT.items():
            record.check(name, what)
        self.earlier()
        if self.step_summary:
            _appendable(self.step_summary)
        record.remove(sitrep.TESTS_BADGE, _WHAT[sitrep.TESTS_BADGE])

    def earlier(self) -> Optional[dict]:
        """The sitrep already in the directory (the build's, or an earlier ``test`` run's), which
        this run's results are added to; ``None`` when there is none (a fresh report is made).

        :raises ReportUnreadable: ``sitrep.json`` is there but cannot be read (a directory, a
            read error, larger than :data:`bake.documents.MAX_BYTES`, not UTF-8, not JSON, or not
            a sitrep: no ``targets`` object), naming the file and why: it is never replaced.
        """
        path = self.sitrep_dir / "sitrep.json"
        if not os.path.lexists(path):
            return None
        try:
            report = read_json(path)
        except OSError as err:
            why = err.strerror or str(err)
        except DocumentError as err:
            why = str(err)
        else:
            if isinstance(report, dict) and isinstance(report.get("targets"), dict):
                return report
            why = "not a sitrep (no targets object)"
        raise ReportUnreadable(f"{path}: cannot add the tests to this sitrep: {why}; bake-plan will not replace it "
                               f"(a build's results): move it away, or give another --sitrep-dir")

    def write(self, tests: dict, ran: Optional[Sequence[Tuple[str, str]]] = None,
              requested: Sequence[str] = ()) -> dict:
        """Merge ``tests`` (:func:`bake.run.sitrep.make_tests`) into the sitrep and write every
        report. The ``tests`` block of an earlier ``test`` run in this sitrep (after the same
        build) is merged, not replaced: its results and installed distributions for the
        ``(target, platform)`` pairs of ``ran`` (default: those of ``tests``' results) give way to
        this run's, the rest are kept, and the summary, counts and badge are of them all. The
        section appended to ``$GITHUB_STEP_SUMMARY`` is this run's alone (an earlier run appended
        its own).

        :param requested: the stages this run was asked to test (the badge label names them after
            the kept results' stages).
        :returns: the sitrep written.
        :raises RunError: a report cannot be written, or the ``sitrep.json`` there can no longer
            be read (:meth:`earlier`): the tests ran, exit 1, nothing written."""
        record = Record(self.sitrep_dir)
        try:
            report = self.earlier()
        except OutputError as err:
            raise RunError(f"the tests ran ({tests['summary']}), but {err}") from None
        earlier = report.get("tests") if isinstance(report, dict) else None
        this_run = tests  # the step summary gets this run's section only: an earlier one is there already
        if isinstance(earlier, dict) and isinstance(earlier.get("results"), list):
            tests = merged_tests(earlier, tests, ran, requested)
        if not (isinstance(report, dict) and isinstance(report.get("targets"), dict) and report["targets"]):
            # No build's sitrep here: the tests' own, with the build's keys, so its readers read it.
            report = {"summary": tests["summary"], "badge_label": tests["badge_label"], "outcome": tests["outcome"],
                      "error": None, "targets": {}}
        report["tests"] = tests
        report = sitrep.redacted(report)
        try:
            record.write("sitrep.json", sitrep.to_json(report), _WHAT["sitrep.json"])
            record.write(sitrep.TESTS_BADGE, sitrep.to_json(sitrep.tests_badge(report["tests"])),
                         _WHAT[sitrep.TESTS_BADGE])
            record.write("sitrep.md", sitrep.markdown(report), _WHAT["sitrep.md"])
            if self.step_summary:
                try:
                    # GitHub drops a step summary over 1 MiB whole: what is appended fits beside what is there
                    room = sitrep.SUMMARY_BYTES - _size_of(self.step_summary)
                    with open(self.step_summary, "a", encoding="utf-8") as handle:
                        handle.write(sitrep.tests_markdown(sitrep.redacted({"tests": this_run})["tests"],
                                                           max(room, 0)))
                except OSError as err:
                    raise OutputError(f"cannot append to $GITHUB_STEP_SUMMARY {self.step_summary}: "
                                      f"{err.strerror or err}") from None
        except OutputError as err:
            raise RunError(f"the tests ran ({tests['summary']}), but {err}") from None
        return report


def _size_of(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def run_image_tests(composition: Composition, reports: TestReports, local: bool = False, build_flags: str = "",
                    echo: Callable[[str], None] = lambda line: print(shown(line), file=sys.stderr, flush=True),
                    date: Optional[datetime.date] = None, date_from: str = "--date") -> dict:
    """Run the requested stages' image tests and write the reports (prepared by the caller).

    :param local: test the engine's image store (after ``build --load``) instead of the registry.
    :param date: the day the user named (``--date``): the image of its dated tag is tested
        (:func:`cases`); ``date_from`` says where it came from.
    :param echo: gets each line shown while the tests run (default: stderr, redacted and with
        control characters escaped, :func:`bake.plan.secrets.shown`).
    :returns: the ``tests`` block (:func:`bake.run.sitrep.make_tests`).
    :raises bake.run.engine.EngineError: no engine (nothing ran).
    :raises UsageError: an image to test is missing (nothing ran).
    :raises RunError: the tests ran but a report could not be written.
    """
    from bake.run import engine

    found = cases(composition, date, date_from)
    label = f"{', '.join(composition.requested)} tests"
    if found:
        engine.EngineProbe().answered()  # the one line for no engine, as a build says it
        missing_images(found, engine.local_image_exists if local else engine.image_exists, local, build_flags)
    results = run_cases(found, engine.run_in_image, None if local else engine.pull_image, echo=echo)
    block = sitrep.make_tests(label, results)
    block["installed"] = installed_distributions(found, results, engine.run_in_image)
    block["sizes"] = image_sizes(found, results, engine.image_size)
    return reports.write(block, ran=[(c.target, c.platform) for c in found], requested=composition.requested)["tests"]


INSTALLED_TIMEOUT_S = 120.0
"""How long listing an image's installed distributions may take, in seconds."""

INSTALLED_KEEP = 2000
"""At most this many output lines of the listing are read (a longer list is not recorded)."""

_INSTALLED_HEADER = "bake-plan-installed"
_INSTALLED_SCRIPT = (  # one line: ``-v`` shows the command as one shell line
    "import importlib.metadata as m, re; names = [((d.metadata['Name'] or '').strip(), d.version) "
    "for d in m.distributions()]; seen = {}; "
    "[seen.setdefault(re.sub(r'[-_.]+', '-', n).lower(), v) for n, v in names if n]; "
    f"print('{_INSTALLED_HEADER}', len(seen)); [print(n, seen[n]) for n in sorted(seen)]")
_INSTALLED_ARGV = ["sh", "-c", 'for p in python3 python; do if command -v "$p" >/dev/null 2>&1; then '
                   'exec "$p" -c "$1"; fi; done; exit 127', "sh", _INSTALLED_SCRIPT]
"""The listing run in each tested image: the image's Python (``python3``, else ``python``) prints
a header with the count, then ``name version`` per distribution (names normalised as pip does);
the script is ``sh``'s ``$1``, never part of the shell's text."""


def installed_distributions(found: Sequence[Case], results: Sequence[dict], run: Callable[..., ContainerRun]
                            ) -> List[dict]:
    """The distributions installed in each tested image, once per image and platform, after its
    tests: ``[{"target", "platform", "distributions": {name: version}}]`` (``publish --sitrep``
    holds back an image whose arches differ). An image without Python, one whose tests could not
    run (its pull failed), a listing that failed, timed out or was longer than its bound is left
    out: unknown, not empty.

    :param run: :func:`bake.run.engine.run_in_image`-shaped.
    """
    out = []
    for case in _ran_once(found, results):
        ran = run(case.image, case.platform, _INSTALLED_ARGV, INSTALLED_TIMEOUT_S, keep=INSTALLED_KEEP)
        dists = _listing(ran)
        if dists is not None:
            out.append({"target": case.target, "platform": case.platform, "distributions": dists})
    return out


def _ran_once(found: Sequence[Case], results: Sequence[dict]) -> List[Case]:
    """Each tested image once per target and platform, leaving out those whose tests could not
    run (their pull failed: ``exit_code`` ``None``)."""
    unrun = {(r["target"], r["platform"]) for r in results if r["exit_code"] is None}
    out, seen = [], set()
    for case in found:
        key = (case.target, case.platform, case.image)
        if key not in seen and (case.target, case.platform) not in unrun:
            seen.add(key)
            out.append(case)
    return out


def image_sizes(found: Sequence[Case], results: Sequence[dict], size: Callable[[str, str], Optional[int]]
                ) -> List[dict]:
    """The size of each tested image, once per image and platform, after its tests:
    ``[{"target", "platform", "size_bytes"}]`` (``publish --sitrep`` holds back an image whose
    largest arch is more than ``--arch-size-ratio`` times its smallest). An image whose tests
    could not run (its pull failed), or whose size the engine did not give, is left out.

    :param size: :func:`bake.run.engine.image_size`-shaped: ``(ref, platform)`` → bytes or ``None``.
    """
    out = []
    for case in _ran_once(found, results):
        found_size = size(case.image, case.platform)
        if found_size is not None:
            out.append({"target": case.target, "platform": case.platform, "size_bytes": found_size})
    return out


def _listing(ran: ContainerRun) -> Optional[dict]:
    """``{name: version}`` from the listing's output, or ``None`` when it is not whole."""
    if ran.exit_code != 0 or ran.timed_out:
        return None
    lines = [line.strip() for line in ran.tail]
    heads = [i for i, line in enumerate(lines) if line.startswith(_INSTALLED_HEADER + " ")]
    if not heads:
        return None
    try:
        count = int(lines[heads[-1]].split()[1])
    except (IndexError, ValueError):
        return None
    dists = {}
    for line in lines[heads[-1] + 1:]:
        words = line.split()
        if len(words) == 2:
            dists[words[0]] = words[1]
    return dists if len(dists) == count else None
