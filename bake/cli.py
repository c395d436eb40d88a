"""The command line: ``bake-plan [plan] --target T…``, ``bake-plan build``, ``bake-plan stages``.

The core raises :class:`bake.errors.BakePlanError`; only this module prints and picks exit
statuses (``docs/errors.md``): 0 success; 1 the work started and failed (a build, a push, a
publish: the sitrep or the output says what, and a rerun finishes it); 2 bad input or no engine
to run on (one line on stderr, no traceback, no file written). Error lines never show a
credential: they go through :func:`bake.secrets.redact`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from bake import __version__
from bake.errors import BakePlanError, UsageError
from bake.naming import check_platform, check_reference, check_registry

COMMANDS = ("plan", "build", "publish", "matrix", "stages")
FORMATS = ("hcl", "json")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        raise UsageError(f"{self.prog}: {message}")


def _plan_arguments() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--target", "-t", action="append", required=True, metavar="T",
                        help="stage or bake target to plan (repeatable); its ancestors come along")
    common.add_argument("--platform", action="append", default=[], metavar="P",
                        help="os/arch, e.g. linux/arm64 (repeatable; a comma list works too). "
                             "Default: every platform each stage supports. Exactly one makes a per-arch plan")
    common.add_argument("--registry", help="registry/namespace for every image, e.g. localhost:5555/ci")
    common.add_argument("--date", help="YYYY-MM-DD for nightly tags (default: SOURCE_DATE_EPOCH, else today in UTC)")
    common.add_argument("--base-image", action="append", default=[], metavar="ORIGINAL=REPLACEMENT",
                        help="build FROM REPLACEMENT wherever a Dockerfile says FROM ORIGINAL (repeatable)")
    common.add_argument("--cache-branch", metavar="BRANCH",
                        help="write cache refs for this branch (<key>-<branch>) instead of the shared key")
    common.add_argument("--cache-from-branch", metavar="BRANCH",
                        help="also read the cache refs of this branch (e.g. the default branch)")
    common.add_argument("--from-registry", action="store_true",
                        help="per-job mode: take published ancestors from the registry, pinned by digest")
    common.add_argument("--parent-report", action="append", default=[], metavar="FILE",
                        help="sitrep.json or buildx metadata file of a job that pushed an ancestor (repeatable)")
    common.add_argument("--secret", action="append", default=[], metavar="id=NAME,env=VAR|id=NAME,src=FILE",
                        help="a build secret every target may mount with RUN --mount=type=secret,id=NAME "
                             "(repeatable); the plan holds only the variable's name or the file's path")
    common.add_argument("--not-secret", action="append", default=[], metavar="NAME",
                        help="an arg or label NAME that looks like a credential but is not one (repeatable)")
    common.add_argument("--format", choices=FORMATS, default="hcl", help="plan file format (default hcl)")
    common.add_argument("-o", "--output", help="plan file to write, or - for stdout "
                                               "(default docker-bake.hcl / docker-bake.json)")
    return common


def _selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", "-t", action="append", required=True, metavar="T",
                        help="stage or bake target (repeatable); its ancestors come along")
    parser.add_argument("--platform", action="append", default=[], metavar="P",
                        help="os/arch (repeatable); default: every platform each stage supports")
    parser.add_argument("--not-secret", action="append", default=[], metavar="NAME",
                        help="an arg or label NAME that looks like a credential but is not one (repeatable)")


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

    sub.add_parser("stages", help="list every stage: its plugin, parent and platforms")
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; without a command, ``plan`` is meant. :raises UsageError: bad options."""
    argv = list(argv)
    # `bake-plan --target X` means `bake-plan plan --target X`.
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "plan")
    return build_parser().parse_args(argv)


def plan_date(value: Optional[str], environ=os.environ) -> datetime.date:
    """``--date``, else ``SOURCE_DATE_EPOCH`` (reproducible-builds.org), else today in UTC.

    :raises UsageError: a date that is not a real YYYY-MM-DD day, or a non-integer epoch.
    """
    if value is not None:
        try:
            if not _DATE.match(value):
                raise ValueError
            return datetime.date.fromisoformat(value)
        except ValueError:
            raise UsageError(f"--date {value!r} is not a date in the form YYYY-MM-DD") from None
    epoch = environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            return datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc).date()
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"SOURCE_DATE_EPOCH {epoch!r} is not a Unix time in seconds") from None
    return datetime.datetime.now(tz=datetime.timezone.utc).date()


