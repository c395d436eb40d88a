"""One function per ``bake-plan`` command: checked :class:`~bake.settings.merge.Settings` in, what
the user sees printed, an exit status out (``docs/errors.md``).

Each command is a straight line down the pipeline: settings → plan (:mod:`bake.api`) → file
(:mod:`bake.output`) → buildx (:mod:`bake.run`) → sitrep; or settings → lock (:mod:`bake.pip`).
Heavier modules (python-on-whales, packaging) are imported inside the commands that need them,
so planning never pays for them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Iterator, Optional, TextIO

from bake.api import FORMATS as DEFAULT_FILES
from bake.api import make_plan, render_parts
from bake.errors import OutputError
from bake.output import check_writable, write_atomic
from bake.owned import check_replaceable, no_empty_directory_left, write_output
from bake.plan.compose import Composition
from bake.plan.plugins import get_plugin_manager
from bake.plan.text import counted, printable

_print = print


def print(*values, **options) -> None:  # noqa: A001 - every line this module prints goes through here
    """:func:`print`, each ``str`` value escaped by :func:`bake.plan.text.printable` (a newline
    too): a path, a tag or a plugin's text holding ``ESC [2J`` or U+202E is shown as ``\\x1b[2J``,
    never obeyed by the terminal, as the error lines show it. A message of several lines is
    printed as several calls."""
    _print(*(printable(v, keep="\t") if isinstance(v, str) else v for v in values), **options)
from bake.settings.merge import Settings


def compose(settings: Settings, per_arch: bool = True) -> Composition:
    """The plan of ``settings``: plugins (less the blocked ones), stage overrides, a ``--locked``
    plan's locks, the ``--wheelhouse`` as an OCI image layout pinned by digest
    (:func:`bake.pip.wheelhouse.oci_layout`), then docker/metadata-action's bake files.

    :raises bake.errors.BakePlanError: bad input, one line naming the culprit.
    """
    options = settings.plan_options(per_arch)
    if options.wheelhouse is not None:
        import dataclasses

        from bake.pip.wheelhouse import oci_layout

        options = dataclasses.replace(options, wheelhouse=oci_layout(options.wheelhouse))
    pm = get_plugin_manager(blocked=settings.blocked_plugins)
    with _collector_paused():
        composition = make_plan(options, pm, settings.stages, locks_dir=settings.locks_dir if settings.locked else None,
                                targets_from=settings.where("targets"))
    if settings.metadata_bake_files:
        from bake.plan.metadata import inherit, read_bake_files

        inherit(composition, read_bake_files(settings.metadata_bake_files), settings.metadata_targets, arch=options.arch)
    if settings.command in ("plan", "build"):
        check_privileges(composition, settings.allow)
        if settings.locked:
            _note_unlocked_finals(settings, composition)
    return composition


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a plan is made (and, by ``plan``, written), then
    back as it was. A plan is millions of new dicts, lists and strings and no cycles; the
    collector walked them again and again as they grew, about a sixth of the CPU of a
    20,000-stage plan (the peak memory is the same without it)."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _note_unlocked_finals(settings: Settings, composition: Composition) -> None:
    """A ``--locked`` plan locks the requested stages' final images; the final image of an
    ancestor meal-kit stage the plan also builds compiles its own lines in the image. One note
    naming them and the ``--target`` that locks them too."""
    from bake.plan.names import target_name

    targets = composition.plan["target"]
    unlocked = [stage.name for stage in composition.chain if stage.name not in composition.requested
                and stage.kind == "mealkit" and target_name(stage.name) in targets]
    if unlocked:
        words = " ".join(f"--target {name}" for name in [*unlocked, *composition.requested])
        print(f"bake-plan: note: --locked locks the requested stages only; the final image of "
              f"{', '.join(repr(n) for n in unlocked)} is built too and compiles its own lines in the image "
              f"(to lock it as well: `bake-plan lock {words}`, then the same --target list here)",
              file=_informing(settings, sys.stderr))


def check_privileges(composition: Composition, allowed) -> None:
    """Every privilege beyond reading its contexts that a target asks buildx for (its
    ``entitlements``, :func:`bake.plan.render.entitlements`) is one the user granted
    (``--allow ENTITLEMENT``, ``allow = [...]``): a plugin cannot give its build the host's network
    or an insecure sandbox on its own. Checked before the plan is written and before buildx runs.

    :raises bake.errors.PrivilegeError: one line naming the plugin (the one whose
        ``bake_plan_adjust_target`` set it, else the stage's), the stage, the target and the privilege.
    """
    from bake.errors import PrivilegeError
    from bake.plan.compose import target_names
    from bake.plan.plugins import THROUGH_A_WRAPPER
    from bake.plan.render import entitlements

    owners = {tname: stage for stage in composition.chain for tname, _ in target_names(stage)}
    for tname, asked in entitlements(composition.plan).items():
        for privilege in asked:
            if privilege in allowed:
                continue
            stage = owners.get(tname)
            plugin = composition.changed_by.get((tname, "entitlements", None)) or (stage.plugin if stage else "?")
            who = "a plugin (through a hook wrapper)" if plugin == THROUGH_A_WRAPPER else f"plugin '{plugin}'"
            raise PrivilegeError(
                f"{who}, stage '{stage.name if stage else '?'}', target '{tname}': asks buildx for {privilege!r}, a "
                f"privilege beyond reading its contexts; grant it with --allow {privilege} (or allow = "
                f'["{privilege}"] in the configuration) if you trust the plugin with it')


def write_plan(settings: Settings, composition: Composition, summary_to: TextIO) -> str:
    """Write the plan file (``-o``, default ``docker-bake.hcl``/``.json``; ``-`` is stdout) and a
    summary of its targets to ``summary_to``. :returns: where the plan went.

    :raises bake.errors.OutputError: a file bake-plan did not write is there, and no ``--force``
        (:func:`bake.owned.check_replaceable`).
    """
    output = settings.output or DEFAULT_FILES[settings.format]
    if output != "-":
        check_replaceable(output, force=settings.force)
    filename = os.path.basename(output) if output != "-" else DEFAULT_FILES[settings.format]
    write_output(output, render_parts(composition, settings.format, filename=filename, environment=settings.environment),
                 what="the plan", force=settings.force)
    if output != "-" and filename in DEFAULT_FILES.values():
        _warn_of_files_read_with(output)
    plan = composition.plan
    built = plan["group"]["default"]["targets"]
    where = "stdout" if output == "-" else output
    print(f"bake-plan: wrote {counted(len(built), 'target')} for {', '.join(composition.requested)} to {where}",
          file=summary_to)
    for name in built:
        target = plan["target"][name]
        tags = ", ".join(t.rsplit("/", 1)[-1] for t in target.get("tags", []))
        if not tags:
            tags = f"(tags from {', '.join(target['inherits'])})" if target.get("inherits") else "(not tagged)"
        print(f"  {name:<28} {','.join(target['platforms']):<24} {tags}", file=summary_to)
    if composition.bake_files:
        files = [output if output != "-" else DEFAULT_FILES[settings.format], *composition.bake_files]
        from bake.plan.render import shell_word

        print(f"  build with: docker buildx bake {' '.join('-f ' + shell_word(f) for f in files)}", file=summary_to)
    return output


BUILDX_READS_BY_DEFAULT = ("compose.yaml", "compose.yml", "docker-compose.yml", "docker-compose.yaml",
                           "docker-bake.json", "docker-bake.hcl")
"""The files ``docker buildx bake`` without ``--file`` reads together, from the current directory
(buildx docs, "bake file definition"; the ``.override`` files, meant to be merged, left out)."""


def _warn_of_files_read_with(output: str) -> None:
    """A plan written under a name buildx reads by default, beside another such file (an older plan
    in the other format, a hand-written one, a Compose file): plain ``docker buildx bake`` would
    merge the two, so say so (a warning: the plan itself is right)."""
    directory = os.path.dirname(output) or "."
    others = [name for name in BUILDX_READS_BY_DEFAULT
              if name != os.path.basename(output) and os.path.isfile(os.path.join(directory, name))]
    if others:
        print(f"bake-plan: warning: {', '.join(others)} {'is' if len(others) == 1 else 'are'} here too: "
              f"`docker buildx bake` without --file reads {'it' if len(others) == 1 else 'them'} together with "
              f"{os.path.basename(output)}; build with --file {output}, or move {'it' if len(others) == 1 else 'them'} away",
              file=sys.stderr)


def check_plan_output(settings: Settings) -> None:
    """Before anything is composed (a ``--locked`` plan copies its locks, a ``--wheelhouse`` gets
    its OCI layout): the plan file can go where ``-o`` says (:func:`bake.owned.check_replaceable`,
    :func:`bake.output.check_writable`), so a refused plan writes nothing.

    :raises bake.errors.OutputError: as :func:`write_plan` would, later.
    """
    output = settings.output or DEFAULT_FILES[settings.format]
    if output != "-":
        check_replaceable(output, force=settings.force)
        check_writable(output)


def plan(settings: Settings) -> int:
    """``bake-plan [plan]``: write the plan; the summary goes to stderr when the plan is on stdout
    (nowhere under ``-q``)."""
    check_plan_output(settings)
    with _collector_paused():  # through the writing too: the plan's objects, made while it was off, are all new to it
        write_plan(settings, compose(settings), _informing(settings, sys.stderr if settings.output == "-" else sys.stdout))
    return 0


def _informing(settings: Settings, stream: TextIO) -> TextIO:
    """Where lines that only inform go: ``stream``, or nowhere under ``-q`` (which keeps errors,
    the documents and the results, as pip's and pytest's ``-q`` do)."""
    return io.StringIO() if settings.verbosity < 0 else stream


def _tracing(settings: Settings):
    """Under ``-v``, a callable that shows each command bake-plan runs (``bake-plan: running:
    docker …``) on stderr; else ``None``."""
    if settings.verbosity <= 0:
        return None
    from bake.plan.secrets import shown

    known = [v for v in (s.value() for s in settings.secrets) if v]
    return lambda line: print(f"bake-plan: running: {shown(line, known)}", file=sys.stderr, flush=True)


def build(settings: Settings) -> int:
    """``bake-plan build``: write the plan, run buildx on it, write the sitrep; with ``--dry-run``
    write the plan and print the ``docker buildx bake`` command on stdout (the summary on stderr),
    build nothing and leave the reports alone (only the metadata file's directory is made).
    :returns: 0 every target built, 1 a target failed, 130 interrupted."""
    from bake.run.build import Reports, bake_argv, run_build
    from bake.run.engine import EngineProbe, command_line, installed_buildx, show_commands

    show_commands(_tracing(settings))
    probe = None
    if not settings.dry_run:  # `docker info` answers while the plugins load and the plan is made
        probe = EngineProbe()
    try:
        metadata_file = settings.metadata_file or settings.sitrep_dir / "bake-metadata.json"
        reports = Reports.from_environment(settings.sitrep_dir, metadata_file)
        # the likelier mistake first: -o on a report is said as such (a dry run's command would meet it)
        reports.check_apart(Path(settings.output or DEFAULT_FILES[settings.format]))
        check_plan_output(settings)
        composition = compose(settings)
        if settings.lint and _lint_findings(composition):
            return 1
        latest = _skip_unchanged(settings, composition) if settings.skip_unchanged else None
        if latest is not None and not composition.plan["group"]["default"]["targets"] and not settings.dry_run:
            return _nothing_to_build(composition, reports, Path(settings.output or DEFAULT_FILES[settings.format]),
                                     latest, settings.date if settings.since_last else None)
        if settings.dry_run:  # runs no docker: the buildx plugin on disk, its version as a build remembered it
            buildx = installed_buildx()
            try:  # where buildx writes it, so the command runs as printed; before the plan is written
                metadata_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise OutputError(f"cannot make {metadata_file.parent} for the metadata file: "
                                  f"{err.strerror or err}") from None
            plan_file = write_plan(settings, composition, _informing(settings, sys.stderr))
            argv = bake_argv(composition, Path(plan_file), metadata_file, push=settings.push, load=settings.load,
                             pull=settings.pull, builder=settings.builder, progress=settings.progress,
                             buildx=buildx, no_cache=settings.no_cache)
            print(command_line(argv))
            return 0
        with no_empty_directory_left(settings.sitrep_dir, metadata_file.parent):
            reports.prepare(Path(settings.output or DEFAULT_FILES[settings.format]))
            plan_file = write_plan(settings, composition, _informing(settings, sys.stdout))
            sitrep = run_build(composition, Path(plan_file), reports, push=settings.push, pull=settings.pull,
                               load=settings.load, builder=settings.builder,
                               known_secrets=[v for v in (s.value() for s in settings.secrets) if v],
                               progress=settings.progress, no_cache=settings.no_cache, probe=probe,
                               since_last=settings.date if settings.since_last else None, latest=latest)
    finally:
        if probe is not None:  # still running when bake-plan stops early (bad input, an interrupt)
            probe.close()
    if sitrep.get("error") and sitrep["error"] not in sitrep["summary"]:  # the summary cuts it: said whole, first
        print(f"bake-plan: {sitrep['error']}", file=sys.stderr)
    print(f"bake-plan: {sitrep['summary']}", file=sys.stdout if sitrep["outcome"] == "pass" else sys.stderr)
    for warning in sitrep.get("warnings") or ():  # the cache not working (bake.run.sitrep.add_cache_warnings)
        print(f"bake-plan: warning: {warning}", file=sys.stderr)
    if sitrep.get("interrupted"):
        return 130
    return 0 if sitrep["outcome"] == "pass" else 1


def _skip_unchanged(settings: Settings, composition: Composition):
    """``build --skip-unchanged``: take out of the plan each target whose input digest equals its
    newest nightly record's (:func:`bake.plan.records.unchanged_targets`), say so, one line each,
    and move its tags onto the recorded image (``imagetools create``, eight repositories at a time;
    printed only under ``--dry-run``). First the digests of the base images named by tag are asked of their
    registries and counted in the input digests (:func:`bake.run.build.resolve_base_digests`);
    one that does not answer is said, and its targets count as changed. The records are read
    once, in parallel and time-bounded (:func:`bake.run.build.newest_records`); a record that
    cannot be read (unreadable, hostile, no answer) is said, and its target builds as usual.
    :returns: the records read (:class:`bake.run.build.Newest`), which the sitrep's
    ``since_last`` and the cache health check reuse.

    :raises bake.errors.UsageError: not exactly one ``--platform`` (a record is of one arch), or
        no ``--push`` (the tags are moved in the registry).
    """
    from bake.errors import UsageError
    from bake.plan import records
    from bake.run.build import newest_records, resolve_base_digests
    from bake.run.engine import create_manifest
    from bake.run.publish import ask_all, per_repository

    if len(settings.platforms) != 1:
        raise UsageError("--skip-unchanged needs exactly one --platform: a nightly record is of one arch")
    if not (settings.push or settings.dry_run):
        raise UsageError("--skip-unchanged needs --push: the tags of an unchanged target are moved onto its "
                         "recorded image in the registry")
    plan = composition.plan
    for ref, digest in resolve_base_digests(composition).items():
        if digest is None:
            print(f"bake-plan: base image {ref}: its registry gave no digest; the targets built from it "
                  "count as changed", file=sys.stderr)
    latest = newest_records(plan)
    for (target, _), why in latest.faults.items():  # said, and the target builds as usual
        print(f"bake-plan: {why}; {target} builds as usual", file=sys.stderr)
    unchanged = records.unchanged_targets(plan, latest.found)
    moves = {}  # tag -> the recorded image it is moved onto
    for name, record in unchanged.items():
        print(f"bake-plan: {records.unchanged_line(name, record)}")
        source = f"{record['repository']}@{record['image_digest']}"
        for tag in plan["target"][name].get("tags") or []:
            if settings.dry_run:
                print(f"bake-plan: would tag {tag} <- {source}")
            else:
                moves[tag] = source
    by_repository = per_repository(list(moves), lambda tag: tag)  # one repository's tags in turn
    ask_all(list(by_repository), lambda repo: [create_manifest(tag, [moves[tag]]) for tag in by_repository[repo]])
    records.drop_unchanged(plan, unchanged)
    composition.unchanged = dict(unchanged)
    return latest


def _nothing_to_build(composition: Composition, reports, plan_file: Path, latest=None, since_last=None) -> int:
    """Every target was unchanged: no buildx run; the reports say so (with ``since_last``, the
    nightly's date: each target's ``since_last`` from ``latest``, the records read). :returns: 0."""
    from bake.run import sitrep
    from bake.run.build import add_since_last

    label = f"{', '.join(composition.requested)} build"
    reports.prepare(plan_file)
    report = sitrep.make_sitrep(composition.plan, label, 0, [], {}, {}, unchanged=composition.unchanged)
    if since_last is not None and latest is not None:
        add_since_last(report, composition.plan, latest, since_last)
    reports.write(report)
    print(f"bake-plan: {report['summary']}")
    return 0


def publish(settings: Settings) -> int:
    """``bake-plan publish``: the multi-arch tags, made from the per-arch ones only when every arch
    is there. With ``--format json`` the progress lines go to stderr and stdout gets one JSON
    document (:func:`publish_report`). :returns: 0 published, 1 an arch is missing (no tag was created)."""
    from bake.run import engine
    from bake.run.publish import manifests, missing_sources
    from bake.run.publish import publish as publish_all
    from bake.run.retry import Retries

    if settings.sitreps or settings.all_or_nothing:
        return _publish_gated(settings)
    wanted = manifests(compose(settings, per_arch=False))
    as_json = settings.format == "json"
    lines = sys.stderr if as_json else sys.stdout
    digests: dict = {}  # per-arch ref → digest, from the one existence check of each
    engine.show_commands(_tracing(settings))
    retries = Retries()
    registry = _registry_calls(settings, retries, sys.stderr)

    def exists(ref: str) -> bool:
        digests[ref] = registry.digest(ref)
        return digests[ref] is not None

    def report(manifest) -> None:
        print(f"published {manifest.tag} <- {', '.join(s.rsplit(':', 1)[-1] for s in manifest.sources)}",
              file=lines, flush=True)

    def create(tag: str, sources: list) -> None:  # several at once (bake.run.publish.CREATES_AT_ONCE)
        registry.create(tag, sources, ())
        if as_json:
            digests[tag] = registry.digest(tag)

    # one buildx run asks for many images at once; the JSON report names each one's digest, asked one by one
    all_exist = None if as_json else registry.all_exist
    if settings.dry_run:  # check, list with the command that would make each, create nothing
        missing = missing_sources(wanted, exists, all_exist)
        for manifest in ([] if missing else wanted):
            print(f"would publish {manifest.tag} <- "
                  f"{', '.join(s.rsplit(':', 1)[-1] for s in manifest.sources)}", file=lines)
            print(f"  {engine.command_line(engine.imagetools_create_command(manifest.tag, manifest.sources))}",
                  file=lines, flush=True)
    else:
        missing = publish_all(wanted, exists, create, on_created=report, all_exist=all_exist)
    if as_json:
        write_atomic("-", json.dumps(publish_report(wanted, digests, missing, settings.dry_run, retries.count),
                                     indent=2) + "\n", what="the publish report")
    if retries.count:
        print(f"bake-plan: {counted(retries.count, 'registry call')} retried ({retries.waited_s:g} s waited)",
              file=_informing(settings, sys.stderr))
    print("bake-plan: note: no gate applied (no --sitrep): the floating tags move whatever the tests said",
          file=_informing(settings, lines))
    if missing:
        print(f"bake-plan: error: not publishing: {len(missing)} per-arch image(s) missing; no tag was created:",
              file=sys.stderr)
        for ref in missing:
            print(f"  missing {ref}", file=sys.stderr)
        return 1
    return 0


def test(settings: Settings) -> int:
    """``bake-plan test``: run the requested stages' image tests in their final images, per
    platform, and add the outcomes to the sitrep. :returns: 0 every test passed (or none is
    declared), 1 a test failed; a missing image or engine raises (exit 2, nothing ran)."""
    from bake.run.engine import show_commands
    from bake.run.imagetest import TestReports, run_image_tests
    from bake.settings import values

    show_commands(_tracing(settings))
    composition = compose(settings)
    reports = TestReports.from_environment(settings.sitrep_dir)
    # The hint for a missing image repeats the flags that chose its tag (a configuration is read again).
    flags = "".join(f" {flag} {value}" for key, flag, value in (("registry", "--registry", settings.registry),
                                                                 ("date", "--date", settings.date))
                    if settings.where(key) == flag)
    quiet = settings.verbosity < 0  # -q: the summary line and errors only
    with no_empty_directory_left(settings.sitrep_dir):
        reports.prepare()
        # a day the user named (--date 2026-11-29) tests that night's tag, not the latest one
        named_day = settings.date if values.is_day_policy(str(settings["date"])) else None
        tests = run_image_tests(composition, reports, local=settings.local, build_flags=flags,
                                date=named_day, date_from=settings.where("date"),
                                **({"echo": lambda line: None} if quiet else {}))
    print(f"bake-plan: {tests['summary']}", file=sys.stdout if tests["outcome"] == "pass" else sys.stderr)
    return 0 if tests["outcome"] == "pass" else 1


def _registry_calls(settings: Settings, retries, stream: TextIO):
    """:class:`bake.run.release.Registry` of :mod:`bake.run.engine`'s calls, each retried on a
    passing failure (:func:`bake.run.retry.retrying`), each retry shown on ``stream``."""
    from bake.run import engine
    from bake.run.release import Registry
    from bake.run.retry import retrying

    def note(line: str) -> None:
        print(f"bake-plan: retrying {line}", file=_informing(settings, stream), flush=True)

    return Registry(
        digest=lambda ref: retrying(lambda: engine.image_digest(ref), f"imagetools inspect {ref}", retries, note=note),
        create=lambda tag, sources, notes: retrying(
            lambda: engine.create_manifest(tag, sources, annotations=notes), f"imagetools create {tag}", retries,
            note=note),
        annotations=lambda ref: retrying(lambda: engine.index_annotations(ref), f"imagetools inspect --raw {ref}",
                                         retries, note=note),
        all_exist=lambda refs: retrying(lambda: engine.all_resolve(refs), f"imagetools create --dry-run {refs[0]} …",
                                        retries, note=note),
    )


def _publish_gated(settings: Settings) -> int:
    """``publish --sitrep``/``--all-or-nothing`` (:func:`bake.run.release.publish_gated`): the
    sitreps are read first (bad ones are exit 2 before the registry is asked anything), the gate
    decides per image, dated tags are made, then floating tags moved. :returns: 0 every tag
    published; 1 an image held back, a per-arch image missing, or a failure part-way (after the
    rollback under ``--all-or-nothing``), or ``$GITHUB_STEP_SUMMARY`` could not be appended to."""
    from bake.run import engine
    from bake.plan.gate import decide
    from bake.run.publish import manifests
    from bake.errors import OutputError
    from bake.run.release import append_summary, arch_comparison, publish_gated, publish_markdown, select
    from bake.run.retry import Retries
    from bake.settings.sitreps import read_sitreps

    evidence = read_sitreps(settings.sitreps) if settings.sitreps else None
    composition = compose(settings, per_arch=False)
    wanted = manifests(composition)
    decisions = None
    if evidence is not None:
        from bake.pip.lockfiles import lock_differences

        decisions = decide(composition, evidence, size_ratio=settings["arch-size-ratio"],
                           predicted=lock_differences(list(composition.stages.values()), settings.locks_dir))
    as_json = settings.format == "json"
    lines = sys.stderr if as_json else sys.stdout
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:  # checked before the registry is asked anything
        from bake.run.build import _appendable

        _appendable(step_summary)
    engine.show_commands(_tracing(settings))
    retries = Retries()
    registry = _registry_calls(settings, retries, sys.stderr)
    if decisions is not None and evidence.digests:
        registry, decisions = _held_if_moved(wanted, evidence, decisions, registry)
    if decisions is None:
        print("bake-plan: note: no gate applied (no --sitrep): the floating tags move whatever the tests said",
              file=_informing(settings, lines))
    held = {name: d for name, d in (decisions or {}).items() if not d.floating}
    for name, decision in (decisions or {}).items():
        if arch_comparison(decision):
            print(f"arches of {name}: {arch_comparison(decision)}", file=lines, flush=True)
    for name, decision in held.items():
        print(f"held back {name}: {'; '.join(decision.reasons)}", file=lines, flush=True)
    if held and settings.all_or_nothing:
        print(f"bake-plan: --all-or-nothing: {counted(len(held), 'image')} held back, so no floating tag moves",
              file=lines, flush=True)
    dated, moving, kept = select(wanted, settings.date, decisions, settings.all_or_nothing)

    def shown(sources) -> str:
        return ", ".join(s.rsplit(":", 1)[-1] for s in sources)

    def summarise(outcome, unrecorded: str = "") -> int:
        """Append the Markdown summary when GitHub Actions asks for one; 1 when it cannot be."""
        if step_summary:
            try:
                append_summary(step_summary, lambda room: "\n" + publish_markdown(
                    settings.date, decisions, dated, moving, kept, outcome, retries.count, retries.waited_s,
                    settings.all_or_nothing, room - 1, unrecorded))
            except OutputError as err:
                print(f"bake-plan: error: {err}", file=sys.stderr)
                return 1
        return 0

    if settings.dry_run:
        for manifest in [*dated, *moving]:
            print(f"would publish {manifest.tag} <- {shown(manifest.sources)}", file=lines, flush=True)
        for manifest in kept:
            print(f"would keep {manifest.tag} where it is (held back)", file=lines, flush=True)
        unsummarised = summarise(None)
        if as_json:
            write_atomic("-", json.dumps(_gated_report(settings, decisions, None, retries, dated, moving, kept),
                                         indent=2) + "\n", what="the publish report")
        return 1 if held or unsummarised else 0
    outcome = publish_gated(wanted, settings.date, decisions, registry, settings.all_or_nothing,
                            on_created=lambda tag, sources: print(f"published {tag} <- {shown(sources)}",
                                                                  file=lines, flush=True))
    for tag, digest in ([] if outcome.missing or outcome.failed else outcome.kept):
        print(f"kept {tag} " + (f"on {digest}" if digest else "absent (it never existed)") + " (held back)",
              file=lines, flush=True)
    _print_rollback(outcome.rolled_back)
    unrecorded = _record_published(settings, composition, wanted, outcome, registry, lines,
                                   evidence.documents if evidence else [])
    if retries.count:
        print(f"bake-plan: {counted(retries.count, 'registry call')} retried ({retries.waited_s:g} s waited)",
              file=_informing(settings, sys.stderr))
    unsummarised = summarise(outcome, unrecorded)
    if as_json:
        write_atomic("-", json.dumps(_gated_report(settings, decisions, outcome, retries, dated, moving, kept),
                                     indent=2) + "\n", what="the publish report")
    if outcome.missing:
        print(f"bake-plan: error: not publishing: {len(outcome.missing)} per-arch image(s) missing; no tag was "
              "created:", file=sys.stderr)
        for ref in outcome.missing:
            print(f"  missing {ref}", file=sys.stderr)
        return 1
    if outcome.failed:
        done = "; the floating tags already moved were put back" if outcome.rolled_back else ""
        print(f"bake-plan: error: {outcome.failed}; {len(outcome.created)} tag(s) were published before it{done}; "
              "rerun the same `bake-plan publish` to finish", file=sys.stderr)
        return 1
    if unrecorded:
        print(f"bake-plan: error: the images are published, but not their nightly records: {unrecorded}; "
              "rerun `bake-plan record` with the same --sitrep", file=sys.stderr)
        return 1
    if held:
        print(f"bake-plan: {counted(len(held), 'image')} held back: their floating tags did not move",
              file=sys.stderr)
        return 1
    return unsummarised


def _held_if_moved(wanted, evidence, decisions, registry):
    """Each per-arch tag a build sitrep tested, asked of the registry (:data:`CHECKS_AT_ONCE` at a
    time): the decisions with every image held whose tag a later build moved
    (:func:`bake.plan.gate.moved_since_tested`), and the registry calls with those answers kept,
    so publishing does not ask again. :returns: ``(registry, decisions)``."""
    import dataclasses

    from bake.plan.gate import moved_since_tested
    from bake.run.publish import ask_all

    asked = {}
    for manifest in wanted:
        for source in manifest.sources:
            arch = source[len(manifest.tag) + 1:]
            if (manifest.target, arch) in evidence.digests:
                asked[(manifest.target, arch, source)] = source
    answers = dict(zip(asked.values(), ask_all(list(asked.values()), registry.digest)))
    decisions = moved_since_tested(decisions, evidence, {key: answers[ref] for key, ref in asked.items()})
    ask = registry.digest
    return dataclasses.replace(registry, digest=lambda ref: answers[ref] if ref in answers else ask(ref)), decisions


def _record_published(settings: Settings, composition: Composition, wanted, outcome, registry,
                      lines: TextIO, documents: list) -> str:
    """``publish --sitrep`` (not ``--no-record``): the nightly record of each image whose tags it
    made, from the sitreps (``documents``: the files the gate read, :class:`bake.plan.gate.Evidence`),
    pushed beside it (:func:`_record_sitreps`, each push retried as the tags are); nothing when a
    per-arch image was missing (nothing was published).

    :returns: ``""``, or why the records could not be pushed (the registry refused one).
    """
    from bake.errors import RunError

    if not settings.sitreps or settings.no_record or outcome.missing:
        return ""
    made = {tag for tag, _ in outcome.created}
    published = {m.target for m in wanted if m.tag in made}
    if not published:
        return ""
    try:
        _record_sitreps(settings, composition.plan, documents, only=published, stream=lines,
                        create=lambda tag, sources, annotations=(): registry.create(tag, sources, list(annotations)))
    except RunError as err:
        return str(err)
    return ""


def promote(settings: Settings) -> int:
    """``bake-plan promote``: move the floating tags of the requested chains' images onto the
    dated multi-arch images of ``--date`` (:func:`bake.run.release.promote`), all or nothing.
    :returns: 0 moved; 1 a dated image did not pass the gate (or has no record of one) and
    ``--force`` was not given, or a move failed (the tags already moved were put back).
    :raises bake.errors.UsageError: an image has no tag naming the date, or a dated image is not
        in the registry (nothing moved)."""
    from bake.errors import UsageError
    from bake.run import engine
    from bake.run.publish import manifests
    from bake.run.release import Registry, promotions
    from bake.run.release import promote as promote_all
    from bake.run.retry import Retries

    day = settings.date.isoformat()
    moves, without = promotions(manifests(compose(settings, per_arch=False)), settings.date)
    if without:
        raise UsageError(f"{settings.where('date')} {day}: image {without[0]} has no tag naming that date"
                         + (f" ({len(without) - 1} more)" if len(without) > 1 else ""))
    engine.show_commands(_tracing(settings))
    retries = Retries()
    registry = _registry_calls(settings, retries, sys.stderr)
    if settings.dry_run:
        registry = Registry(digest=registry.digest, create=lambda tag, sources, notes: None,
                            annotations=registry.annotations)
    verb = "would move" if settings.dry_run else "moved"
    outcome, refusals = promote_all(moves, registry, force=settings.force,
                                    on_moved=lambda move, digest: print(f"{verb} {move.tag} -> {move.dated} ({digest})",
                                                                        flush=True))
    missing = [line for line in refusals if line.endswith("is not in the registry")]
    if missing:
        raise UsageError(f"{settings.where('date')} {day}: {missing[0]}: publish that night first; no tag moved",
                         details=missing[1:])
    if refusals:
        print(f"bake-plan: error: not promoting {day}: {counted(len(refusals), 'image')} did not pass publish "
              "--sitrep's gate (--force moves them all the same); no tag moved:", file=sys.stderr)
        for line in refusals:
            print(f"  {line}", file=sys.stderr)
        return 1
    _print_rollback(outcome.rolled_back)
    if retries.count:
        print(f"bake-plan: {counted(retries.count, 'registry call')} retried ({retries.waited_s:g} s waited)",
              file=_informing(settings, sys.stderr))
    if outcome.failed:
        done = "; the tags already moved were put back" if outcome.rolled_back else ""
        print(f"bake-plan: error: {outcome.failed}{done}", file=sys.stderr)
        return 1
    return 0


def _print_rollback(rolled_back) -> None:
    """One stderr line per tag a failed move put back (:attr:`bake.run.release.Outcome.rolled_back`)."""
    from bake.run.engine import repository_of

    words = {"restored": "put back {tag} on {digest}",
             "new": "left {tag} on the new index: it did not exist before, so there is nothing to put back",
             "failed": "could not put back {tag} on {digest}: move it by hand (docker buildx imagetools create "
                       "--tag {tag} {repository}@{digest})"}
    for tag, digest, how in rolled_back:
        line = words[how].format(tag=tag, digest=digest, repository=repository_of(tag))
        print(f"bake-plan: rolled back: {line}", file=sys.stderr, flush=True)


def _gated_report(settings: Settings, decisions, outcome, retries, dated, moving, kept) -> dict:
    """``publish --sitrep --format json``: ``{"dry_run", "gate": {"applied", "images": {target:
    {"dated", "floating", "reasons", "arches": {"size_bytes": {arch: bytes}, "distributions": {arch:
    count}, "differing"}}}}, "published": [{"tag", "digest"}], "kept": [{"tag",
    "digest"}], "missing": [ref], "rolled_back": [{"tag", "digest"}], "failed", "retries"}``;
    a dry run lists the tags it would publish (``digest`` ``null``) and keep."""
    images = {name: {"dated": d.dated, "floating": d.floating, "reasons": list(d.reasons),
                     "arches": {"size_bytes": dict(d.sizes), "distributions": dict(d.distributions),
                                "differing": d.differing}}
              for name, d in (decisions or {}).items()}
    if outcome is None:
        published = [{"tag": m.tag, "digest": None} for m in [*dated, *moving]]
        kept_tags = [{"tag": m.tag, "digest": None} for m in kept]
    else:
        published = [{"tag": tag, "digest": digest} for tag, digest in outcome.created]
        kept_tags = [{"tag": tag, "digest": digest} for tag, digest in outcome.kept]
    return {"dry_run": settings.dry_run, "gate": {"applied": decisions is not None, "images": images},
            "all_or_nothing": settings.all_or_nothing, "published": published, "kept": kept_tags,
            "missing": list(outcome.missing) if outcome else [],
            "rolled_back": [{"tag": t, "digest": d, "how": how}
                            for t, d, how in (outcome.rolled_back if outcome else [])],
            "failed": outcome.failed if outcome else None, "retries": retries.count}


def publish_report(wanted: list, digests: dict, missing: list, dry_run: bool, retries: int = 0) -> dict:
    """``publish --format json``: ``{"dry_run", "tags": [{"tag", "digest", "sources": [{"ref",
    "arch", "digest"}]}], "missing": [ref], "retries"}``. ``digest`` of a tag is its manifest list's,
    ``null`` on a dry run; ``tags`` is empty when a per-arch image is missing (nothing was created);
    ``retries`` counts the registry calls tried again (:mod:`bake.run.retry`)."""
    tags = [] if missing else [
        {"tag": m.tag, "digest": None if dry_run else digests.get(m.tag),
         "sources": [{"ref": ref, "arch": ref.rsplit("-", 1)[-1], "digest": digests.get(ref)} for ref in m.sources]}
        for m in wanted]
    return {"dry_run": dry_run, "tags": tags, "missing": list(missing), "retries": retries}


def matrix(settings: Settings) -> int:
    """``bake-plan matrix``: CI jobs, one per stage and arch, in dependency waves: the
    ``{"include": [...]}`` of ``strategy.matrix`` (``github``, ``json``), or a whole GitHub Actions
    workflow (``github-workflow``, :mod:`bake.plan.workflow`) written to ``-o`` (default stdout),
    or with ``--check`` compared with it.

    :returns: 0; 1 when ``--check`` finds the file stale or missing (:class:`bake.errors.StaleFile`).
    """
    from bake.plan.matrix import jobs

    if settings.format == "github-workflow":
        _at_the_repository_root()
    entries = jobs(compose(settings))
    rewrite = "the same command without --check"
    if settings.format == "github-workflow":
        text, rewrite = _workflow(settings, entries)
    else:
        if settings.wave is not None:
            waves = sorted({e["wave"] for e in entries})
            if settings.wave not in waves:  # an empty matrix fails the GitHub job that reads it
                from bake.errors import UsageError

                have = f"waves {waves[0]}–{waves[-1]}" if len(waves) > 1 else f"only wave {waves[0]}"
                raise UsageError(f"--wave {settings.wave}: the plan has {have}")
            entries = [e for e in entries if e["wave"] == settings.wave]
        out = {"include": entries}
        text = (json.dumps(out, separators=(",", ":")) if settings.format == "github" else json.dumps(out, indent=2)) + "\n"
    if settings.check:
        _check_file(settings.output, text, rewrite)
        return 0
    output = settings.output or "-"
    if settings.format == "github-workflow" and output != "-":
        check_replaceable(output, force=settings.force)  # before making its directory
        Path(output).parent.mkdir(parents=True, exist_ok=True)  # .github/workflows in a new repository
    write_output(output, text, what="the workflow" if settings.format == "github-workflow" else "the matrix",
                 force=settings.force)
    if output != "-":
        print(f"bake-plan: wrote {len(entries)} build jobs to {output}", file=sys.stderr)
    return 0


def _at_the_repository_root() -> None:
    """The workflow's ``-o`` and its ``--check`` step are relative to the repository's root, where
    GitHub runs the steps: written from a subdirectory of a git repository, it would check a file
    that is not there.

    :raises UsageError: the current directory is inside a git work tree but not at its top.
    """
    from bake.errors import UsageError

    here = Path.cwd()
    if (here / ".git").exists():
        return
    for parent in here.parents:
        if (parent / ".git").exists():
            raise UsageError(f"--format github-workflow: run it from the repository's root ({parent}): "
                             "the workflow's steps run there, and its -o FILE is relative to it")


def _workflow(settings: Settings, entries) -> tuple:
    """The workflow text of ``settings``' selection and the command that writes it: the command
    names every target, platform and ``--not-secret``, so its ``--check`` reads the same family."""
    import shlex

    from bake.plan.workflow import render_workflow

    selection = [w for t in settings.targets for w in ("--target", t)]
    if settings.provenance["platforms"].source != "default":
        selection += [w for p in settings.platforms for w in ("--platform", p)]
    selection += [w for n in sorted(settings.not_secret) for w in ("--not-secret", n)]
    regenerate = ["bake-plan", "matrix", *selection, "--format", "github-workflow", "-o", settings.output]
    from bake.version import install_requirement

    install = settings["install"] or install_requirement()
    return render_workflow(entries, regenerate, selection, install=install), shlex.join(regenerate)


def _check_file(path: str, text: str, rewrite: str) -> None:
    """``--check``: ``path`` holds exactly ``text``, else :class:`bake.errors.StaleFile` saying
    where it first differs and the command (``rewrite``) that writes it."""
    from bake.errors import StaleFile

    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block the read
        raise StaleFile(f"--check: {path} is not a regular file")
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            have = handle.read()
    except FileNotFoundError:
        have = None
    except (OSError, UnicodeDecodeError) as err:
        raise StaleFile(f"--check: cannot read {path}: {getattr(err, 'strerror', None) or err}") from None
    if have == text:
        return
    if have is None:
        raise StaleFile(f"{path} does not exist: write it with: {rewrite}")
    raise StaleFile(f"{path} is stale (line {_first_difference(have, text)} differs; the family or bake-plan "
                    f"changed since it was written): write it again with: {rewrite}")


def _first_difference(have: str, want: str) -> int:
    """The 1-based number of the first line that differs."""
    old, new = have.splitlines(), want.splitlines()
    for number, (a, b) in enumerate(zip(old, new), 1):
        if a != b:
            return number
    return min(len(old), len(new)) + 1


def lock(settings: Settings) -> int:
    """``bake-plan lock``: compile each requested stage's chain of requirement lines on the host
    and write the locks, all or none. :returns: 0; a conflict raises :class:`bake.errors.LockConflict`."""
    from bake.pip.lock import foreign_platforms, lock_specs, python_version, resolve_all, write_locks
    from bake.pip.sources import prepare_checkouts

    if settings.python is not None:  # a --python that is no interpreter is said before any checkout
        python_version(settings.python)
    composition = compose(settings)
    if settings.in_image:
        return _lock_in_image(settings, composition)
    # git-clone sources' -e file:///opt/<src> lines resolve from host checkouts (host_paths).
    for made in prepare_checkouts(composition.chain):
        print(f"bake-plan: checked out {made}", file=_informing(settings, sys.stderr))
    # --python: the stages' markers are evaluated for that interpreter, as uv evaluates the rest
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name, settings.python)]
    for spec in specs:
        print(f"bake-plan: locking {spec.describe()}: {counted(len(spec.lines), 'requirement line')} "
              f"from {counted(len({line.stage for line in spec.lines}), 'stage')}", file=_informing(settings, sys.stderr))
        foreign = foreign_platforms(spec, settings.python)
        if foreign:
            machine = os.uname().machine
            print(f"bake-plan: note: the lock for {', '.join(foreign)} is resolved with the markers and wheel tags of "
                  f"{settings.python or sys.executable} ({machine}), so its dependencies are {machine}'s; declare the "
                  "chain's Python (the root stage's python=) to resolve for each platform",
                  file=_informing(settings, sys.stderr))
        for line in spec.skipped:
            print(f"bake-plan: note: skipped {line.text!r} of {line.who()}: in-image path {line.missing} "
                  "has no host path (declare it in the stage's host_paths); the lock leaves it out",
                  file=sys.stderr)
    _note_build_time_lines(settings, composition)
    results = resolve_all(specs, settings.pip_args, python=settings.python)  # uv runs side by side
    # Every lock compiled before any is written: a conflict in the second leaves the first as it was.
    for path, (spec, text) in zip(write_locks(results, Path(settings.locks_dir)), results):
        pins = sum(1 for row in text.splitlines() if row and not row[0].isspace() and not row.startswith(("#", "--")))
        print(f"bake-plan: wrote {path}: {counted(pins, 'pinned requirement')} for {spec.describe()}")
        if not spec.lines:
            print(f"bake-plan: note: the stages of '{spec.target}' declare no requirement lines; "
                  "lines their Dockerfiles write at build time are not seen on the host "
                  "(`bake-plan lock --in-image` locks them)", file=sys.stderr)
    return 0


def _note_build_time_lines(settings: Settings, composition: Composition) -> None:
    """A note for each stage of a requested chain whose Dockerfile writes requirement lines at build
    time (a wheel built in the image): a host lock cannot cover them, ``lock --in-image`` can."""
    from bake.pip.image_lock import build_time_lines
    from bake.pip.lock import lock_chain
    from bake.plan.text import clipped

    for name in composition.requested:
        for stage in lock_chain(composition, name):
            step = build_time_lines(stage)
            if step:
                print(f"bake-plan: note: stage '{stage.name}' (plugin '{stage.plugin}') writes requirement lines at "
                      f"build time ({clipped(step, 80)}), which this lock cannot see; `build --locked` needs "
                      f"the lock made in the image: bake-plan lock --in-image --target {name}",
                      file=_informing(settings, sys.stderr))


def _lock_in_image(settings: Settings, composition: Composition) -> int:
    """``bake-plan lock --in-image``: build each requested stage's meal kit chain and run its final
    stage's compile in it (:mod:`bake.run.image_lock`), then write the locks with the host lock's
    header (:mod:`bake.pip.image_lock`), all or none. :returns: 0.

    :raises bake.errors.LockError: a compile failed in an image (its error line, the failed steps).
    :raises bake.run.engine.EngineError: no engine or buildx to build with.
    """
    from bake.pip.image_lock import lock_texts
    from bake.pip.lock import lock_specs, write_locks
    from bake.run.engine import EngineProbe, require_buildx_plugin, show_commands
    from bake.run.image_lock import check_builder, compile_in_images

    show_commands(_tracing(settings))
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name)]
    wanted: dict = {}  # stage → its platforms (a lock per arch is one spec per platform)
    for spec in specs:
        wanted[spec.target] = list(dict.fromkeys([*wanted.get(spec.target, ()), *spec.platforms]))
    probe = EngineProbe()
    try:
        probe.answered()
        buildx = probe.buildx()
        if buildx is None:
            require_buildx_plugin()
    finally:
        probe.close()
    check_builder(settings.builder)  # as build checks it: one line, exit 2, nothing built
    informing = _informing(settings, sys.stderr)
    for name, platforms in wanted.items():
        print(f"bake-plan: locking '{name}' in its image ({', '.join(platforms)}): building its meal kits and "
              "running its final stage's pip-compile", file=informing)
    compiled = compile_in_images(composition.plan, wanted, builder=settings.builder,
                                 console=lambda line: informing.write(line), buildx=buildx)
    results = lock_texts(specs, {stage: {p: (c.body, c.python) for p, c in by.items()}
                                 for stage, by in compiled.items()})
    for path, (spec, text) in zip(write_locks(results, Path(settings.locks_dir)), results):
        pins = sum(1 for row in text.splitlines() if row and not row[0].isspace() and not row.startswith(("#", "-")))
        print(f"bake-plan: wrote {path}: {counted(pins, 'pinned requirement')} for {spec.describe()}, "
              "compiled in the image")
    return 0


def wheelhouse(settings: Settings) -> int:
    """``bake-plan wheelhouse``: download every wheel the requested stages' chains need (the lock
    when there is one, else the requirement lines; pip and pip-tools) for ``--python-version`` and
    each platform, into ``-o DIR`` (default the configured wheelhouse, else ``./wheelhouse``).
    :returns: 0; pip's failure raises :class:`bake.errors.LockError` (exit 1)."""
    from pathlib import Path

    from bake.pip.lock import lock_specs
    from bake.pip.wheelhouse import default_tools_cache, fill
    from bake.plan.render import shell_word

    composition = compose(settings)
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name)]
    out = Path(settings.output or settings.wheelhouse or "wheelhouse").absolute()
    with no_empty_directory_left(out):
        counts = fill(specs, out, settings.python_version, locks_dir=Path(settings.locks_dir), pip_args=settings.pip_args,
                      report=lambda msg: print(f"bake-plan: {msg}", file=_informing(settings, sys.stderr)),
                      tools_cache=default_tools_cache())
    print(f"bake-plan: wheelhouse {out}: {counted(counts['added'], 'wheel')} added, {counts['kept']} unchanged, "
          f"{counts['built']} built from sdists; build with --wheelhouse {shell_word(str(out))}")
    return 0


