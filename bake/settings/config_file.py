"""Configuration: ``[tool.bake-plan]`` in ``pyproject.toml``, or ``bake-plan.toml``, merged with the
command line, every value remembering where it came from.

Finding the file: ``--config FILE`` if given; else, from the current directory up to the
filesystem root, the first directory holding ``bake-plan.toml`` (its top-level keys) or a
``pyproject.toml`` with a ``[tool.bake-plan]`` table (one without is skipped, one with a misspelt
``[tool.bake_plan]`` is an error), ``bake-plan.toml`` first (ruff's and black's search, with their
precedence of the tool's own file). A name that exists but is not a regular file (a directory, a
FIFO, a dangling symlink, a loop) is an error, not skipped; ``/dev/null`` is an empty file.

Precedence: a command-line flag beats the file; the file beats the built-in default. Each merged
value carries its source: ``default``, ``<file>:<table>``, ``--flag`` or ``env SOURCE_DATE_EPOCH``.

Keys (``bake-plan config`` prints them merged)::

    registry = "ghcr.io/acme"                 # --registry
    platforms = ["linux/amd64", "linux/arm64"] # --platform
    date = "auto"   # --date: auto (SOURCE_DATE_EPOCH, else today) | today | source-date-epoch | YYYY-MM-DD (or a TOML date)
    targets = ["upstream-pax"]                 # --target, when none is given
    base-images = { "python:3.11" = "mirror.example/python:3.11" }   # --base-image
    cache-from-branch = "main"                 # --cache-from-branch
    metadata-targets = ["upstream-pax"]        # --metadata-targets

    [plugins]                                  # entry-point names
    disable = ["xla-ci"]                       # blocked before loading
    enable = ["base", "jax"]                   # if given: only these (and bake-plan's own policies)

    [stages.jax]                               # bake.plan.overrides
    args = { BAZEL_CACHE = "https://cache.example" }
    sources = { JAX = { ref = "jax-v0.4.30" } }

    [stages.xla-ci]
    base-image = "…/development:{python}_cuda_{cuda}"
    variants = { python = ["3.10", "3.12"], cuda = ["12.1", "12.4"] }
    variant-format = "dev-{python}_cuda_{cuda}"
    variant-args = { python = "python_version" }

An unknown key, a value of the wrong shape, an unreadable or malformed file: one
:class:`bake.errors.ConfigError` line naming the file and key (with the nearest valid name).
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from bake.errors import ConfigError, UsageError, did_you_mean
from bake.plan.names import check_platform, check_registry
from bake.plan.overrides import StageOverride

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib  # type: ignore[no-redef]

CONFIG_FILE = "bake-plan.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = ("tool", "bake-plan")

DEFAULT = "default"
ENV_EPOCH = "env SOURCE_DATE_EPOCH"
DATE_POLICIES = ("auto", "today", "source-date-epoch")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_IMAGE_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]*\Z")

# The schema. Leaves are shapes: "str", "date" (a string or a TOML date), "strs" (list of strings),
# "table" (string → string), "axes" (string → list of strings); a dict is a sub-table;
# ("each", sub-schema) is a table of them by name (one per stage, per source).
_SOURCE = {"url": "str", "ref": "str"}
_STAGE = {"args": "table", "sources": ("each", _SOURCE), "base-image": "str", "variants": "axes",
          "variant-format": "str", "variant-args": "table"}
SCHEMA: Dict[str, Any] = {
    "registry": "str",
    "platforms": "strs",
    "date": "date",
    "targets": "strs",
    "base-images": "table",
    "cache-from-branch": "str",
    "metadata-targets": "strs",
    "plugins": {"enable": "strs", "disable": "strs"},
    "stages": ("each", _STAGE),
}

FLAGS = {
    "registry": "--registry",
    "platforms": "--platform",
    "date": "--date",
    "targets": "--target",
    "base-images": "--base-image",
    "cache-from-branch": "--cache-from-branch",
    "metadata-targets": "--metadata-targets",
}
"""Top-level keys that a command-line flag can set, and the flag."""

DEFAULTS: Dict[str, Any] = {
    "registry": None,  # each stage's own
    "platforms": (),  # each stage's own
    "date": "auto",
    "targets": (),
    "base-images": {},
    "cache-from-branch": None,
    "metadata-targets": (),  # the requested stages' final targets
    "plugins.enable": None,  # every installed plugin
    "plugins.disable": (),
}


@dataclasses.dataclass(frozen=True)
class FileConfig:
    """One configuration file, read and checked against :data:`SCHEMA`.

    :param path: the file. :param table: the table holding the keys (``tool.bake-plan`` in a
        ``pyproject.toml``, ``""`` for ``bake-plan.toml``). :param data: its keys.
    """

    path: Path
    table: str
    data: Mapping[str, Any]

    @property
    def name(self) -> str:
        """The file as messages show it: relative to the current directory when inside it."""
        return display_path(self.path)

    def where(self, *keys: str) -> str:
        """Provenance of a value: ``pyproject.toml:tool.bake-plan`` or ``bake-plan.toml:stages.jax``."""
        table = ".".join(k for k in (self.table, *keys) if k)
        return f"{self.name}:{table}" if table else self.name


@dataclasses.dataclass(frozen=True)
class Setting:
    """A merged value and where it came from (``default``, ``<file>:<table>``, ``--flag``)."""

    value: Any
    source: str


def display_path(path: Path) -> str:
    """``path`` relative to the current directory when inside it. Only the directory is resolved,
    so a symlink shows as itself (a dangling one or a loop too)."""
    path = Path(path)
    try:
        full = path.parent.resolve() / path.name
        return str(full.relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):
        return str(path)


def _not_a_file(path: Path) -> Optional[str]:
    """Why ``path`` cannot be read as a configuration file, or ``None`` when it can: a regular
    file (following symlinks), or ``/dev/null`` (an empty configuration)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a dangling symlink (to {os.readlink(path)})"
        return "no such file"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symlink loop"
        return f"cannot read: {err.strerror or err}"
    if stat.S_ISREG(info.st_mode):
        return None
    if stat.S_ISDIR(info.st_mode):
        return "is a directory"
    try:
        if os.path.samestat(info, os.stat(os.devnull)):
            return None
    except OSError:  # pragma: no cover - no /dev/null
        pass
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"))
    kind = next((name for test, name in kinds if test(info.st_mode)), "not a file")
    return f"is not a regular file ({kind})"


