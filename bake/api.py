"""The library face of bake-plan: plan and render without the command line.

Composition and rendering are pure; this module wires them to the plugin manager and the
shipped template. The CLI is a thin layer over these two calls.
"""

from __future__ import annotations

from typing import Optional

import pluggy

from bake.compose import Composition, PlanOptions, compose
from bake.plugins import Hooks, get_plugin_manager
from bake.render import to_hcl, to_json
from bake.resources import template_path

FORMATS = {"hcl": "docker-bake.hcl", "json": "docker-bake.json"}
"""Plan formats and their default file names (the names ``docker buildx bake`` reads by default)."""


def make_plan(options: PlanOptions, pm: Optional[pluggy.PluginManager] = None) -> Composition:
    """Collect every plugin's stages and compose the plan for ``options``.

    :param pm: a plugin manager; default :func:`bake.plugins.get_plugin_manager` (entry points).
    :raises bake.errors.BakePlanError: bad input, with a one-line message naming the culprit.
    """
    hooks = Hooks(pm if pm is not None else get_plugin_manager())
    return compose(hooks.collect_stages(), options, hooks)


def render(composition: Composition, fmt: str = "hcl", filename: str = "docker-bake.hcl") -> str:
    """The plan file's text in ``fmt`` (``hcl`` through ``docker-bake.hcl.tmpl``, or ``json``).

    Same composition, same bytes. :raises ValueError: an unknown format.
    """
    if fmt == "json":
        return to_json(composition.plan)
    if fmt == "hcl":
        return to_hcl(composition.plan, template_path(), composition.requested, filename=filename)
    raise ValueError(f"unknown plan format {fmt!r}")
