"""The command line: ``bake-plan [plan] --target T…``, ``build``, ``publish``, ``matrix``, ``lock``,
``bump``, ``stages``, ``graph``, ``config``. Values come from the flags, then the configuration
file (:mod:`bake.settings.config_file`).

The core raises :class:`bake.errors.BakePlanError`; only this module prints and picks exit
statuses (``docs/errors.md``): 0 success; 1 the work started and failed (a build, a push, a
publish: the sitrep or the output says what, and a rerun finishes it) or requirements that
conflict; 2 bad input or no engine to run on (one line on stderr, no traceback, no file written).
Error lines never show a credential: they go through :func:`bake.plan.secrets.redact`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from bake.version import __version__
from bake.errors import BakePlanError, UsageError
from bake.plan.names import check_reference

COMMANDS = ("plan", "build", "publish", "matrix", "lock", "bump", "stages", "graph", "config")
DEFAULT_LOCKS_DIR = "locks"
FORMATS = ("hcl", "json")
GRAPH_FORMATS = ("mermaid", "markdown", "dot")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise UsageError(f"{command}: {message}" if command else message)


def _config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="configuration file (default: bake-plan.toml, or pyproject.toml with "
                             "[tool.bake-plan], in this directory or the nearest parent)")


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that beat the configuration file's keys of the same meaning (bake.settings.config_file)."""
    _selection_arguments(parser)
    parser.add_argument("--registry", help="registry/namespace for every image, e.g. localhost:5555/ci")
    parser.add_argument("--date", help="YYYY-MM-DD for nightly tags, or today, source-date-epoch, auto "
                                       "(default auto: SOURCE_DATE_EPOCH, else today in UTC)")
    parser.add_argument("--base-image", action="append", default=[], metavar="ORIGINAL=REPLACEMENT",
                        help="build FROM REPLACEMENT wherever a Dockerfile says FROM ORIGINAL (repeatable)")
    parser.add_argument("--cache-from-branch", metavar="BRANCH",
                        help="also read the cache refs of this branch (e.g. the default branch)")


def _plan_arguments() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    _settings_arguments(common)
    common.add_argument("--cache-branch", metavar="BRANCH",
                        help="write cache refs for this branch (<key>-<branch>) instead of the shared key")
    common.add_argument("--from-registry", action="store_true",
                        help="per-job mode: take published ancestors from the registry, pinned by digest")
    common.add_argument("--parent-report", action="append", default=[], metavar="FILE",
                        help="sitrep.json or buildx metadata file of a job that pushed an ancestor (repeatable)")
    common.add_argument("--metadata-bake-file", action="append", default=[], metavar="FILE",
                        help="bake file written by docker/metadata-action (repeatable): chosen targets "
                             "inherit its tags, labels, annotations and args")
    common.add_argument("--metadata-targets", action="append", metavar="T",
                        help="stages or bake targets that inherit the metadata-action target "
                             "(repeatable; default: the requested stages' final targets)")
    common.add_argument("--secret", action="append", default=[], metavar="id=NAME,env=VAR|id=NAME,src=FILE",
                        help="a build secret every target may mount with RUN --mount=type=secret,id=NAME "
                             "(repeatable); the plan holds only the variable's name or the file's path")
    common.add_argument("--format", choices=FORMATS, default="hcl", help="plan file format (default hcl)")
    common.add_argument("-o", "--output", help="plan file to write, or - for stdout "
                                               "(default docker-bake.hcl / docker-bake.json)")
    common.add_argument("--locked", action="store_true",
                        help="the final stage of each --target installs exactly its lock from the locks "
                             "directory (made by `bake-plan lock`) instead of compiling")
    _locks_dir_argument(common)
    _sources_argument(common)
    return common


def _selection_arguments(parser: argparse.ArgumentParser) -> None:
    _config_argument(parser)
    parser.add_argument("--target", "-t", action="append", metavar="T",
                        help="stage or bake target (repeatable); its ancestors come along. "
                             "Default: the configuration's targets")
    parser.add_argument("--platform", action="append", default=[], metavar="P",
                        help="os/arch, e.g. linux/arm64 (repeatable; a comma list works too). "
                             "Default: every platform each stage supports. Exactly one makes a per-arch plan")
    parser.add_argument("--not-secret", action="append", default=[], metavar="NAME",
                        help="an arg or label NAME that looks like a credential but is not one (repeatable)")


