"""An example bake-plan plugin: the ``notebook`` image on the jax meal kit, tagged by date.

Two hooks:

- ``bake_plan_stages`` adds the stage: a JupyterLab image built on ``jax``'s meal kit from the
  Dockerfile in ``context/`` (installed inside this package, so ``pip install`` carries it);
- ``bake_plan_tags`` tags its final image ``latest`` and ``YYYY.MM.DD`` (CalVer) instead of
  ``nightly-YYYY-MM-DD``, and answers ``None`` for everything else, so other stages keep
  bake-plan's default tags.
"""

from pathlib import Path

from bake import Source, Stage, hookimpl

CONTEXT = Path(__file__).resolve().parent / "context"
STAGE = "notebook"


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name=STAGE,
            image="jax-notebook",
            parent="jax",
            context=CONTEXT,
            sources=(Source("EXAMPLES", "https://github.com/google/flax.git", "main", path="/opt/examples"),),
            requirements=("jupyterlab>=4,<5",),
            args={"NOTEBOOK_PORT": "8888"},
        )
    ]


@hookimpl
def bake_plan_tags(stage, flavor, date):
    if stage.name != STAGE or flavor != "final":
        return None  # not ours: the next policy (bake-plan's default) answers
    return ["latest", date.strftime("%Y.%m.%d")]
