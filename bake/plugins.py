"""The plugin manager: built-in and third-party plugins, loaded the same way, and a typed wrapper.

Nothing happens at import time: :func:`get_plugin_manager` builds a fresh manager on each call, so
tests can make their own (pluggy's eggsample layout).

Entry points are found by reading the ``entry_points.txt`` of every distribution on ``sys.path``
directly, the way :mod:`importlib.metadata` finds them but without importing it (it pulls in the
``email`` package and costs a plan about a quarter of its start-up time). Where that shortcut could
miss something (a zip or ``.egg`` on ``sys.path``, an import hook that provides distributions),
:mod:`importlib.metadata` itself is asked.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.machinery
import os
import re
import sys
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import pluggy

from bake import PROJECT, hookspecs
from bake.errors import PluginError, StageError
from bake.stage import Stage, validate


def get_plugin_manager(load_entrypoints: bool = True, plugins: Sequence[object] = ()) -> pluggy.PluginManager:
    """A new manager with the hook specs, every ``bake_plan`` entry point, then ``plugins``.

    :param load_entrypoints: load the entry-point group ``bake_plan`` (the built-ins are there too).
    :param plugins: extra plugin objects (modules or instances) registered after the entry points.
    :raises PluginError: an entry point fails to import, or implements a hook that does not exist.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    if load_entrypoints:
        for ep in _entry_points():
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as err:  # a broken third-party package must not give a traceback
                raise PluginError(
                    f"plugin '{ep.name}' (from {ep.dist}, {ep.value}) failed to load: {type(err).__name__}: {err}"
                ) from None
            _register(pm, plugin, ep.name)
    for plugin in plugins:
        _register(pm, plugin, None)
    return pm


class EntryPoint(NamedTuple):
    """One entry point of the ``bake_plan`` group: ``name = value`` from distribution ``dist``."""

    name: str
    value: str
    dist: str
    """The distribution's name (``?`` when unknown), for error messages."""

    def load(self) -> object:
        """Import the module of ``module[:attr.attr]`` (extras ignored) and return the object."""
        module, _, attrs = self.value.split("[", 1)[0].partition(":")
        obj = importlib.import_module(module.strip())
        for attr in attrs.strip().split("."):
            if attr:
                obj = getattr(obj, attr)
        return obj


def _entry_points() -> List[EntryPoint]:
    found = _scan_entry_points(PROJECT)
    if found is None:
        found = _importlib_entry_points(PROJECT)
    # One entry per name, sorted, so the load order (and so hook order) does not depend on sys.path.
    unique = {ep.name: ep for ep in found}
    return [unique[name] for name in sorted(unique)]


def _importlib_entry_points(group: str) -> List[EntryPoint]:
    from importlib import metadata

    eps = metadata.entry_points()
    selected = eps.select(group=group) if hasattr(eps, "select") else eps.get(group, [])
    return [EntryPoint(ep.name, ep.value, getattr(getattr(ep, "dist", None), "name", None) or "?")
            for ep in selected]


def _scan_entry_points(group: str) -> Optional[List[EntryPoint]]:
    """``group``'s entry points from the ``*.dist-info``/``*.egg-info`` directories on ``sys.path``,
    in :func:`importlib.metadata.entry_points`'s order (the first distribution of a name wins), or
    ``None`` when only :mod:`importlib.metadata` can answer."""
    if any(hasattr(finder, "find_distributions") for finder in sys.meta_path
           if finder is not importlib.machinery.PathFinder):
        return None
    found: List[EntryPoint] = []
    seen = set()
    for entry in sys.path:
        if not isinstance(entry, str) or entry.lower().endswith(".egg"):
            return None
        try:
            children = os.listdir(entry or ".")
        except OSError:
            if os.path.isfile(entry):  # a zip on sys.path
                return None
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            normalized = re.sub(r"[-_.]+", "_", low.rpartition(".")[0].partition("-")[0])
            if normalized in seen:
                continue
            seen.add(normalized)
            info = os.path.join(entry, child)
            pairs = list(_read_group(os.path.join(info, "entry_points.txt"), group))
            if pairs:
                dist = _dist_name(info)
                found.extend(EntryPoint(name, value, dist) for name, value in pairs)
    return found


