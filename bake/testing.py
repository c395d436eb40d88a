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
an inline plugin next to the one under test.
"""

from __future__ import annotations

import datetime
from typing import Optional, Sequence

import pluggy

from bake.api import make_plan, render
from bake.plan import policies
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
