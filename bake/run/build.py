"""Execution: run a written plan with buildx and report what happened (the sitrep)."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from bake.errors import OutputError, RunError, UsageError
from bake.owned import Record
from bake.plan.compose import DEFAULT_GROUP, Composition
from bake.plan.inputs import pinned_digest
from bake.plan.render import granted, read_paths
from bake.plan.secrets import redact
from bake.run import engine, sitrep
from bake.run.progress import LiveConsole, RawRedactor


REPORT_FILES = ("sitrep.json", "badge.json", "sitrep.md")
"""What a build writes in the sitrep directory (JAX-Toolbox's sitrep, its badge, the summary)."""
REPORT_WHAT = {"sitrep.json": "the sitrep", "badge.json": "the badge", "sitrep.md": "the summary"}
STALE_AFTER_A_BUILD = {sitrep.TESTS_BADGE: "the tests badge"}
"""Reports of an earlier ``bake-plan test`` a new build makes stale (its tests ran on the old images);
removed when bake-plan wrote them, else left alone."""


class Reports:
    """Where one build's reports go, checked before anything is built and written at any end.

    :param sitrep_dir: the directory of :data:`REPORT_FILES`.
    :param metadata_file: buildx's ``--metadata-file``.
    :param step_summary: ``$GITHUB_STEP_SUMMARY`` (appended to), or ``None``.
    """

    @classmethod
    def from_environment(cls, sitrep_dir: Path, metadata_file: Path) -> "Reports":
        """The reports of a build, with ``$GITHUB_STEP_SUMMARY`` when GitHub Actions sets it."""
        return cls(sitrep_dir, metadata_file, os.environ.get("GITHUB_STEP_SUMMARY"))

    def __init__(self, sitrep_dir: Path, metadata_file: Path, step_summary: Optional[str]):
        self.sitrep_dir, self.metadata_file, self.step_summary = sitrep_dir, metadata_file, step_summary

    def check_apart(self, plan_file: Path) -> None:
        """That the plan file, the metadata file and the three reports are five files.

        :raises OutputError: two of them are one (``-o DIR/sitrep.json --sitrep-dir DIR``).
        """
        named = {"the plan": plan_file, "--metadata-file": self.metadata_file,
                 **{f"the {name}": self.sitrep_dir / name for name in REPORT_FILES}}
        seen: dict = {}
        for what, path in named.items():
            real = os.path.realpath(path)
            if real in seen:
                raise OutputError(f"{path} would be both {seen[real]} and {what}: give each its own file")
            seen[real] = what

    def prepare(self, plan_file: Path) -> None:
        """Check every report path is writable and apart from the plan file, and take the previous
        run's reports away, so a run that stops early (no engine, bad input) never leaves an old
        "pass" behind. Called before the plan is written.

        Only files bake-plan wrote are removed or replaced: each directory's record
        (:class:`bake.owned.Record`) lists the reports it wrote and the metadata file it had buildx
        write; a file of that name it did not write (or that changed since), a symbolic link, a
        directory or a FIFO is left as it is and refused.

        :raises OutputError: a directory cannot be made or written, a report path is taken by
            something bake-plan did not write, two of the files are one (``-o DIR/sitrep.json
            --sitrep-dir DIR``), or ``$GITHUB_STEP_SUMMARY`` cannot be appended to.
        """
        self.check_apart(plan_file)
        try:
            self.sitrep_dir.mkdir(parents=True, exist_ok=True)
            self.metadata_file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise OutputError(f"cannot prepare {err.filename}: {err.strerror}") from None
        for directory in dict.fromkeys([self.sitrep_dir, self.metadata_file.parent]):
            try:  # writable now, so a finished build is never lost for want of a report
                with tempfile.NamedTemporaryFile(dir=directory, prefix=".bake-plan-probe-"):
                    pass
            except OSError as err:
                raise OutputError(f"cannot write reports in {directory}: {err.strerror or err}") from None
        reports = Record(self.sitrep_dir)
        for name in REPORT_FILES:
            reports.check(name, REPORT_WHAT[name])
        Record(self.metadata_file.parent).check(self.metadata_file.name, "buildx's --metadata-file")
        if self.step_summary:
            _appendable(self.step_summary)
        for name in REPORT_FILES:
            reports.remove(name, REPORT_WHAT[name])
        for name, what in STALE_AFTER_A_BUILD.items():
            if reports.ours(name):
                reports.remove(name, what)

    def drop_stale_metadata(self) -> None:
        """Remove the previous ``--metadata-file`` just before buildx writes a new one (a stale
        file would report digests of an older build), when bake-plan had it written; record the
        name as bake-plan's, for buildx to write.

        :raises OutputError: a file bake-plan did not have written is there (left as it is).
        """
        record = Record(self.metadata_file.parent)
        record.remove(self.metadata_file.name, "buildx's --metadata-file")
        record.adopt(self.metadata_file.name, None, "buildx's --metadata-file")

    def write(self, report: dict) -> None:
        """Write the sitrep, its badge and summary, and append the summary to
        ``$GITHUB_STEP_SUMMARY``.

        :raises RunError: a report cannot be written: the work was done, so this is exit 1.
        """
        summary = sitrep.markdown(report)
        try:
            record = Record(self.sitrep_dir)
            record.write("sitrep.json", sitrep.to_json(report), REPORT_WHAT["sitrep.json"])
            record.write("badge.json", sitrep.to_json(sitrep.badge(report)), REPORT_WHAT["badge.json"])
            record.write("sitrep.md", summary, REPORT_WHAT["sitrep.md"])
            if self.step_summary:
                try:
                    with open(self.step_summary, "a", encoding="utf-8") as handle:
                        handle.write(summary)
                except OSError as err:
                    raise OutputError(f"cannot append to $GITHUB_STEP_SUMMARY {self.step_summary}: "
                                      f"{err.strerror or err}") from None
        except OutputError as err:
            raise RunError(f"the build ran ({report['summary']}), but {err}") from None


def _appendable(path: str) -> None:
    """``$GITHUB_STEP_SUMMARY`` can be appended to now (a regular file, or one that can be
    made), without blocking on a FIFO. :raises OutputError: it cannot."""
    where = f"$GITHUB_STEP_SUMMARY {path}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as err:
        raise OutputError(f"cannot append to {where}: {err.strerror or err}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputError(f"cannot append to {where}: it is not a regular file")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
        os.close(fd)
    except OSError as err:
        raise OutputError(f"cannot append to {where}: {err.strerror or err}") from None


def bake_argv(composition: Composition, plan_file: Path, metadata_file: Path, push: bool = False,
              load: bool = False, pull: bool = False, builder: Optional[str] = None,
              progress: str = "rawjson", buildx: Optional[Tuple[int, int, int]] = None,
              no_cache: bool = False) -> List[str]:
    """The arguments after ``docker`` that build the plan's ``default`` group
    (:func:`bake.run.engine.bake_command`), granting read access to exactly the paths the plan
    reads (:func:`bake.plan.render.read_paths`; not to a ``buildx`` version older than
    :data:`bake.run.engine.FS_ENTITLEMENTS`, which neither asks nor takes the flag; ``None``:
    unknown, granted) and reading docker/metadata-action's files after the plan; ``no_cache``: no
    build cache read (``--no-cache``)."""
    grant = buildx is None or buildx[:2] >= engine.FS_ENTITLEMENTS
    return engine.bake_command(plan_file, [DEFAULT_GROUP], metadata_file, push=push, load=load, pull=pull,
                               builder=builder, extra_files=composition.bake_files,
                               allow=read_paths(composition.plan) if grant else (), progress=progress,
                               no_cache=no_cache, entitlements=granted(composition.plan))


def console_mode(progress: str, terminal: bool) -> str:
    """The ``--progress`` mode shown: buildx's ``auto`` is ``tty`` when stderr is a terminal
    (``terminal``), else ``plain``; any other mode is itself."""
    return ("tty" if terminal else "plain") if progress == "auto" else progress


def run_build(
    composition: Composition,
    plan_file: Path,
    reports: Reports,
    push: bool = False,
    load: bool = False,
    builder: Optional[str] = None,
    pull: bool = False,
    no_cache: bool = False,
    known_secrets: Sequence[str] = (),
    progress: str = "plain",
    probe: Optional[engine.EngineProbe] = None,
    since_last: Optional[datetime.date] = None,
    latest: Optional["Newest"] = None,
) -> dict:
    """Build the plan's ``default`` group (every target of the chain, so meal kits are tagged and
    pushed too) and write ``sitrep.json``, ``badge.json`` and ``sitrep.md`` in ``sitrep_dir``; the
    Markdown is appended to ``$GITHUB_STEP_SUMMARY`` when that is set (GitHub Actions).

    Every line shown and every report written goes through :func:`bake.plan.secrets.redact` with
    ``known_secrets`` (the ``--secret`` values, and each line of a multi-line one) and has its
    control characters escaped: a step that prints a secret, a URL with a token in it or a
    terminal control sequence puts none of them in the console or the reports.

    ``reports`` must have been prepared (:meth:`Reports.prepare`, before the plan was written);
    the previous metadata file is removed only once the engine answers.

    buildx always runs with ``--progress=rawjson``, read by the one progress reader, so the
    sitrep is whole in every mode; ``progress`` (buildx's words) only picks what stderr shows:
    ``plain`` plain-progress lines, ``quiet`` only errors, ``tty`` one live status line
    (:class:`bake.run.progress.LiveConsole`), ``rawjson`` buildx's JSON lines as they came
    (redacted), ``auto`` tty on a terminal, else plain. ``no_cache`` passes buildx's ``--no-cache``
    (every step runs again); ``probe``: the engine probe the caller started before planning (else
    one is started here). Under ``-v`` the commands are shown by :func:`bake.run.engine.show_commands`.

    After a ``push``: ``since_last`` (the nightly's date) gives each target the sitrep's
    ``since_last``, its diff against its newest nightly record (:func:`add_since_last`); ``latest``
    is what ``build --skip-unchanged`` read of those records (:func:`newest_records`), read here
    (after the build) when ``None`` and needed. The cache health check takes its records from the
    same read. Without ``push`` no record is read.

    Around buildx this asks the engine one thing before it: the probe (``docker version``, once
    buildx's version is remembered; ``docker info`` the first time, and for a plan with
    attestations), started before planning. buildx runs through python-on-whales
    (:func:`bake.run.engine.bake`). Each target's ``duration_s`` comes from buildx's progress
    (:meth:`bake.run.progress.ProgressReader.durations`).

    :returns: the sitrep; its ``outcome`` is ``pass``, ``fail``, or ``interrupted`` (and
        ``interrupted`` true) when Ctrl-C or SIGTERM stopped the build, also while the registry
        was asked for pushed sizes. A failed or interrupted build still writes all three files,
        naming the failing target.
    :raises bake.run.engine.EngineError: the engine cannot be reached (nothing was built).
    :raises bake.errors.UsageError: ``builder`` is not a buildx builder, or the plan's attestations
        cannot go through the engine's image store (nothing was built).
    :raises bake.errors.RunError: the build ran but a report could not be written.
    """
    probe = probe or engine.EngineProbe()
    facts = probe.answered()  # the engine answers, its buildx (remembered), its image store (docker info only)
    buildx = probe.buildx()
    if buildx is None:  # neither docker info nor docker buildx version named one: is there a buildx at all?
        engine.require_buildx_plugin()
    engine.require_buildx(composition.plan, buildx)
    if builder is not None:
        engine.check_builder(builder)
    elif os.environ.get("BUILDX_BUILDER"):  # buildx's own choice of builder: as much a mistake when wrong
        engine.check_builder(os.environ["BUILDX_BUILDER"], "BUILDX_BUILDER")
    engine.require_attestation_store(composition.plan, load, builder, facts)
    reports.drop_stale_metadata()
    built = composition.plan["group"][DEFAULT_GROUP]["targets"]
    argv = bake_argv(composition, plan_file, reports.metadata_file, push=push, load=load, pull=pull, builder=builder,
                     buildx=buildx, no_cache=no_cache)
    mode = console_mode(progress, sys.stderr.isatty())

    def show(line: str) -> None:
        sys.stderr.write(redact(line, known_secrets))

    live = LiveConsole(show, width=lambda: shutil.get_terminal_size().columns) if mode == "tty" else None
    # rawjson: each step's output is redacted as a stream, so a secret cut across log chunks is too
    raw_redactor = RawRedactor(known_secrets) if mode == "rawjson" else None
    raw = (lambda line: sys.stderr.write(raw_redactor(line))) if raw_redactor is not None else None
    console = live or ((lambda line: None) if raw else show)
    try:
        run = engine.bake(argv, reports.metadata_file, console=console, raw=raw, only_errors=mode == "quiet",
                          sole_target=built[0] if len(built) == 1 else None, plan=composition.plan)
    finally:
        if live is not None:
            live.close()
        if raw_redactor is not None:
            sys.stderr.write(raw_redactor.finish())
    label = f"{', '.join(composition.requested)} build"
    interrupted = run.interrupted

    def report_with(sizes, resolve=lambda ref: None):
        return _sitrep(composition, label, run, known_secrets, sizes, resolve)

    try:  # the digests of base images neither buildx's metadata nor its progress gave, then sizes
        resolve = _asked_at_once(lambda lookup: report_with(lambda ref: {}, lookup), _base_digest, unknown=None)
        report = report_with(_asked_at_once(lambda lookup: report_with(lookup, resolve), engine.pushed_sizes)
                             if push else lambda ref: {}, resolve)
        if push and since_last is not None and not interrupted:  # a nightly: what changed since the last one?
            latest = latest if latest is not None else newest_records(composition.plan)
            add_since_last(report, composition.plan, latest, since_last)
        if push and not no_cache and not interrupted:  # a nightly: did the registry cache do its work?
            sitrep.add_cache_warnings(report, expected_inputs(composition.plan, report,
                                                              None if latest is None else latest.reader(composition.plan)))
    except KeyboardInterrupt:  # stopped while asking the registry: report without its answers
        interrupted = True
        report = report_with(lambda ref: {})
    with _interrupts_held():
        report = _finish(report, interrupted, label, reports, known_secrets)
    return report


def _finish(report: dict, interrupted: bool, label: str, reports: Reports, known_secrets: Sequence[str]) -> dict:
    """Mark an interrupted build's report, redact it, write the reports. :returns: what was written."""
    report["interrupted"] = interrupted
    if interrupted:  # cancelled, not broken: what did not finish was not built
        for entry in report["targets"].values():
            if entry["outcome"] == sitrep.FAIL and not entry["digest"]:
                entry["outcome"], entry["duration_s"] = sitrep.NOT_BUILT, None
        report["outcome"] = sitrep.INTERRUPTED
        report["summary"] = f"{label}: interrupted"
    # One redaction for every report file (sitrep.json, badge, sitrep.md, the step summary).
    report = sitrep.redacted(report, known_secrets)
    reports.write(report)
    return report


@contextlib.contextmanager
def _interrupts_held():
    """SIGINT, SIGTERM and SIGHUP wait until the block is done, then interrupt: the reports are
    written whole or not started (a half-written set reads as another run's)."""
    held: List[int] = []
    try:
        previous = {number: signal.signal(number, lambda got, frame: held.append(got))
                    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread (bake-plan used as a library): nothing to hold
        yield
        return
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if held:
        raise KeyboardInterrupt


SIZE_QUERIES = 8
"""How many pushed images' sizes are asked of the registry at once (each is a docker CLI run)."""
_NO_SIZES: dict = {}  # what a lookup of sizes gives for a ref it was not asked (never changed)


def _asked_at_once(report, fetch, unknown: Any = _NO_SIZES):
    """``fetch`` (``ref`` → sizes, :func:`bake.run.engine.pushed_sizes`, or any other answer) for
    every ref ``report`` (a function of such a lookup) asks for, :data:`SIZE_QUERIES` at a time
    rather than one after another; :returns: the lookup of the answers (``unknown`` for a ref not
    asked: ``{}``, no sizes). A dry ``report`` first tells which refs."""
    from concurrent.futures import ThreadPoolExecutor

    wanted: List[str] = []
    report(lambda ref: wanted.append(ref) or unknown)
    wanted = list(dict.fromkeys(wanted))
    if not wanted:
        return lambda ref: unknown
    pool = ThreadPoolExecutor(max_workers=min(SIZE_QUERIES, len(wanted)))
    try:
        answers = dict(zip(wanted, pool.map(fetch, wanted)))
    finally:  # an interrupt does not wait for the questions not yet asked
        pool.shutdown(wait=False, cancel_futures=True)
    return lambda ref: answers.get(ref, unknown)


RECORD_TIMEOUT_S = 30.0
"""How long the registry may take to give one target's newest nightly record (:func:`expected_inputs`), in seconds."""


def expected_inputs(plan: dict, report: dict, read=None) -> dict:
    """The input digest each target that ran steps had in its previous nightly: its newest record
    (``record-<target>-latest-<arch>``, :func:`bake.run.record.read_latest`'s refs), asked only for
    the tagged one-platform targets whose ``steps_run`` is above 0 (a target that ran nothing
    needs no question), :data:`SIZE_QUERIES` at a time.

    :param read: ``read(ref)`` → the record or ``None``; default
        :func:`bake.run.record.read_record` bounded by :data:`RECORD_TIMEOUT_S`. A record that is
        missing, unreadable or not answered in time gives no expectation (no warning).
    :returns: target → ``(input digest, "nightly-<date>")`` for :func:`bake.run.sitrep.add_cache_warnings`.
    """
    from bake.errors import RecordError
    from bake.plan import records
    from bake.run.record import read_record

    def fetch(ref: str) -> Optional[dict]:
        try:
            if read is not None:
                return read(ref)
            return read_record(ref, lambda r: engine.index_annotations(r, RECORD_TIMEOUT_S))
        except (RecordError, engine.EngineError, RunError, UsageError):
            return None

    ran = {name for name, t in report["targets"].items() if t.get("steps_run") and not t.get("unchanged_since")}
    refs = {target: ref for target, _, ref in records.latest_refs(plan)
            if target in ran and len(plan["target"][target].get("platforms") or []) == 1}
    lookup = _asked_at_once(lambda ask: [ask(ref) for ref in refs.values()], fetch, unknown=None)
    out = {}
    for target, ref in refs.items():
        found = lookup(ref)
        if isinstance(found, dict) and found.get("input_digest"):
            out[target] = (found["input_digest"], records.built_in(found))
    return out


@dataclasses.dataclass
class Newest:
    """The newest nightly record of each tagged target and arch of a plan, as read once
    (:func:`newest_records`) for ``build --skip-unchanged``, the sitrep's ``since_last`` and the
    cache health check.

    :param found: ``(target, arch)`` → its newest record.
    :param faults: ``(target, arch)`` → why it could not be read, one line (an unreadable or
        hostile record, a registry that did not answer in time). A key in neither has no record.
    """

    found: Dict[Tuple[str, str], dict] = dataclasses.field(default_factory=dict)
    faults: Dict[Tuple[str, str], str] = dataclasses.field(default_factory=dict)

    def reader(self, plan: dict):
        """``read(ref)`` → the record read for that ref of :func:`bake.plan.records.latest_refs`
        (``None``: none), for :func:`expected_inputs`: no registry asked again."""
        from bake.plan import records

        by_ref = {ref: self.found.get((target, arch)) for target, arch, ref in records.latest_refs(plan)}
        return lambda ref: by_ref.get(ref)


def newest_records(plan: dict, annotations=None) -> Newest:
    """Read the newest nightly record of every tagged target and platform of ``plan``
    (:func:`bake.run.record.read_latest`), :data:`SIZE_QUERIES` refs asked at a time, each within
    :data:`RECORD_TIMEOUT_S`. Nothing raised: a record that cannot be read is a fault of its target.

    :param annotations: ``annotations(ref)`` → the index's annotations or ``None``; default
        :func:`bake.run.engine.index_annotations` bounded by :data:`RECORD_TIMEOUT_S`.
    """
    from bake.errors import RecordError
    from bake.plan import records
    from bake.run.record import read_latest

    fetch = annotations or (lambda ref: engine.index_annotations(ref, RECORD_TIMEOUT_S))

    def ask(ref: str):
        try:
            return fetch(ref)
        except (engine.EngineError, RunError, UsageError) as err:  # no answer: said as the record's fault
            return err

    refs = records.latest_refs(plan)
    lookup = _asked_at_once(lambda question: [question(ref) for _, _, ref in refs], ask, unknown=None)

    def asked(ref: str):
        got = lookup(ref)
        if isinstance(got, Exception):
            raise RecordError(str(got))
        return got

    out = Newest()
    keys = {ref: (target, arch) for target, arch, ref in refs}
    out.found = read_latest(plan, asked, unreadable=lambda target, ref, err: out.faults.__setitem__(keys[ref], str(err)))
    return out


def add_since_last(report: dict, plan: dict, latest: Newest, date: datetime.date) -> None:
    """Give each target of a sitrep its ``since_last`` (:func:`bake.plan.records.since_last`): the
    records this build would write (:func:`bake.plan.records.make_records` of ``plan`` and
    ``report``, ``date`` the nightly's) diffed against ``latest``; a target ``build
    --skip-unchanged`` did not build is compared as its newest record (so: unchanged). Changes
    ``report`` in place."""
    from bake.plan import records

    after = records.make_records(plan, report, date)
    after += [rec for (target, _), rec in latest.found.items()
              if (report["targets"].get(target) or {}).get("unchanged_since")]
    for target, entries in records.since_last(after, latest.found, latest.faults).items():
        if target in report["targets"]:
            report["targets"][target]["since_last"] = entries


BASE_DIGEST_TIMEOUT_S = 30.0
"""How long the registry may take to give one base image's digest (:func:`_base_digest`), in seconds."""


def _base_digest(ref: str) -> Optional[str]:
    """The digest ``ref`` resolves to in its registry now (``docker buildx imagetools inspect``,
    :func:`bake.run.engine.image_digest`), for a base image whose digest the build did not show;
    ``None`` when the registry does not say (no such image, no answer in time, refused)."""
    try:
        return engine.image_digest(ref, BASE_DIGEST_TIMEOUT_S)
    except (engine.EngineError, RunError, UsageError):
        return None


def resolve_base_digests(composition: Composition, digest=None) -> dict:
    """Ask the registry for the digest of every image the plan's targets start from by tag
    (:func:`bake.plan.inputs.base_references`), :data:`SIZE_QUERIES` at a time, each within
    :data:`BASE_DIGEST_TIMEOUT_S`, and count those digests in every target's input digest (its
    label and ``composition.input_digests``): a new image pushed under the tag changes the
    digest of each target built from it and of the targets built on those, and of no other.

    :param digest: ``ref`` → ``sha256:…`` or ``None``; default :func:`_base_digest`
        (``imagetools inspect``; ``None`` when the registry does not answer in time or has no
        such image: the target then counts as changed).
    :returns: reference → digest (``None``: not resolved), for each reference asked.
    """
    from bake.plan.inputs import base_references, label_targets

    targets = composition.plan["target"]
    refs = list(dict.fromkeys(ref for target in targets.values() for ref in base_references(target)))
    lookup = _asked_at_once(lambda ask: [ask(ref) for ref in refs], digest or _base_digest, unknown=None)
    resolved = {ref: lookup(ref) for ref in refs}
    composition.input_digests = label_targets(targets, resolved=resolved)
    return resolved


def base_images_seen(plan: dict, images: Optional[dict]) -> dict:
    """The images BuildKit's progress showed each target starting from
    (:meth:`bake.run.progress.ProgressReader.images`), less its named contexts that are no image
    of a registry: every one but a ``docker-image://`` one (a local directory, the wheelhouse's
    ``oci-layout://…@sha256:…``, a ``target:`` of the plan, a git or HTTP URL), which BuildKit
    names as an image (``docker.io/library/wheelhouse``, the layout's digest) though no registry
    holds it. An image seen with the digest an ``oci-layout://`` context is pinned to is that
    layout, whatever name BuildKit gave it.

    :param plan: the plan (``target`` → ``contexts``). :returns: the same shape, filtered."""
    out = {}
    for target, seen in (images or {}).items():
        contexts = (plan.get("target", {}).get(target) or {}).get("contexts") or {}
        not_images = {name: value for name, value in contexts.items()
                      if isinstance(value, str) and not value.startswith(_IMAGE_CONTEXT)}
        names = {sitrep.image_spelling(name) for name in not_images}
        layouts = {pinned_digest(value) for value in not_images.values()} - {None}
        out[target] = [found for found in seen
                       if sitrep.image_spelling(found[0]) not in names and found[2] not in layouts]
    return out


_IMAGE_CONTEXT = "docker-image://"
"""The one kind of named context that is an image a registry holds (a base image)."""


def _sitrep(composition: Composition, label: str, run: engine.BakeRun, known: Sequence[str],
            sizes=lambda ref: {}, resolve=lambda ref: None) -> dict:
    return sitrep.make_sitrep(composition.plan, label, run.returncode, run.failed, run.metadata, run.durations,
                              error=run.error, steps=run.steps, failed_steps=run.failed_steps, exported=run.exported,
                              known=known, sizes=sizes, transfers=run.transfers, failures=run.failures,
                              images=base_images_seen(composition.plan, run.images), resolve=resolve,
                              unchanged=composition.unchanged, caches=run.caches)
