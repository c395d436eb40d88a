"""The merge: built-in defaults < the configuration file < the environment < the command line,
into one checked :class:`Settings`.

:func:`gather` is the only reader of the command line's values (a plain mapping the CLI makes from
argparse), of the ``BAKE_PLAN_<SETTING>`` variables (:data:`ENVIRONMENT`) and of
``SOURCE_DATE_EPOCH``; every value goes through its one parser in :mod:`bake.settings.values`,
whichever of the three it came from. What comes out is fully checked: nothing below reads flags
or variables again.
(``BAKE_PLAN_SOURCES`` stays the sources manifest's own default, :func:`bake.pip.sources.manifest_path`,
because plugins read the manifest under the library too, without settings.)
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from bake.errors import ConfigError, UsageError, did_you_mean
from bake.plan.compose import DEFAULT_SBOM_GENERATOR, ParentImage, PlanOptions, attestations
from bake.plan.plugins import CORE_PLUGINS, ENV_PLUGINS_DISABLE, entry_point_names
from bake.plan.secrets import SecretSpec
from bake.settings import values
from bake.settings.file import CONFIG_FILE, PYPROJECT, SCHEMA, FileConfig, bare_or_quoted, load

if TYPE_CHECKING:
    from bake.plan.overrides import StageOverride

DEFAULT = "default"
"""The Python version ``bake-plan wheelhouse`` fetches wheels for without ``--python-version``."""

FLAGS = {
    "registry": "--registry",
    "platforms": "--platform",
    "date": "--date",
    "targets": "--target",
    "base-images": "--base-image",
    "cache-from-branch": "--cache-from-branch",
    "metadata-targets": "--metadata-targets",
    "pull": "--pull",
    "wheelhouse": "--wheelhouse",
    "provenance": "--provenance",
    "sbom": "--sbom",
    "sbom-generator": "--sbom-generator",
    "progress": "--progress",
    "allow": "--allow",
    "arch-size-ratio": "--arch-size-ratio",
    "since-last": "--since-last",
}
"""Configuration keys a command-line flag can set too, and the flag."""

_FLAG_VALUES = {  # configuration key → the command line's name for it (argparse's dest)
    "registry": "registry", "platforms": "platform", "date": "date", "targets": "target",
    "base-images": "base_image", "cache-from-branch": "cache_from_branch", "metadata-targets": "metadata_targets",
    "pull": "pull",
    "wheelhouse": "wheelhouse",
    "provenance": "provenance", "sbom": "sbom", "sbom-generator": "sbom_generator",
    "progress": "progress",
    "allow": "allow",
    "arch-size-ratio": "arch_size_ratio",
    "since-last": "since_last",
}

DEFAULTS: Dict[str, Any] = {
    "registry": None,  # each stage's own
    "platforms": (),  # each stage's own
    "date": "auto",
    "targets": (),
    "base-images": {},
    "cache-from-branch": None,
    "metadata-targets": (),  # the requested stages' final targets
    "pull": None,  # on with --push
    "wheelhouse": None,  # pip in the build uses the stages' own settings (an index)
    "provenance": False,  # buildx's own default: provenance mode=min on pushed images
    "sbom": False,
    "sbom-generator": DEFAULT_SBOM_GENERATOR,
    "progress": "auto",  # build: tty on a terminal, else plain
    "allow": (),  # no privilege beyond reading the contexts
    # publish --sitrep: largest arch's image / smallest's. bake.plan.gate.DEFAULT_SIZE_RATIO, not imported
    # from there: only publish needs the gate (a test checks that the two agree).
    "arch-size-ratio": 2.0,
    "since-last": True,  # build --push: each target's diff against its newest nightly record in the sitrep
    "install": None,  # the CI workflow's bake-plan: how this one was installed (bake.version)
    "plugins.enable": None,  # every installed plugin
    "plugins.disable": (),
}

TARGET_COMMANDS = ("plan", "build", "publish", "promote", "matrix", "lock", "graph", "wheelhouse", "test", "lint",
                   "diff", "record")
"""Commands that work on targets: they need one, a date and the plugins."""

IMAGE_NAME_COMMANDS = ("plan", "build", "publish", "promote", "test", "diff", "record")
"""Commands whose plan's image names are used (written, built, pushed, merged, run): a stage with
no registry of its own needs ``--registry`` there; graph, matrix, lock and wheelhouse name none."""

WHEELHOUSE_COMMANDS = ("plan", "build")
"""Commands whose plan sends the wheelhouse (``--wheelhouse``, ``wheelhouse = "DIR"``) to the build."""

ENV_PREFIX = "BAKE_PLAN_"


def env_variable(key: str) -> str:
    """The environment variable of a configuration key: ``BAKE_PLAN_`` and the key in capitals,
    ``-`` and ``.`` written ``_`` (``cache-from-branch`` → ``BAKE_PLAN_CACHE_FROM_BRANCH``,
    ``plugins.disable`` → ``BAKE_PLAN_PLUGINS_DISABLE``), as pip names ``--index-url``
    ``PIP_INDEX_URL``."""
    return ENV_PREFIX + key.replace("-", "_").replace(".", "_").upper()


ENVIRONMENT = {key: env_variable(key) for key in FLAGS}
"""Configuration key → the ``BAKE_PLAN_<SETTING>`` variable that sets it, between the file and the
flag: every key a flag sets (a key added to :data:`FLAGS` gets its variable). The text reads as
the file key's shape (:data:`bake.settings.file.SCHEMA`) says, through the flag's parser
(:func:`_from_text`). An empty variable is unset (pip and docker read an empty one so)."""

ENV_SOURCES = "BAKE_PLAN_SOURCES"
"""The sources manifest's variable (``--sources`` beats it), read by :mod:`bake.pip.sources`,
which plugins use without settings; named here for the plan's header and the typo check."""