def _locks_dir_argument(parser) -> None:
    parser.add_argument("--locks-dir", default=DEFAULT_LOCKS_DIR, metavar="DIR",
                        help=f"where locks are (default ./{DEFAULT_LOCKS_DIR})")


def _sources_argument(parser) -> None:
    parser.add_argument("--sources", metavar="FILE",
                        help="the sources manifest (default $BAKE_PLAN_SOURCES, else the shipped stages/sources.toml)")


def _lock_arguments() -> argparse.ArgumentParser:
    lock = _Parser(add_help=False)
    _config_argument(lock)
    lock.add_argument("--target", "-t", action="append", metavar="T",
                      help="stage to lock (repeatable): its own and its parents' requirement lines. "
                           "Default: the configuration's targets")
    lock.add_argument("--platform", action="append", default=[], metavar="P",
                      help="os/arch to lock for (repeatable); default: every platform the stage builds for")
    _locks_dir_argument(lock)
    _sources_argument(lock)
    lock.add_argument("--python", default=sys.executable, metavar="PYTHON",
                      help="interpreter that runs pip-tools; the lock is resolved for its Python version "
                           "(default: the one running bake-plan)")
    pip = lock.add_argument_group("passed to pip-compile")
    pip.add_argument("-i", "--index-url", metavar="URL")
    pip.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    pip.add_argument("-f", "--find-links", action="append", default=[], metavar="URL")
    pip.add_argument("--no-index", action="store_true")
    pip.add_argument("--trusted-host", action="append", default=[], metavar="HOST")
    return lock


