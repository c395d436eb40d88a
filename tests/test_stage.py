"""Validation of stages that share a build context: the directory is looked up once per
collection, and each stage's own Dockerfile is still checked."""

from __future__ import annotations

import pytest

from bake import Stage
from bake.errors import StageError
from bake.plan.validate import validate


def test_a_shared_context_is_checked_once_and_each_dockerfile_still_counts(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    checked = set()
    validate(Stage(name="a", context=tmp_path), "p", checked)
    assert checked == {(str(tmp_path), "Dockerfile")}
    validate(Stage(name="b", context=str(tmp_path)), "p", checked)
    with pytest.raises(StageError, match=r"stage 'c', field 'dockerfile': .*/Other\.Dockerfile does not exist"):
        validate(Stage(name="c", context=tmp_path, dockerfile="Other.Dockerfile"), "p", checked)
    validate(Stage(name="d", context=tmp_path, dockerfile="Other.Dockerfile", dockerfile_inline="FROM scratch"),
             "p", checked)
    assert checked == {(str(tmp_path), "Dockerfile"), (str(tmp_path), "")}


def test_without_a_shared_set_every_call_looks(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    validate(Stage(name="a", context=tmp_path), "p")
    (tmp_path / "Dockerfile").unlink()
    with pytest.raises(StageError, match="Dockerfile does not exist"):
        validate(Stage(name="a", context=tmp_path), "p")
    with pytest.raises(StageError, match="must be an absolute directory"):
        validate(Stage(name="a", context="relative/dir"), "p")
    with pytest.raises(StageError, match="does not exist"):
        validate(Stage(name="a", context=str(tmp_path / "missing")), "p")