def _misspelt_table(data: dict) -> Optional[str]:
    """A ``[tool.*]`` table of a ``pyproject.toml`` that looks meant for bake-plan (``bake_plan``,
    ``bakeplan``, ``Bake-Plan``) when ``[tool.bake-plan]`` itself is absent."""
    tool = data.get("tool")
    if not isinstance(tool, dict) or PYPROJECT_TABLE[1] in tool:
        return None
    for key in tool:
        if re.sub(r"[-_.\s]", "", key.lower()) == "bakeplan":
            return key
    return None


def _no_table(path: Path, data: dict) -> Optional[ConfigError]:
    """The error for a ``pyproject.toml`` with a misspelt ``[tool.bake-plan]``, else ``None``."""
    near = _misspelt_table(data)
    if near is None:
        return None
    return ConfigError(f"{display_path(path)}: [tool.{_bare_or_quoted(near)}] is not read; did you mean [tool.bake-plan]?")


def find_config(start: Path) -> Optional[Path]:
    """The configuration file for ``start``: walking up to the filesystem root, the first
    ``bake-plan.toml``, or ``pyproject.toml`` with a ``[tool.bake-plan]`` table.

    :raises ConfigError: a ``bake-plan.toml`` or ``pyproject.toml`` on the way exists (or is a
        symlink) but is not a readable regular file (a directory, FIFO, dangling symlink, loop),
        is not TOML, or is a ``pyproject.toml`` with a misspelt table (``[tool.bake_plan]``).
    """
    for directory in [start, *start.parents]:
        for candidate in (directory / CONFIG_FILE, directory / PYPROJECT):
            if not os.path.lexists(candidate):
                continue
            reason = _not_a_file(candidate)
            if reason is not None:
                raise ConfigError(f"{display_path(candidate)}: {reason}")
            if candidate.name == CONFIG_FILE:
                return candidate
            data = _read_toml(candidate)
            if _table(data, PYPROJECT_TABLE) is not None:
                return candidate
            error = _no_table(candidate, data)
            if error is not None:
                raise error
    return None


