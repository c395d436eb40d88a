"""The sitrep's ``since_last`` without an engine: each target's diff against its newest nightly record
(bake/plan/records.py ``since_last``), the records read once and a bad one kept as one line
(bake/run/build.py ``newest_records``, ``add_since_last``), and the Markdown section "Changed
since nightly-DATE" (bake/run/sitrep.py), escaped and byte-bounded."""

from __future__ import annotations

import datetime
import json
import re

from test_diff import HOSTILE, HOSTILE_PIN, record
from test_report_bounds import _render

from bake.plan import records
from bake.run import sitrep
from bake.run.build import Newest, add_since_last, newest_records
from bake.run.engine import RegistryError

A, B = "a" * 40, "b" * 40
D1, D2, IMG = "sha256:" + "1" * 64, "sha256:" + "2" * 64, "sha256:" + "e" * 64
DATE = datetime.date(2026, 11, 29)


def _rec(target, digest, pins=None, ref=A, base=None, date="2026-11-28", repository="r.example/x"):
    out = {**record(target, digest, pins, ref=ref), "date": date, "repository": repository,
           "base_images": [{"image": "docker.io/library/busybox:latest", "platform": "linux/amd64", "digest": base}]
           if base else []}
    return out


def test_since_last_names_the_pins_sources_base_images_and_inputs_that_moved():
    before = {("jax", "amd64"): _rec("jax", D1, {"numpy": "1.0", "six": "1"}, base="sha256:" + "b" * 64)}
    after = [_rec("jax", D2, {"numpy": "1.1", "six": "1"}, ref=B, base="sha256:" + "c" * 64, date="2026-11-29")]
    (entry,) = records.since_last(after, before)["jax"]
    assert entry["arch"] == "amd64" and entry["from"] == "nightly-2026-11-28" and entry["reason"] is None
    assert (entry["status"], entry["input_from"], entry["input_to"]) == ("changed", D1, D2)
    assert entry["python"] == {"added": [], "removed": [], "upgraded": [{"name": "numpy", "from": "1.0", "to": "1.1"}],
                               "downgraded": [], "changed": []}
    assert [(s["name"], s["from"], s["to"]) for s in entry["sources"]] == [("JAX", A, B)]
    assert entry["sources"][0]["compare"] == f"https://github.com/google/jax/compare/{A}...{B}"
    assert entry["base_images"] == [{"image": "docker.io/library/busybox:latest", "from": "sha256:" + "b" * 64,
                                     "to": "sha256:" + "c" * 64}]
    assert records.since_last_changed(entry)
    same = records.since_last([_rec("jax", D1, {"numpy": "1.0"})], {("jax", "amd64"): _rec("jax", D1, {"numpy": "1.0"})})
    assert same["jax"][0]["status"] == "unchanged" and not records.since_last_changed(same["jax"][0])


def test_no_record_an_unreadable_one_and_an_untagged_target_each_say_why_in_one_line():
    after = [_rec("fresh", D1), _rec("bad", D1), _rec("loose", D1, repository=None)]
    fault = "r.example/x:record-bad-latest-amd64: an unreadable record: pins name 'x|y'\nis not " + "z" * 500
    got = records.since_last(after, {}, {("bad", "amd64"): fault})
    assert got["fresh"][0]["status"] == "new" and got["fresh"][0]["reason"] == records.NO_EARLIER_RECORD
    assert got["fresh"][0]["from"] is None and got["fresh"][0]["python"] is None
    bad = got["bad"][0]
    assert bad["status"] == "unknown" and "\n" not in bad["reason"] and len(bad["reason"]) == records.FAULT_CHARS
    assert bad["reason"].startswith("r.example/x:record-bad-latest-amd64: an unreadable record: pins name 'x|y' is not")
    assert got["loose"][0]["status"] == "unknown" and got["loose"][0]["reason"] == records.UNTAGGED


def test_a_base_image_without_a_digest_on_one_side_is_no_change():
    old = [{"image": "a", "digest": "sha256:1"}, {"image": "b", "digest": None}, {"image": "gone", "digest": "sha256:3"}]
    new = [{"image": "a", "digest": "sha256:2"}, {"image": "b", "digest": "sha256:9"}, {"image": "fresh", "digest": "sha256:4"}]
    assert records.base_image_changes(old, new) == [
        {"image": "a", "from": "sha256:1", "to": "sha256:2"}, {"image": "fresh", "from": None, "to": "sha256:4"},
        {"image": "gone", "from": "sha256:3", "to": None}]


