"""A third-party plugin: the ``my-leaf`` stage, built on the jax meal kit."""

from pathlib import Path

from bake import Stage, hookimpl

CONTEXT = Path(__file__).resolve().parent / "context"


@hookimpl
def bake_plan_stages():
    return [
        Stage(
            name="my-leaf",
            image="my-leaf",
            registry="ghcr.io/acme",  # its own: without it, --registry (or the configuration's) is needed
            parent="jax",
            context=CONTEXT,
            requirements=("numpy<2",),
            args={"LEAF_GREETING": "hello ${USER} %{ if } from the leaf"},
        )
    ]
