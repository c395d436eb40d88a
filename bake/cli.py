"""The command line: ``bake-plan [plan] --target T…``, ``build``, ``publish``, ``matrix``, ``lock``,
``wheelhouse``, ``bump``, ``stages``, ``graph``, ``config`` (and ``completion``, made from the parser): argparse → :func:`bake.settings.merge.gather` (flags,
configuration file and environment, checked once) → one function of :mod:`bake.commands`.

The core raises :class:`bake.errors.BakePlanError`; only this module prints and picks exit
statuses (``docs/errors.md``): 0 success; 1 the work started and failed (a build, a push, a
publish: the sitrep or the output says what, and a rerun finishes it) or requirements that
conflict; 2 bad input or no engine to run on (one line on stderr, no traceback, no file written).
Error lines never show a credential or a raw control character: they go through
:func:`bake.plan.secrets.redact` and :func:`bake.plan.text.printable`.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence, Tuple

from bake import commands
from bake.errors import BakePlanError, UsageError, did_you_mean
from bake.output import claim_stdout, discard_stdout, write_atomic
from bake.patterns import LazyPattern
from bake.pip.sources import use_manifest
from bake.plan.secrets import redact, shown
from bake.plan.text import one_line
from bake.settings import values
from bake.settings.merge import gather
from bake.version import __version__

COMMANDS = ("plan", "build", "publish", "promote", "matrix", "lock", "bump", "stages", "graph", "config",
            "wheelhouse", "test", "lint", "diff", "record", "completion")
DEFAULT_LOCKS_DIR = "locks"
FORMATS = ("hcl", "json")
GRAPH_FORMATS = ("mermaid", "markdown", "dot")
DIFF_FORMATS = ("text", "json", "markdown")
TEXT_FORMATS = ("text", "json")  # stages, publish: lines for people, or one JSON document
SHELLS = ("bash", "zsh")


class _Parser(argparse.ArgumentParser):
    building = False
    """True while :func:`build_parser` adds the options (see :meth:`_get_formatter`)."""

    def _get_formatter(self):
        # argparse makes a help formatter for each option it adds (to try its metavar), and each
        # formatter asks the terminal's width through shutil, whose import (bz2, lzma) is about 4 ms
        # of a plan's start. While the parser is built, that try gets a fixed width; help, usage
        # and error lines are formatted later, at the terminal's width.
        if _Parser.building:
            return self.formatter_class(prog=self.prog, width=80)
        return super()._get_formatter()

    def error(self, message: str):  # argparse's own errors: one line, exit 2
        command = self.prog.split(" ", 1)[1] if " " in self.prog else ""
        raise UsageError(f"{command}: {message}" if command else message)


def _config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help="configuration file (default: bake-plan.toml, or pyproject.toml with "
                             "[tool.bake-plan], in this directory or the nearest parent)")


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that beat the configuration file's keys of the same meaning (bake.settings.merge)."""
    _selection_arguments(parser)
    parser.add_argument("--registry", help="registry/namespace for every image, e.g. localhost:5555/ci")
    parser.add_argument("--date", help="YYYY-MM-DD for nightly tags, or today, source-date-epoch, auto "
                                       "(default auto: SOURCE_DATE_EPOCH, else today in UTC)")
    _base_image_argument(parser)
    parser.add_argument("--cache-from-branch", metavar="BRANCH",
                        help="also read the cache refs of this branch (e.g. the default branch)")


def _base_image_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-image", action="append", default=[], metavar="ORIGINAL=REPLACEMENT",
                        help="build FROM REPLACEMENT wherever a Dockerfile says FROM ORIGINAL (repeatable)")


def _not_secret_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--not-secret", action="append", default=[], metavar="NAME",
                        help="an arg or label NAME that looks like a credential but is not one (repeatable)")


def _plan_arguments() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    _settings_arguments(common)
    _not_secret_argument(common)
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
    # No argparse default: without --format, -o's name picks it (bake.settings.values.plan_format).
    common.add_argument("--format", choices=FORMATS,
                        help="plan file format (default: json for -o NAME.json, else hcl); buildx reads "
                             "NAME.hcl only as HCL and NAME.json only as JSON")
    common.add_argument("-o", "--output", metavar="FILE", help="plan file to write, or - for stdout "
                                                               "(default docker-bake.hcl / docker-bake.json)")
    common.add_argument("--force", action="store_true",
                        help="replace the plan file even when bake-plan did not write it (a hand-written "
                             "docker-bake.hcl); without it such a file is left as it is and refused")
    common.add_argument("--allow", action="append", metavar="ENTITLEMENT",
                        help="grant the build a privilege a stage asks for (its entitlements), in buildx's "
                             "spelling: network.host, security.insecure (repeatable; or allow = [...] in the "
                             "configuration); without it such a plan is refused before buildx runs")
    common.add_argument("--locked", action="store_true",
                        help="the final stage of each --target installs exactly its lock from the locks "
                             "directory (made by `bake-plan lock`) instead of compiling")
    common.add_argument("--wheelhouse", metavar="DIR",
                        help="a directory of wheels: every stage whose Dockerfile uses the 'wheelhouse' context "
                             "gets it, and pip in the build installs only from it (no index)")
    _provenance_arguments(common)
    _locks_dir_argument(common)
    _sources_argument(common)
    return common