OTHER_VARIABLES = (ENV_SOURCES, "BAKE_PLAN_CHECKOUTS")
"""bake-plan's variables read outside the settings (:mod:`bake.pip.sources`): never a typo."""

_NOT_EMPTY = {  # argparse dest → (the option, what an empty value is): "" is a mistake, not "not given"
    "output": ("-o", "empty path"), "config": ("--config", "empty path"), "sources": ("--sources", "empty path"),
    "metadata_file": ("--metadata-file", "empty path"), "sitrep_dir": ("--sitrep-dir", "empty path"),
    "locks_dir": ("--locks-dir", "empty path"), "parent_report": ("--parent-report", "empty path"),
    "metadata_bake_file": ("--metadata-bake-file", "empty path"), "python": ("--python", "empty interpreter"),
    "builder": ("--builder", "empty builder name"), "not_secret": ("--not-secret", "empty name"),
    "names": ("bump", "empty source name"), "index_url": ("--index-url", "empty URL"),
    "extra_index_url": ("--extra-index-url", "empty URL"), "find_links": ("--find-links", "empty URL"),
    "trusted_host": ("--trusted-host", "empty host"), "sitrep": ("--sitrep", "empty path"),
}
"""Options whose empty value would otherwise pass for "not given" (the default) or reach pip as is;
the options with a parser of their own (``--registry``, ``--date``…) refuse it there."""

_PIP_OPTIONS = (("index_url", "--index-url"), ("extra_index_url", "--extra-index-url"),
                ("find_links", "--find-links"), ("no_index", "--no-index"), ("trusted_host", "--trusted-host"))


class Setting(NamedTuple):
    """A merged value and where it came from (``default``, ``<file>:<table>``, ``--flag``,
    ``env BAKE_PLAN_REGISTRY``, ``env SOURCE_DATE_EPOCH``)."""

    value: Any
    source: str