def build_parser() -> argparse.ArgumentParser:
    """The ``bake-plan`` argument parser: its errors raise :class:`UsageError` (one line, exit 2)."""
    parser = _Parser(prog="bake-plan", description="Turn a family of container images into a Docker Buildx bake plan.")
    parser.add_argument("--version", action="version", version=f"bake-plan {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    common = _plan_arguments()

    sub.add_parser("plan", parents=[common], help="write the bake plan for targets and their ancestors (the default)")

    build = sub.add_parser("build", parents=[common],
                           help="write the plan, run docker buildx bake on it, and write a sitrep")
    build.add_argument("--push", action="store_true", help="push every image of the plan")
    build.add_argument("--load", action="store_true", help="load the images into the engine's image store")
    build.add_argument("--builder", help="buildx builder instance to use")
    build.add_argument("--metadata-file", help="where buildx writes per-target digests "
                                               "(default: bake-metadata.json in the sitrep directory)")
    build.add_argument("--sitrep-dir", default=".", help="directory for sitrep.json, badge.json, sitrep.md (default .)")

    publish = sub.add_parser("publish", help="merge per-arch images into multi-arch tags, only when every arch is there")
    _selection_arguments(publish)
    publish.add_argument("--registry", help="registry/namespace the per-arch images were pushed to")
    publish.add_argument("--date", help="YYYY-MM-DD of the nightly tags (default: SOURCE_DATE_EPOCH, else today in UTC)")

    matrix = sub.add_parser("matrix", help="print CI jobs (one per stage and arch) in dependency waves")
    _selection_arguments(matrix)
    matrix.add_argument("--format", choices=("github", "json"), default="github",
                        help="github: one line for $GITHUB_OUTPUT / strategy.matrix; json: indented")
    matrix.add_argument("--wave", type=int, metavar="N", help="only the jobs of wave N")
    sub.add_parser("lock", parents=[_lock_arguments()],
                   help="compile the chain's requirements on the host into <locks>/<target>.txt")
    bump = sub.add_parser("bump", help="move each source's commit to the head of its tracking ref")
    bump.add_argument("names", nargs="*", metavar="NAME", help="sources to bump (default: all)")
    _sources_argument(bump)

    stages = sub.add_parser("stages", help="list every stage: its plugin, parent and platforms")
    _config_argument(stages)

    graph = sub.add_parser("graph", help="draw the stage DAG of targets (Mermaid or Graphviz dot)")
    _settings_arguments(graph)
    graph.add_argument("--format", choices=GRAPH_FORMATS, default="mermaid",
                       help="mermaid (flowchart text), markdown (the same in a ```mermaid block, for "
                            "GitHub and $GITHUB_STEP_SUMMARY) or dot (Graphviz)")
    graph.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")

    config = sub.add_parser("config", help="print the merged configuration and where each value came from")
    _settings_arguments(config)
    config.add_argument("--metadata-targets", action="append", metavar="T",
                        help="stages or bake targets that inherit the metadata-action target")
    config.add_argument("--format", choices=("toml", "json"), default="toml", help="output format (default toml)")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; without a command, ``plan`` is meant. :raises UsageError: bad options."""
    argv = list(argv)
    # `bake-plan --target X` means `bake-plan plan --target X`.
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "plan")
    return build_parser().parse_args(argv)


def base_image_pairs(values: Sequence[str]) -> dict:
    """``ORIGINAL=REPLACEMENT`` values as ``{original: replacement}``. :raises UsageError: a malformed value."""
    pairs = {}
    for value in values:
        original, sep, replacement = value.partition("=")
        if not sep:
            raise UsageError(f"--base-image {value!r} is not ORIGINAL=REPLACEMENT (two image references)")
        for part in (original, replacement):
            try:
                check_reference(part)
            except ValueError as err:
                raise UsageError(f"--base-image {value!r}: {err}") from None
        if pairs.get(original, replacement) != replacement:
            raise UsageError(f"--base-image {original!r} is given twice, as {pairs[original]!r} and {replacement!r}")
        pairs[original] = replacement
    return pairs


def settings(args):
    """The configuration file (``--config`` or found from the current directory) merged with
    the flags given (:func:`bake.settings.config_file.resolve`)."""
    from bake.settings import config_file as config

    given = {
        "registry": getattr(args, "registry", None),
        "platforms": getattr(args, "platform", None) or None,
        "date": getattr(args, "date", None),
        "targets": getattr(args, "target", None),
        "base-images": base_image_pairs(getattr(args, "base_image", None) or []) or None,
        "cache-from-branch": getattr(args, "cache_from_branch", None),
        "metadata-targets": getattr(args, "metadata_targets", None),
    }
    flags = {key: value for key, value in given.items() if value is not None}
    return config.resolve(config.load(getattr(args, "config", None)), flags)


def secret_specs(values: Sequence[str]) -> tuple:
    """``--secret`` values as :class:`bake.plan.secrets.SecretSpec` (a relative ``src`` made absolute).

    :raises UsageError: a malformed value, a missing file, or one id given twice.
    """
    from bake.plan.secrets import parse_secret

    specs = []
    for value in values:
        try:
            spec = parse_secret(value)
        except ValueError as err:
            raise UsageError(f"--secret {value!r}: {err}") from None
        if any(s.id == spec.id for s in specs):
            raise UsageError(f"--secret: id '{spec.id}' is given twice")
        specs.append(spec)
    return tuple(specs)


def _compose(args, per_arch: bool = True):
    from bake.api import make_plan

    config = settings(args)
    digests = {}
    for report in getattr(args, "parent_report", []):
        digests.update(read_digests(report))
    options = config.plan_options(
        cache_branch=getattr(args, "cache_branch", None),
        from_registry=getattr(args, "from_registry", False),
        digests=digests,
        secrets=secret_specs(getattr(args, "secret", [])),
        not_secret=frozenset(getattr(args, "not_secret", [])),
        per_arch=per_arch,
    )
    locked = getattr(args, "locked", False)
    composition = make_plan(options, config.plugin_manager(), config.stages,
                            locks_dir=Path(args.locks_dir) if locked else None)
    if config.values["metadata-targets"].source == "--metadata-targets" and not args.metadata_bake_file:
        raise UsageError("--metadata-targets needs --metadata-bake-file (the file docker/metadata-action writes)")
    if getattr(args, "metadata_bake_file", None):
        from bake.plan.metadata import inherit, read_bake_files

        inherit(composition, read_bake_files(args.metadata_bake_file), config["metadata-targets"], arch=options.arch)
    return composition


def read_digests(path: str) -> dict:
    """Bake target → image digest from a sitrep.json (``targets.<name>.digest``) or a buildx
    metadata file (``<name>.containerimage.digest``).

    :raises UsageError: the file is unreadable or neither shape.
    """
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:
        raise UsageError(f"--parent-report {path}: {getattr(err, 'strerror', None) or err}") from None
    if isinstance(data, dict) and isinstance(data.get("targets"), dict):
        return {n: t["digest"] for n, t in data["targets"].items() if isinstance(t, dict) and t.get("digest")}
    if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()):
        return {n: t["containerimage.digest"] for n, t in data.items() if t.get("containerimage.digest")}
    raise UsageError(f"--parent-report {path}: neither a sitrep.json nor a buildx metadata file")


def _write_plan(args, composition, summary_to) -> str:
    from bake.api import FORMATS as DEFAULT_FILES, render
    from bake.output import write_atomic

    output = args.output or DEFAULT_FILES[args.format]
    filename = os.path.basename(output) if output != "-" else DEFAULT_FILES[args.format]
    write_atomic(output, render(composition, args.format, filename=filename))
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
        files = [output if output != "-" else DEFAULT_FILES[args.format], *composition.bake_files]
        print(f"  build with: docker buildx bake {' '.join('-f ' + f for f in files)}", file=summary_to)
    return output


def _cmd_plan(args) -> int:
    composition = _compose(args)
    _write_plan(args, composition, sys.stderr if args.output == "-" else sys.stdout)
    return 0


def _cmd_build(args) -> int:
    from bake.run.build import run_build

    if args.output == "-":
        raise UsageError("build needs a plan file: -o - is for `bake-plan plan`")
    for spec in secret_specs(args.secret):
        if spec.env and spec.env not in os.environ:
            raise UsageError(f"--secret id={spec.id},env={spec.env}: {spec.env} is not set, so the build "
                             "could not mount the secret")
    composition = _compose(args)
    plan_file = _write_plan(args, composition, sys.stdout)
    sitrep_dir = Path(args.sitrep_dir)
    metadata_file = Path(args.metadata_file) if args.metadata_file else sitrep_dir / "bake-metadata.json"
    sitrep = run_build(
        composition, Path(plan_file), sitrep_dir=sitrep_dir, metadata_file=metadata_file,
        push=args.push, load=args.load, builder=args.builder,
    )
    print(f"bake-plan: {sitrep['summary']}", file=sys.stdout if sitrep["outcome"] == "pass" else sys.stderr)
    if sitrep.get("interrupted"):
        return 130
    return 0 if sitrep["outcome"] == "pass" else 1


def _cmd_publish(args) -> int:
    from bake.run import engine
    from bake.run.publish import manifests, publish

    composition = _compose(args, per_arch=False)  # the multi-arch tags, made from the per-arch ones
    wanted = manifests(composition)

    def report(manifest) -> None:
        print(f"published {manifest.tag} <- {', '.join(s.rsplit(':', 1)[-1] for s in manifest.sources)}", flush=True)

    missing = publish(wanted, engine.image_exists, engine.create_manifest, on_created=report)
    if missing:
        print(f"bake-plan: error: not publishing: {len(missing)} per-arch image(s) missing; no tag was created:",
              file=sys.stderr)
        for ref in missing:
            print(f"  missing {ref}", file=sys.stderr)
        return 1
    return 0


def _cmd_matrix(args) -> int:
    import json

    from bake.plan.matrix import jobs

    entries = jobs(_compose(args))
    if args.wave is not None:
        entries = [e for e in entries if e["wave"] == args.wave]
    matrix = {"include": entries}
    print(json.dumps(matrix, separators=(",", ":")) if args.format == "github" else json.dumps(matrix, indent=2))
def _pip_args(args) -> List[str]:
    out = []
    if args.index_url:
        out += ["--index-url", args.index_url]
    for url in args.extra_index_url:
        out += ["--extra-index-url", url]
    for link in args.find_links:
        out += ["--find-links", link]
    if args.no_index:
        out.append("--no-index")
    for host in args.trusted_host:
        out += ["--trusted-host", host]
    return out


def _cmd_lock(args) -> int:
    from bake.api import make_plan
    from bake.pip.lock import compile_lock, lock_specs, python_version, write_locks

    config = settings(args)  # plugins enabled, stage overrides, targets and platforms
    composition = make_plan(config.plan_options(), config.plugin_manager(), config.stages)
    specs = [spec for name in composition.requested for spec in lock_specs(composition, name)]
    version = python_version(args.python)
    pip_args = _pip_args(args)
    results = []
    for spec in specs:
        print(f"bake-plan: locking {spec.describe()}: {len(spec.lines)} requirement lines "
              f"from {len({line.stage for line in spec.lines})} stages", file=sys.stderr)
        for line in spec.skipped:
            print(f"bake-plan: note: skipped {line.text!r} of {line.who()}: in-image path {line.missing} "
                  "has no host path (declare it in the stage's host_paths); the lock leaves it out",
                  file=sys.stderr)
        results.append((spec, compile_lock(spec, pip_args, python=args.python, version=version)))
    # Every lock compiled before any is written: a conflict in the second leaves the first as it was.
    for path, (spec, text) in zip(write_locks(results, Path(args.locks_dir)), results):
        pins = sum(1 for row in text.splitlines() if row and not row[0].isspace() and not row.startswith(("#", "--")))
        print(f"bake-plan: wrote {path}: {pins} pinned requirements for {spec.describe()}")
        if not spec.lines:
            print(f"bake-plan: note: the stages of '{spec.target}' declare no requirement lines; "
                  "lines their Dockerfiles write at build time are not seen on the host", file=sys.stderr)
    return 0


def _cmd_bump(args) -> int:
    from bake.pip.sources import bump, manifest_path

    results = bump(args.names)
    for result in results:
        change = f"{result.old[:12]} -> {result.new[:12]}" if result.moved else f"{result.new[:12]} (unchanged)"
        print(f"bake-plan: {result.key}: {change} ({result.tracking_ref})")
    moved = sum(1 for r in results if r.moved)
    print(f"bake-plan: {moved} of {len(results)} sources moved" + (f"; rewrote {manifest_path()}" if moved else ""))
    return 0


def _cmd_stages(args) -> int:
    from bake.api import collect_stages
    from bake.plan.plugins import Hooks

    config = settings(args)
    stages = collect_stages(Hooks(config.plugin_manager()), config.stages)
    rows = [("STAGE", "PLUGIN", "PARENT", "PLATFORMS")]
    for stage in sorted(stages.values(), key=lambda s: s.name):
        parent = stage.parent or (f"image {stage.base_image}" if stage.base_image else "-")
        rows.append((stage.name, stage.plugin, parent, ",".join(stage.platforms)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
    return 0


def _cmd_graph(args) -> int:
    from bake.plan.graph import render_graph
    from bake.output import write_atomic

    write_atomic(args.output, render_graph(_compose(args), args.format), what="the graph")
    return 0


def _cmd_config(args) -> int:
    from bake.settings import config_file as cfg

    merged = settings(args)
    sys.stdout.write(cfg.to_json(merged) if args.format == "json" else cfg.to_toml(merged))
    return 0


def _known_secrets(args) -> list:
    """The current values of the ``--secret``s given, for redaction (best effort: none on bad input)."""
    try:
        return [v for v in (spec.value() for spec in secret_specs(getattr(args, "secret", None) or [])) if v]
    except BakePlanError:
        return []


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``bake-plan`` console script. Returns the exit status."""
    args = None
    _terminate_like_ctrl_c()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        if getattr(args, "sources", None):
            from bake.pip.sources import use_manifest

            if not os.path.isfile(args.sources):
                raise UsageError(f"--sources {args.sources}: no such file (the sources manifest)")

            use_manifest(args.sources)
        command = {"stages": _cmd_stages, "build": _cmd_build, "publish": _cmd_publish, "matrix": _cmd_matrix,
                   "lock": _cmd_lock, "bump": _cmd_bump, "graph": _cmd_graph, "config": _cmd_config}
        return command.get(args.command, _cmd_plan)(args)
    except BakePlanError as err:
        from bake.plan.secrets import redact

        print(f"bake-plan: error: {redact(' '.join(str(err).split()), _known_secrets(args))}", file=sys.stderr)
        for detail in err.details:
            print(f"  {redact(detail, _known_secrets(args))}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("bake-plan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `bake-plan -o - | head`: the reader left; nothing to report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except OSError as err:  # stdout on a full disk (/dev/full), a vanished directory, ...
        where = f" {err.filename}" if err.filename else " the output"
        print(f"bake-plan: error: cannot write{where}: {err.strerror or err}", file=sys.stderr)
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure at exit
        except OSError:
            pass
        return 2


def _terminate_like_ctrl_c() -> None:
    """SIGTERM (a CI job cancelled, `timeout`) stops bake-plan the way Ctrl-C does: a build in
    progress is cancelled and its sitrep written (see :func:`bake.run.engine.bake`)."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (bake-plan used as a library)
        pass


if __name__ == "__main__":
    sys.exit(main())
