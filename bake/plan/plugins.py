"""The plugin manager: built-in and third-party plugins, loaded the same way, and a typed wrapper.

Nothing happens at import time: :func:`get_plugin_manager` builds a fresh manager on each call, so
tests can make their own (pluggy's eggsample layout).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import sys
import types
import warnings
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import pluggy

from bake.errors import PluginError, StageError
from bake.patterns import LazyPattern
from bake.plan import entrypoints, hookspecs
from bake.plan.hookspecs import PROJECT
from bake.plan.stage import ImageTest, Source, Stage
from bake.plan.text import clipped, one_line
from bake.plan.validate import validate

# A dataclass constructor called with a field it does not have, or without a required one
# (Python 3.10+ names the class: "Stage.__init__() got an unexpected keyword argument 'imagee'").
_UNEXPECTED_FIELD = LazyPattern(r"(?:\b(\w+)\.)?__init__\(\) got an unexpected keyword argument '(\w+)'")
_MISSING_FIELD = LazyPattern(r"(?:\b(\w+)\.)?__init__\(\) missing \d+ required positional arguments?: (.+)")
_MODEL = {"Stage": Stage, "Source": Source, "ImageTest": ImageTest}


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
                with _stdout_to_stderr():
                    plugin = ep.load()
            except KeyboardInterrupt:
                raise
            except BaseException as err:  # a broken third-party package must not give a traceback
                where = f"distribution {ep.dist}, {ep.value}" if ep.dist else ep.value  # the package, then the module
                raise PluginError(
                    f"plugin '{ep.name}' (from {where}) failed to load: {type(err).__name__}: {err}"
                    f"{disable_hint(ep.name)}"
                ) from None
            _register(pm, plugin, ep.name)
    for plugin in plugins:
        _register(pm, plugin, entry_point_name_of(plugin))
    return pm


ENV_PLUGINS_DISABLE = "BAKE_PLAN_PLUGINS_DISABLE"
"""The environment variable whose comma-separated entry-point names join ``plugins.disable``: one
environment (a CI job, a test run) can keep out a plugin installed beside bake-plan without a
configuration file (tox's block list, likewise). Read in :mod:`bake.settings.merge` (the name
``env_variable("plugins.disable")`` gives); defined here, once, for the error lines too."""


def disable_hint(name: Optional[str]) -> str:
    """What ends the error line of a broken plugin: how to run without it (its entry-point name in
    the configuration's ``plugins.disable``, or in ``$BAKE_PLAN_PLUGINS_DISABLE``). Empty for a
    plugin registered without an entry-point name, and for bake-plan's own default policies."""
    if not name or name.isdigit() or name in CORE_PLUGINS:
        return ""
    return (f" (to run without it: plugins.disable = [\"{name}\"] in the configuration, "
            f"or {ENV_PLUGINS_DISABLE}={name})")


def entry_point_name_of(plugin: object) -> Optional[str]:
    """The name of the installed ``bake_plan`` entry point that loads ``plugin`` (a module named
    ``module`` or an object ``module:attr``), so a plugin passed as an object (``bake.testing``) is
    named as the command line names it; ``None`` when no entry point loads it."""
    module = getattr(plugin, "__name__", None) if isinstance(plugin, types.ModuleType) else None
    for ep in _entry_points():
        mod, _, attr = ep.value.partition(":")
        mod, attr = mod.strip(), attr.strip()
        if module is not None and not attr and mod == module:
            return ep.name
        loaded = sys.modules.get(mod)
        if attr and loaded is not None and _attribute(loaded, attr) is plugin:
            return ep.name
    return None


def _attribute(obj: object, dotted: str) -> object:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
    return obj


class PluginWarning(UserWarning):
    """A plugin mistake that does not stop the run: a ``bake_plan_*`` function not marked
    ``@hookimpl``, which pluggy ignores. The command line shows it as one ``bake-plan: warning:``
    line on stderr; pytest collects it (``pytest.warns(PluginWarning)``)."""


def _warn_unmarked(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    """Warn about each ``bake_plan_*`` callable of ``plugin`` that pluggy does not take for a hook
    implementation (no ``@hookimpl``): it would never be called, silently."""
    for attr in sorted(dir(plugin)):
        if not attr.startswith(PROJECT + "_"):
            continue
        value = getattr(plugin, attr, None)
        if callable(value) and not isinstance(value, type) and pm.parse_hookimpl_opts(plugin, attr) is None:
            warnings.warn(PluginWarning(
                f"plugin '{name}': {attr} is not marked @hookimpl, so bake-plan never calls it "
                "(from bake import hookimpl; @hookimpl above the def)"), stacklevel=2)


BUILTIN_MODULES = ("bake", "bake_plan_plugins")
"""Top-level packages of bake-plan's own entry points (the built-in stages and the default policies)."""


def entry_point_names(builtin_only: bool = False) -> List[str]:
    """Names of the installed ``bake_plan`` entry points, sorted; with ``builtin_only``, only
    bake-plan's own (their modules are in :data:`BUILTIN_MODULES`)."""
    eps = _entry_points()
    if builtin_only:
        eps = [ep for ep in eps if ep.value.split(":")[0].split(".")[0] in BUILTIN_MODULES]
    return [ep.name for ep in eps]


def _entry_points():
    return entrypoints.entry_points()


def _register(pm: pluggy.PluginManager, plugin: object, name: Optional[str]) -> None:
    if name is not None and pm.is_blocked(name):
        pm.unblock(name)  # passed as an object: wanted, though its entry point is not loaded
    shown = name or getattr(plugin, "__name__", None) or type(plugin).__name__
    # pluggy's own ValueError spells out every registered plugin's repr: one line says which clash
    if pm.is_registered(plugin):
        what = f"module {plugin.__name__}" if hasattr(plugin, "__name__") else "the same object"
        raise PluginError(f"plugin '{shown}' could not be registered: {what} is already plugin "
                          f"'{pm.get_name(plugin)}' (two entry points name one plugin){disable_hint(name)}")
    if name is not None and pm.has_plugin(name):
        raise PluginError(f"plugin '{name}' could not be registered: another plugin has that name{disable_hint(name)}")
    try:
        pm.register(plugin, name=name)
    except ValueError as err:
        first = clipped(str(err).splitlines()[0], 200) if str(err) else type(err).__name__
        raise PluginError(f"plugin '{shown}' could not be registered: {first}{disable_hint(name)}") from None
    except pluggy.PluginValidationError as err:
        raise PluginError(f"plugin '{name or plugin}': {err}{disable_hint(name)}") from None
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as err:
        raise PluginError(
            f"plugin '{pm.get_name(plugin)}' implements a hook bake-plan does not have: {err}{disable_hint(name)}"
        ) from None
    _warn_unmarked(pm, plugin, name or _label(plugin))


class Hooks:
    """Typed calls into the plugins, each failure turned into one :class:`PluginError` line."""

    def __init__(self, pm: pluggy.PluginManager):
        self.pm = pm
        # While watching (watching()): target name -> (the live target, a copy of it when finished).
        self._watched: Optional[Dict[str, Tuple[dict, dict]]] = None
        # Hook name → (its implementations when last called, its wrappers among them).
        self._impls: Dict[str, Tuple[list, list]] = {}
        self.platforms_by: Dict[str, Optional[str]] = {}
        """Stage name → the plugin whose ``bake_plan_platforms`` answered for it (:meth:`platforms`)."""

    def collect_stages(self) -> Dict[str, Stage]:
        """Every stage of every plugin, by name, each stamped with its plugin.

        :raises PluginError: a plugin raises or returns something other than a list of stages.
        :raises StageError: a stage is malformed, or two plugins define the same stage name.
        """
        stages: Dict[str, Stage] = {}
        checked_contexts: set = set()  # contexts found on disk: one look each, however many stages share it
        returned, call = self._through_pluggy("bake_plan_stages")
        # Each list is the plugin's whose implementation returned it; a list a hook wrapper put
        # in pluggy's answer is the wrapper's (or "a hook wrapper" when there are several).
        by_list = {id(answer): label for label, answer in call.answers}
        if not isinstance(returned, list):  # a hook wrapper replaced pluggy's list of answers
            raise PluginError(f"plugin '{call.wrapper_label}': its bake_plan_stages wrapper returned "
                              f"{type(returned).__name__}, expected pluggy's list of answers (lists of bake.Stage)")
        for answer in reversed(returned):  # pluggy answers last-registered first: plugins in load order
            plugin = by_list.get(id(answer)) or call.wrapper_label
            if isinstance(answer, Stage) or not isinstance(answer, (list, tuple)):
                raise PluginError(f"plugin '{plugin}': bake_plan_stages returned {type(answer).__name__}, expected a "
                                  f"list of bake.Stage{disable_hint(call.names.get(plugin))}")
            for item in answer:
                stage = validate(item, plugin, checked_contexts)
                if stage.name in stages:
                    other = stages[stage.name].plugin
                    raise StageError(
                        f"stage '{stage.name}' is defined twice: by plugin '{other}' and by plugin '{plugin}'"
                    )
                stages[stage.name] = stage
        return stages

    def _through_pluggy(self, hook: str, observe: Optional[Callable[[Optional[str]], None]] = None,
                        in_place: bool = False, **kwargs) -> Tuple[object, "_Call"]:
        """Call a hook through pluggy (``pm.hook.<hook>(**kwargs)``), so its order, ``firstresult``
        and hook wrappers (``wrapper=True``, ``hookwrapper=True``) are pluggy's, with each plain
        implementation guarded (:func:`_guarded`) so a failure, an answer and a change to a
        watched target name the plugin whose implementation it was.

        :returns: pluggy's answer (a list, or a ``firstresult`` hook's one answer) and the
            :class:`_Call`, whose ``answers`` are ``[(plugin, answer)]`` in call order.
        :raises PluginError: an implementation or a wrapper raised, returned an answer to an
            ``in_place`` hook, or changed a finished target (:meth:`watching`).
        """
        caller = getattr(self.pm.hook, hook)
        impls = caller.get_hookimpls()
        known = self._impls.get(hook)
        if known is None or known[0] != impls:  # a plugin registered since: guard its implementations
            for impl in impls:
                if not (impl.hookwrapper or impl.wrapper) and not getattr(impl.function, _GUARDED, False):
                    impl.function = _guarded(impl)
            known = self._impls[hook] = (impls, [impl for impl in impls if impl.hookwrapper or impl.wrapper])
        wrappers = known[1]
        call = _Call(self, hook, kwargs, observe, in_place, wrappers)
        _CALLS.append(call)
        # What plugins print goes to stderr (_stdout_to_stderr), swapped here by hand: this runs
        # for each of a large plan's tens of thousands of hook calls.
        stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            answer = caller(**kwargs)
        except (PluginError, KeyboardInterrupt):
            raise
        except BaseException as err:  # raised by a wrapper (a plain implementation's is a PluginError)
            who = f"plugin '{call.wrapper_label}'" if len(wrappers) == 1 else "a plugin (through a hook wrapper)"
            raise PluginError(f"{who} raised {type(err).__name__} in {hook}{call.where}: {one_line(str(err))}") from None
        finally:
            sys.stdout = stdout
            _CALLS.pop()
        if wrappers:  # what a wrapper changed after its implementations returned
            self._after(None, hook, call.where, observe)
        return answer, call

    def _call(self, hook: str, firstresult: bool = False, observe: Optional[Callable[[Optional[str]], None]] = None,
              in_place: bool = False, **kwargs) -> Tuple[object, Optional[str]]:
        """Call a hook through pluggy (:meth:`_through_pluggy`). Returns ``(answer, plugin name)``:
        for a ``firstresult`` hook pluggy's answer and the plugin that gave it (``None`` when a
        hook wrapper replaced it), else the list of answers and ``None``.

        :param observe: called with the plugin name (``None`` for a hook wrapper) after each
            implementation returns, so a caller can see what that call changed.
        :param in_place: the hook changes what it is handed and answers nothing: an answer would
            be lost, so it is a :class:`PluginError` (a plugin returning a new target instead).
        :raises PluginError: an implementation raised, or changed a finished target (:meth:`watching`).
        """
        answer, call = self._through_pluggy(hook, observe=observe, in_place=in_place, **kwargs)
        if not firstresult:
            return answer, None
        plugin = next((label for label, given in call.answers if given is answer), None)
        return answer, plugin

    def tags(self, stage: Stage, flavor: str, date: datetime.date) -> List[str]:
        """The tag policy's answer for one target. :raises PluginError: it raised or is not a list of strings."""
        return self.tags_by(stage, flavor, date)[0]

    def tags_by(self, stage: Stage, flavor: str, date: datetime.date) -> Tuple[List[str], Optional[str]]:
        """:meth:`tags` and the name of the plugin that answered (``None`` when unknown)."""
        answer, plugin = self._call("bake_plan_tags", firstresult=True, stage=stage, flavor=flavor, date=date)
        return self._expect_strs("bake_plan_tags", stage, answer, plugin), plugin

    def cache_key(self, stage: Stage, flavor: str) -> str:
        """The cache-key policy's answer for one target. :raises PluginError: it raised or is not a string."""
        return self.cache_key_by(stage, flavor)[0]

    def cache_key_by(self, stage: Stage, flavor: str) -> Tuple[str, Optional[str]]:
        """:meth:`cache_key` and the name of the plugin that answered (``None`` when unknown)."""
        key, plugin = self._call("bake_plan_cache_key", firstresult=True, stage=stage, flavor=flavor)
        if not isinstance(key, str) or not key:
            raise PluginError(f"{_by(plugin)}bake_plan_cache_key for stage '{stage.name}' returned {key!r:.60}, "
                              "expected a non-empty string")
        return key, plugin

    def platforms(self, stage: Stage, requested: Sequence[str]) -> List[str]:
        """The platform policy's answer for one stage.

        :raises PluginError: it raised, is not a list of strings, is empty, or names a platform the
            stage does not support that ``requested`` does not hold either.
        """
        answer, plugin = self._call("bake_plan_platforms", firstresult=True, stage=stage, requested=tuple(requested))
        platforms = self._expect_strs("bake_plan_platforms", stage, answer, plugin)
        if not platforms:  # buildx would build for the engine's own platform under every arch's tags
            raise PluginError(f"{_by(plugin)}bake_plan_platforms for stage '{stage.name}' returned no platform "
                              "(return None to leave the answer to the next policy)")
        self.platforms_by[stage.name] = plugin
        invented = [p for p in platforms if p not in stage.platforms and p not in requested]
        if invented:  # nobody asked for it: the policy's mistake, not the user's (that is compose's)
            raise PluginError(f"{_by(plugin)}bake_plan_platforms for stage '{stage.name}' answered "
                              f"{', '.join(invented)}, which the stage does not support (it supports "
                              f"{', '.join(stage.platforms)}) and no --platform asked for")
        return platforms

    def adjust_target(self, stage: Stage, name: str, flavor: str, target: dict) -> Dict[Tuple[str, Optional[str]], str]:
        """Let every plugin adjust one target in place, and say who changed what.

        :returns: ``(attribute, key)`` → the plugin whose call last changed it (added, replaced,
            removed or changed inside); ``key`` is a key of a mapping attribute (``args``,
            ``labels``, ``contexts``) or ``None`` for the attribute as a whole. Through a hook
            wrapper the plugin is unknown: :data:`THROUGH_A_WRAPPER`.
        :raises PluginError: a plugin raised, or returned something (a new target, which would be lost).
        """
        changed: Dict[Tuple[str, Optional[str]], str] = {}
        if not self.adjusts_targets():
            return changed
        before = [snapshot(target)]

        def observe(plugin: Optional[str]) -> None:
            after = snapshot(target)
            for where in changes(before[0], after):
                changed[where] = plugin or THROUGH_A_WRAPPER
            before[0] = after

        self._call("bake_plan_adjust_target", observe=observe, in_place=True, stage=stage, name=name, flavor=flavor,
                   target=target)
        return changed

    def adjusts_targets(self) -> bool:
        """Whether any plugin implements ``bake_plan_adjust_target`` (is ever handed a target)."""
        return bool(self.pm.hook.bake_plan_adjust_target.get_hookimpls())

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """While in this block, every target passed to :meth:`watch` is compared with how it was
        when it was finished after each hook implementation returns, and a change is a
        :class:`PluginError` naming the plugin, the hook call, the target and the attribute: a
        plugin that kept a reference to a target and changes it from a later call (costly: only
        to find such a plugin once a change is known)."""
        self._watched = {}
        try:
            yield
        finally:
            self._watched = None

    def watch(self, name: str, target: dict) -> None:
        """Take a finished target under watch (:meth:`watching`; outside it, nothing happens)."""
        if self._watched is not None:
            self._watched[name] = (target, snapshot(target))

    def _after(self, plugin: Optional[str], hook: str, where: str, observe) -> None:
        if observe is not None:
            observe(plugin)
        for name, (target, finished) in (self._watched or {}).items():
            if target != finished:
                attr, key = next(iter(changes(finished, target)), ("?", None))
                what = f"{attr}[{key!r}]" if key is not None else attr
                who = f"plugin '{plugin}'" if plugin else "a plugin (through a hook wrapper)"
                raise PluginError(
                    f"{who}, target '{name}', {what}: changed in {hook}{where}, after the target was finished; "
                    "a plugin may change a target only in bake_plan_adjust_target for that target"
                )

    @staticmethod
    def _expect_strs(hook: str, stage: Stage, value, plugin: Optional[str] = None) -> List[str]:
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise PluginError(f"{_by(plugin)}{hook} for stage '{stage.name}' returned {value!r:.60}, "
                              "expected a list of strings")
        return list(value)


THROUGH_A_WRAPPER = "a hook wrapper"
"""What :meth:`Hooks.adjust_target` names when a hook wrapper hides which plugin changed a target."""


def snapshot(node):
    """A copy of a plan node (mappings and lists copied, everything else shared), to see later
    whether it changed: cheaper than ``copy.deepcopy`` for the plan's plain JSON shape."""
    if isinstance(node, dict):
        return {k: snapshot(v) for k, v in node.items()}
    if isinstance(node, list):
        return [snapshot(v) for v in node]
    return node


def changes(before: dict, after: dict) -> List[Tuple[str, Optional[str]]]:
    """What differs between two states of a target: ``(attribute, key)`` for each key of a
    mapping attribute that was added, removed or changed, ``(attribute, None)`` for any other
    attribute that was."""
    out: List[Tuple[str, Optional[str]]] = []
    if not isinstance(before, dict) or not isinstance(after, dict):
        return [("", None)] if before != after else []
    for attr in dict.fromkeys([*before, *after]):
        old, new = before.get(attr, _MISSING), after.get(attr, _MISSING)
        if old is new or old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            out.extend((attr, k) for k in dict.fromkeys([*old, *new])
                       if k not in old or k not in new or not (old[k] is new[k] or old[k] == new[k]))
        else:
            out.append((attr, None))
    return out


_MISSING = object()

_GUARDED = "_bake_plan_guarded"
"""Set on a hook implementation's function once :func:`_guarded` wraps it."""


class _Call:
    """One hook call under way through pluggy: what the guarded implementations need to name
    their plugin in a failure, and the answers they gave, ``[(plugin, answer)]``."""

    __slots__ = ("hooks", "hook", "kwargs", "observe", "in_place", "wrappers", "answers")

    def __init__(self, hooks: "Hooks", hook: str, kwargs: dict, observe, in_place: bool, wrappers: list):
        self.hooks, self.hook, self.kwargs, self.observe, self.in_place = hooks, hook, kwargs, observe, in_place
        self.wrappers = wrappers
        self.answers: List[Tuple[str, object]] = []

    @property
    def where(self) -> str:
        """What an error line says of the call after the hook's name: ``" for stage 's', target 't'"``
        (made only when a line needs it)."""
        stage = self.kwargs.get("stage")
        where = f" for stage '{stage.name}'" if stage is not None else ""
        if "name" in self.kwargs:
            where += f", target '{self.kwargs['name']}'"
        return where

    @property
    def wrapper_label(self) -> str:
        """How error lines name the hook wrapper: its plugin, or :data:`THROUGH_A_WRAPPER` for several."""
        return plugin_label(self.wrappers[0]) if len(self.wrappers) == 1 else THROUGH_A_WRAPPER

    @property
    def names(self) -> Dict[str, str]:
        """How error lines name each implementation's plugin → its registered (entry-point) name;
        made only when an error line needs it, not on each of a plan's thousands of hook calls."""
        return {plugin_label(impl): impl.plugin_name for impl in getattr(self.hooks.pm.hook, self.hook).get_hookimpls()}


_CALLS: List[_Call] = []
"""The hook calls under way (a hook implementation may call another hook), innermost last."""


def _guarded(impl) -> Callable:
    """``impl``'s function as pluggy will call it: while :class:`Hooks` calls the hook, a failure
    is one :class:`PluginError` line naming the plugin, its answer is recorded, and a change it
    made to a watched target is checked (:meth:`Hooks._after`); called otherwise (``pm.hook`` by a
    library user), it is the function itself."""
    function = impl.function
    plugin = plugin_label(impl)

    def guard(*args):
        call = _CALLS[-1] if _CALLS else None
        if call is None:
            return function(*args)
        try:
            answer = function(*args)
        except KeyboardInterrupt:
            raise
        except PluginError:
            raise
        except TypeError as err:
            if call.hook != "bake_plan_stages":
                raise PluginError(f"plugin '{plugin}' raised TypeError in {call.hook}{call.where}: {err}"
                                  f"{disable_hint(impl.plugin_name)}") from None
            raise PluginError(_constructor_error(plugin, err) + disable_hint(impl.plugin_name)) from None
        except BaseException as err:  # SystemExit, GeneratorExit: still the plugin's, one line
            raise PluginError(f"plugin '{plugin}' raised {type(err).__name__} in {call.hook}{call.where}: {err}"
                              f"{disable_hint(impl.plugin_name)}") from None
        if call.observe is not None or call.hooks._watched:
            call.hooks._after(plugin, call.hook, call.where, call.observe)
        if answer is not None:
            if call.in_place:
                raise PluginError(f"plugin '{plugin}' returned {type(answer).__name__} from {call.hook}{call.where}: "
                                  "the hook changes the target it is handed in place and returns nothing "
                                  "(a returned target is not used)")
            call.answers.append((plugin, answer))
        return answer

    setattr(guard, _GUARDED, True)
    guard.__wrapped__ = function
    return guard


def plugin_label(impl) -> str:
    """How error lines name the plugin of a hook implementation: its registered name (the entry
    point's name), or for a plugin registered without one (pluggy names it by ``id()``) its
    module's or class's name."""
    name = impl.plugin_name
    return _label(impl.plugin) if name.isdigit() else name


def _label(plugin: object) -> str:
    """A plugin registered without a name: its module's or class's name."""
    return getattr(plugin, "__name__", None) or type(plugin).__name__


def _by(plugin: Optional[str]) -> str:
    return f"plugin '{plugin}': " if plugin else ""


def _constructor_error(plugin: str, err: TypeError) -> str:
    """The line for a ``TypeError`` raised in ``bake_plan_stages``: for a ``Stage``/``Source``
    built with a field it does not have (or without one it needs), say which, with the nearest
    field name."""
    text = str(err)
    generic = f"plugin '{plugin}' raised TypeError in bake_plan_stages: {text}"
    match = _UNEXPECTED_FIELD.search(text)
    if match and match.group(1) in (None, *_MODEL):
        cls, name = match.group(1), match.group(2)
        models = [_MODEL[cls]] if cls else list(_MODEL.values())
        fields = sorted({f.name for m in models for f in dataclasses.fields(m)} - {"plugin"})
        if cls is None and name in fields:
            return generic
        import difflib  # an error line's hint: not imported by a plan that succeeds

        near = difflib.get_close_matches(name, fields, n=1)
        hint = f" (did you mean '{near[0]}'?)" if near else f" (its fields: {', '.join(fields)})"
        return f"plugin '{plugin}': {cls or 'Stage'}() has no field '{name}'{hint}"
    match = _MISSING_FIELD.search(text)
    if match and match.group(1) in _MODEL:
        return f"plugin '{plugin}': {match.group(1)}() needs the field(s) {match.group(2)}"
    return generic


def _stdout_to_stderr():
    """While plugin code runs, what it prints goes to stderr: stdout carries plans (``-o -``) and
    JSON (``matrix``) that a stray ``print`` would corrupt.

    This catches ``print`` only, for library callers. Output that goes round ``sys.stdout`` (a
    subprocess, ``os.write(1, …)``, ``sys.__stdout__``, an ``atexit`` handler, a thread) is kept
    off the document by the CLI, which points descriptor 1 at stderr for the whole run of a
    command whose stdout is a document (:func:`bake.output.claim_stdout`): swapping descriptors
    here, around each of thousands of hook calls, would be neither cheap nor thread-safe."""
    return contextlib.redirect_stdout(sys.stderr)