# eq=False: nothing compares two; an __eq__ (and __hash__) over every field is more code Python compiles at import
@dataclasses.dataclass(frozen=True, eq=False)
class Settings:
    """Everything one command needs, merged and checked (:func:`gather`).

    Shared by every command: ``provenance`` (configuration key, and ``plugins.enable`` /
    ``plugins.disable`` → :class:`Setting`, for ``bake-plan config``), ``file``, ``stages`` (the
    per-stage overrides), ``targets``, ``platforms`` (``os/arch``), ``registry``, ``date`` (the
    build day; ``None`` for commands without one) and ``date_source`` (``env SOURCE_DATE_EPOCH``
    or the policy's source), ``base_images`` (``(original, replacement)``
    pairs), ``cache_from_branch``, ``metadata_targets``, ``blocked_plugins`` (entry-point names not
    to load), ``not_secret``, ``environment`` (``(variable, text)`` of each ``BAKE_PLAN_*``
    variable in force, for the plan's header) and ``warnings`` (lines for the CLI to print: a
    ``BAKE_PLAN_*`` variable that looks like a misspelt setting). The rest belong to one command
    or a few, and keep their defaults elsewhere: plan and build (``cache_branch``, ``from_registry``, ``digests`` target → sha256
    digest, ``parents`` target → what its ``--parent-report`` says, ``secrets``, ``metadata_bake_files``, ``format``, ``output``, ``force`` (replace a plan file bake-plan did not write), ``locked``,
    ``locks_dir``, ``sources`` the manifest), build (``push``, ``pull``, ``load``, ``builder``, ``metadata_file``, ``sitrep_dir``),
    every command (``verbosity``: ``-v`` count less ``-q`` count), build (``progress``, ``quiet``
    under ``-q`` unless ``--progress`` is given; ``dry_run``), publish (``dry_run``, ``format``), stages (``format``), test (``local``, ``sitrep_dir``), matrix (``format``, ``wave``, ``output``, ``check``), lock (``python``, ``pip_args``), bump (``names``),
    wheelhouse (``wheelhouse`` the directory, also plan and build's; ``python_version``; ``pip_args``;
    ``output``; ``locks_dir``),
    graph and config (``format``, ``output``).
    """

    command: str
    provenance: Mapping[str, Setting]
    file: Optional[FileConfig] = None
    stages: Tuple[StageOverride, ...] = ()
    targets: Tuple[str, ...] = ()
    platforms: Tuple[str, ...] = ()
    registry: Optional[str] = None
    date: Optional[datetime.date] = None
    date_source: Optional[str] = None
    base_images: Tuple[Tuple[str, str], ...] = ()
    cache_from_branch: Optional[str] = None
    metadata_targets: Tuple[str, ...] = ()
    blocked_plugins: Tuple[str, ...] = ()
    not_secret: FrozenSet[str] = frozenset()
    allow: Tuple[str, ...] = ()
    """The privileges granted to the build beyond reading its contexts (``--allow``, ``allow``)."""
    environment: Tuple[Tuple[str, str], ...] = ()
    warnings: Tuple[str, ...] = ()
    cache_branch: Optional[str] = None
    from_registry: bool = False
    digests: Mapping[str, str] = dataclasses.field(default_factory=dict)
    parents: Mapping[str, ParentImage] = dataclasses.field(default_factory=dict)
    secrets: Tuple[SecretSpec, ...] = ()
    metadata_bake_files: Tuple[str, ...] = ()
    format: str = "hcl"
    output: Optional[str] = None
    force: bool = False
    locked: bool = False
    locks_dir: Path = Path("locks")
    sources: Optional[Path] = None
    push: bool = False
    dry_run: bool = False
    pull: bool = False
    load: bool = False
    no_cache: bool = False
    builder: Optional[str] = None
    metadata_file: Optional[Path] = None
    sitrep_dir: Path = Path(".")
    wave: Optional[int] = None
    check: bool = False
    python: Optional[str] = None
    pip_args: Tuple[str, ...] = ()
    names: Tuple[str, ...] = ()
    wheelhouse: Optional[str] = None
    python_version: Optional[str] = None
    local: bool = False  # test: the engine's image store, not the registry
    in_image: bool = False  # lock --in-image: compile in the meal kits (bake.run.image_lock)
    lint: bool = False  # build --lint: lint the chain's Dockerfiles first
    sitreps: Tuple[str, ...] = ()  # publish --sitrep: the nightly's build and test sitreps (bake.settings.sitreps)
    all_or_nothing: bool = False  # publish --all-or-nothing
    no_record: bool = False  # publish --no-record: push no nightly record of the images published
    sbom_dir: Optional[Path] = None  # record --sbom DIR: each record's CycloneDX SBOM written there too
    diff_from: Optional[str] = None  # diff --from: a plan or record file, or the DATE of a nightly's records
    diff_to: str = "plan"  # diff --to: "plan" (this plan), a plan or record file, or a DATE
    skip_unchanged: bool = False  # build --skip-unchanged: no build of a target its newest record matches
    since_last: bool = True  # build --push: the sitrep's since_last (--no-since-last, since-last = false: off)
    verbosity: int = 0
    progress: str = "auto"

    def where(self, key: str) -> str:
        """Where a configuration key's value came from, as an error line names it: its flag
        (``--target``), ``env VAR``, or the file and key (``bake-plan.toml: targets``,
        ``pyproject.toml: [tool.bake-plan] targets``); the bare key for a default."""
        source = self.provenance[key].source
        if self.file is not None and source.startswith(self.file.name):
            return _file_where(self.file, key)
        return key if source == DEFAULT else source

    def __getitem__(self, key: str) -> Any:
        """A merged configuration value by its key (``registry``, ``plugins.enable``…)."""
        return self.provenance[key].value

    def plan_options(self, per_arch: bool = True) -> PlanOptions:
        """:class:`bake.plan.compose.PlanOptions` for composing the plan.

        :param per_arch: ``False`` keeps a one-platform plan's tags without ``-<arch>`` (publish).
        """
        return PlanOptions(
            targets=self.targets, date=self.date, platforms=self.platforms, registry=self.registry,
            registry_needed=self.command in IMAGE_NAME_COMMANDS,
            base_images=self.base_images, cache_from_branch=self.cache_from_branch,
            cache_branch=self.cache_branch, from_registry=self.from_registry, digests=dict(self.digests),
            parents=dict(self.parents),
            secrets=self.secrets, not_secret=self.not_secret, per_arch=per_arch,
            wheelhouse=self.wheelhouse if self.command in WHEELHOUSE_COMMANDS or self.in_image else None,
            attest=attestations(self["provenance"], self["sbom-generator"] if self["sbom"] else None),
            # `build --load` pushes nothing: no registry is known to be there for cache-to.
            cache_to=not (self.command == "build" and self.load and not self.push),
        )