def plan_platforms(values: Sequence[str]) -> tuple:
    """Normalised, de-duplicated ``--platform`` values. :raises UsageError: an unknown platform."""
    out = []
    for value in values:
        for item in value.split(","):
            try:
                out.append(check_platform(item))
            except ValueError as err:
                raise UsageError(f"--platform: {err}") from None
    return tuple(dict.fromkeys(out))


def base_image_pairs(values: Sequence[str]) -> tuple:
    """``ORIGINAL=REPLACEMENT`` values as pairs. :raises UsageError: a malformed value."""
    pairs = []
    for value in values:
        original, sep, replacement = value.partition("=")
        if not sep:
            raise UsageError(f"--base-image {value!r} is not ORIGINAL=REPLACEMENT (two image references)")
        for part in (original, replacement):
            try:
                check_reference(part)
            except ValueError as err:
                raise UsageError(f"--base-image {value!r}: {err}") from None
        pairs.append((original, replacement))
    return tuple(pairs)


def secret_specs(values: Sequence[str]) -> tuple:
    """``--secret`` values as :class:`bake.secrets.SecretSpec` (a relative ``src`` made absolute).

    :raises UsageError: a malformed value, a missing file, or one id given twice.
    """
    from bake.secrets import parse_secret

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


def _compose(args):
    from bake.api import make_plan
    from bake.compose import PlanOptions

    if getattr(args, "registry", None) is not None:
        try:
            check_registry(args.registry)
        except ValueError as err:
            raise UsageError(f"--registry: {err}") from None
    digests = {}
    for report in getattr(args, "parent_report", []):
        digests.update(read_digests(report))
    options = PlanOptions(
        targets=tuple(args.target),
        date=plan_date(getattr(args, "date", None)),
        platforms=plan_platforms(args.platform),
        registry=getattr(args, "registry", None),
        base_images=base_image_pairs(getattr(args, "base_image", [])),
        cache_branch=getattr(args, "cache_branch", None),
        cache_from_branch=getattr(args, "cache_from_branch", None),
        from_registry=getattr(args, "from_registry", False),
        digests=digests,
        secrets=secret_specs(getattr(args, "secret", [])),
        not_secret=frozenset(getattr(args, "not_secret", [])),
    )
    return make_plan(options)


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
    targets = composition.plan["target"]
    where = "stdout" if output == "-" else output
    print(f"bake-plan: wrote {len(targets)} targets for {', '.join(composition.requested)} to {where}", file=summary_to)
    for name, target in targets.items():
        tags = ", ".join(t.rsplit("/", 1)[-1] for t in target.get("tags", [])) or "(not tagged)"
        print(f"  {name:<28} {','.join(target['platforms']):<24} {tags}", file=summary_to)
    return output


def _cmd_plan(args) -> int:
    composition = _compose(args)
    _write_plan(args, composition, sys.stderr if args.output == "-" else sys.stdout)
    return 0


def _cmd_build(args) -> int:
    from bake.build import run_build

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
    return 0 if sitrep["outcome"] == "pass" else 1


def _cmd_publish(args) -> int:
    from bake import engine
    from bake.publish import manifests, publish

    composition = _compose(args)
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

    from bake.matrix import jobs

    entries = jobs(_compose(args))
    if args.wave is not None:
        entries = [e for e in entries if e["wave"] == args.wave]
    matrix = {"include": entries}
    print(json.dumps(matrix, separators=(",", ":")) if args.format == "github" else json.dumps(matrix, indent=2))
    return 0


def _cmd_stages(args) -> int:
    from bake.plugins import Hooks, get_plugin_manager

    stages = Hooks(get_plugin_manager()).collect_stages()
    rows = [("STAGE", "PLUGIN", "PARENT", "PLATFORMS")]
    for stage in sorted(stages.values(), key=lambda s: s.name):
        parent = stage.parent or (f"image {stage.base_image}" if stage.base_image else "-")
        rows.append((stage.name, stage.plugin, parent, ",".join(stage.platforms)))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[3])
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
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        command = {"stages": _cmd_stages, "build": _cmd_build, "publish": _cmd_publish,
                   "matrix": _cmd_matrix}.get(args.command, _cmd_plan)
        return command(args)
    except BakePlanError as err:
        from bake.secrets import redact

        print(f"bake-plan: error: {redact(' '.join(str(err).split()), _known_secrets(args))}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("bake-plan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `bake-plan -o - | head`: the reader left; nothing to report
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
