"""Every registry call is bounded in time: a registry that accepts connections but never answers
is reported, naming it, instead of hanging a nightly job forever. The silent registry is a socket
on loopback that accepts and then says nothing."""

from __future__ import annotations

import time

import pytest
from registry_proxy import silent_server

from bake.errors import RunError
from bake.run import engine as run_engine

pytestmark = pytest.mark.engine


@pytest.fixture
def silent_registry():
    with silent_server() as name:
        yield name


def test_a_registry_that_never_answers_is_named_not_waited_for(engine, silent_registry):
    ref = f"{silent_registry}/team/app:latest-amd64"
    started = time.monotonic()
    with pytest.raises(RunError, match=rf"the registry {silent_registry} did not answer within 3 s"):
        run_engine.image_exists(ref, timeout_s=3)
    with pytest.raises(RunError, match=rf"the registry {silent_registry} did not answer within 3 s"):
        run_engine.create_manifest(f"{silent_registry}/team/app:latest", [ref], timeout_s=3)
    assert time.monotonic() - started < 30