def gather(command: str, given: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings of one ``command``: defaults < configuration file < environment < ``given``.

    :param given: the command line's values by argparse ``dest`` (``registry``, ``platform``,
        ``base_image``, ``secret``…); a flag that was not given is absent or ``None``.
    :param environ: the environment: the ``BAKE_PLAN_<SETTING>`` variables (:data:`ENVIRONMENT`),
        ``BAKE_PLAN_PLUGINS_DISABLE``, ``SOURCE_DATE_EPOCH``, and ``--secret``'s variables.
    :raises UsageError: a bad flag or environment value (``env BAKE_PLAN_PULL: …``), or a missing
        one (no target).
    :raises ConfigError: a bad configuration file or value in it.
    """
    flag = given.get
    _refuse_empty(given)
    verbosity = (flag("verbose") or 0) - (flag("quiet") or 0)
    sources = values.existing_file(flag("sources"), "--sources", "the sources manifest") if flag("sources") else None
    if sources is None and environ.get(ENV_SOURCES):  # checked here, or a plugin reading it is blamed
        sources = values.existing_file(environ[ENV_SOURCES], f"env {ENV_SOURCES}", "the sources manifest")
    if command == "build" and flag("output") == "-":
        raise UsageError("build needs a plan file: -o - is for `bake-plan plan`")
    if command == "build" and flag("output") and os.path.exists(flag("output")) \
            and not os.path.isdir(flag("output")) and not os.path.isfile(flag("output")):
        # buildx reads the plan back from this path: a device or a pipe gives it nothing to read
        raise UsageError(f"build needs a plan file: -o {flag('output')} is not a regular file")
    file = load(flag("config"))
    provenance = _merge(file, given, environ)
    _disable_from_environment(provenance, environ)
    environment, warnings = _in_force(provenance, given, environ), tuple(_misspelt(environ))
    stages = _overrides(file)
    if command == "bump":
        return Settings(command, provenance, file, sources=sources, names=tuple(flag("names") or ()),
                        environment=environment, warnings=warnings)
    targets = provenance["targets"].value
    if command in TARGET_COMMANDS and not targets:
        raise UsageError(f"no target: pass --target T, or set targets = [...] in {CONFIG_FILE} "
                         f"or in [tool.bake-plan] of {PYPROJECT}")
    date, date_source = None, None
    if command in TARGET_COMMANDS or command == "config":
        source = provenance["date"].source
        date, from_env = values.resolve_date(provenance["date"].value, environ,
                                             source if source.startswith(("--", "env ")) else f"{source}: date")
        date_source = from_env or provenance["date"].source
    if flag("parent_report") and not flag("from_registry"):  # it would be read and silently not used
        raise UsageError("--parent-report is only read in per-job mode: add --from-registry (or drop --parent-report)")
    parents: Dict[str, ParentImage] = {}
    for report in flag("parent_report") or ():
        for name, parent in values.parent_digests(report).items():
            if parent.digest or name not in parents:  # another job's failed rebuild never hides a pushed image
                parents[name] = parent
    digests = {name: parent.digest for name, parent in parents.items() if parent.digest}
    secrets = values.secrets(flag("secret") or ())
    if command == "build":
        for spec in secrets:
            if spec.env and spec.env not in environ:
                raise UsageError(f"--secret id={spec.id},env={spec.env}: {spec.env} is not set, so the build "
                                 "could not mount the secret")
    if (command in TARGET_COMMANDS and provenance["metadata-targets"].source == FLAGS["metadata-targets"]
            and not flag("metadata_bake_file")):
        raise UsageError("--metadata-targets needs --metadata-bake-file (the file docker/metadata-action writes)")
    if provenance["sbom-generator"].source == FLAGS["sbom-generator"] and not provenance["sbom"].value:
        raise UsageError("--sbom-generator is only used with an SBOM: add --sbom (or sbom = true in the configuration)")
    if provenance["arch-size-ratio"].source == FLAGS["arch-size-ratio"] and not flag("sitrep"):
        raise UsageError("--arch-size-ratio is only used by publish's gate: add --sitrep (or drop --arch-size-ratio)")
    wheelhouse = provenance["wheelhouse"].value
    if command == "lock":
        _lock_in_image_flags(given)
    if wheelhouse is not None and (command in WHEELHOUSE_COMMANDS or flag("in_image")):
        source = provenance["wheelhouse"].source
        wheelhouse = values.existing_wheelhouse(
            wheelhouse, source if source.startswith(("--", "env ")) else f"{source}: wheelhouse")
    output, fmt = flag("output"), flag("format")
    if command in ("plan", "build"):
        fmt = values.plan_format(output, fmt, "-o")
    if command == "matrix":
        _matrix_flags(fmt, output, bool(flag("check")), flag("wave"))
    cache_branch = flag("cache_branch")
    blocked = ()
    if command in TARGET_COMMANDS or command in ("stages", "config"):
        # Installed names are needed only to check plugins.enable/disable: no scan of every distribution else.
        if provenance["plugins.enable"].value is not None or provenance["plugins.disable"].value:
            blocked = tuple(_blocked_plugins(provenance, entry_point_names()))
    return Settings(
        command=command, provenance=provenance, file=file, stages=stages,
        targets=targets, platforms=provenance["platforms"].value, registry=provenance["registry"].value,
        date=date, date_source=date_source, base_images=tuple(provenance["base-images"].value.items()),
        cache_from_branch=provenance["cache-from-branch"].value, metadata_targets=provenance["metadata-targets"].value,
        blocked_plugins=blocked, not_secret=frozenset(flag("not_secret") or ()), allow=provenance["allow"].value,
        environment=environment, warnings=warnings,
        cache_branch=values.branch(cache_branch, "--cache-branch") if cache_branch is not None else None,
        from_registry=bool(flag("from_registry")), digests=digests, parents=parents, secrets=secrets,
        metadata_bake_files=tuple(flag("metadata_bake_file") or ()), format=fmt or "hcl",
        output=values.wheelhouse_output(output) if command == "wheelhouse" and output is not None
        else output, force=bool(flag("force")), locked=bool(flag("locked")),
        locks_dir=values.locks_dir(flag("locks_dir"), must_exist=bool(flag("locked")) or command == "wheelhouse")
        if flag("locks_dir") is not None else Path("locks"),
        sources=sources,
        push=bool(flag("push")), dry_run=bool(flag("dry_run")), pull=_pull(provenance["pull"].value, bool(flag("push"))), load=bool(flag("load")), builder=flag("builder"),
        no_cache=bool(flag("no_cache")),
        metadata_file=values.metadata_file(flag("metadata_file")) if flag("metadata_file") else None,
        sitrep_dir=values.sitrep_dir(flag("sitrep_dir")) if flag("sitrep_dir") is not None else Path("."),
        wave=flag("wave"), check=bool(flag("check")), python=values.python(flag("python")) if flag("python") is not None else None,
        pip_args=_pip_args(given), wheelhouse=wheelhouse,
        python_version=values.python_version(flag("python_version"), "--python-version")
        if flag("python_version") is not None else None,
        local=bool(flag("local")), lint=bool(flag("lint")), in_image=bool(flag("in_image")),
        sitreps=tuple(flag("sitrep") or ()), all_or_nothing=bool(flag("all_or_nothing")),
        no_record=bool(flag("no_record")),
        sbom_dir=values.sitrep_dir(flag("sbom_dir"), "--sbom") if flag("sbom_dir") is not None else None,
        diff_from=flag("diff_from"), diff_to=flag("diff_to") or "plan",
        skip_unchanged=bool(flag("skip_unchanged")), since_last=bool(provenance["since-last"].value),
        verbosity=verbosity, progress=_progress(provenance["progress"], verbosity),
    )


def _matrix_flags(fmt: Optional[str], output: Optional[str], check: bool, wave: Optional[int]) -> None:
    """``matrix``: ``--check`` compares a file, so it needs one; a workflow holds every wave and
    names its own file, relative to the repository's root.

    :raises UsageError: as said.
    """
    if check and (output is None or output == "-"):
        raise UsageError("--check needs -o FILE: the committed file to compare with what bake-plan writes now")
    if fmt == "github-workflow" and wave is not None:
        raise UsageError("--wave selects the jobs of one wave for --format github or json; "
                         "--format github-workflow holds every wave")
    # The workflow's first job runs `matrix … -o FILE --check` from the repository's root.
    if fmt == "github-workflow" and (output is None or output == "-" or os.path.isabs(output)):
        raise UsageError("--format github-workflow needs -o FILE relative to the repository's root "
                         "(e.g. -o .github/workflows/nightly.yml): the workflow checks that file is fresh")


def _merge(file: Optional[FileConfig], given: Mapping[str, Any], environ: Mapping[str, str]) -> Dict[str, Setting]:
    """Configuration key → :class:`Setting`: defaults, then the file's values, then the
    environment's (:data:`ENVIRONMENT`), then the flags', each through its parser."""
    merged = {key: Setting(value, DEFAULT) for key, value in DEFAULTS.items()}
    if file is not None:
        for key, value in file.data.items():
            if key == "plugins":
                for sub, listed in value.items():
                    merged[f"plugins.{sub}"] = Setting(values.names(listed), file.where("plugins"))
            elif key != "stages":
                where = _file_where(file, key)
                base = file.path.resolve().parent if key == "wheelhouse" else None
                merged[key] = Setting(_parse(key, value, where, base), file.where())
    for key, variable in ENVIRONMENT.items():
        text = environ.get(variable, "")
        if text:  # an empty variable is unset (pip, docker): `VAR= bake-plan …`, or CI's unset `${{ vars.X }}`
            where = f"env {variable}"
            merged[key] = Setting(_parse_given(key, _from_text(key, text, where), where), where)
    for key, dest in _FLAG_VALUES.items():
        value = given.get(dest)
        if value is None or (key in ("platforms", "base-images") and not value):
            continue
        merged[key] = Setting(_parse_given(key, value, FLAGS[key]), FLAGS[key])
    return merged


def _from_text(key: str, text: str, where: str) -> Any:
    """A variable's text as the key's flag gives it, by the file key's shape (:data:`SCHEMA`):
    a list key takes it as one flag value (``BAKE_PLAN_PLATFORMS=linux/amd64,linux/arm64``, a
    comma list, as ``--platform`` takes one); a table (``base-images``) as comma-separated
    ``ORIGINAL=REPLACEMENT`` values (an image reference holds no comma); a boolean through
    :func:`bake.settings.values.boolean`; any other as it is."""
    shape = SCHEMA.get(key)
    if shape == "bool":
        return values.boolean(text, where)
    if shape == "table":
        return text.split(",")
    if shape in ("values", "strs"):
        return [text]
    return text


def _parse_given(key: str, value: Any, where: str) -> Any:
    """A flag's (or a variable's) value through its parser: ``--base-image``'s
    ``ORIGINAL=REPLACEMENT`` values first become the file's table."""
    if key == "base-images":
        value = values.base_image_flags(value, where)
    return _parse(key, value, where)


