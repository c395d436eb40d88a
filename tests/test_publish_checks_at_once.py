"""``publish`` (and its ``--dry-run``) asks the registry about every per-arch image several at a
time, and reports them in plan order whatever order the answers come in."""

from __future__ import annotations

import threading
import time

import pytest

from bake.errors import RunError
from bake.run.publish import CHECKS_AT_ONCE, Manifest, missing_sources


def _wanted(count: int):
    return [Manifest(tag=f"r/img:t{i}", sources=[f"r/img:t{i}-amd64", f"r/img:t{i}-arm64"]) for i in range(count)]


def test_sixteen_tags_are_checked_at_once_and_reported_in_plan_order():
    wanted = _wanted(16)
    lock, running, most = threading.Lock(), [0], [0]

    def exists(ref: str) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2 if ref.endswith("0-amd64") else 0.05)  # the first answers last
        with lock:
            running[0] -= 1
        return not ref.endswith(("3-arm64", "1-amd64"))

    start = time.monotonic()
    missing = missing_sources(wanted, exists)
    took = time.monotonic() - start
    assert missing == ["r/img:t1-amd64", "r/img:t3-arm64", "r/img:t11-amd64", "r/img:t13-arm64"]
    assert most[0] == CHECKS_AT_ONCE
    assert took < 32 * 0.05 / 2, took  # one after another: 1.75 s


def test_each_image_is_asked_once():
    asked = []
    wanted = [Manifest("r/a:1", ["r/a:1-amd64"]), Manifest("r/a:2", ["r/a:1-amd64", "r/a:2-amd64"])]
    assert missing_sources(wanted, lambda ref: asked.append(ref) or True) == []
    assert sorted(asked) == ["r/a:1-amd64", "r/a:2-amd64"]


def test_the_first_failure_in_plan_order_is_raised():
    def exists(ref: str) -> bool:
        if ref.startswith("r/img:t2-"):
            time.sleep(0.2)
            raise RunError(f"cannot check {ref}: refused")
        if ref.startswith("r/img:t9-"):
            raise RunError(f"cannot check {ref}: refused")
        return True

    with pytest.raises(RunError, match=r"^cannot check r/img:t2-amd64: refused$"):
        missing_sources(_wanted(12), exists)
