"""The pure core: stages in, the plan (buildx's JSON shape) out.

- :mod:`bake.plan.stage`: the stage model plugins declare; :mod:`bake.plan.validate` checks one
  (its requirement lines with :mod:`bake.plan.requirement_lines`).
- :mod:`bake.plan.hookspecs`: every hook, with its docstring; :mod:`bake.plan.plugins`: the
  plugin manager (nothing at import time) and the typed :class:`~bake.plan.plugins.Hooks`
  wrapper; :mod:`bake.plan.policies`: the default tag, cache-key and platform policies.
- :mod:`bake.plan.overrides` and :mod:`bake.plan.variants`: collected stages changed by the
  configuration and expanded into concrete stages, before composition.
- :mod:`bake.plan.compose`: requested targets -> their chain -> bake targets (``PlanOptions``,
  ``Composition``); :mod:`bake.plan.checks`: what every target must be before it is written.
- :mod:`bake.plan.names`: the grammars of repositories, tags, platforms, references;
  :mod:`bake.plan.secrets`: build secrets and keeping credentials out of plans.
- :mod:`bake.plan.render` (HCL through the template, or JSON), :mod:`bake.plan.graph` (Mermaid,
  dot), :mod:`bake.plan.matrix` (CI jobs in waves), :mod:`bake.plan.metadata`
  (docker/metadata-action bake files): what a plan is turned into.

Functions of their inputs: the core never prints, never reaches Docker or runs a process, and
reads no setting itself (they arrive as arguments). May import itself, :mod:`bake.errors`,
:mod:`bake.resources`, :mod:`bake.output` and :mod:`bake.version`; never ``subprocess``,
``python_on_whales``, :mod:`bake.pip`, :mod:`bake.run`, :mod:`bake.settings`, :mod:`bake.api`,
:mod:`bake.cli`, :mod:`bake.testing` or the :mod:`bake` facade (``tests/test_architecture.py``;
``docs/architecture.md``).
"""
