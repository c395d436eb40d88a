"""The plugin manager: built-in and third-party plugins, loaded the same way, and a typed wrapper.

Nothing happens at import time: :func:`get_plugin_manager` builds a fresh manager on each call, so
tests can make their own (pluggy's eggsample layout).
"""

from __future__ import annotations

import datetime
from importlib import metadata
from typing import Dict, Iterable, List, Optional, Sequence

import pluggy

from bake import PROJECT, hookspecs
from bake.errors import PluginError, StageError
from bake.stage import Stage, validate


CORE_PLUGINS = ("default-policies",)
"""Entry points that are part of bake-plan itself (the default policies): never blocked."""


def get_plugin_manager(
    load_entrypoints: bool = True, plugins: Sequence[object] = (), blocked: Iterable[str] = ()
) -> pluggy.PluginManager:
    """A new manager with the hook specs, every ``bake_plan`` entry point, then ``plugins``.

    :param load_entrypoints: load the entry-point group ``bake_plan`` (the built-ins are there too).
    :param plugins: extra plugin objects (modules or instances) registered after the entry points.
    :param blocked: entry-point names not to load (``pm.set_blocked``: never imported), e.g. from
        the configuration's ``plugins.disable``.
    :raises PluginError: an entry point fails to import, or implements a hook that does not exist.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    for name in blocked:
        if name not in CORE_PLUGINS:
            pm.set_blocked(name)
    if load_entrypoints:
        for ep in _entry_points():
            if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as err:  # a broken third-party package must not give a traceback
                dist = _dist_name(ep) or "?"
                raise PluginError(
                    f"plugin '{ep.name}' (from {dist}, {ep.value}) failed to load: {type(err).__name__}: {err}"
                ) from None
            _register(pm, plugin, ep.name)
    for plugin in plugins:
        _register(pm, plugin, None)
    return pm


BUILTIN_MODULES = ("bake", "bake_plan_plugins")
"""Top-level packages of bake-plan's own entry points (the built-in stages and the default policies)."""


def entry_point_names(builtin_only: bool = False) -> List[str]:
    """Names of the installed ``bake_plan`` entry points, sorted; with ``builtin_only``, only
    bake-plan's own (their modules are in :data:`BUILTIN_MODULES`)."""
    eps = _entry_points()
    if builtin_only:
        eps = [ep for ep in eps if ep.value.split(":")[0].split(".")[0] in BUILTIN_MODULES]
    return [ep.name for ep in eps]


def _dist_name(ep) -> Optional[str]:
    return getattr(getattr(ep, "dist", None), "name", None)


def _entry_points():
    eps = metadata.entry_points()
    selected = eps.select(group=PROJECT) if hasattr(eps, "select") else eps.get(PROJECT, [])
    # One entry per name, sorted, so the load order (and so hook order) does not depend on sys.path.
    unique = {ep.name: ep for ep in selected}
    return [unique[name] for name in sorted(unique)]


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
                stage = validate(item, plugin)
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
