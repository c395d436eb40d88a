"""Hook specifications: the whole contract between bake-plan and its plugins.

Every hook is called with keyword arguments only, so an implementation may accept fewer
arguments than the spec lists (pluggy's convention), and specs can grow without breaking plugins.
Policy hooks are ``firstresult``: the first implementation that returns something other than
``None`` wins; bake-plan's own defaults (:mod:`bake.plan.policies`) are ``trylast``, so any plugin's
answer comes before them. The plugin authors' guide, with an example of each hook, is
``docs/plugins.md``; a test keeps it in step with these specs.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Optional, Sequence

import pluggy

if TYPE_CHECKING:
    from bake.plan.stage import Stage

PROJECT = "bake_plan"
"""The pluggy project name and the entry-point group third-party plugins register under."""

hookspec = pluggy.HookspecMarker(PROJECT)
"""Marker for the specifications below."""

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marker for hook implementations: ``@hookimpl def bake_plan_stages(): ...`` (re-exported as
``bake.hookimpl`` for plugin authors)."""


@hookspec
def bake_plan_stages() -> "Sequence[Stage]":
    """Contribute stages to the family.

    Fires once per run, when the plugin manager collects stages, before any composition.

    :returns: a list (or tuple) of :class:`bake.plan.stage.Stage`; an empty list is fine.
    :raises: nothing on purpose: an exception here is reported as
        ``plugin '<name>' raised <Type>: <message>`` and the run stops with exit status 2.
        Two plugins returning the same stage name is an error naming both.
    """


@hookspec
def bake_plan_adjust_target(stage: "Stage", name: str, flavor: str, target: dict) -> None:
    """Adjust one generated bake target in place, after bake-plan has filled it in.

    Fires once per generated target, in plan order, after tags, cache refs and platforms are set.

    :param stage: the stage the target comes from.
    :param name: the bake target name (``<stage>-mealkit`` or ``<stage>``, sanitised to
        ``[A-Za-z0-9_-]+`` as buildx requires).
    :param flavor: ``"mealkit"``, ``"final"`` or ``"single"`` (a one-target stage).
    :param target: the target as a dict in buildx's JSON shape (keys such as ``context``,
        ``dockerfile``, ``target``, ``contexts``, ``args``, ``labels``, ``tags``, ``platforms``,
        ``cache-from``, ``cache-to``; see the buildx bake file reference). Values are plain,
        unescaped strings: rendering escapes ``${``/``%{`` for bake.
    :returns: ``None``; mutate ``target``. Once every hook has run, the whole plan is checked
        (:func:`bake.plan.checks.check_plan`): only attributes buildx's bake reads, each with a
        value of its kind (tags image references, platforms known, contexts absolute or
        ``target:``/``docker-image://``/…, no NaN), text in Unicode NFC, and nothing that looks like
        a credential (build secrets go through bake's ``secret`` attribute, set from ``--secret``),
        else the run stops naming the plugin that last changed the value, the target and the
        attribute. Change only ``target``, in this call: changing a target kept from an earlier
        call is an error naming the plugin.
    """


@hookspec(firstresult=True)
def bake_plan_tags(stage: "Stage", flavor: str, date: datetime.date) -> Optional[Sequence[str]]:
    """The tag policy: the tags (without repository) of one target.

    Fires once per published target. bake-plan puts ``<registry>/<image>:`` in front and, in a
    per-arch plan (exactly one ``--platform``), appends ``-<arch>`` to every tag.

    :param flavor: ``"mealkit"``, ``"final"`` or ``"single"``.
    :param date: the build date (``--date``, else ``SOURCE_DATE_EPOCH``, else today in UTC).
    :returns: tags such as ``["latest", "nightly-2026-11-29"]`` (the JAX-Toolbox convention), or
        ``None`` to leave the decision to the next implementation. Each tag must match the
        registry rule ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`` after the arch suffix.
    """


@hookspec(firstresult=True)
def bake_plan_cache_key(stage: "Stage", flavor: str) -> Optional[str]:
    """The cache-key policy: the key of one target's layer and compiler caches.

    Fires once per target. The key is the tag of the registry cache ref
    (``<registry>/<image>:<key>``, used by ``cache-from``/``cache-to``) and is passed to the build
    as the ``CACHE_SILO`` arg (the Bazel remote-cache silo of the PyTorch/XLA CI). bake-plan
    appends ``-<arch>`` in a per-arch plan, so separate arches never share a writable ref.

    :returns: a key such as ``"cache-silo-ci-dev-3.8_cuda_12.1"`` (design.md), or ``None``.
    """


@hookspec(firstresult=True)
def bake_plan_platforms(stage: "Stage", requested: Sequence[str]) -> Optional[Sequence[str]]:
    """The platform policy: the platforms one stage's targets build for.

    Fires once per stage in the chain.

    :param requested: the normalised ``--platform`` values (``os/arch[/variant]``, buildx's
        form), or an empty sequence when none was given.
    :returns: platforms, or ``None``. bake-plan checks the answer is a subset of what the stage
        supports and of its parent's platforms (buildx requires a ``target:`` context's platforms
        to cover the referencing target's).
    """