def load(path: Optional[str] = None, start: Optional[Path] = None) -> Optional[FileConfig]:
    """Read the configuration: ``path`` (``--config``) or the one :func:`find_config` finds.

    :returns: the checked file, or ``None`` when there is none.
    :raises ConfigError: the file is missing (``--config``), not a regular file, unreadable, not
        TOML, has no ``[tool.bake-plan]`` (an explicit ``pyproject.toml``), or breaks the schema.
    """
    if path is not None:
        found = Path(path)
        reason = _not_a_file(found)
        if reason is not None:
            raise ConfigError(f"--config {path}: {reason}")
    else:
        found = find_config((start or Path.cwd()).resolve())
        if found is None:
            return None
    data = _read_toml(found)
    if found.name == PYPROJECT:
        table = _table(data, PYPROJECT_TABLE)
        if table is None:
            raise _no_table(found, data) or ConfigError(f"{display_path(found)}: no [tool.bake-plan] table")
        config = FileConfig(found, ".".join(PYPROJECT_TABLE), table)
    else:
        config = FileConfig(found, "", data)
    _check(config, config.data, SCHEMA, ())
    _check_plugins(config)
    return config


def _read_toml(path: Path) -> dict:
    """The file's TOML (UTF-8; a leading byte-order mark is dropped, as editors on Windows write one)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as err:
        raise ConfigError(f"{display_path(path)}: cannot read: {err.strerror or err}") from None
    try:
        return tomllib.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as err:
        raise ConfigError(f"{display_path(path)}: not UTF-8: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{display_path(path)}: not valid TOML: {err}") from None


def _table(data: dict, keys: Sequence[str]):
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _check(config: FileConfig, data: Any, schema: Any, keys: Tuple[str, ...]) -> None:
    """Every key known, every value of its shape; else one line naming file, table and key (and
    the offending element: ``targets[0]``, ``args.GREETING``, ``variants.python``)."""
    def fail(msg: str, element: str = "") -> ConfigError:
        table = ".".join(k for k in (config.table, *keys[:-1]) if k)
        where = f"[{table}] " if table else ""
        key = f"{keys[-1] if keys else ''}{element}"
        return ConfigError(f"{config.name}: {where}{key}{': ' if key else ''}{msg}")

    def string(value: Any, element: str) -> None:
        if not isinstance(value, str):
            raise fail(_not_a_string(value), element)
        if not value:
            raise fail("empty string", element)

    if isinstance(schema, dict):
        if not isinstance(data, dict):
            raise fail(f"expected a table, got {_type(data)}")
        for key, value in data.items():
            if key not in schema:
                table = ".".join(k for k in (config.table, *keys) if k)
                where = f"[{table}] " if table else ""
                hint = did_you_mean(key, schema)
                if key == "tool" and not config.table:
                    hint = f" ({CONFIG_FILE} takes the keys of [tool.bake-plan] at its top level)"
                raise ConfigError(f"{config.name}: {where}unknown key '{key}'{hint}")
            _check(config, value, schema[key], keys + (key,))
    elif isinstance(schema, tuple):  # ("each", sub-schema): a table of tables keyed by name
        if not isinstance(data, dict):
            raise fail(f"expected a table, got {_type(data)}")
        for name, value in data.items():
            _check(config, value, schema[1], keys + (name,))
    elif schema == "str":
        string(data, "")
    elif schema == "date":  # a string (a policy or YYYY-MM-DD) or a TOML date
        is_day = isinstance(data, datetime.date) and not isinstance(data, datetime.datetime)
        if not is_day and not isinstance(data, str):
            raise fail(f"expected a string or a date such as 2026-11-29, got {_type(data)}")
        if not is_day:
            string(data, "")
    elif schema == "strs":
        if not isinstance(data, list):
            raise fail(f"expected a list of strings, got {_type(data)}")
        for i, value in enumerate(data):
            string(value, f"[{i}]")
    elif schema == "table":
        if not isinstance(data, dict):
            raise fail(f"expected a table of strings, got {_type(data)}")
        for name, value in data.items():
            if not isinstance(value, str):
                raise fail(_not_a_string(value), f".{_bare_or_quoted(name)}")
    elif schema == "axes":
        if not isinstance(data, dict):
            raise fail(f"expected a table of axis = [values], got {_type(data)}")
        for axis, values in data.items():
            element = f".{_bare_or_quoted(axis)}"
            if not isinstance(values, list):
                raise fail(f"expected a list of values, got {_type(values)}", element)
            if not values:
                raise fail("no values", element)
            for i, value in enumerate(values):
                string(value, f"{element}[{i}]")


def _check_plugins(config: FileConfig) -> None:
    """``[plugins]``: ``enable`` names at least one plugin, and no plugin is both enabled and disabled."""
    plugins = config.data.get("plugins", {})
    enable, disable = _names(plugins.get("enable", ())), _names(plugins.get("disable", ()))
    where = f"{config.name}: [{'.'.join(k for k in (config.table, 'plugins') if k)}]"
    if "enable" in plugins and not enable:
        raise ConfigError(f"{where} enable: empty, so no plugin is enabled (leave enable out to load every installed plugin)")
    both = [name for name in enable if name in disable]
    if both:
        raise ConfigError(f"{where} plugin '{both[0]}' is both in enable and in disable")


def _type(value: Any) -> str:
    names = {str: "a string", list: "a list", dict: "a table", bool: "a boolean", int: "an integer",
             float: "a number", datetime.date: "a date", datetime.datetime: "a date-time", datetime.time: "a time"}
    return names.get(type(value), type(value).__name__)


def _not_a_string(value: Any) -> str:
    """``5 is an integer, expected a string`` (the value shown as TOML when it is a scalar)."""
    if isinstance(value, bool):
        shown = "true" if value else "false"
    elif isinstance(value, (int, float)):
        shown = repr(value)
    elif isinstance(value, (datetime.date, datetime.time)):
        shown = value.isoformat()
    else:
        return f"expected a string, got {_type(value)}"
    return f"{shown} is {_type(value)}, expected a string"


# ---------------------------------------------------------------------------------------------
# Values: one normaliser per top-level key, shared by the file and the command line.


def parse_date_policy(value: str, where: str) -> str:
    """``auto``, ``today``, ``source-date-epoch`` or a real ``YYYY-MM-DD`` day.

    :raises UsageError: anything else, naming ``where`` (``--date`` or the file and key).
    """
    if value in DATE_POLICIES or _is_day(value):
        return value
    raise _error(where, f"{value!r} is not a date in the form YYYY-MM-DD, nor one of {', '.join(DATE_POLICIES)}")


def _is_day(value: str) -> bool:
    try:
        return bool(_DATE.match(value)) and bool(datetime.date.fromisoformat(value))
    except ValueError:
        return False


def resolve_date(policy: str, environ: Mapping[str, str]) -> Tuple[datetime.date, Optional[str]]:
    """The build date a policy gives: ``auto`` is ``SOURCE_DATE_EPOCH`` (reproducible-builds.org)
    when set, else today in UTC.

    :returns: the date and, when it came from the environment, :data:`ENV_EPOCH`.
    :raises UsageError: ``SOURCE_DATE_EPOCH`` is not an integer, or unset for ``source-date-epoch``.
    """
    if _DATE.match(policy):
        return datetime.date.fromisoformat(policy), None
    epoch = environ.get("SOURCE_DATE_EPOCH")
    if policy == "source-date-epoch" and not epoch:
        raise UsageError("date = source-date-epoch, but SOURCE_DATE_EPOCH is not set")
    if policy != "today" and epoch:
        try:
            return datetime.datetime.fromtimestamp(int(epoch), tz=datetime.timezone.utc).date(), ENV_EPOCH
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"SOURCE_DATE_EPOCH {epoch!r} is not a Unix time in seconds") from None
    return datetime.datetime.now(tz=datetime.timezone.utc).date(), None


def parse_platforms(values: Sequence[str], where: str) -> Tuple[str, ...]:
    """Normalised, de-duplicated platforms; each value may be a comma list."""
    out = []
    for value in values:
        for item in value.split(","):
            try:
                out.append(check_platform(item))
            except ValueError as err:
                raise _error(where, str(err)) from None
    return tuple(dict.fromkeys(out))


def parse_base_images(pairs: Sequence[Tuple[str, str]], where: str) -> Dict[str, str]:
    """``{original: replacement}`` from image-reference pairs."""
    out = {}
    for original, replacement in pairs:
        if not _IMAGE_REF.match(original) or not _IMAGE_REF.match(replacement):
            raise _error(where, f"{original}={replacement} is not ORIGINAL=REPLACEMENT (two image references)")
        out[original] = replacement
    return out


def _error(where: str, msg: str) -> UsageError:
    return (UsageError if where.startswith("--") else ConfigError)(f"{where}: {msg}")


def _names(values: Sequence[str]) -> Tuple[str, ...]:
    return tuple(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


def _normalise(key: str, value: Any, where: str) -> Any:
    if key == "registry":
        try:
            return check_registry(value)
        except ValueError as err:
            raise _error(where, str(err)) from None
    if key == "platforms":
        return parse_platforms(value, where)
    if key == "date":
        if isinstance(value, datetime.date):  # a TOML date: that day
            return value.isoformat()
        return parse_date_policy(value, where)
    if key == "base-images":
        return parse_base_images(list(value.items()), where)
    if key in ("targets", "metadata-targets"):
        return _names(value)
    return value


# ---------------------------------------------------------------------------------------------
# Merging.


class Settings:
    """The merged configuration.

    :param values: top-level key (and ``plugins.enable``/``plugins.disable``) → :class:`Setting`.
    :param stages: the per-stage overrides (:class:`bake.plan.overrides.StageOverride`), file order.
    :param file: the configuration file, or ``None``.
    """

    def __init__(self, values: Dict[str, Setting], stages: Tuple[StageOverride, ...], file: Optional[FileConfig],
                 environ: Mapping[str, str]):
        self.values, self.stages, self.file, self._environ = values, stages, file, environ

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def date(self) -> Setting:
        """The build date under the merged policy, with its source.

        :raises UsageError: a bad ``SOURCE_DATE_EPOCH``, or none under ``source-date-epoch``.
        """
        policy = self.values["date"]
        day, env = resolve_date(policy.value, self._environ)
        return Setting(day, env or policy.source)

    def targets(self) -> Tuple[str, ...]:
        """``--target`` or the file's ``targets``. :raises UsageError: neither gives one."""
        targets = self["targets"]
        if not targets:
            raise UsageError(
                f"no target: pass --target T, or set targets = [...] in {CONFIG_FILE} "
                f"or in [tool.bake-plan] of {PYPROJECT}"
            )
        return targets

    def plan_options(self, **extra):
        """:class:`bake.plan.compose.PlanOptions` from the merged values; ``extra`` adds the
        command-line-only ones (``cache_branch``, ``from_registry``, ``digests``)."""
        from bake.plan.compose import PlanOptions

        return PlanOptions(
            targets=self.targets(),
            date=self.date().value,
            platforms=self["platforms"],
            registry=self["registry"],
            base_images=tuple(self["base-images"].items()),
            cache_from_branch=self["cache-from-branch"],
            **extra,
        )

    def blocked_plugins(self, installed: Sequence[str]) -> List[str]:
        """Entry-point names not to load: ``plugins.disable``, and with ``plugins.enable`` every
        other installed one (bake-plan's own policies always load).

        :raises ConfigError: a name that is not an installed plugin, a core plugin disabled, or
            every plugin that declares stages blocked.
        """
        from bake.plan.plugins import CORE_PLUGINS

        for key in ("plugins.enable", "plugins.disable"):
            setting = self.values[key]
            for name in setting.value or ():
                if name not in installed:
                    hint = did_you_mean(name, installed) or f" (installed: {', '.join(installed)})"
                    raise ConfigError(f"{setting.source}: {key.split('.')[1]}: no installed plugin '{name}'{hint}")
                if key == "plugins.disable" and name in CORE_PLUGINS:
                    raise ConfigError(
                        f"{setting.source}: disable: '{name}' is bake-plan's own; a plugin that answers "
                        "the policy hooks replaces it"
                    )
        blocked = set(self["plugins.disable"])
        if self["plugins.enable"] is not None:
            blocked |= set(installed) - set(self["plugins.enable"]) - set(CORE_PLUGINS)
        families = [name for name in installed if name not in CORE_PLUGINS]
        if families and blocked >= set(families):
            key = "plugins.enable" if self["plugins.enable"] is not None else "plugins.disable"
            raise ConfigError(
                f"{self.values[key].source}: no plugin is enabled: {key.split('.')[1]} leaves only bake-plan's own "
                f"(installed: {', '.join(families)})"
            )
        return sorted(blocked)

    def plugin_manager(self):
        """A plugin manager with the configuration's disabled plugins blocked before loading."""
        from bake.plan.plugins import entry_point_names, get_plugin_manager

        return get_plugin_manager(blocked=self.blocked_plugins(entry_point_names()))


