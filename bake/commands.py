"""One function per ``bake-plan`` command: checked :class:`~bake.settings.merge.Settings` in, what
the user sees printed, an exit status out (``docs/errors.md``).

Each command is a straight line down the pipeline: settings → plan (:mod:`bake.api`) → file
(:mod:`bake.output`) → buildx (:mod:`bake.run`) → sitrep; or settings → lock (:mod:`bake.pip`).
Heavier modules (python-on-whales, pip-tools) are imported inside the commands that need them,
so planning never pays for them.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from bake.api import FORMATS as DEFAULT_FILES
from bake.api import make_plan, render
from bake.output import write_atomic
from bake.plan.compose import Composition
from bake.plan.plugins import get_plugin_manager
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
    composition = make_plan(options, pm, settings.stages, locks_dir=settings.locks_dir if settings.locked else None,
                            targets_from=settings.where("targets"))
    if settings.metadata_bake_files:
        from bake.plan.metadata import inherit, read_bake_files

        inherit(composition, read_bake_files(settings.metadata_bake_files), settings.metadata_targets, arch=options.arch)
    return composition


def write_plan(settings: Settings, composition: Composition, summary_to: TextIO) -> str:
    """Write the plan file (``-o``, default ``docker-bake.hcl``/``.json``; ``-`` is stdout) and a
    summary of its targets to ``summary_to``. :returns: where the plan went."""
    output = settings.output or DEFAULT_FILES[settings.format]
    filename = os.path.basename(output) if output != "-" else DEFAULT_FILES[settings.format]
    write_atomic(output, render(composition, settings.format, filename=filename))
    plan = composition.plan
    built = plan["group"]["default"]["targets"]
    where = "stdout" if output == "-" else output
    print(f"bake-plan: wrote {len(built)} targets for {', '.join(composition.requested)} to {where}", file=summary_to)
    for name in built:
        target = plan["target"][name]
        tags = ", ".join(t.rsplit("/", 1)[-1] for t in target.get("tags", []))
        if not tags:
            tags = f"(tags from {', '.join(target['inherits'])})" if target.get("inherits") else "(not tagged)"
        print(f"  {name:<28} {','.join(target['platforms']):<24} {tags}", file=summary_to)
    if composition.bake_files:
        files = [output if output != "-" else DEFAULT_FILES[settings.format], *composition.bake_files]
        print(f"  build with: docker buildx bake {' '.join('-f ' + f for f in files)}", file=summary_to)
    return output


def plan(settings: Settings) -> int:
    """``bake-plan [plan]``: write the plan; the summary goes to stderr when the plan is on stdout
    (nowhere under ``-q``)."""
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
    from bake.run.engine import buildx_version, command_line

    composition = compose(settings)
    metadata_file = settings.metadata_file or settings.sitrep_dir / "bake-metadata.json"
    if settings.dry_run:
        plan_file = write_plan(settings, composition, _informing(settings, sys.stderr))
        argv = bake_argv(composition, Path(plan_file), metadata_file, push=settings.push, load=settings.load,
                         pull=settings.pull, builder=settings.builder, progress=settings.progress,
                         buildx=buildx_version())
        metadata_file.parent.mkdir(parents=True, exist_ok=True)  # where buildx writes it: the command runs as printed
        print(command_line(argv))
        return 0
    reports = Reports.from_environment(settings.sitrep_dir, metadata_file)
    reports.prepare(Path(settings.output or DEFAULT_FILES[settings.format]))
    plan_file = write_plan(settings, composition, _informing(settings, sys.stdout))
    sitrep = run_build(composition, Path(plan_file), reports, push=settings.push, pull=settings.pull, load=settings.load,
                       builder=settings.builder, known_secrets=[v for v in (s.value() for s in settings.secrets) if v],
                       progress=settings.progress, trace=_tracing(settings))
    print(f"bake-plan: {sitrep['summary']}", file=sys.stdout if sitrep["outcome"] == "pass" else sys.stderr)
    if sitrep.get("interrupted"):
        return 130
    return 0 if sitrep["outcome"] == "pass" else 1


def publish(settings: Settings) -> int:
    """``bake-plan publish``: the multi-arch tags, made from the per-arch ones only when every arch
    is there. :returns: 0 published, 1 an arch is missing (no tag was created)."""
    from bake.run import engine
    from bake.run.publish import manifests, missing_sources
    from bake.run.publish import publish as publish_all

    wanted = manifests(compose(settings, per_arch=False))
    trace = _tracing(settings)

    def report(manifest) -> None:
        print(f"published {manifest.tag} <- {', '.join(s.rsplit(':', 1)[-1] for s in manifest.sources)}", flush=True)

    def exists(ref: str) -> bool:
        if trace:
            trace(engine.command_line(engine.imagetools_inspect_command(ref)))
        return engine.image_exists(ref)

    def create(tag: str, sources) -> None:
        if trace:
            trace(engine.command_line(engine.imagetools_create_command(tag, sources)))
        engine.create_manifest(tag, sources)

    if settings.dry_run:  # check, list with the command that would make each, create nothing
        missing = missing_sources(wanted, exists)
        for manifest in ([] if missing else wanted):
            print(f"would publish {manifest.tag} <- "
                  f"{', '.join(s.rsplit(':', 1)[-1] for s in manifest.sources)}\n"
                  f"  {engine.command_line(engine.imagetools_create_command(manifest.tag, manifest.sources))}",
                  flush=True)
    else:
        missing = publish_all(wanted, exists, create, on_created=report)
    if missing:
        print(f"bake-plan: error: not publishing: {len(missing)} per-arch image(s) missing; no tag was created:",
              file=sys.stderr)
        for ref in missing:
            print(f"  missing {ref}", file=sys.stderr)
        return 1
    return 0


def matrix(settings: Settings) -> int:
    """``bake-plan matrix``: CI jobs, one per stage and arch, in dependency waves."""
    from bake.plan.matrix import jobs

    entries = jobs(compose(settings))
    if settings.wave is not None:
        waves = sorted({e["wave"] for e in entries})
        if settings.wave not in waves:  # an empty matrix fails the GitHub job that reads it
            from bake.errors import UsageError

            have = f"waves {waves[0]}–{waves[-1]}" if len(waves) > 1 else f"only wave {waves[0]}"
            raise UsageError(f"--wave {settings.wave}: the plan has {have}")
        entries = [e for e in entries if e["wave"] == settings.wave]
    out = {"include": entries}
    text = json.dumps(out, separators=(",", ":")) if settings.format == "github" else json.dumps(out, indent=2)
    write_atomic("-", text + "\n", what="the matrix")
    return 0


def lock(settings: Settings) -> int:
    """``bake-plan lock``: compile each requested stage's chain of requirement lines on the host
    and write the locks, all or none. :returns: 0; a conflict raises :class:`bake.errors.LockConflict`."""
    from bake.pip.lock import lock_specs, python_version, resolve, write_locks
    from bake.pip.sources import prepare_checkouts

    if settings.python is not None:  # a --python that is no interpreter is said before any checkout
        python_version(settings.python)
    composition = compose(settings)
    # git-clone sources' -e file:///opt/<src> lines resolve from host checkouts (host_paths).
    for made in prepare_checkouts(composition.chain):
        print(f"bake-plan: checked out {made}", file=_informing(settings, sys.stderr))
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name)]
    results = []
    for spec in specs:
        print(f"bake-plan: locking {spec.describe()}: {len(spec.lines)} requirement lines "
              f"from {len({line.stage for line in spec.lines})} stages", file=_informing(settings, sys.stderr))
        for line in spec.skipped:
            print(f"bake-plan: note: skipped {line.text!r} of {line.who()}: in-image path {line.missing} "
                  "has no host path (declare it in the stage's host_paths); the lock leaves it out",
                  file=sys.stderr)
        results.extend(resolve(spec, settings.pip_args, python=settings.python))
    # Every lock compiled before any is written: a conflict in the second leaves the first as it was.
    for path, (spec, text) in zip(write_locks(results, Path(settings.locks_dir)), results):
        pins = sum(1 for row in text.splitlines() if row and not row[0].isspace() and not row.startswith(("#", "--")))
        print(f"bake-plan: wrote {path}: {pins} pinned requirements for {spec.describe()}")
        if not spec.lines:
            print(f"bake-plan: note: the stages of '{spec.target}' declare no requirement lines; "
                  "lines their Dockerfiles write at build time are not seen on the host", file=sys.stderr)
    return 0


def wheelhouse(settings: Settings) -> int:
    """``bake-plan wheelhouse``: download every wheel the requested stages' chains need (the lock
    when there is one, else the requirement lines; pip and pip-tools) for ``--python-version`` and
    each platform, into ``-o DIR`` (default the configured wheelhouse, else ``./wheelhouse``).
    :returns: 0; pip's failure raises :class:`bake.errors.LockError` (exit 1)."""
    from pathlib import Path

    from bake.pip.lock import lock_specs
    from bake.pip.wheelhouse import fill

    composition = compose(settings)
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name)]
    out = Path(settings.output or settings.wheelhouse or "wheelhouse").absolute()
    counts = fill(specs, out, settings.python_version, locks_dir=Path(settings.locks_dir),
                  pip_args=settings.pip_args, report=lambda msg: print(f"bake-plan: {msg}", file=_informing(settings, sys.stderr)))
    print(f"bake-plan: wheelhouse {out}: {counts['added']} wheels added, {counts['kept']} unchanged, "
          f"{counts['built']} built from sdists; build with --wheelhouse {out}")
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
    """``bake-plan stages``: every stage with its plugin, parent and platforms."""
    from bake.api import collect_stages
    from bake.plan.plugins import Hooks

    found = collect_stages(Hooks(get_plugin_manager(blocked=settings.blocked_plugins)), settings.stages)
    rows = [("STAGE", "PLUGIN", "PARENT", "PLATFORMS")]
    for stage in sorted(found.values(), key=lambda s: s.name):
        parent = stage.parent or (f"image {stage.base_image}" if stage.base_image else "-")
        rows.append((stage.name, stage.plugin, parent, ",".join(stage.platforms)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    write_atomic("-", "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3] + "\n"
                              for row in rows), what="the stage list")
    return 0


def graph(settings: Settings) -> int:
    """``bake-plan graph``: the stage DAG of the targets as Mermaid, Markdown or Graphviz dot."""
    from bake.plan.graph import render_graph

    write_atomic(settings.output or "-", render_graph(compose(settings), settings.format), what="the graph")
    return 0


def config(settings: Settings) -> int:
    """``bake-plan config``: the merged configuration and where each value came from."""
    from bake.settings.show import to_json, to_toml

    write_atomic("-", to_json(settings) if settings.format == "json" else to_toml(settings), what="the configuration")
    return 0
