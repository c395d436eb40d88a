"""``publish`` (and its ``--dry-run``) asks the registry about every per-arch image several at a
time, creates the tags several at a time, and reports both in plan order whatever order the answers
come in."""

from __future__ import annotations

import threading
import time

import pytest

from bake.errors import RunError
from bake.run.publish import (CHECKS_AT_ONCE, CREATES_AT_ONCE, REFS_PER_CHECK, Manifest, PublishIncomplete,
                              missing_sources, publish)


def _wanted(count: int):
    return [Manifest(tag=f"r/img:t{i}", sources=[f"r/img:t{i}-amd64", f"r/img:t{i}-arm64"]) for i in range(count)]


def _apart(count: int):
    """``count`` tags, each in a repository of its own."""
    return [Manifest(tag=f"r/img{i}:t", sources=[f"r/img{i}:t-amd64", f"r/img{i}:t-arm64"]) for i in range(count)]


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


def test_tags_are_created_several_at_once_and_reported_in_plan_order():
    wanted = _apart(16)
    lock, running, most, shown = threading.Lock(), [0], [0], []

    def create(tag: str, sources) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2 if tag == "r/img0:t" else 0.05)  # the first finishes last
        with lock:
            running[0] -= 1

    start = time.monotonic()
    assert publish(wanted, lambda ref: True, create, on_created=lambda m: shown.append(m.tag)) == []
    took = time.monotonic() - start
    assert shown == [m.tag for m in wanted]
    assert most[0] == CREATES_AT_ONCE
    assert took < 16 * 0.05 / 2, took  # one after another: 0.95 s


def test_a_failed_creation_starts_no_other_and_counts_every_tag_made():
    wanted = _apart(12)
    started, shown = [], []

    def create(tag: str, sources) -> None:
        started.append(tag)
        if tag == "r/img1:t":
            time.sleep(0.05)  # the first four have started
            raise RunError("imagetools create r/img1:t failed: refused")
        time.sleep(0.2)

    with pytest.raises(PublishIncomplete) as caught:
        publish(wanted, lambda ref: True, create, on_created=lambda m: shown.append(m.tag))
    err = caught.value
    assert err.failed.tag == "r/img1:t"
    assert [m.tag for m in err.created] == shown  # each tag made was said, in plan order
    assert "r/img0:t" in shown and "r/img2:t" in shown  # under way when img1 failed: finished and counted
    assert sorted(started) == [f"r/img{i}:t" for i in range(CREATES_AT_ONCE)]  # none started after the failure
    assert str(err).startswith(f"publishing stopped at r/img1:t: imagetools create r/img1:t failed: refused; "
                               f"{len(shown)} of 12 tags were published before it; rerun the same")


def test_the_tags_of_one_repository_are_created_one_after_another():
    """The stock registry:2 (distribution 2.8, filesystem storage) rewrites a repository's link
    files in place: two lists of one digest written at once in one repository can answer 500."""
    wanted = _wanted(3) + _apart(3)  # r/img:t0..t2, then r/img0..2:t
    lock, running, overlapped, shown = threading.Lock(), {}, [], []

    def create(tag: str, sources) -> None:
        repository = tag.rsplit(":", 1)[0]
        with lock:
            if running.get(repository):
                overlapped.append(tag)
            running[repository] = running.get(repository, 0) + 1
        time.sleep(0.05)
        with lock:
            running[repository] -= 1

    assert publish(wanted, lambda ref: True, create, on_created=lambda m: shown.append(m.tag)) == []
    assert overlapped == [] and shown == [m.tag for m in wanted]


def test_nothing_is_created_when_a_source_is_missing():
    made = []
    assert publish(_wanted(3), lambda ref: ref != "r/img:t2-arm64", lambda tag, s: made.append(tag)) == \
        ["r/img:t2-arm64"]
    assert made == []


def test_one_question_for_many_images_leaves_the_one_by_one_checks_unasked():
    asked, lists = [], []
    wanted = _wanted(40)  # 80 per-arch images: two lists of at most REFS_PER_CHECK
    refs = [source for m in wanted for source in m.sources]
    assert missing_sources(wanted, lambda ref: asked.append(ref) or True,
                           all_exist=lambda part: lists.append(part) or True) == []
    assert asked == []
    assert sorted(map(tuple, lists)) == sorted([tuple(refs[:REFS_PER_CHECK]), tuple(refs[REFS_PER_CHECK:])])


def test_only_a_list_not_all_there_is_asked_image_by_image():
    wanted = _wanted(40)
    refs = [source for m in wanted for source in m.sources]
    gone = refs[REFS_PER_CHECK + 3]
    asked = []

    def exists(ref: str) -> bool:
        asked.append(ref)
        return ref != gone

    assert missing_sources(wanted, exists, all_exist=lambda part: gone not in part) == [gone]
    assert sorted(asked) == sorted(refs[REFS_PER_CHECK:])


def test_a_refused_list_question_is_raised_and_nothing_is_created():
    def all_exist(part) -> bool:
        raise RunError("cannot check r/img:t0-amd64 and 5 more: the registry r did not answer within 1 s")

    made = []
    with pytest.raises(RunError, match="did not answer"):
        publish(_wanted(3), lambda ref: True, lambda tag, s: made.append(tag), all_exist=all_exist)
    assert made == []
