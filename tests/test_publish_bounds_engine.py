"""``publish`` against a registry that answers every read but never answers the write of a manifest
list: the registry call is stopped at its time bound and one line names the tag and the registry,
instead of the nightly job hanging. The fault is a proxy on loopback in front of the test registry:
reads (``GET``, ``HEAD``) go through, a ``PUT`` is accepted and never answered."""

from __future__ import annotations

import functools
import threading
import time
import uuid

import pytest

from registry_proxy import registry_proxy

from bake.errors import RunError
from bake.run import engine as run_engine
from bake.run.publish import Manifest, PublishIncomplete, publish

pytestmark = pytest.mark.engine


@pytest.fixture
def put_never_answers(engine):
    """``localhost:<port>``: the test registry, except that a PUT is never answered."""
    stop = threading.Event()
    held = []

    def hold_puts(handler, body):
        if handler.command != "PUT":
            return False
        held.append(handler.path)
        stop.wait(120)  # accepted, never answered (until the test ends)
        return True

    with registry_proxy(engine.registry, hold_puts, http11=False) as name:
        yield name, held
        stop.set()


def test_a_manifest_write_that_is_never_answered_is_stopped_and_named(engine, put_never_answers):
    registry, held = put_never_answers
    source = f"{registry}/stand-in/busybox:latest"
    assert run_engine.image_exists(source, timeout_s=30)  # reads go through the proxy
    tag = f"{registry}/stand-in/busybox:never-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with pytest.raises(RunError, match=rf"^imagetools create {tag} failed: the registry {registry} did not answer "
                                       r"within 5 s$"):
        run_engine.create_manifest(tag, [source], timeout_s=5)
    assert time.monotonic() - started < 5 + 25
    assert held, "the write reached the proxy (the bound stopped a call that had started)"


def test_publish_stops_at_the_tag_whose_write_hangs_and_says_so_in_one_line(engine, put_never_answers):
    registry, _ = put_never_answers
    source = f"{registry}/stand-in/busybox:latest"
    tag = f"{registry}/stand-in/busybox:never-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with pytest.raises(PublishIncomplete) as caught:
        publish([Manifest(tag, [source])], functools.partial(run_engine.image_exists, timeout_s=30),
                functools.partial(run_engine.create_manifest, timeout_s=5))
    assert time.monotonic() - started < 5 + 60
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"publishing stopped at {tag}: imagetools create {tag} failed: the registry {registry} "
                           "did not answer within 5 s; 0 of 1 tags were published before it; rerun the same")
    # every registry call of publish is bounded by default
    assert run_engine.image_digest.__defaults__ == (run_engine.REGISTRY_TIMEOUT_S,)
    assert run_engine.create_manifest.__defaults__ == (run_engine.REGISTRY_TIMEOUT_S,)
