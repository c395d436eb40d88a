"""Cache health, without an engine: whether each target's registry cache was read and written,
from buildx's ``--progress=rawjson`` lines, and the warning for a target expected to come from
the cache (its input digest that of its previous nightly) that ran its steps. The engine test
(``tests/test_cache_health_engine.py``) shows the same on real builds."""

from __future__ import annotations

from test_progress import T0, T1, vertex

from bake.run.build import expected_inputs
from bake.run.progress import ProgressReader
from bake.run.sitrep import add_cache_warnings, make_sitrep, markdown

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


def _plan():
    def target(name):
        return {"dockerfile-inline": "FROM scratch\n", "platforms": ["linux/amd64"],
                "tags": [f"localhost:5555/ch/{name}:nightly-2026-11-30-amd64"],
                "labels": {"io.bake-plan.input-digest": DIGEST},
                "cache-from": [f"type=registry,ref=localhost:5555/ch/{name}:cache"]}

    return {"group": {"default": {"targets": ["ch-a", "ch-b", "ch-c"]}},
            "target": {"ch-a": target("ch-a"), "ch-b": target("ch-b"), "ch-c": target("ch-c")}}


def _caches(lines):
    progress = ProgressReader(_plan(), None, lambda line: None)
    for line in lines:
        progress.feed(line + "\n")
    progress.finish()
    return progress.caches()


def test_a_cache_read_and_written_a_missing_one_and_a_failed_export_are_told_apart():
    lines = [
        # ch-a: its own ref missing, its parent's read; the export done
        vertex("a-own", "[ch-a] importing cache manifest from localhost:5555/ch/ch-a:cache", completed=T1,
               error="failed to configure registry cache importer: localhost:5555/ch/ch-a:cache: not found"),
        vertex("a-parent", "[ch-a] importing cache manifest from localhost:5555/ch/ch-p:cache", completed=T1),
        vertex("a-export", "[ch-a] exporting cache to registry", completed=T1),
        # ch-b: nothing to read; the export failed (ignore-error=true: the build went on)
        vertex("b-own", "[ch-b] importing cache manifest from localhost:5555/ch/ch-b:cache", completed=T1,
               error="failed to configure registry cache importer: localhost:5555/ch/ch-b:cache: not found"),
        vertex("b-export", "[ch-b] exporting cache to registry", completed=T1,
               error="error writing manifest blob: 413 Request Entity Too Large"),
        # ch-c: an import that never finished says nothing
        vertex("c-own", "[ch-c] importing cache manifest from localhost:5555/ch/ch-c:cache", started=T0),
    ]
    assert _caches(lines) == {"ch-a": {"read": True, "written": True}, "ch-b": {"read": False, "written": False}}
    # two exports of one target (one per cache-to): written only when both finished
    both = [vertex("c-export-1", "[ch-c] exporting cache to registry", completed=T1),
            vertex("c-export-2", "[ch-c] exporting cache to client directory", completed=T1, error="disk full")]
    assert _caches(lines + both)["ch-c"] == {"read": None, "written": False}
    report = make_sitrep(_plan(), "ch build", 0, [], {n: {"containerimage.digest": OTHER} for n in ("ch-a", "ch-b", "ch-c")},
                         {}, steps={}, caches=_caches(lines))
    got = {n: (t["cache_read"], t["cache_written"], t["cache_warning"]) for n, t in report["targets"].items()}
    assert got == {"ch-a": (True, True, None), "ch-b": (False, False, None), "ch-c": (None, None, None)}
    assert report["warnings"] == []
    table = markdown(report)
    assert "| registry cache |" in table and "| read, written |" in table and "| not read, not written |" in table


def _report(steps):
    meta = {n: {"containerimage.digest": OTHER} for n in ("ch-a", "ch-b", "ch-c")}
    return make_sitrep(_plan(), "ch build", 0, [], meta, {}, steps=steps,
                       caches={"ch-a": {"read": False, "written": True}, "ch-b": {"read": True, "written": True}})


