"""bake-plan: a family of container images, declared as stages by plugins, as a Docker Buildx bake plan.

Plugins import :data:`hookimpl` to implement the hooks in :mod:`bake.hookspecs` and build
:class:`~bake.stage.Stage` objects. Nothing here touches Docker or the environment at import time.
"""

from __future__ import annotations

import pluggy

__version__ = "0.1.0"

PROJECT = "bake_plan"
"""The pluggy project name and the entry-point group third-party plugins register under."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marker for hook implementations: ``@hookimpl def bake_plan_stages(): ...``."""

from bake.stage import Source, Stage  # noqa: E402  (re-exported for plugin authors)

__all__ = ["PROJECT", "Source", "Stage", "hookimpl", "__version__"]