def _provenance_arguments(parser) -> None:
    parser.add_argument("--provenance", action=argparse.BooleanOptionalAction, default=None,
                        help="attach SLSA provenance (mode=max: every step and build arg) to every image "
                             "(bake's attest; config key provenance)")
    parser.add_argument("--sbom", action=argparse.BooleanOptionalAction, default=None,
                        help="attach an SPDX SBOM to every image, made by the --sbom-generator (config key sbom)")
    parser.add_argument("--sbom-generator", metavar="IMAGE",
                        help="SBOM generator image, pulled by BuildKit (default docker/buildkit-syft-scanner; "
                             "config key sbom-generator)")


def _selection_arguments(parser: argparse.ArgumentParser) -> None:
    _config_argument(parser)
    parser.add_argument("--target", "-t", action="append", metavar="T",
                        help="stage or bake target (repeatable); its ancestors come along. "
                             "Default: the configuration's targets")
    parser.add_argument("--platform", action="append", default=[], metavar="P",
                        help="os/arch, e.g. linux/arm64 (repeatable; a comma list works too). "
                             "Default: every platform each stage supports. Exactly one makes a per-arch plan")


def _locks_dir_argument(parser) -> None:
    parser.add_argument("--locks-dir", default=None, metavar="DIR",  # None: not given (a given one must exist to be read)
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
    _not_secret_argument(lock)
    _locks_dir_argument(lock)
    _sources_argument(lock)
    lock.add_argument("--python", default=None, metavar="PYTHON",
                      help="interpreter whose Python and markers uv resolves the lock for (uv pip compile "
                           "--python; it must be the stage's Python when the stage declares one). Default: the "
                           "Python the stage declares (python = \"3.10\") on each arch, with no such interpreter "
                           "needed; for a stage that declares none, the Python running bake-plan")
    _pip_index_arguments(lock.add_argument_group("passed to the resolver (uv pip compile)"))
    image = lock.add_argument_group("--in-image: lock in the images (bake.run.image_lock)")
    image.add_argument("--in-image", action="store_true",
                       help="build each target's meal kit chain and run its final stage's pip-compile in it, "
                            "so lines its Dockerfiles write at build time (a wheel built in the image: "
                            "name @ file:///opt/...whl) are locked as in-image paths")
    image.add_argument("--wheelhouse", metavar="DIR",
                       help="with --in-image: a directory of wheels pip in the build installs from (no index)")
    _base_image_argument(image)
    image.add_argument("--builder", help="with --in-image: buildx builder instance to use")
    return lock


def _pip_index_arguments(pip) -> None:
    pip.add_argument("-i", "--index-url", metavar="URL")
    pip.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    pip.add_argument("-f", "--find-links", action="append", default=[], metavar="URL")
    pip.add_argument("--no-index", action="store_true")
    pip.add_argument("--trusted-host", action="append", default=[], metavar="HOST")


def _wheelhouse_arguments() -> argparse.ArgumentParser:
    parser = _Parser(add_help=False)
    _config_argument(parser)
    parser.add_argument("--target", "-t", action="append", metavar="T",
                        help="stage whose chain's wheels to fetch (repeatable). Default: the configuration's targets")
    parser.add_argument("--platform", action="append", default=[], metavar="P",
                        help="os/arch to fetch wheels for (repeatable); default: every platform the stage builds for")
    _not_secret_argument(parser)
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="the wheelhouse to fill (default: the configuration's wheelhouse, else ./wheelhouse)")
    parser.add_argument("--python-version", metavar="3.N",
                        help="the image's Python version the wheels are for (default: the stage's python, else 3.11)")
    _locks_dir_argument(parser)
    _sources_argument(parser)
    _pip_index_arguments(parser.add_argument_group("passed to pip download"))
    return parser