def bump(settings: Settings) -> int:
    """``bake-plan bump``: move each named source (default: all) to the head of its tracking ref."""
    from bake.pip.sources import bump as bump_sources
    from bake.pip.sources import manifest_path

    results = bump_sources(settings.names)
    for result in results:
        change = f"{result.old[:12]} -> {result.new[:12]}" if result.moved else f"{result.new[:12]} (unchanged)"
        print(f"bake-plan: {result.key}: {change} ({result.tracking_ref})")
    moved = sum(1 for r in results if r.moved)
    print(f"bake-plan: {moved} of {len(results)} sources moved" + (f"; rewrote {manifest_path()}" if moved else ""))
    return 0


def stages(settings: Settings) -> int:
    """``bake-plan stages``: every stage with its plugin, parent and platforms; ``--format json``:
    a JSON list, one object per stage (``name``, ``plugin``, ``kind``, ``image`` (registry/repository:
    the configured registry, else the stage's own, else the repository alone; ``null`` for a stage
    without an image), ``parent``, ``base_image``, ``platforms``, ``python``,
    ``variant``, ``variant_of``, ``targets``: its bake targets), sorted by name."""
    from bake.api import collect_stages
    from bake.plan.compose import repository, target_names
    from bake.plan.plugins import Hooks

    found = sorted(collect_stages(Hooks(get_plugin_manager(blocked=settings.blocked_plugins)), settings.stages).values(),
                   key=lambda s: s.name)
    if settings.format == "json":
        listing = [{"name": s.name, "plugin": s.plugin, "kind": s.kind,
                    "image": repository(s, settings.registry) if s.image else None, "parent": s.parent,
                    "base_image": s.base_image, "platforms": list(s.platforms), "python": s.python,
                    "variant": s.variant, "variant_of": s.variant_of,
                    "targets": [name for name, _ in target_names(s)]} for s in found]
        write_atomic("-", json.dumps(listing, indent=2) + "\n", what="the stage list")
        return 0
    rows = [("STAGE", "PLUGIN", "PARENT", "PLATFORMS")]
    for stage in found:
        parent = stage.parent or (f"image {stage.base_image}" if stage.base_image else "-")
        rows.append((stage.name, stage.plugin, parent, ",".join(stage.platforms)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    write_atomic("-", "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3] + "\n"
                              for row in rows), what="the stage list")
    return 0


def lint(settings: Settings) -> int:
    """``bake-plan lint``: every stage's Dockerfile of the targets' chains through BuildKit's
    checks and hadolint (:mod:`bake.run.lint`), one line per finding on stdout.

    :returns: 0 no finding, 1 findings; :class:`bake.errors.LintError` when a linter cannot run."""
    from bake.run.engine import show_commands

    show_commands(_tracing(settings))
    return 1 if _lint_findings(compose(settings)) else 0


def _lint_findings(composition) -> int:
    """Lint ``composition``'s chain, print each finding (stdout) and a summary (stderr).
    :returns: how many findings."""
    from bake.plan.text import printable
    from bake.run.engine import run_docker
    from bake.run.lint import inputs, lint as run_lint

    items, notes = inputs(composition)
    for note in notes:
        print(f"bake-plan: note: {note}", file=sys.stderr)
    findings, ignored = run_lint(items, run_docker)
    for finding in findings:
        print(printable(str(finding)))
    dropped = f" ({counted(ignored, 'finding')} ignored by lint_ignore)" if ignored else ""
    stages = counted(len(items), "Dockerfile")
    if findings:
        print(f"bake-plan: lint: {counted(len(findings), 'finding')} in {stages}{dropped}", file=sys.stderr)
    else:
        print(f"bake-plan: lint: {stages}, no findings{dropped}", file=sys.stderr)
    return len(findings)


def graph(settings: Settings) -> int:
    """``bake-plan graph``: the stage DAG of the targets as Mermaid, Markdown or Graphviz dot."""
    from bake.plan.graph import render_graph

    write_output(settings.output or "-", render_graph(compose(settings), settings.format), what="the graph",
                 force=settings.force)
    return 0


def diff(settings: Settings) -> int:
    """``bake-plan diff``: per target and arch of the plan, whether its input digest changed since
    ``--from`` (a plan or record file, or a nightly's DATE, whose records are read from the
    registry), the Python distributions added, removed, upgraded and downgraded, and the source
    commits that moved; as text, JSON or a Markdown table.

    :raises bake.errors.UsageError: a side that is neither a readable file nor a date, or a date
        with no records of these targets.
    """
    from bake.plan import records

    plan = compose(settings).plan
    before = _diff_side(settings, settings.diff_from, "--from", plan)
    after = _diff_side(settings, settings.diff_to, "--to", plan)
    entries = records.diff(before, after)
    if settings.format == "json":
        text = records.diff_json(entries)
    elif settings.format == "markdown":
        from bake.run.record import diff_markdown

        text = diff_markdown(entries)
    else:
        text = records.diff_text(entries)
    write_atomic("-", text, what="the diff")
    return 0


def record(settings: Settings) -> int:
    """``bake-plan record``: push the nightly record of each target each ``--sitrep`` names as
    pushed, one per platform, beside its image (:func:`bake.run.record.write_records`); one line
    per record pushed, and per target left without one, why.

    :returns: 0 (1 when no sitrep named a pushed target).
    :raises bake.errors.UsageError: a sitrep that is missing or not JSON.
    :raises bake.run.engine.RegistryError: the registry refused a record or did not answer.
    """
    from bake.settings.sitreps import read_sitreps

    plan = compose(settings).plan
    # the SBOMs are made and their files checked before any record is pushed: a bad --sbom stops first
    documents = read_sitreps(settings.sitreps).documents  # read once, for the SBOMs and the records
    sboms = _sboms(settings, plan, documents, settings.sbom_dir) if settings.sbom_dir is not None else []
    pushed = _record_sitreps(settings, plan, documents, dry_run=settings.dry_run)
    for out, text in sboms:
        write_atomic(str(out), text, what="the SBOM")
        print(f"wrote {out}", flush=True)
    return 0 if pushed else 1


def _sboms(settings: Settings, plan: dict, documents: list, directory: Path) -> list:
    """``record --sbom DIR``: each record ``documents`` (the sitreps) give for a pushed image, as a CycloneDX SBOM
    (:func:`bake.plan.sbom.sbom_json`) for ``DIR/<target>-<date>-<arch>.cdx.json``, made before
    anything is written. A record that would not be pushed (not passed, no valid digest, a field
    :func:`bake.plan.records.record_fault` refuses) gets none.

    :returns: ``[(path, text)]``.
    :raises bake.errors.UsageError: a sitrep that is missing or not JSON.
    :raises OutputError: ``DIR`` cannot be made, or a file's place is a symbolic link or not a
        regular file (nothing is written through it).
    """
    from bake.plan import records
    from bake.plan.sbom import sbom_json

    out = []
    for data in documents:
        for rec in records.make_records(plan, data, settings.date):
            if not (rec["repository"] and rec["outcome"] == "pass" and isinstance(rec["image_digest"], str)) \
                    or records.record_fault(rec):
                continue  # no record is pushed for it either
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise OutputError(f"--sbom {directory}: {err.strerror or err}") from None
            path = directory / f"{rec['target']}-{settings.date.isoformat()}-{rec['arch']}.cdx.json"
            if path.is_symlink() or (path.exists() and not path.is_file()):
                raise OutputError(f"--sbom {path}: a symbolic link or not a regular file: bake-plan writes no SBOM "
                                  "through it")
            out.append((path, sbom_json(rec)))
    return out


def _record_sitreps(settings: Settings, plan: dict, documents: list, only=None, create=None, dry_run: bool = False,
                    stream: Optional[TextIO] = None) -> int:
    """Push the records of the targets each of ``documents`` (sitreps as :func:`bake.settings.sitreps.read_sitreps`
    read them) names as pushed
    (:func:`bake.run.record.write_records`), ``only`` those targets when given; a line per record
    (``recorded REF`` on ``stream``) and per target left without one (on stderr).

    :returns: how many records were pushed (or would be, under ``dry_run``).
    :raises bake.errors.UsageError: a sitrep that is missing or not JSON.
    :raises bake.run.engine.RegistryError: the registry refused a record or did not answer.
    """
    from bake.run.record import write_records

    pushed = 0

    def said(ref: str, verb: str) -> None:
        print(f"{verb} {ref}", file=stream or sys.stdout, flush=True)

    for data in documents:  # each record said once pushed: a registry failing part-way leaves those lines
        for ref, why in write_records(plan, data, settings.date, create=create, dry_run=dry_run, only=only,
                                      on_pushed=lambda ref: said(ref, "recorded")):
            if why is None:
                pushed += 1
                if dry_run:
                    said(ref, "would push")
            else:
                print(f"bake-plan: no record of {ref}: {why}", file=sys.stderr)
    return pushed


def _diff_side(settings: Settings, spec: str, option: str, plan: dict) -> list:
    """The records of one side of ``diff``: ``plan`` (this plan's), a DATE (the nightly's records in
    the registry), or a file (a plan or records)."""
    import datetime
    import re

    from bake.errors import UsageError
    from bake.plan import records

    if spec == "plan":
        return records.plan_records(plan, settings.date)
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec) and not os.path.exists(spec):
        try:
            date = datetime.date.fromisoformat(spec)
        except ValueError:
            raise UsageError(f"{option} {spec!r} is not a date in the form YYYY-MM-DD") from None
        from bake.run.record import read_records

        found = read_records(plan, date)
        if not found:
            raise UsageError(f"{option} {spec}: the registry holds no nightly record of that date for these targets "
                             f"(record-<target>-{spec}-<arch> tags)")
        return found
    from bake.documents import DocumentError, read_text

    try:  # the one reader: a regular file, at most 64 MiB
        text = read_text(spec)
    except OSError as err:
        raise UsageError(f"{option} {spec}: {err.strerror or err}") from None
    except DocumentError as err:
        raise UsageError(f"{option} {spec}: {err}") from None
    return records.parse_records(text, f"{option} {spec}")


def config(settings: Settings) -> int:
    """``bake-plan config``: the merged configuration and where each value came from, once the
    installed plugins' stages have taken it as ``stages`` takes it (an override of no stage, a
    plugin to disable that is not installed: one line, exit 2, as every other command says)."""
    from bake.api import collect_stages
    from bake.plan.plugins import Hooks
    from bake.settings.show import to_json, to_toml

    collect_stages(Hooks(get_plugin_manager(blocked=settings.blocked_plugins)), settings.stages)
    if settings.targets:  # the configured targets' plan, checked as `plan` checks it (nothing written)
        compose(settings)
    write_atomic("-", to_json(settings) if settings.format == "json" else to_toml(settings), what="the configuration")
    return 0
