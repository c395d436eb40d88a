"""Python packages, the meal kit's way: every package installed once, from one lock.

- :mod:`bake.pip.requirements`: one requirement line as a stage writes it to
  ``/opt/pip-tools.d`` (which project, which local path, whether its marker holds on a platform).
- :mod:`bake.pip.lock`: ``bake-plan lock``: ``pip-compile`` a chain's requirements on the host,
  before any build, naming the stages of a conflict; the locks ``--locked`` builds install.
- :mod:`bake.pip.sources`: the sources manifest (``stages/sources.toml``), ``source()`` for
  plugins, and ``bake-plan bump`` (``git ls-remote``).

May import itself, :mod:`bake.plan`, :mod:`bake.errors`, :mod:`bake.resources`,
:mod:`bake.output`, :mod:`bake.version`, and ``subprocess`` (pip-compile, git); never
:mod:`bake.run` (its sibling), ``python_on_whales``, or anything above: :mod:`bake.settings`,
:mod:`bake.api`, :mod:`bake.cli`, :mod:`bake.testing` (``tests/test_architecture.py``;
``docs/architecture.md``).
"""