def _plan():
    def target(name, base=None):
        out = {"platforms": ["linux/amd64"], "tags": [f"r.example/x/{name}:nightly-2026-11-29-amd64"],
               "args": {"URLREF_JAX": f"https://github.com/google/jax.git#{B}"},
               "labels": {"io.bake-plan.input-digest": D2}}
        if base:
            out["contexts"] = {"base": f"target:{base}"}
        return out
    return {"group": {"default": {"targets": ["ok", "bad", "gone"]}},
            "target": {"ok": target("ok"), "bad": target("bad"), "gone": target("gone", "ok")}}


def _annotations(ref):
    """The registry: a record for ``ok``, a hostile one for ``bad``, no answer for ``gone``."""
    if "record-ok-latest" in ref:
        return {"io.bake-plan.record": json.dumps({**_rec("ok", D1, ref=A), "target": "ok"})}
    if "record-bad-latest" in ref:
        return {"io.bake-plan.record": json.dumps({**_rec("bad", D1), "pins": {HOSTILE_PIN: "1.0"}})}
    raise RegistryError(f"cannot read {ref}: the registry did not answer within 30 s")


def test_the_newest_records_are_read_once_each_and_a_bad_one_is_a_fault_not_an_error():
    asked = []
    latest = newest_records(_plan(), lambda ref: asked.append(ref) or _annotations(ref))
    assert sorted(asked) == sorted(ref for _, _, ref in records.latest_refs(_plan()))
    assert list(latest.found) == [("ok", "amd64")]
    assert "an unreadable record: pins name" in latest.faults[("bad", "amd64")]
    assert latest.faults[("gone", "amd64")].endswith("the registry did not answer within 30 s")
    # the cache health check reads from the same read: no registry asked again
    read = latest.reader(_plan())
    assert read("r.example/x/ok:record-ok-latest-amd64")["input_digest"] == D1
    assert read("r.example/x/gone:record-gone-latest-amd64") is None


def test_add_since_last_gives_every_target_its_entry_and_the_summary_its_section():
    plan = _plan()
    report = sitrep.make_sitrep(plan, "ok build", 0, [], {n: {"containerimage.digest": IMG} for n in plan["target"]}, {})
    add_since_last(report, plan, newest_records(plan, _annotations), DATE)
    ok, bad, gone = (report["targets"][n]["since_last"] for n in ("ok", "bad", "gone"))
    assert ok[0]["status"] == "changed" and [s["to"] for s in ok[0]["sources"]] == [B]
    assert bad[0]["status"] == "unknown" and "an unreadable record" in bad[0]["reason"]
    assert gone[0]["status"] == "unknown" and "did not answer" in gone[0]["reason"]
    assert report["outcome"] == "pass"  # a record that cannot be read changes no outcome
    text = sitrep.markdown(sitrep.redacted(report))
    section = text[text.index("### Changed since nightly-2026-11-28"):]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `ok`", "| `bad`", "| `gone`"]
    assert all(len(re.findall(r"(?<!\\)\|", row)) == 7 for row in rows), rows  # six cells each
    assert "<img" not in _render(text)


def test_a_target_skip_unchanged_did_not_build_is_compared_as_its_record():
    plan = _plan()
    old = {**_rec("ok", D1), "image_digest": IMG, "outcome": "pass", "tags": ["r.example/x/ok:nightly-2026-11-28-amd64"]}
    del plan["target"]["ok"], plan["target"]["gone"]
    plan["group"]["default"]["targets"] = ["bad"]
    report = sitrep.make_sitrep(plan, "ok build", 0, [], {"bad": {"containerimage.digest": IMG}}, {},
                                unchanged={"ok": old})
    add_since_last(report, plan, Newest(found={("ok", "amd64"): old}), DATE)
    assert report["targets"]["ok"]["since_last"][0]["status"] == "unchanged"
    assert report["targets"]["bad"]["since_last"][0]["status"] == "new"


def test_the_section_escapes_every_value_and_keeps_its_rows_in_one_cell_each():
    for text in HOSTILE:
        before = {(text, "amd64"): {**_rec(text, D1, {"numpy": "1.0"}, ref=f"r{text}"), "target": text}}
        after = [{**_rec(text, D2, {"numpy": f"2.0{text}"}, ref=B), "target": text}]
        targets = {text: {"since_last": records.since_last(after, before)[text]}}
        section = sitrep.since_last_markdown(sitrep.redacted(targets))
        assert "\x1b" not in section and "\u202e" not in section
        lines = section.splitlines()
        assert len(lines) == 5, lines  # the heading, a blank line, the head, the rule, one row
        html = _render(section)
        assert "<script" not in html and html.count("<td>") == 6, html