def _read_group(path: str, group: str) -> Iterator[Tuple[str, str]]:
    # entry_points.txt is INI-like; parsed the way importlib.metadata parses it.
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, ValueError):  # missing, unreadable, not UTF-8: no entry points
        return
    section = None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            yield name.strip(), value.strip()


def _dist_name(info: str) -> str:
    # The Name: header of the metadata (the spelling users know), else the directory's stem.
    for filename in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info, filename), encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        break
                    if line.lower().startswith("name:"):
                        return line[5:].strip()
        except (OSError, ValueError):
            continue
    return os.path.basename(info).partition("-")[0]


def _register(pm: pluggy.PluginManager, plugin: object, name: Optional[str]) -> None:
    try:
        pm.register(plugin, name=name)
    except ValueError as err:
        raise PluginError(f"plugin '{name or plugin}' could not be registered: {err}") from None
    except pluggy.PluginValidationError as err:
        raise PluginError(f"plugin '{name or plugin}': {err}") from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as err:
        raise PluginError(
            f"plugin '{pm.get_name(plugin)}' implements a hook bake-plan does not have: {err}"
        ) from None


class Hooks:
    """Typed calls into the plugins, each failure turned into one :class:`PluginError` line."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm

    def collect_stages(self) -> Dict[str, Stage]:
        """Every stage of every plugin, by name, each stamped with its plugin.

        :raises PluginError: a plugin raises or returns something other than a list of stages.
        :raises StageError: a stage is malformed, or two plugins define the same stage name.
        """
        stages: Dict[str, Stage] = {}
        checked_contexts: set = set()  # contexts found on disk: one look each, however many stages share it
        # Called one implementation at a time so every stage (and every failure) names its plugin.
        for impl in reversed(self.pm.hook.bake_plan_stages.get_hookimpls()):
            plugin = impl.plugin_name
            try:
                returned = impl.function()
            except Exception as err:
                raise PluginError(f"plugin '{plugin}' raised {type(err).__name__} in bake_plan_stages: {err}") from None
            if returned is None:
                continue
            if isinstance(returned, Stage) or not isinstance(returned, (list, tuple)):
                raise PluginError(
                    f"plugin '{plugin}': bake_plan_stages returned {type(returned).__name__}, expected a list of bake.Stage"
                )
            for item in returned:
                stage = validate(item, plugin, checked_contexts)
                if stage.name in stages:
                    other = stages[stage.name].plugin
                    raise StageError(
                        f"stage '{stage.name}' is defined twice: by plugin '{other}' and by plugin '{plugin}'"
                    )
                stages[stage.name] = stage
        return stages

    def _call(self, hook: str, **kwargs):
        try:
            return getattr(self.pm.hook, hook)(**kwargs)
        except Exception as err:
            stage = kwargs.get("stage")
            where = f" for stage '{stage.name}'" if stage is not None else ""
            raise PluginError(f"a plugin raised {type(err).__name__} in {hook}{where}: {err}") from None

    def tags(self, stage: Stage, flavor: str, date: datetime.date) -> List[str]:
        return self._expect_strs("bake_plan_tags", stage, self._call("bake_plan_tags", stage=stage, flavor=flavor, date=date))

    def cache_key(self, stage: Stage, flavor: str) -> str:
        key = self._call("bake_plan_cache_key", stage=stage, flavor=flavor)
        if not isinstance(key, str) or not key:
            raise PluginError(f"bake_plan_cache_key for stage '{stage.name}' returned {key!r}, expected a string")
        return key

    def platforms(self, stage: Stage, requested: Sequence[str]) -> List[str]:
        answer = self._call("bake_plan_platforms", stage=stage, requested=tuple(requested))
        return self._expect_strs("bake_plan_platforms", stage, answer)

    def adjust_target(self, stage: Stage, name: str, flavor: str, target: dict) -> None:
        self._call("bake_plan_adjust_target", stage=stage, name=name, flavor=flavor, target=target)

    @staticmethod
    def _expect_strs(hook: str, stage: Stage, value) -> List[str]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise PluginError(f"{hook} for stage '{stage.name}' returned {value!r:.60}, expected a list of strings")
        return list(value)
