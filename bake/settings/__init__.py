"""Settings: the configuration file, the environment and the command line merged into one
checked :class:`~bake.settings.merge.Settings`, built once per run and passed down.

- :mod:`bake.settings.values`: one parser per kind of value (registry, platform, date policy,
  base-image pair, branch, digest, secret spec, path), whatever its source.
- :mod:`bake.settings.file`: finding, reading and checking the configuration file's schema.
- :mod:`bake.settings.merge`: defaults < file < environment < flags → :class:`Settings`.
- :mod:`bake.settings.show`: ``bake-plan config``'s output.

May import :mod:`bake.errors` and :mod:`bake.plan` (the value grammars, ``PlanOptions``,
``StageOverride``); never :mod:`bake.run`, :mod:`bake.pip` or argparse.
"""
