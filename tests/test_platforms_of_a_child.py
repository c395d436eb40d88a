"""A child's platforms are its own (default amd64 and arm64), not its parent's: under a root that
supports amd64 alone, a child that says nothing is refused in one line naming both stages, and
the remedies docs/plugins.md gives (the child's own ``platforms``, or ``--platform``) plan it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bake import Stage, hookimpl
from bake.errors import StageError
from bake.testing import plan_for

REGISTRY = "localhost:5000/me"


def _family(tmp_path: Path, leaf_platforms):
    for name in ("my-root", "my-leaf"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "Dockerfile").write_text("FROM scratch AS mealkit\nFROM mealkit AS final\n")
    extra = {} if leaf_platforms is None else {"platforms": leaf_platforms}

    class Family:
        @hookimpl
        def bake_plan_stages(self):
            return [Stage(name="my-root", image="my-root", context=tmp_path / "my-root",
                          base_image="python:3.10-slim-bookworm", python="3.10", platforms=("linux/amd64",)),
                    Stage(name="my-leaf", image="my-leaf", parent="my-root", context=tmp_path / "my-leaf", **extra)]

    return Family()


def test_a_child_of_an_amd64_only_root_that_says_nothing_is_refused(tmp_path):
    with pytest.raises(StageError, match="stage 'my-leaf': builds for linux/arm64 but stage 'my-root' it builds on "
                                         "does not"):
        plan_for(_family(tmp_path, None), targets=["my-leaf"], registry=REGISTRY)


def test_the_childs_own_platforms_plan_it(tmp_path):
    targets = plan_for(_family(tmp_path, ("linux/amd64",)), targets=["my-leaf"], registry=REGISTRY)["target"]
    assert targets["my-leaf"]["platforms"] == ["linux/amd64"]
    assert targets["my-root-mealkit"]["platforms"] == ["linux/amd64"]


def test_or_platform_on_the_command_line(tmp_path):
    targets = plan_for(_family(tmp_path, None), targets=["my-leaf"], platforms=["linux/amd64"],
                       registry=REGISTRY)["target"]
    assert targets["my-leaf"]["platforms"] == ["linux/amd64"]