def _parse(key: str, value: Any, where: str, base: Optional[Path] = None) -> Any:
    """One configuration key's value through its parser (:mod:`bake.settings.values`); ``base``:
    the directory a relative path in it is taken from (the file's; default the current one)."""
    if key == "wheelhouse":
        return values.wheelhouse(value, where, base)
    if key == "registry":
        return values.registry(value, where)
    if key == "progress":
        return values.progress(value, where)
    if key == "platforms":
        return values.platforms(value, where)
    if key == "date":
        return values.date_policy(value, where)
    if key == "base-images":
        return values.base_images(list(value.items()), where)
    if key == "cache-from-branch":
        return values.branch(value, where)
    if key == "sbom-generator":
        return values.sbom_generator(value, where)
    if key == "install":
        return values.install_requirement(value, where)
    if key in ("targets", "metadata-targets"):
        return values.names(value, where, "target name")
    if key == "allow":
        return values.entitlements(value, where)
    if key == "arch-size-ratio":
        return values.size_ratio(value, where)
    return value


def _file_where(file: FileConfig, key: str) -> str:
    """How an error names a key of the configuration file: ``bake-plan.toml: targets``."""
    return f"{file.name}: [{file.table}] {key}" if file.table else f"{file.name}: {key}"


def _refuse_empty(given: Mapping[str, Any]) -> None:
    """:raises UsageError: an option of :data:`_NOT_EMPTY` given as the empty string (``-o ''``),
    naming the option: one line, ``-o: empty path``."""
    for dest, (option, what) in _NOT_EMPTY.items():
        value = given.get(dest)
        if value == "" or (isinstance(value, (list, tuple)) and any(v == "" for v in value)):
            raise UsageError(f"{option}: {what}")