def resolve(file: Optional[FileConfig], flags: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> Settings:
    """Merge built-in defaults < ``file`` < ``flags``.

    :param flags: top-level key (see :data:`FLAGS`) → value given on the command line, already
        in the file's shape (lists, ``{original: replacement}``); absent when the flag was not given.
    :raises UsageError: a flag's value is bad. :raises ConfigError: a file value is bad.
    """
    values = {key: Setting(value, DEFAULT) for key, value in DEFAULTS.items()}
    stages: List[StageOverride] = []
    if file is not None:
        for key, value in file.data.items():
            if key == "plugins":
                for sub, names in value.items():
                    values[f"plugins.{sub}"] = Setting(_names(names), file.where("plugins"))
            elif key == "stages":
                stages.extend(_override(name, table, file) for name, table in value.items())
            else:
                where = file.where()
                values[key] = Setting(_normalise(key, value, f"{file.name}: {_key_where(file, key)}"), where)
    for key, value in flags.items():
        values[key] = Setting(_normalise(key, value, FLAGS[key]), FLAGS[key])
    return Settings(values, tuple(stages), file, environ)


def _key_where(file: FileConfig, key: str) -> str:
    return f"[{file.table}] {key}" if file.table else key


def _override(name: str, table: Mapping[str, Any], file: FileConfig) -> StageOverride:
    return StageOverride(
        stage=name,
        where=file.where("stages", _bare_or_quoted(name)),
        args=dict(table.get("args", {})),
        sources={src: dict(fields) for src, fields in table.get("sources", {}).items()},
        base_image=table.get("base-image"),
        variants={axis: tuple(values) for axis, values in table.get("variants", {}).items()},
        variant_format=table.get("variant-format"),
        variant_args=dict(table.get("variant-args", {})),
    )


# ---------------------------------------------------------------------------------------------
# Printing: `bake-plan config`.

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _bare_or_quoted(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_bare_or_quoted(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, datetime.date):
        return json.dumps(value.isoformat())
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def to_toml(settings: Settings) -> str:
    """The merged configuration as a ``bake-plan.toml`` (valid TOML), each value followed by a
    comment naming its source; unset values are comments. ``date`` is the policy (``auto``), with
    the day it gives today in its comment."""
    origin = settings.file.name if settings.file else "no configuration file"
    lines = [f"# bake-plan configuration: built-in defaults < {origin} < command line", ""]
    rows: List[Tuple[str, str]] = []
    for key in FLAGS:
        setting = settings.values[key]
        if key == "date":  # the policy, so that the output reads back the same; the day in the comment
            rows.append((f"date = {_toml_value(setting.value)}", _date_comment(settings)))
        elif setting.value is None:
            rows.append((f"# {key} is not set", setting.source))
        else:
            rows.append((f"{key} = {_toml_value(setting.value)}", setting.source))
    rows.append(("", ""))
    rows.append(("[plugins]", ""))
    for sub in ("enable", "disable"):
        setting = settings.values[f"plugins.{sub}"]
        if setting.value is None:
            rows.append((f"# {sub} is not set: every installed plugin", setting.source))
        else:
            rows.append((f"{sub} = {_toml_value(setting.value)}", setting.source))
    for override in settings.stages:
        rows.append(("", ""))
        rows.append((f"[stages.{_bare_or_quoted(override.stage)}]", override.where))
        for key, value in override.as_table().items():
            rows.append((f"{key} = {_toml_value(value)}", ""))
    width = max(len(text) for text, _ in rows)
    for text, source in rows:
        lines.append(f"{text:<{width}}  # {source}".rstrip() if source else text)
    return "\n".join(lines).rstrip("\n") + "\n"


def _date_comment(settings: Settings) -> str:
    """``default; today: 2026-11-29`` or ``bake-plan.toml; env SOURCE_DATE_EPOCH: 2023-11-14``; just
    the source when the policy is a day."""
    policy = settings.values["date"]
    if _DATE.match(policy.value):
        return policy.source
    day = settings.date()
    return f"{policy.source}; {ENV_EPOCH if day.source == ENV_EPOCH else 'today'}: {day.value.isoformat()}"


def to_json(settings: Settings) -> str:
    """The merged configuration as JSON: ``file``, ``settings`` (key → ``{value, source}``) and
    ``stages`` (name → ``{value, source}``)."""
    out: Dict[str, Any] = {}
    for key in list(FLAGS) + ["plugins.enable", "plugins.disable"]:
        setting = settings.date() if key == "date" else settings.values[key]
        value = setting.value.isoformat() if isinstance(setting.value, datetime.date) else setting.value
        out[key] = {"value": list(value) if isinstance(value, tuple) else value, "source": setting.source}
    stages = {o.stage: {"value": o.as_table(), "source": o.where} for o in settings.stages}
    data = {"file": str(settings.file.path) if settings.file else None, "settings": out, "stages": stages}
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