def test_the_section_is_byte_bounded_and_says_what_it_left_out():
    entries = {f"t{n}": {"since_last": [{"arch": "amd64", "from": "nightly-2026-11-28", "status": "changed",
                                          "input_from": D1, "input_to": D2, "python": None, "sources": [],
                                          "base_images": [], "reason": "x" * 200}]} for n in range(200)}
    section = sitrep.since_last_markdown(entries, 10_000)
    assert len(section.encode()) <= 10_000
    assert re.search(r"_\d+ table rows left out: ", section), section[-300:]
    assert sitrep.since_last_markdown({"t": {"outcome": "pass"}}) == ""  # not computed: no section
    quiet = {"t": {"since_last": [{"arch": "amd64", "from": "nightly-2026-11-28", "status": "unchanged",
                                   "python": None, "sources": [], "base_images": [], "reason": None}]}}
    assert "Nothing changed" in sitrep.since_last_markdown(quiet)


def test_since_last_is_on_by_default_and_off_by_flag_config_or_environment(tmp_path, monkeypatch):
    import os

    from bake.settings.merge import gather

    monkeypatch.chdir(tmp_path)
    given = {"target": ["jax"], "config": os.devnull}
    assert gather("build", given, {}).since_last is True
    assert gather("build", dict(given, since_last=False), {}).since_last is False
    assert gather("build", given, {"BAKE_PLAN_SINCE_LAST": "off"}).since_last is False
    (tmp_path / "bake-plan.toml").write_text("since-last = false\n")
    assert gather("build", {"target": ["jax"], "config": "bake-plan.toml"}, {}).since_last is False


def _shapes():
    """Records of every wrong shape a registry could hold, with the one phrase each is refused by."""
    good = {**_rec("bad", D1), "target": "bad"}
    yield {**good, "pins": ["numpy"]}, "pins is not an object or null"
    yield {**good, "sources": ["x"]}, "sources is not an object or null"
    yield {**good, "sources": {"JAX": "https://x"}}, "sources.JAX is not an object"
    yield {**good, "sources": {"JAX": {"url": "u", "ref": 5, "patches": []}}}, "sources.JAX.ref is not a string"
    yield {**good, "base_images": [{"image": ["x"], "digest": None}]}, "base_images[0].image is not a string"
    yield {**good, "base_images": 5}, "base_images is not a list or null"
    yield {**good, "date": "2026-12-01|<b>d</b>"}, "date '2026-12-01|<b>d</b>' is not YYYY-MM-DD"
    yield {**good, "pins": {"numpy": "1." + "0" * 60000}}, "pins.numpy is longer than 4096 characters"
    yield {**good, "size_bytes": "big"}, "size_bytes is not an integer or null"
    yield {**good, "target": "root", "arch": "arm64"}, ("it is the record of 'root' on 'arm64', not of 'bad' on "
                                                         "'amd64'")


def test_a_record_of_any_wrong_shape_or_of_another_target_is_a_fault_of_its_target_never_a_crash():
    plan = _plan()
    for shape, why in _shapes():
        def registry(ref, shape=shape):
            if "record-bad-latest" in ref:
                return {"io.bake-plan.record": json.dumps(shape)}
            return None
        latest = newest_records(plan, registry)
        assert latest.found == {}
        assert latest.faults[("bad", "amd64")] == f"r.example/x/bad:record-bad-latest-amd64: an unreadable record: {why}"
        report = {"targets": {name: {"outcome": "pass", "platforms": ["linux/amd64"], "digest": IMG,
                                     "input_digest": D2} for name in plan["target"]}}
        add_since_last(report, plan, latest, DATE)  # the sitrep is written whatever the registry held
        [entry] = report["targets"]["bad"]["since_last"]
        assert entry["reason"].endswith(why) and entry["status"] == "unknown"


def test_a_since_last_entry_is_bounded_whatever_the_record_held():
    many = {f"p{n}": "1." + "9" * 3000 for n in range(1000)}
    before, after = _rec("ok", D1, pins=many), _rec("ok", D2, pins={"numpy": "2.0.0"})
    [entry] = records.since_last([after], {("ok", "amd64"): before})["ok"]
    python = entry["python"]
    assert len(python["removed"]) == records.SINCE_LAST_PINS and python["left_out"] == {"removed": 900}
    assert python["added"] == [{"name": "numpy", "version": "2.0.0"}]
    assert max(len(p["version"]) for p in python["removed"]) <= records.SINCE_LAST_VERSION_CHARS
    assert len(json.dumps(entry)) < 40_000
    assert records.pin_words(python)[-1] == "… 900 more (bake-plan diff lists them)"