def _disable_from_environment(provenance: Dict[str, Setting], environ: Mapping[str, str]) -> None:
    """Add the plugins named by ``$BAKE_PLAN_PLUGINS_DISABLE`` to ``plugins.disable`` (an empty or
    unset variable adds none). :raises UsageError: an empty name in the list."""
    listed = environ.get(ENV_PLUGINS_DISABLE, "")
    if not listed.strip():
        return
    where = f"env {ENV_PLUGINS_DISABLE}"
    added = values.names([listed], where, "plugin name")
    current = provenance["plugins.disable"]
    source = where if current.source == DEFAULT else f"{current.source} + {where}"
    provenance["plugins.disable"] = Setting(tuple(dict.fromkeys((*current.value, *added))), source)


def _in_force(provenance: Mapping[str, Setting], given: Mapping[str, Any],
              environ: Mapping[str, str]) -> Tuple[Tuple[str, str], ...]:
    """``(variable, text)`` of each ``BAKE_PLAN_*`` variable whose value is in force (no flag beat
    it): the settings of :data:`ENVIRONMENT`, ``BAKE_PLAN_PLUGINS_DISABLE`` and, without
    ``--sources``, ``BAKE_PLAN_SOURCES``. The plan's header writes them, so that the plan can be
    made again (``docs/security.md``)."""
    used = [(variable, environ[variable]) for key, variable in ENVIRONMENT.items()
            if provenance[key].source == f"env {variable}"]
    if f"env {ENV_PLUGINS_DISABLE}" in provenance["plugins.disable"].source:
        used.append((ENV_PLUGINS_DISABLE, environ[ENV_PLUGINS_DISABLE]))
    if environ.get(ENV_SOURCES) and not given.get("sources"):
        used.append((ENV_SOURCES, environ[ENV_SOURCES]))
    return tuple(used)