class _OneCommand(argparse._SubParsersAction):
    """Sub-parsers of which only ``only`` is built (all when ``None``): a command line names one
    command, and building the others' options cost a plan's cold start about 3 % of its time."""

    def __init__(self, *args, only: Optional[str] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.only = only

    def add_parser(self, name, **kwargs):
        if self.only is not None and name != self.only:
            return _Unbuilt()
        return super().add_parser(name, **kwargs)


class _Unbuilt:
    """A command's parser not built (:class:`_OneCommand`): takes every call and keeps nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: self


def build_parser(only: Optional[str] = None) -> argparse.ArgumentParser:
    """The ``bake-plan`` argument parser: its errors raise :class:`UsageError` (one line, exit 2).

    :param only: build only this command's sub-parser (the one a command line names); ``None``:
        every command's, for ``--help`` and the completion script.
    """
    _Parser.building = True
    try:
        return _build_parser(only)
    finally:
        _Parser.building = False


def _build_parser(only: Optional[str]) -> argparse.ArgumentParser:
    parser = _Parser(prog="bake-plan", description="Turn a family of container images into a Docker Buildx bake plan.")
    parser.add_argument("--version", action="version", version=f"bake-plan {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, action=_OneCommand, only=only)
    common = _plan_arguments()

    sub.add_parser("plan", parents=[common], help="write the bake plan for targets and their ancestors (the default)")

    build = sub.add_parser("build", parents=[common],
                           help="write the plan, run docker buildx bake on it, and write a sitrep")
    build.add_argument("--push", action="store_true", help="push every image of the plan")
    build.add_argument("--pull", action=argparse.BooleanOptionalAction, default=None,
                       help="fetch every base image anew instead of using the engine's copy "
                            "(default: on with --push; config key pull)")
    build.add_argument("--load", action="store_true", help="load the images into the engine's image store")
    build.add_argument("--no-cache", action="store_true",
                       help="run every step again: read no build cache (buildx bake --no-cache)")
    build.add_argument("--builder", help="buildx builder instance to use")
    build.add_argument("--metadata-file", metavar="FILE", help="where buildx writes per-target digests "
                                               "(default: bake-metadata.json in the sitrep directory)")
    build.add_argument("--sitrep-dir", default=".", metavar="DIR", help="directory for sitrep.json, badge.json, sitrep.md (default .)")
    build.add_argument("--progress", metavar="MODE",
                       help=f"what buildx's progress looks like: {', '.join(values.PROGRESS_MODES)} (buildx's words; "
                            "default auto: tty on a terminal, else plain; quiet with -q; config key progress)")
    build.add_argument("--dry-run", action="store_true",
                       help="write the plan and print the docker buildx bake command that would build it; "
                            "build nothing, write no sitrep")
    build.add_argument("--lint", action="store_true",
                       help="lint every stage's Dockerfile first (as bake-plan lint); build nothing on a finding")
    build.add_argument("--skip-unchanged", action="store_true",
                       help="build no target whose input digest equals its newest nightly record's (bake-plan "
                            "record); its tags are moved onto the recorded image; needs one --platform and --push")
    build.add_argument("--since-last", action=argparse.BooleanOptionalAction, default=None,
                       help="with --push: give each target in the sitrep its diff against its newest nightly "
                            "record (pins, sources, base images, input digest) and sitrep.md a section 'Changed "
                            "since DATE' (default: on; config key since-last)")

    publish = sub.add_parser("publish", help="merge per-arch images into multi-arch tags, only when every arch is there")
    _selection_arguments(publish)
    _not_secret_argument(publish)
    publish.add_argument("--registry", help="registry/namespace the per-arch images were pushed to")
    publish.add_argument("--date", help="YYYY-MM-DD of the nightly tags (default: SOURCE_DATE_EPOCH, else today in UTC)")
    publish.add_argument("--metadata-bake-file", action="append", default=[], metavar="FILE",
                         help="docker/metadata-action's bake file of the publish job (tags without the -<arch> "
                              "suffix): its tags are merged from their per-arch images too")
    publish.add_argument("--metadata-targets", action="append", metavar="T",
                         help="stages or bake targets that inherit the metadata-action target")
    publish.add_argument("--dry-run", action="store_true",
                         help="check every per-arch image and list the tags it would create, creating none")
    publish.add_argument("--sitrep", action="append", metavar="FILE",
                         help="a build or test sitrep.json of the nightly (repeatable; a directory: every "
                              "sitrep.json under it): floating tags (latest, mealkit) move only for images whose "
                              "chain built and passed its tests on every arch; dated tags need every arch built")
    publish.add_argument("--arch-size-ratio", metavar="N",
                         help="with --sitrep: hold an image's floating tags back when its largest arch's image is "
                              "more than N times the size of its smallest arch's (default 2; config "
                              "arch-size-ratio, env BAKE_PLAN_ARCH_SIZE_RATIO)")
    publish.add_argument("--all-or-nothing", action="store_true",
                         help="move no floating tag unless every image's can move; a move failing part-way "
                              "puts the tags already moved back on their earlier digests")
    publish.add_argument("--no-record", action="store_true",
                         help="with --sitrep: push no nightly record of the images published (by default each "
                              "is recorded beside its image, as bake-plan record does)")
    publish.add_argument("--format", choices=TEXT_FORMATS, default="text",
                         help="text: a line per tag; json: the lines go to stderr and stdout gets "
                              "{dry_run, tags: [{tag, digest, sources: [{ref, arch, digest}]}], missing, retries}; "
                              "with --sitrep or --all-or-nothing {dry_run, gate: {applied, images: {T: {dated, "
                              "floating, reasons, arches: {size_bytes, distributions, differing}}}}, all_or_nothing, published: [{tag, digest}], kept: [{tag, digest}], "
                              "missing, rolled_back: [{tag, digest, how}], failed, retries}")

    promote = sub.add_parser("promote", help="move the floating tags (latest, mealkit) of the targets' chains onto "
                                             "one night's dated multi-arch images")
    _selection_arguments(promote)
    _not_secret_argument(promote)
    promote.add_argument("--registry", help="registry/namespace the images were published to")
    promote.add_argument("--date", help="YYYY-MM-DD of the night whose dated tags (nightly-DATE, mealkit-DATE) "
                                        "the floating tags move onto")
    promote.add_argument("--metadata-bake-file", action="append", default=[], metavar="FILE",
                         help="docker/metadata-action's bake file of the publish job: its tags move too")
    promote.add_argument("--metadata-targets", action="append", metavar="T",
                         help="stages or bake targets that inherit the metadata-action target")
    promote.add_argument("--force", action="store_true",
                         help="move onto a night whose images did not pass publish --sitrep's gate (or were "
                              "published without one)")
    promote.add_argument("--dry-run", action="store_true",
                         help="check the dated images and their gate, list the moves, move nothing")

    test = sub.add_parser("test", help="run the stages' image tests in their final images, per platform, "
                                       "and add the outcomes to the sitrep")
    _selection_arguments(test)  # tags come from the same options as the build's
    _not_secret_argument(test)
    test.add_argument("--registry", help="registry/namespace the images were pushed to")
    test.add_argument("--date", help="YYYY-MM-DD of the nightly tags (default: SOURCE_DATE_EPOCH, else today in UTC)")
    test.add_argument("--local", action="store_true",
                      help="test the images in the engine's image store (after build --load) instead of "
                           "pulling them from the registry")
    test.add_argument("--sitrep-dir", default=".",
                      help="directory of the build's sitrep.json, which gains the tests; tests-badge.json too "
                           "(default .)")

    matrix = sub.add_parser("matrix", help="print CI jobs (one per stage and arch) in dependency waves")
    _selection_arguments(matrix)
    _not_secret_argument(matrix)
    matrix.add_argument("--format", choices=("github", "json", "github-workflow"), default="github",
                        help="github: one line for $GITHUB_OUTPUT / strategy.matrix; json: indented; "
                             "github-workflow: a complete GitHub Actions workflow, one job per stage and arch "
                             "(docs/ci.md)")
    matrix.add_argument("--wave", type=int, metavar="N", help="only the jobs of wave N")
    matrix.add_argument("-o", "--output", default=None, metavar="FILE",
                        help="file to write (default: stdout); --format github-workflow needs one, relative to the "
                             "repository's root, e.g. .github/workflows/nightly.yml")
    matrix.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the -o FILE differs from what would be written (stale)")
    matrix.add_argument("--force", action="store_true",
                        help="replace the -o FILE even if bake-plan did not write it (a workflow of your own)")
    sub.add_parser("lock", parents=[_lock_arguments()],
                   help="compile the chain's requirements on the host into <locks>/<target>.txt")
    sub.add_parser("wheelhouse", parents=[_wheelhouse_arguments()],
                   help="download the wheels the chain's build needs (its lock, else its lines; pip and "
                        "pip-tools) for the image's Python and each platform, for --wheelhouse")
    bump = sub.add_parser("bump", help="move each source's commit to the head of its tracking ref")
    bump.add_argument("names", nargs="*", metavar="NAME", help="sources to bump (default: all)")
    _sources_argument(bump)

    stages = sub.add_parser("stages", help="list every stage: its plugin, parent and platforms")
    _config_argument(stages)
    stages.add_argument("--format", choices=TEXT_FORMATS, default="text",
                        help="text: a table; json: a list of {name, plugin, kind, image, parent, base_image, "
                             "platforms, python, variant, variant_of, targets}")

    graph = sub.add_parser("graph", help="draw the stage DAG of targets (Mermaid or Graphviz dot)")
    # Only what changes the drawing: tags, dates and cache refs are not drawn.
    _selection_arguments(graph)
    _base_image_argument(graph)
    _not_secret_argument(graph)
    graph.add_argument("--format", choices=GRAPH_FORMATS, default="mermaid",
                       help="mermaid (flowchart text), markdown (the same in a ```mermaid block, for "
                            "GitHub and $GITHUB_STEP_SUMMARY) or dot (Graphviz)")
    graph.add_argument("-o", "--output", default="-", metavar="FILE",
                       help="file to write (default: stdout); a file bake-plan did not write is refused")
    graph.add_argument("--force", action="store_true",
                       help="replace the -o FILE even if bake-plan did not write it")

    config = sub.add_parser("config", help="print the merged configuration and where each value came from")
    _settings_arguments(config)
    config.add_argument("--metadata-targets", action="append", metavar="T",
                        help="stages or bake targets that inherit the metadata-action target")
    config.add_argument("--format", choices=("toml", "json"), default="toml", help="output format (default toml)")

    lint = sub.add_parser("lint", help="check every stage's Dockerfile of the chain with BuildKit's checks "
                                       "and hadolint; exit 1 on a finding")
    _selection_arguments(lint)
    _base_image_argument(lint)
    _not_secret_argument(lint)

    diff = sub.add_parser("diff", help="what changed between a nightly and this plan: input digests, Python "
                                       "distributions, source commits")
    _settings_arguments(diff)
    _not_secret_argument(diff)
    diff.add_argument("--from", dest="diff_from", required=True, metavar="FILE|DATE",
                      help="the old side: a plan (plan --format json), a record file, or the DATE of a nightly "
                           "whose records are read from the registry")
    diff.add_argument("--to", dest="diff_to", default="plan", metavar="plan|FILE|DATE",
                      help="the new side: plan (default: this plan), a plan or record file, or a DATE")
    diff.add_argument("--locked", action="store_true",
                      help="plan as build --locked does, so the plan's side has the locks' pins")
    _locks_dir_argument(diff)
    diff.add_argument("--format", choices=DIFF_FORMATS, default="text",
                      help="text (one line per target and arch), json, or markdown (a table, for "
                           "$GITHUB_STEP_SUMMARY)")

    record = sub.add_parser("record", help="push the nightly record of each image a sitrep names as pushed, "
                                           "beside the image")
    _settings_arguments(record)
    _not_secret_argument(record)
    record.add_argument("--sitrep", action="append", required=True, metavar="FILE|DIR",
                        help="a build's sitrep.json (after bake-plan test, with its tests), or a directory of them "
                             "(repeatable)")
    record.add_argument("--locked", action="store_true",
                        help="plan as build --locked did, so each record holds its lock's pins")
    _locks_dir_argument(record)
    record.add_argument("--dry-run", action="store_true", help="print the records' refs; push nothing")
    record.add_argument("--sbom", metavar="DIR", dest="sbom_dir",  # build's --sbom is the attestation switch
                        help="also write each record as a CycloneDX 1.6 SBOM, DIR/<target>-<date>-<arch>.cdx.json "
                             "(the lock's pins and hashes, the source commits, the base images by digest)")

    completion = sub.add_parser("completion", help="print a shell completion script made from this parser")
    completion.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    for name, command in sub.choices.items():  # a command missing from HELP fails a test, not the CLI
        _verbosity_arguments(command)
        command.description, examples = HELP.get(name, (None, ()))
        command.epilog = "examples:\n" + "".join(f"  {line}\n" for line in examples) if examples else None
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


HELP = {
    "plan": ("Write the bake plan of the targets and their ancestors.\n"
             "Each stage is a meal kit and a final target; a child builds on its parent's meal kit.\n"
             "A plan file bake-plan did not write (a hand-written docker-bake.hcl) is left as it is\n"
             "and refused, unless --force is given.",
             ["bake-plan --target upstream-pax",
              "bake-plan plan --target jax --platform linux/arm64 --format json -o -",
              "bake-plan plan --target jax --force        # replace a hand-written docker-bake.hcl"]),
    "build": ("Write the plan, build it with docker buildx bake, and write the sitrep.\n"
              "sitrep.json, badge.json and sitrep.md go to --sitrep-dir; the exit status is 0 when\n"
              "every target built, 1 when one failed, 2 for bad input or no engine.",
              ["bake-plan build --target upstream-pax --push",
               "bake-plan build --target upstream-pax --platform linux/amd64 --push --cache-branch pr-42",
               "bake-plan build --target my-leaf --load --builder mybuilder --sitrep-dir reports"]),
    "publish": ("Merge the per-arch images into multi-arch tags.\n"
                "Each tag's TAG-amd64 and TAG-arm64 become one manifest list. Every per-arch image is\n"
                "checked first: if any is missing, no tag is created (exit 1).",
                ["bake-plan publish --target upstream-pax --date 2026-11-29",
                 "bake-plan publish --target upstream-pax --sitrep reports/ --all-or-nothing",
                 "bake-plan publish --target upstream-pax --dry-run --format json"]),
    "promote": ("Move the floating tags of the targets' chains onto one night's dated images.\n"
                "latest and mealkit of every image in the chain move onto nightly-DATE and\n"
                "mealkit-DATE, all or nothing; a night whose images did not pass publish --sitrep's\n"
                "gate is refused (exit 1) unless --force.",
                ["bake-plan promote --target upstream-pax --date 2026-11-27",
                 "bake-plan promote --target upstream-pax --date 2026-11-27 --dry-run"]),
    "test": ("Run the stages' image tests in their final images, per platform.\n"
             "Each test runs in a container of the image the build pushed (--local: loaded); the\n"
             "outcomes join sitrep.json and tests-badge.json. Exit 1 when a test failed.",
             ["bake-plan test --target upstream-pax --platform linux/arm64 --registry ghcr.io/acme",
              "bake-plan test --target my-leaf --local --sitrep-dir reports"]),
    "matrix": ("Print the CI jobs, one per stage and arch, in dependency waves.\n"
               "{\"include\": [...]} for a GitHub Actions strategy.matrix; each job has its wave and\n"
               "the jobs it needs.",
               ["bake-plan matrix --target upstream-pax",
                "bake-plan matrix --target upstream-pax --wave 0 --format json",
                "bake-plan matrix --target upstream-pax --format github-workflow -o .github/workflows/nightly.yml"]),
    "lock": ("Compile the chain's requirements on the host into locks.\n"
             "The requirement lines of each target and its ancestors become <locks>/<target>.txt,\n"
             "which `bake-plan build --locked` installs exactly.",
             ["bake-plan lock --target upstream-pax",
              "bake-plan lock --target jax --platform linux/arm64 --locks-dir locks -f ./wheels",
              "bake-plan lock --in-image --target upstream-pax --wheelhouse ./wheels"]),
    "wheelhouse": ("Download the wheels the chain's build needs.\n"
                   "For the image's Python and each platform, into a directory that --wheelhouse then\n"
                   "sends to the build, whose pip installs from it alone.",
                   ["bake-plan wheelhouse --target jax -o wheelhouse --python-version 3.11",
                    "bake-plan build --target jax --wheelhouse wheelhouse"]),
    "bump": ("Move each source's commit to the head of its tracking ref.\n"
             "The sources manifest is rewritten; name sources to bump only those.",
             ["bake-plan bump",
              "bake-plan bump paxml praxis --sources stages/sources.toml"]),
    "stages": ("List every stage the installed plugins declare.\n"
               "Its plugin, its parent (or base image) and its platforms; --format json for scripts.",
               ["bake-plan stages",
                "bake-plan stages --format json"]),
    "graph": ("Draw the stage DAG of the targets.\n"
              "Mermaid, Mermaid in a Markdown block (GitHub, $GITHUB_STEP_SUMMARY), or Graphviz dot.",
              ["bake-plan graph --target upstream-pax",
               "bake-plan graph --target upstream-pax --format markdown -o graph.md",
               "bake-plan graph --target upstream-pax --format dot -o chain.dot"]),
    "config": ("Print the merged configuration and where each value came from.\n"
               "Defaults, then the configuration file, the environment, and the flags.",
               ["bake-plan config",
                "bake-plan config --target jax --format json"]),
    "lint": ("Lint every stage's Dockerfile of the targets' chains before building.\n"
             "BuildKit's own Dockerfile checks (docker buildx build --call=check) and hadolint, with no\n"
             "network: one line per finding naming the plugin, stage, Dockerfile and line; exit 1 on any.\n"
             "A stage's lint_ignore (rule -> reason) drops that rule in its Dockerfile.",
             ["bake-plan lint --target upstream-pax",
              "bake-plan build --target my-leaf --lint --load"]),
    "diff": ("Show what changed between a nightly and this plan.\n"
             "Per target and arch: whether its input digest changed, the Python distributions added,\n"
             "removed, upgraded and downgraded (from the locks), and the source commits that moved.",
             ["bake-plan diff --target jax --platform linux/amd64 --from 2026-11-28",
              "bake-plan diff --target jax --from old-plan.json --locked --format markdown"]),
    "record": ("Push the nightly record of each image beside it in the registry.\n"
               "One JSON document per image and arch (input digest, lock pins, source commits, base images,\n"
               "test outcomes, size), tagged record-<target>-<date>-<arch>; bake-plan diff --from DATE reads it.\n"
               "publish --sitrep writes them for the images it publishes; this writes them again.",
               ["bake-plan record --target jax --platform linux/amd64 --date 2026-11-29 --sitrep reports/"]),
    "completion": ("Print a shell completion script made from bake-plan's own parser.\n"
                   "It completes the commands, each command's options, and choices such as --format values.",
                   ["bake-plan completion bash > ~/.local/share/bash-completion/completions/bake-plan",
                    "bake-plan completion zsh > ~/.zfunc/_bake-plan   # with fpath+=(~/.zfunc) before compinit"]),
}
"""Each command's description and examples for its ``--help`` (every example parses:
``tests/test_cli_conventions.py``)."""


VERBOSITY = LazyPattern(r"-(q+|v+)\Z|--quiet\Z|--verbose\Z")
"""``-q``/``-v`` and their long forms, which every command takes before or after its name."""


def _verbosity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="count", default=0,
                        help="say less: only errors and the results (on build: --progress quiet unless given)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="say more: also each docker/buildx command bake-plan runs")


TARGET_OPTIONS = ("--target", "-t")
TARGET_OPTION_COMMANDS = ("plan", "build", "publish", "promote", "test", "matrix", "lock", "wheelhouse", "graph",
                          "config", "lint", "diff", "record")
"""The commands that take ``--target``/``-t``."""
_FOLD = "\0"  # no command-line word holds a NUL (argv entries are C strings): the words split back exactly


def fold_targets(argv: Sequence[str]) -> Tuple[List[str], bool]:
    """Each run of ``--target V`` / ``-t V`` / ``--target=V`` / ``-tV`` / ``-t=V`` (one after another)
    of a command that takes ``--target`` as one ``--target=V1<NUL>V2…`` word in its place, and
    whether any was folded. Only runs: a word moved past another option's would change what that
    option reads as its value (``--platform --target=x y``).

    argparse's loop over a command line looks for the next option once per option (and copies an
    ``append`` list once per value): quadratic in the number of option strings, 10 s of CPU for the 15,000
    ``--target`` flags of a 20,000-stage family. Folded, argparse still parses everything, and
    :func:`parse_args` splits the word back into the same list. Left as they are, so argparse says
    what it says of them: a ``--target`` with no value or one starting with ``-`` (``expected one
    argument``), anything after ``--``, and the words of a command without ``--target``.

    :param argv: the command line with its command first (``plan``, ``build`` …).
    """
    if not argv or argv[0] not in TARGET_OPTION_COMMANDS:
        return list(argv), False
    out: List[str] = [argv[0]]
    runs: List[Tuple[int, List[str]]] = []  # where each run's word goes in out, and its values
    run: Optional[List[str]] = None  # the values of the current run
    i = 1
    while i < len(argv):
        word, value, step = argv[i], None, 1
        if word == "--":
            out.extend(argv[i:])
            break
        if word in TARGET_OPTIONS and i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            value, step = argv[i + 1], 2
        elif word.startswith("--target="):
            value = word[len("--target="):]
        elif word.startswith("-t") and len(word) > 2:  # argparse's attached short forms: -tV, -t=V
            value = word[3:] if word[2] == "=" else word[2:]
        if value is None or _FOLD in value:
            out.append(word)
            run = None
        elif run is None:
            run = [value]
            runs.append((len(out), run))
            out.append("")
        else:
            run.append(value)
        i += step
    for place, names in runs:
        out[place] = "--target=" + _FOLD.join(names)  # the = form: argparse takes any value so
    return out, any(len(names) > 1 for _, names in runs)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse a command line; without a command (nothing, or an option first), ``plan`` is meant.

    :raises UsageError: bad options, or a first word that is not a command
        (``unknown command 'completion' (commands: plan, build, …)``).
    """
    argv = list(argv)
    lead = next((i for i, word in enumerate(argv) if not VERBOSITY.match(word)), len(argv))
    if 0 < lead < len(argv) and argv[lead] in COMMANDS:  # `bake-plan -q build …` as pip and pytest take it
        argv = [argv[lead], *argv[:lead], *argv[lead + 1:]]
    # `bake-plan --target X` means `bake-plan plan --target X`; a bare word first must be a command.
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        raise UsageError(f"unknown command {argv[0]!r}{did_you_mean(argv[0], COMMANDS)} "
                         f"(commands: {', '.join(COMMANDS)})")
    implied = not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"))
    if implied:
        argv.insert(0, "plan")
    argv, folded = fold_targets(argv)
    args, extra = build_parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_known_args(argv)
    if folded:
        args.target = [name for word in args.target for name in word.split(_FOLD)]
    if extra:  # name the command typed: `graph --date X` is an option graph does not take
        raise UsageError(("" if implied else f"{args.command}: ") + f"unrecognized arguments: {' '.join(extra)}")
    return args


