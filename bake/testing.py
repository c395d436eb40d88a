"""Helpers for testing a bake-plan plugin with pytest.

The advice of pluggy and tox, packaged: a fresh plugin manager per test, the real composition,
nothing mocked. A plugin's tests see bake-plan's built-in stages (so a stage can build on
``jax``) and default policies, and never the other plugins installed beside it::

    import datetime

    import my_plugin
    from bake.testing import plan_for

    def test_my_stage_builds_on_the_jax_meal_kit():
        targets = plan_for(my_plugin, targets=["my-stage"])["target"]
        assert targets["my-stage-mealkit"]["contexts"]["base"] == "target:jax-mealkit"

Plugins may be modules or instances of classes with ``@hookimpl`` methods, so one test can add
an inline plugin next to the one under test. A plugin module that is installed is named as the
command line names it, by its entry point's name (``stage.plugin``, error lines); anything else
by its module's or class's name.

The fixtures pytest loads through bake-plan's ``pytest11`` entry point (``bake_plan_plan`` and
the others) are in :mod:`bake.pytest_plugin`.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import List, Optional, Sequence, Union

import pluggy

from bake.api import make_plan, render
from bake.documents import read_toml
from bake.errors import UsageError
from bake.plan import policies
from bake.plan.hookspecs import PROJECT
from bake.plan.compose import Composition, PlanOptions
from bake.plan.plugins import entry_point_names, get_plugin_manager

DATE = datetime.date(2026, 11, 29)
"""The date tests plan for unless they say otherwise: tags such as ``nightly-2026-11-29``."""


def plugin_manager(*plugins: object, builtins: bool = True) -> pluggy.PluginManager:
    """A fresh plugin manager with ``plugins`` registered after bake-plan's own.

    :param builtins: also load bake-plan's built-in stages (``base``, ``jax``, …); without them,
        only the default policies (:mod:`bake.plan.policies`) are there. Other installed plugins,
        including the one under test when it is installed, are never loaded from entry points.
    :raises bake.errors.PluginError: a plugin implements a hook that does not exist.
    """
    if builtins:
        blocked = set(entry_point_names()) - set(entry_point_names(builtin_only=True))
        return get_plugin_manager(plugins=plugins, blocked=blocked)
    return get_plugin_manager(load_entrypoints=False, plugins=[policies, *plugins])


def installed_plugin_manager(*names: str) -> pluggy.PluginManager:
    """A fresh plugin manager with bake-plan's built-in stages and default policies and the
    installed plugins of entry-point ``names``, loaded as the command line loads them (other
    installed plugins are not).

    :raises bake.errors.UsageError: a name no installed ``bake_plan`` entry point has (is the
        plugin ``pip install``-ed?).
    :raises bake.errors.PluginError: a plugin fails to load.
    """
    installed = entry_point_names()
    missing = [n for n in names if n not in installed]
    if missing:
        raise UsageError(f"no installed bake_plan entry point named {', '.join(missing)} "
                         f"(installed: {', '.join(installed)}); pip install the plugin first")
    keep = set(names) | set(entry_point_names(builtin_only=True))
    return get_plugin_manager(blocked=[n for n in installed if n not in keep])


def project_plugin_names(pyproject: Union[str, Path]) -> List[str]:
    """The entry-point names a ``pyproject.toml`` declares under ``[project.entry-points.bake_plan]``
    (what ``pip install`` of that project registers), sorted; empty without the file or the table.

    :raises bake.errors.BakePlanError: the file is not TOML.
    """
    pyproject = Path(pyproject)
    if not pyproject.is_file():
        return []
    table = read_toml(pyproject).get("project", {}).get("entry-points", {}).get(PROJECT, {})
    return sorted(table) if isinstance(table, dict) else []


def compose_plan(
    *plugins: object,
    targets: Sequence[str],
    date: datetime.date = DATE,
    platforms: Sequence[str] = (),
    registry: Optional[str] = None,
    builtins: bool = True,
    **options,
) -> Composition:
    """Compose the plan for ``targets`` with ``plugins`` (see :func:`plugin_manager`).

    :param options: other :class:`bake.plan.compose.PlanOptions` fields (``base_images``, ``cache_branch``…).
    :raises bake.errors.BakePlanError: what a user would see as a one-line error.
    """
    options = PlanOptions(targets=tuple(targets), date=date, platforms=tuple(platforms), registry=registry, **options)
    return make_plan(options, plugin_manager(*plugins, builtins=builtins))


def plan_for(*plugins: object, targets: Sequence[str], **kwargs) -> dict:
    """The plan (buildx's JSON shape: ``group``, ``target``) of :func:`compose_plan`."""
    return compose_plan(*plugins, targets=targets, **kwargs).plan


def plan_text(*plugins: object, targets: Sequence[str], fmt: str = "hcl", **kwargs) -> str:
    """The plan file bake-plan would write (``hcl`` or ``json``), e.g. to check with
    ``docker buildx bake -f FILE --print``."""
    return render(compose_plan(*plugins, targets=targets, **kwargs), fmt)