def _misspelt(environ: Mapping[str, str]) -> List[str]:
    """A warning for each variable named like a misspelt ``BAKE_PLAN_*`` setting: ``BAKE_PLAN_``
    in any case, not one bake-plan reads, and at most two characters away from one
    (``BAKE_PLAN_REGISTY``, ``BAKE_PLAN_PLATFORM``, ``bake_plan_registry``). Other
    ``BAKE_PLAN_*`` names are left alone, as pip leaves unknown ``PIP_*`` ones: plugins and
    tools name their own variables so (``BAKE_PLAN_BENCH_STAGES``)."""
    known = sorted({*ENVIRONMENT.values(), ENV_PLUGINS_DISABLE, *OTHER_VARIABLES})
    out = []
    for name in sorted(environ):
        if name in known or not name.upper().startswith(ENV_PREFIX):
            continue
        near = [variable for variable in known if _characters_apart(name.upper(), variable) <= 2]
        if near:
            out.append(f"env {name} is not a bake-plan setting, so it is ignored{did_you_mean(name, near)}")
    return out


def _characters_apart(a: str, b: str) -> int:
    """How many characters of the longer of ``a`` and ``b`` are not in their common subsequence
    (:class:`difflib.SequenceMatcher`): 1 for a letter left out, added, changed or swapped."""
    import difflib  # only for a BAKE_PLAN_* name that is not a setting

    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return max(len(a), len(b)) - sum(block.size for block in matcher.get_matching_blocks())