COMMAND_FUNCTIONS = {"plan": commands.plan, "build": commands.build, "publish": commands.publish,
                     "promote": commands.promote,
                     "matrix": commands.matrix, "lock": commands.lock, "bump": commands.bump,
                     "stages": commands.stages, "graph": commands.graph, "config": commands.config,
                     "wheelhouse": commands.wheelhouse, "test": commands.test, "lint": commands.lint,
                     "diff": commands.diff, "record": commands.record}


def _known_secrets(given: dict) -> list:
    """The current values of the ``--secret``s given, for redaction (best effort: none on bad input)."""
    try:
        return [v for v in (spec.value() for spec in values.secrets(given.get("secret") or ())) if v]
    except BakePlanError:
        return []


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the ``bake-plan`` console script. Returns the exit status."""
    if argv is None:  # the bake-plan process itself, not a caller in-process
        _no_collection_at_exit()
        try:
            return _main(argv)
        finally:
            _late_signals_ignored()
    return _main(argv)


def _main(argv: Optional[List[str]]) -> int:
    given: dict = {}
    _terminate_like_ctrl_c()
    _plugin_warnings_as_lines()
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        given = vars(args)
        _stdout_for_the_document(args)
        if args.command == "completion":  # from the parser itself: no settings, no plugins
            from bake.completion import script

            write_atomic("-", script(build_parser(), args.shell), what="the completion script")
            return 0
        settings = gather(args.command or "plan", given)
        for warning in settings.warnings:  # a misspelt BAKE_PLAN_* variable: said, not fatal (pip ignores unknown PIP_*)
            print(f"bake-plan: warning: {one_line(redact(warning))}", file=sys.stderr)
        if settings.sources:
            use_manifest(settings.sources)
        return COMMAND_FUNCTIONS[settings.command](settings)
    except BakePlanError as err:
        known = _known_secrets(given)
        print(f"bake-plan: error: {one_line(redact(str(err), known))}", file=sys.stderr)
        for detail in err.details:
            print(f"  {shown(detail, known)}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("bake-plan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `bake-plan -o - | head`: the reader left; nothing to report
        discard_stdout()
        return 1
    except OSError as err:  # stdout on a full disk (/dev/full), a vanished directory, ...
        where = f" {err.filename}" if err.filename else " the output"
        print(f"bake-plan: error: cannot write{shown(where)}: {err.strerror or err}", file=sys.stderr)
        discard_stdout()  # no second failure at exit
        return 2


def _stdout_for_the_document(args: argparse.Namespace) -> None:
    """A command whose stdout is a document (``plan -o -``, ``matrix``, ``graph``, ``config``,
    ``stages``, ``completion``, ``publish --format json``) keeps stdout for it alone before any plugin loads: everything else written to
    stdout, by plugin code above all, goes to stderr (:func:`bake.output.claim_stdout`). Other
    commands leave stdout alone: buildx's, pip's and git's output stays where it was."""
    command = args.command or "plan"
    if command in ("plan", "graph"):
        wanted = getattr(args, "output", None) == "-"
    else:
        wanted = command in ("matrix", "config", "stages", "completion", "diff") or (
            command == "publish" and args.format == "json")
    if wanted:
        claim_stdout()


