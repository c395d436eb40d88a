"""The Dockerfiles bake-plan ships (its built-in stages, the quick start's templates) keep their
layer cache from one night to the next: bake-plan sets ``SOURCE_DATE_EPOCH`` to the plan's date,
and BuildKit keys ``WORKDIR``'s cache on it, so a step that builds a layer after a ``WORKDIR`` in
its stage runs again every night (checked on the test engine: a new epoch runs ``WORKDIR`` and
the ``RUN`` after it again, the same epoch takes both from the cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bake.plan.dockerfile import instructions

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted([*ROOT.glob("stages/*/Dockerfile"), *ROOT.glob("examples/*/*/*/Dockerfile"),
                  *ROOT.glob("examples/*/*/context/Dockerfile")])
LAYERS = ("RUN", "COPY", "ADD")


def test_the_shipped_dockerfiles_are_found():
    assert {p.parent.name for p in SHIPPED} >= {"base", "jax", "xla-ci", "my-root", "my-leaf"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_layer_is_built_after_a_workdir_in_its_stage(path):
    after_workdir = None
    for line in instructions(path.read_text(encoding="utf-8")):
        word = line.split(" ", 1)[0].upper()
        if word == "FROM":
            after_workdir = None
        elif word == "WORKDIR":
            after_workdir = line
        elif word in LAYERS and after_workdir:
            pytest.fail(f"{path.relative_to(ROOT)}: {line!r} follows {after_workdir!r}: it would run every night")