def _overrides(file: Optional[FileConfig]) -> Tuple[StageOverride, ...]:
    """The file's ``[stages.<name>]`` tables as :class:`bake.plan.overrides.StageOverride`, file order."""
    if file is None or not file.data.get("stages"):
        return ()
    from bake.plan.overrides import StageOverride  # only a configuration with overrides needs the module

    return tuple(
        StageOverride(
            stage=name,
            where=file.where("stages", bare_or_quoted(name)),
            args=dict(table.get("args", {})),
            sources={src: dict(fields) for src, fields in table.get("sources", {}).items()},
            base_image=table.get("base-image"),
            variants={axis: tuple(v) for axis, v in table.get("variants", {}).items()},
            variant_format=table.get("variant-format"),
            variant_args=dict(table.get("variant-args", {})),
        )
        for name, table in file.data.get("stages", {}).items()
    )


def _lock_in_image_flags(given: Mapping[str, Any]) -> None:
    """``lock``: the build's flags only with ``--in-image``, and the resolver's index flags only without.

    :raises UsageError: one line naming the flag.
    """
    build_flags = [name for name, key in (("--wheelhouse", "wheelhouse"), ("--base-image", "base_image"),
                                          ("--builder", "builder")) if given.get(key)]
    if build_flags and not given.get("in_image"):
        raise UsageError(f"lock: {build_flags[0]} is for the build of `lock --in-image`: add --in-image "
                         "(or drop it)")
    index_flags = [name for name, key in (("--index-url", "index_url"), ("--extra-index-url", "extra_index_url"),
                                          ("--find-links", "find_links"), ("--no-index", "no_index"),
                                          ("--trusted-host", "trusted_host"), ("--python", "python"))
                   if given.get(key)]
    if index_flags and given.get("in_image"):
        raise UsageError(f"lock --in-image: {index_flags[0]} is for the host's resolver; the image's pip-compile "
                         "uses the image's Python and the stages' pip settings (give --wheelhouse DIR for wheels "
                         "from a directory)")


def _blocked_plugins(provenance: Mapping[str, Setting], installed: Sequence[str]) -> List[str]:
    """Entry-point names not to load: ``plugins.disable``, and with ``plugins.enable`` every
    other installed one (bake-plan's own policies always load).

    :raises ConfigError: a name that is not an installed plugin, a core plugin disabled, or
        every plugin that declares stages blocked.
    """
    enable, disable = provenance["plugins.enable"], provenance["plugins.disable"]
    for key, setting in (("enable", enable), ("disable", disable)):
        for name in setting.value or ():
            if name not in installed:
                hint = did_you_mean(name, installed) or f" (installed: {', '.join(installed)})"
                raise ConfigError(f"{setting.source}: {key}: no installed plugin '{name}'{hint}")
            if key == "disable" and name in CORE_PLUGINS:
                raise ConfigError(f"{setting.source}: disable: '{name}' is bake-plan's own; a plugin that answers "
                                  "the policy hooks replaces it")
    blocked = set(disable.value)
    if enable.value is not None:
        blocked |= set(installed) - set(enable.value) - set(CORE_PLUGINS)
    families = [name for name in installed if name not in CORE_PLUGINS]
    if families and blocked >= set(families):
        key, setting = ("enable", enable) if enable.value is not None else ("disable", disable)
        raise ConfigError(f"{setting.source}: no plugin is enabled: {key} leaves only bake-plan's own "
                          f"(installed: {', '.join(families)})")
    return sorted(blocked)


def _progress(setting: Setting, verbosity: int) -> str:
    """``--progress``/``progress``; ``-q`` makes it ``quiet`` unless ``--progress`` itself is given
    (a flag beats the file, and the more specific flag beats ``-q``)."""
    return "quiet" if verbosity < 0 and setting.source != FLAGS["progress"] else setting.value


def _pull(setting: Optional[bool], push: bool) -> bool:
    """``--pull``/``pull``; unset, on when pushing: a nightly that publishes must not build on a
    stale copy of a base image from the engine's store."""
    return push if setting is None else setting


def _pip_args(given: Mapping[str, Any]) -> Tuple[str, ...]:
    """The index options ``lock`` passes to its resolver, in pip's spelling (uv takes them, but
    ``--trusted-host``: :func:`bake.pip.lock._uv_args`)."""
    out: List[str] = []
    for dest, option in _PIP_OPTIONS:
        value = given.get(dest)
        if value is True:
            out.append(option)
        elif isinstance(value, str):
            out += [option, values.index_url(value, option) if dest == "index_url" else value]
        elif isinstance(value, (list, tuple)):
            for item in value:
                check = {"find_links": values.find_links, "extra_index_url": values.index_url}.get(dest)
                out += [option, check(item, option) if check else item]
    return tuple(out)
