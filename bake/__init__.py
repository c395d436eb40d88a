"""bake-plan: a family of container images, declared as stages by plugins, as a Docker Buildx bake plan.

Plugins import :data:`hookimpl` to implement the hooks in :mod:`bake.plan.hookspecs` and build
:class:`Stage`, :class:`Source` and :class:`ImageTest` objects (:mod:`bake.plan.stage`). Nothing here touches Docker
or the environment at import time. The package map is ``docs/architecture.md``.
"""

from __future__ import annotations

from bake.plan.hookspecs import PROJECT, hookimpl  # re-exported for plugin authors
from bake.plan.stage import ImageTest, Source, Stage
from bake.version import __version__

__all__ = ["PROJECT", "ImageTest", "Source", "Stage", "hookimpl", "__version__"]
