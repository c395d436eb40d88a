"""bake-plan's built-in stage plugins, one module per member of the families it serves
(installed as ``bake_plan_plugins``; registered through the ``bake_plan`` entry-point group
like any third-party plugin). Facts behind them: ``../shared/docs/domain.md``."""
