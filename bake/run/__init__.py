"""Running a written plan: the only code that talks to Docker.

- :mod:`bake.run.engine`: the one module that reaches Docker: the engine probe (``docker
  version`` through :mod:`subprocess`, while the plan is made); ``buildx bake``, image checks,
  builders and ``imagetools`` through python-on-whales (imported inside its functions, so planning
  never pays for it).
- :mod:`bake.run.progress`: the one reader of buildx's ``--progress=rawjson``: the console shown
  from it, and per target the steps (cached or run), failures and exported digests.
- :mod:`bake.run.build`: a plan file -> buildx -> the sitrep.
- :mod:`bake.run.sitrep`: the situation report (``sitrep.json``, a badge, a Markdown summary).
- :mod:`bake.run.publish`: per-arch images merged into multi-arch tags, only when every arch is
  there (the Docker calls passed in as callables).
- :mod:`bake.run.imagetest`: ``bake-plan test``: each requested stage's smoke tests in its final
  image, per platform, added to the sitrep (the Docker calls passed in as callables).

May import itself, :mod:`bake.plan`, :mod:`bake.errors`, :mod:`bake.resources`,
:mod:`bake.output`, :mod:`bake.version`, ``python_on_whales`` and ``subprocess``; never
:mod:`bake.pip` (its sibling) or anything above: :mod:`bake.settings`, :mod:`bake.api`,
:mod:`bake.cli`, :mod:`bake.testing` (``tests/test_architecture.py``; ``docs/architecture.md``).
"""