def _plugin_warnings_as_lines() -> None:
    """A plugin's warning (:class:`bake.plan.plugins.PluginWarning`) is one ``bake-plan: warning:``
    line on stderr, not Python's two-line ``file:line: …`` form."""
    import warnings

    from bake.plan.plugins import PluginWarning

    show = warnings.showwarning

    def one_line_for_plugins(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, PluginWarning):
            print(f"bake-plan: warning: {one_line(str(message))}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = one_line_for_plugins


def _no_collection_at_exit() -> None:
    """At exit, Python runs a last garbage collection over every object of every module, about 5 %
    of a plan's run; the process ends right after, so freezing them first (:func:`gc.freeze`, in an
    ``atexit`` handler registered before any plugin's, so it runs after theirs) skips that walk."""
    import atexit
    import gc

    atexit.register(gc.freeze)


def _terminate_like_ctrl_c() -> None:
    """SIGTERM (a CI job cancelled, `timeout`) and SIGHUP (the terminal closed) stop bake-plan the
    way Ctrl-C does: a build in progress is cancelled and its sitrep written (see
    :func:`bake.run.engine.bake`). Each of the three first kills every short program still
    running (:func:`bake.processes.stop_all`: uv, pip, git, hadolint, in any thread), so a lock or
    a wheelhouse working per platform stops at once instead of at its programs' time bounds."""
    import signal

    # bake.processes only if a command already imported it: planning runs no program and does not
    # import subprocess (tests/test_entry_points.py)
    processes = sys.modules.get("bake.processes")
    if processes is not None:
        processes.resume()  # a command run again in this process (a library user, a test)

    def handler(signum, frame):
        running = sys.modules.get("bake.processes")
        if running is not None:
            running.stop_all()
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGHUP, handler)
    except ValueError:  # not the main thread (bake-plan used as a library)
        pass


def _late_signals_ignored() -> None:
    """Once bake-plan's work is done and its status chosen, a SIGINT/SIGTERM/SIGHUP arriving while
    the interpreter shuts down (which puts the default handlers back) changes nothing."""
    import signal

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
