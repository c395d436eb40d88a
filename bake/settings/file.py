"""The configuration file: ``[tool.bake-plan]`` in ``pyproject.toml``, or ``bake-plan.toml``,
found, read and checked against its schema (what each value means, and the merge with the
command line and the environment, is :mod:`bake.settings.merge`).

Finding the file: ``--config FILE`` if given; else, from the current directory up to the
filesystem root, the first directory holding ``bake-plan.toml`` (its top-level keys) or a
``pyproject.toml`` with a ``[tool.bake-plan]`` table (one without is skipped, one with a misspelt
``[tool.bake_plan]`` is an error), ``bake-plan.toml`` first (ruff's and black's search, with their
precedence of the tool's own file). A name that exists but is not a regular file (a directory, a
FIFO, a dangling symlink, a loop) is an error, not skipped; ``/dev/null`` is an empty file.

Precedence: a command-line flag beats the environment's ``BAKE_PLAN_<SETTING>`` variable, which
beats the file; the file beats the built-in default. Each merged value carries its source:
``default``, ``<file>:<table>``, ``env BAKE_PLAN_REGISTRY``, ``--flag`` or ``env SOURCE_DATE_EPOCH``.

Keys (``bake-plan config`` prints them merged)::

    registry = "ghcr.io/acme"                 # --registry
    platforms = ["linux/amd64", "linux/arm64"] # --platform
    date = "auto"   # --date: auto (SOURCE_DATE_EPOCH, else today) | today | source-date-epoch | YYYY-MM-DD (or a TOML date)
    targets = ["upstream-pax"]                 # --target, when none is given
    base-images = { "python:3.11" = "mirror.example/python:3.11" }   # --base-image
    cache-from-branch = "main"                 # --cache-from-branch
    metadata-targets = ["upstream-pax"]        # --metadata-targets
    pull = true     # build --pull / --no-pull: fetch every base image anew (default: with --push)
    provenance = true                          # --provenance: attest type=provenance,mode=max
    sbom = true                                # --sbom: attest type=sbom (an SPDX SBOM per image)
    sbom-generator = "localhost:5000/syft-scanner:1"  # --sbom-generator (default docker/buildkit-syft-scanner)
    progress = "plain"   # build --progress: auto | tty | plain | quiet | rawjson
    install = "bake-plan @ git+https://github.com/acme/bake-plan@v0.2"  # what the CI workflow pip-installs
    arch-size-ratio = 2.5  # publish --arch-size-ratio: largest arch's image / smallest's before it is held
    since-last = false     # build --since-last / --no-since-last: the sitrep's diff against the last nightly (default: on)

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

import datetime
import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

from bake.documents import DocumentError, read_toml
from bake.errors import ConfigError, did_you_mean
from bake.patterns import LazyPattern
from bake.settings.values import names

CONFIG_FILE = "bake-plan.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = ("tool", "bake-plan")

# The schema. Leaves are shapes: "str", "date" (a string or a TOML date), "strs" (list of strings),
# "value"/"values" (a string / list of strings whose content only its parser in bake.settings.values
# checks, so the file and the flag refuse a bad one with the same words),
# "number" (an integer, a float, or a string its parser reads), "table" (string → string), "axes" (string → list of strings); a dict is a sub-table;
# ("each", sub-schema) is a table of them by name (one per stage, per source).
_SOURCE = {"url": "str", "ref": "str"}
_STAGE = {"args": "table", "sources": ("each", _SOURCE), "base-image": "str", "variants": "axes",
          "variant-format": "str", "variant-args": "table"}
SCHEMA: Dict[str, Any] = {
    "registry": "value",
    "platforms": "values",
    "date": "date",
    "targets": "strs",
    "base-images": "table",
    "cache-from-branch": "value",
    "pull": "bool",
    "progress": "value",
    "metadata-targets": "strs",
    "wheelhouse": "value",
    "provenance": "bool",
    "sbom": "bool",
    "sbom-generator": "value",
    "install": "value",
    "allow": "strs",
    "arch-size-ratio": "number",
    "since-last": "bool",
    "plugins": {"enable": "strs", "disable": "strs"},
    "stages": ("each", _STAGE),
}

class FileConfig(NamedTuple):
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
    return ConfigError(f"{display_path(path)}: [tool.{bare_or_quoted(near)}] is not read; did you mean [tool.bake-plan]?")


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
    """The file's TOML (:func:`bake.documents.read_toml`: UTF-8, a byte-order mark dropped, depth bounded)."""
    try:
        return read_toml(path)
    except OSError as err:
        raise ConfigError(f"{display_path(path)}: cannot read: {err.strerror or err}") from None
    except DocumentError as err:
        raise ConfigError(f"{display_path(path)}: {err}") from None


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
    elif schema == "bool":
        if not isinstance(data, bool):
            raise fail(f"expected true or false, got {_type(data)}")
    elif schema == "value":  # a string whose content its parser checks, as for the flag
        if not isinstance(data, str):
            raise fail(_not_a_string(data))
    elif schema == "number":  # its parser checks the value, as for the flag's text
        if isinstance(data, bool) or not isinstance(data, (int, float, str)):
            raise fail(f"expected a number, got {_type(data)}")
    elif schema == "values":
        if not isinstance(data, list):
            raise fail(f"expected a list of strings, got {_type(data)}")
        for i, value in enumerate(data):
            if not isinstance(value, str):
                raise fail(_not_a_string(value), f"[{i}]")
    elif schema == "date":  # a string (a policy or YYYY-MM-DD, checked by its parser) or a TOML date
        is_day = isinstance(data, datetime.date) and not isinstance(data, datetime.datetime)
        if not is_day and not isinstance(data, str):
            raise fail(f"expected a string or a date such as 2026-11-29, got {_type(data)}")
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
                raise fail(_not_a_string(value), f".{bare_or_quoted(name)}")
    elif schema == "axes":
        if not isinstance(data, dict):
            raise fail(f"expected a table of axis = [values], got {_type(data)}")
        for axis, values in data.items():
            element = f".{bare_or_quoted(axis)}"
            if not isinstance(values, list):
                raise fail(f"expected a list of values, got {_type(values)}", element)
            if not values:
                raise fail("no values", element)
            for i, value in enumerate(values):
                string(value, f"{element}[{i}]")


def _check_plugins(config: FileConfig) -> None:
    """``[plugins]``: ``enable`` names at least one plugin, and no plugin is both enabled and disabled."""
    plugins = config.data.get("plugins", {})
    enable, disable = names(plugins.get("enable", ())), names(plugins.get("disable", ()))
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


_BARE_KEY = LazyPattern(r"[A-Za-z0-9_-]+\Z")


def bare_or_quoted(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)