def test_a_target_expected_to_hit_that_ran_steps_is_a_warning_naming_it():
    report = _report({"ch-a": {"cached": 0, "run": 3}, "ch-b": {"cached": 4, "run": 0}, "ch-c": {"cached": 0, "run": 2}})
    expected = {"ch-a": (DIGEST, "nightly-2026-11-29"), "ch-b": (DIGEST, "nightly-2026-11-29"),
                "ch-c": (OTHER, "nightly-2026-11-29")}  # ch-c's inputs changed: its steps had to run
    added = add_cache_warnings(report, expected)
    assert added == [f"cache not working for ch-a: input unchanged since nightly-2026-11-29 ({DIGEST[:19]}…) "
                     "but 3 steps ran (registry cache: it could not be read)"]
    assert report["warnings"] == added
    assert report["targets"]["ch-a"]["cache_warning"] == added[0]
    assert report["targets"]["ch-b"]["cache_warning"] is None and report["targets"]["ch-c"]["cache_warning"] is None
    assert f"> ⚠️ **warning**: cache not working for ch-a: input unchanged since" in markdown(report)


def test_expected_inputs_asks_only_for_the_targets_that_ran_steps():
    report = _report({"ch-a": {"cached": 0, "run": 3}, "ch-b": {"cached": 4, "run": 0}, "ch-c": {"cached": 0, "run": 1}})
    asked = []

    def read(ref):
        asked.append(ref)
        if "ch-c" in ref:
            return None  # no record yet: no expectation
        return {"input_digest": DIGEST, "date": "2026-11-29", "built_in": "nightly-2026-11-28"}

    assert expected_inputs(_plan(), report, read) == {"ch-a": (DIGEST, "nightly-2026-11-28")}
    assert sorted(asked) == ["localhost:5555/ch/ch-a:record-ch-a-latest-amd64",
                             "localhost:5555/ch/ch-c:record-ch-c-latest-amd64"]


def test_a_record_keeps_the_input_digest_of_the_plan_that_built_the_image():
    """``publish`` plans for every arch at once; the record takes the digest the build's sitrep
    gives (its per-arch plan's), so a later per-arch build compares like with like."""
    import datetime

    from bake.plan.records import make_records

    sitrep = {"targets": {"ch-a": {"outcome": "pass", "digest": OTHER, "platforms": ["linux/amd64"],
                                   "input_digest": "sha256:" + "ef" * 32}}}
    got = {r["target"]: r["input_digest"] for r in make_records(_plan(), sitrep, datetime.date(2026, 11, 30))}
    assert got == {"ch-a": "sha256:" + "ef" * 32, "ch-b": DIGEST, "ch-c": DIGEST}


def test_publish_records_only_the_targets_it_published_and_only_sha256_digests():
    """``write_records(only=…)``, as ``publish`` calls it, and a sitrep's digest (another job's
    file) that is not a sha256 digest gives no record, never an argument to the docker CLI."""
    import datetime

    from bake.run.record import write_records

    made = []
    sitrep = {"targets": {"ch-a": {"outcome": "pass", "digest": OTHER, "platforms": ["linux/amd64"]},
                          "ch-b": {"outcome": "pass", "digest": "sha256:zz --tag evil", "platforms": ["linux/amd64"]},
                          "ch-c": {"outcome": "pass", "digest": OTHER, "platforms": ["linux/amd64"]}}}
    out = write_records(_plan(), sitrep, datetime.date(2026, 11, 30), only={"ch-a", "ch-b"},
                        create=lambda tag, sources, annotations=(): made.append((tag, sources)))
    assert out == [("localhost:5555/ch/ch-a:record-ch-a-2026-11-30-amd64", None),
                   ("ch-b@amd64", "the sitrep's digest is not a sha256 digest")]
    assert made == [(f"localhost:5555/ch/ch-a:{tag}", [f"localhost:5555/ch/ch-a@{OTHER}"])
                    for tag in ("record-ch-a-2026-11-30-amd64", "record-ch-a-latest-amd64")]


def test_a_registry_failing_part_way_leaves_a_line_for_each_record_pushed_before_it():
    import datetime

    import pytest

    from bake.errors import RunError
    from bake.run.record import write_records

    sitrep = {"targets": {name: {"outcome": "pass", "digest": OTHER, "platforms": ["linux/amd64"]}
                          for name in ("ch-a", "ch-b", "ch-c")}}
    said = []

    def create(tag, sources, annotations=()):
        if "ch-b" in tag:
            raise RunError(f"imagetools create {tag} failed: denied")

    with pytest.raises(RunError):
        write_records(_plan(), sitrep, datetime.date(2026, 11, 30), create=create, on_pushed=said.append)
    assert said == ["localhost:5555/ch/ch-a:record-ch-a-2026-11-30-amd64"]
