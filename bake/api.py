"""The library face of bake-plan: plan and render without the command line.

Composition and rendering are pure; this module wires them to the plugin manager and the
shipped template. The CLI is a thin layer over these two calls.
"""

from __future__ import annotations

from typing import Optional

import pluggy

from bake.compose import Composition, PlanOptions, compose
from bake.errors import StageError
from bake.plugins import Hooks, get_plugin_manager
from bake.render import to_hcl, to_json
from bake.resources import template_path

FORMATS = {"hcl": "docker-bake.hcl", "json": "docker-bake.json"}
"""Plan formats and their default file names (the names ``docker buildx bake`` reads by default)."""


def make_plan(options: PlanOptions, pm: Optional[pluggy.PluginManager] = None) -> Composition:
    """Collect every plugin's stages and compose the plan for ``options``.

    The plan is also searched for the current value of every ``options.secrets`` (an
    environment variable's or a file's content, when available and 8 characters or longer): a
    secret must reach builds only through the ``secret`` attribute.

    :param pm: a plugin manager; default :func:`bake.plugins.get_plugin_manager` (entry points).
    :raises bake.errors.BakePlanError: bad input, with a one-line message naming the culprit.
    """
    from bake.secrets import SECRET_HINT, find_secret_values

    hooks = Hooks(pm if pm is not None else get_plugin_manager())
    composition = compose(hooks.collect_stages(), options, hooks)
    found = find_secret_values(composition.plan, options.secrets)
    if found:
        spec, tname, path = found
        source = f"env {spec.env}" if spec.env else f"file {spec.src}"
        stage = next((s for s in composition.chain if tname in _targets_of(s)), None)
        where = f"plugin '{stage.plugin}', stage '{stage.name}', " if stage else ""
        raise StageError(f"{where}target '{tname}', {path}: holds the value of secret '{spec.id}' ({source}); "
                         f"{SECRET_HINT}")
    return composition


def _targets_of(stage) -> list:
    from bake.compose import target_names

    return [name for name, _ in target_names(stage)]


def render(composition: Composition, fmt: str = "hcl", filename: str = "docker-bake.hcl") -> str:
    """The plan file's text in ``fmt`` (``hcl`` through ``docker-bake.hcl.tmpl``, or ``json``).

    Same composition, same bytes. :raises ValueError: an unknown format.
    """
    if fmt == "json":
        return to_json(composition.plan)
    if fmt == "hcl":
        return to_hcl(composition.plan, template_path(), composition.requested, filename=filename)
    raise ValueError(f"unknown plan format {fmt!r}")
