"""bake-plan's built-in stage plugins, one module per member of the families it serves
(installed as ``bake_plan_plugins``; registered through the ``bake_plan`` entry-point group
like any third-party plugin). Facts behind them: ``../shared/docs/domain.md``."""

REGISTRY = "ghcr.io/nvidia"
"""Where the built-in stages are published unless ``--registry`` says otherwise (a stage without a
registry of its own takes the configured one, or is refused: :attr:`bake.Stage.registry`)."""
