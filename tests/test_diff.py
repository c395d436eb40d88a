"""``bake-plan diff`` and the records it compares (bake/plan/records.py): input digests changed or
not, Python distributions added/removed/upgraded/downgraded from two locks, source commits moved
with a compare link, in text, JSON and Markdown; bad sides are one line, exit 2."""

from __future__ import annotations

import datetime
import json

from bake.plan import records
from bake.run.record import diff_markdown

DATE = datetime.date(2026, 11, 29)
A, B = "a" * 40, "b" * 40


def test_pins_of_a_lock_with_hashes_comments_and_urls():
    text = ("# header\n--index-url https://example.invalid/simple\nNumPy==1.26.4 \\\n    --hash=sha256:00 \\\n"
            "    --hash=sha256:11\n    # via jax\nzope.interface==6.0  # via x\n"
            "mylib @ https://example.invalid/mylib-1.0.tar.gz\n-e file:///opt/jax\n"
            "jax[cuda]==0.4.30 ; python_version>'3'\n")
    assert records.pins_of(text) == {"numpy": "1.26.4", "zope-interface": "6.0",
                                     "mylib": "https://example.invalid/mylib-1.0.tar.gz", "jax": "0.4.30"}


def test_pin_changes_sort_added_removed_upgraded_downgraded():
    before = {"numpy": "1.26.4", "scipy": "1.12.0", "old": "1.0", "same": "2", "url": "https://x/1.tgz"}
    after = {"numpy": "2.0.0", "scipy": "1.11.4", "new": "0.1", "same": "2", "url": "https://x/2.tgz"}
    got = records.pin_changes(before, after)
    assert got == {"added": [{"name": "new", "version": "0.1"}], "removed": [{"name": "old", "version": "1.0"}],
                   "upgraded": [{"name": "numpy", "from": "1.26.4", "to": "2.0.0"}],
                   "downgraded": [{"name": "scipy", "from": "1.12.0", "to": "1.11.4"}],
                   "changed": [{"name": "url", "from": "https://x/1.tgz", "to": "https://x/2.tgz"}]}
    assert records.pin_changes(None, after) is None


def test_compare_links_for_github_and_gitlab_only():
    assert records.compare_link("https://github.com/google/jax.git", A, B) == \
        f"https://github.com/google/jax/compare/{A}...{B}"
    assert records.compare_link("git@github.com:google/jax.git", A, B) == \
        f"https://github.com/google/jax/compare/{A}...{B}"
    assert records.compare_link("https://gitlab.com/group/sub/proj", A, B) == \
        f"https://gitlab.com/group/sub/proj/-/compare/{A}...{B}"
    assert records.compare_link("https://example.com/x.git", A, B) is None
    assert records.compare_link("https://github.com/a/b", "x y", B) is None


def record(target, digest, pins=None, ref=A, arch="amd64"):
    return {"schema": records.SCHEMA, "target": target, "arch": arch, "input_digest": digest, "pins": pins,
            "sources": {"JAX": {"url": "https://github.com/google/jax.git", "ref": ref, "patches": []}}}


def test_diff_per_target_and_arch():
    before = [record("jax", "sha256:1", {"numpy": "1.0"}), record("base", "sha256:2")]
    after = [record("base", "sha256:2"), record("jax", "sha256:3", {"numpy": "1.1"}, ref=B), record("new", "sha256:4")]
    entries = records.diff(before, after)
    assert [(e["target"], e["status"]) for e in entries] == [("base", "unchanged"), ("jax", "changed"), ("new", "new")]
    jax = entries[1]
    assert jax["python"]["upgraded"] == [{"name": "numpy", "from": "1.0", "to": "1.1"}]
    assert jax["sources"][0]["compare"] == f"https://github.com/google/jax/compare/{A}...{B}"
    text = records.diff_text(entries)
    assert "base (amd64): unchanged" in text and "jax (amd64): changed (input sha256:1 → sha256:3)" in text
    assert "  python ↑ numpy 1.0 → 1.1" in text and f"compare/{A}...{B}" in text
    doc = json.loads(records.diff_json(entries))
    assert doc["schema"] == "bake-plan.diff/1" and doc["targets"][1]["status"] == "changed"
    table = diff_markdown(entries)
    assert table.splitlines()[0] == "| target | arch | inputs | Python distributions | sources |"
    assert "`↑ numpy 1.0 → 1.1`" in table


def test_a_markdown_cell_cannot_break_the_table():
    entries = records.diff([record("x", "sha256:1")], [record("x", "sha256:2", ref="a|b`c")])
    row = diff_markdown(entries).splitlines()[2]
    import re

    assert len(re.findall(r"(?<!\\)\|", row)) == 6, row  # 5 cells: the ref's | is escaped
    assert "a\\|b'c" in row  # the backtick cannot end the code span


def test_plan_records_read_the_lock_of_a_locked_target(tmp_path):
    (tmp_path / "requirements-amd64.lock").write_text("numpy==1.0\n")
    plan = {"target": {"t": {"platforms": ["linux/amd64", "linux/arm64"], "tags": ["r.example/x/t:latest"],
                             "contexts": {"pip-lock": str(tmp_path)},
                             "labels": {"io.bake-plan.input-digest": "sha256:9"}}}}
    got = records.plan_records(plan, DATE)
    assert [(r["arch"], r["pins"], r["repository"]) for r in got] == [
        ("amd64", {"numpy": "1.0"}, "r.example/x/t"), ("arm64", None, "r.example/x/t")]
    assert records.record_refs(plan, DATE) == [("t", "amd64", "r.example/x/t:record-t-2026-11-29-amd64"),
                                               ("t", "arm64", "r.example/x/t:record-t-2026-11-29-arm64")]


def test_diff_from_an_old_plan_file_names_the_changed_targets(cli, tmp_path):
    old = tmp_path / "old.json"
    common = ("--target", "jax", "--platform", "linux/amd64", "--registry", "localhost:5555/x")
    cli("plan", *common, "--format", "json", "-o", str(old), cwd=tmp_path, check=True)
    same = cli("diff", *common, "--from", str(old), "--format", "json", cwd=tmp_path, check=True)
    assert {t["status"] for t in json.loads(same.stdout)["targets"]} == {"unchanged"}
    moved = cli("diff", *common, "--from", str(old), "--base-image",
                "nvidia/cuda:12.2.0-devel-ubuntu22.04=localhost:5555/cuda@sha256:" + "c" * 64, cwd=tmp_path, check=True)
    assert "jax (amd64): changed" in moved.stdout and "base-mealkit (amd64): changed" in moved.stdout


def test_diff_bad_sides_are_one_line(cli, tmp_path):
    common = ("diff", "--target", "jax", "--platform", "linux/amd64", "--registry", "localhost:5555/x")
    missing = cli(*common, "--from", "nope.json", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip() == \
        "bake-plan: error: --from nope.json: No such file or directory"
    (tmp_path / "x.json").write_text('{"schema": "other"}')
    other = cli(*common, "--from", "x.json", cwd=tmp_path)
    assert other.returncode == 2 and "--from x.json: not a bake-plan plan or nightly record" in other.stderr
    bad = cli(*common, "--from", "2026-02-30", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "bake-plan: error: --from '2026-02-30' is not a date in the form YYYY-MM-DD"


def test_skip_unchanged_needs_one_platform_and_push(cli, tmp_path):
    many = cli("build", "--target", "jax", "--registry", "localhost:5555/x", "--skip-unchanged", "--push", cwd=tmp_path)
    assert many.returncode == 2 and many.stderr.strip() == \
        "bake-plan: error: --skip-unchanged needs exactly one --platform: a nightly record is of one arch"
    local = cli("build", "--target", "jax", "--registry", "localhost:5555/x", "--platform", "linux/amd64",
                "--skip-unchanged", cwd=tmp_path)
    assert local.returncode == 2 and "--skip-unchanged needs --push" in local.stderr


def test_unchanged_targets_are_taken_out_and_their_users_get_the_recorded_image():
    digest = "sha256:" + "d" * 64
    plan = {"group": {"default": {"targets": ["w", "a", "b", "c"]}, "v": {"targets": ["a"]}},
            "target": {
                "w": {"platforms": ["linux/amd64"], "labels": {"io.bake-plan.input-digest": "sha256:w"}},
                "a": {"platforms": ["linux/amd64"], "tags": ["r.example/a:latest-amd64"], "contexts": {"w": "target:w"},
                      "labels": {"io.bake-plan.input-digest": "sha256:a"}},
                "b": {"platforms": ["linux/amd64"], "tags": ["r.example/b:latest-amd64"],
                      "contexts": {"base": "target:a"},
                      "labels": {"io.bake-plan.input-digest": "sha256:b"}},
                "c": {"platforms": ["linux/amd64"], "tags": ["r.example/c:latest-amd64"],
                      "contexts": {"base": "target:a"},
                      "labels": {"io.bake-plan.input-digest": "sha256:c"}}}}
    latest = {("a", "amd64"): {"input_digest": "sha256:a", "outcome": "pass", "image_digest": digest,
                               "repository": "r.example/a", "date": "2026-11-28"},
              ("b", "amd64"): {"input_digest": "sha256:OLD", "outcome": "pass", "image_digest": digest,
                               "repository": "r.example/b"},
              ("c", "amd64"): {"input_digest": "sha256:c", "outcome": "fail", "image_digest": None,
                               "repository": "r.example/c"}}
    unchanged = records.unchanged_targets(plan, latest)
    assert list(unchanged) == ["a"]
    assert records.drop_unchanged(plan, unchanged) == ["w", "a"]  # w: untagged, only a used it
    assert plan["group"] == {"default": {"targets": ["b", "c"]}}
    assert plan["target"]["b"]["contexts"] == {"base": f"docker-image://r.example/a@{digest}"}
    assert records.unchanged_line("a", unchanged["a"]) == "a: unchanged since nightly-2026-11-28 (input sha256:a)"


# --- hostile records: escaped when shown, refused when read -------------------------------------

HOSTILE_PIN = "x|y</td><img src=x onerror=alert(1)>"
HOSTILE = ["evil\x1b[2Kspoof", "two\nlines", "<script>alert(1)</script>", "a | b", "bidi\u202eevil"]


def _hostile_entries(text):
    """A diff whose every shown field holds ``text`` (built past the reader, which refuses such records)."""
    before = record(text, "sha256:1", {HOSTILE_PIN: "1.0", text: "1.0"}, ref=f"r{text}", arch=text)
    after = record(text, "sha256:2", {HOSTILE_PIN: "2.0", text: "2.0"}, ref=B, arch=text)
    after["sources"]["JAX"]["url"] = f"https://example.invalid/{text}"
    return records.diff([before], [after])


def test_the_text_diff_escapes_control_characters_as_error_lines_do():
    for text in HOSTILE:
        out = records.diff_text(_hostile_entries(text))
        assert "\x1b" not in out and "\u202e" not in out
        assert len(out.splitlines()) == 4, out  # the head, two pins and a source: no line break let through
    out = records.diff_text(_hostile_entries("evil\x1b[2Kspoof"))
    assert "evil\\x1b[2Kspoof (evil\\x1b[2Kspoof): changed" in out
    assert "  python ↑ evil\\x1b[2Kspoof 1.0 → 2.0" in records.diff_text(_hostile_entries("evil\x1b[2Kspoof"))
    assert "two\\x0alines (two\\x0alines)" in records.diff_text(_hostile_entries("two\nlines"))


def test_the_markdown_diff_escapes_as_sitrep_md_and_renders_no_html():
    from test_report_bounds import _render

    for text in HOSTILE:
        table = diff_markdown(_hostile_entries(text))
        assert "\x1b" not in table and "\u202e" not in table
        assert len(table.splitlines()) == 3, table  # head, rule, one row
        html = _render(table)
        assert "<script" not in html and "<img" not in html and "</td><" not in html.replace("</td>\n<", "")
        assert html.count("<tr>") == 2 and html.count("<td>") == 5, html
    assert "`evil\\x1b[2Kspoof`" in diff_markdown(_hostile_entries("evil\x1b[2Kspoof"))


def test_the_json_diff_stays_json_with_control_characters_escaped():
    out = records.diff_json(_hostile_entries("evil\x1b[2Kspoof"))
    assert "\x1b" not in out and "\\u001b" in out
    assert json.loads(out)["targets"][0]["target"] == "evil\x1b[2Kspoof"


def _bad_records():
    good = record("jax", "sha256:" + "1" * 64, {"numpy": "1.0"})
    yield {**good, "pins": {HOSTILE_PIN: "1.0"}}, f"pins name {HOSTILE_PIN!r} is not a distribution name"
    yield {**good, "input_digest": "sha256:1"}, "input_digest 'sha256:1' is not a sha256:<64 hex> digest"
    yield {**good, "image_digest": "sha256:" + "A" * 64}, "image_digest"
    yield {**good, "target": "jax\x1b[2K"}, "target holds an escape (U+001B)"
    yield {**good, "arch": "amd64\nfake line"}, "arch holds a line feed (U+000A)"
    yield ({**good, "sources": {"JAX": {"url": "https://x/\x1b]8;;evil", "ref": A, "patches": []}}},
           "sources.JAX.url holds an escape (U+001B)")
    yield {**good, "pins": {"numpy": "1.0\u202e"}}, "pins.numpy holds a control character (U+202E)"


def test_a_record_read_with_a_bad_field_is_unreadable_naming_the_field():
    import pytest

    from bake.errors import RecordError, UsageError
    from bake.run.record import record_from_annotations

    for bad, needle in _bad_records():
        with pytest.raises(UsageError) as err:
            records.parse_records(json.dumps([bad]), "--from a.json")
        assert str(err.value).startswith("--from a.json: item 0: an unreadable record: ") and needle in str(err.value)
        with pytest.raises(RecordError) as err:
            record_from_annotations({"io.bake-plan.record": json.dumps(bad)}, "r/x:record-jax-2026-11-29-amd64")
        assert "r/x:record-jax-2026-11-29-amd64: an unreadable record: " in str(err.value) and needle in str(err.value)
    good = record("jax", "sha256:" + "1" * 64, {"numpy": "1.0", "zope.interface": "6"})
    good["tests"] = [{"test": "python -c '\nimport jax'", "outcome": "pass"}]  # a command may be lines
    assert records.parse_records(json.dumps(good), "f") == [good]


def test_diff_of_a_hostile_record_file_is_one_escaped_line_exit_2(cli, tmp_path):
    from test_errors import assert_one_line_error

    common = ("diff", "--target", "jax", "--platform", "linux/amd64", "--registry", "localhost:5555/x")
    good = record("jax", "sha256:" + "1" * 64, {"numpy": "1.0"})
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps({**good, "pins": {"numpy\x1b[2K<script>": "2.0"}}))
    proc = cli(*common, "--from", "a.json", "--to", "b.json", cwd=tmp_path)
    assert_one_line_error(proc, "--to b.json: an unreadable record: pins name", "is not a distribution name")
    assert "\x1b" not in proc.stderr and proc.stdout == ""
    (tmp_path / "b.json").write_text(json.dumps({**good, "pins": {"numpy": "2.0"}}))
    ok = cli(*common, "--from", "a.json", "--to", "b.json", cwd=tmp_path, check=True)
    assert "jax (amd64): unchanged" in ok.stdout and "  python ↑ numpy 1.0 → 2.0" in ok.stdout


def test_skip_unchanged_takes_an_unreadable_newest_record_as_none_and_says_so():
    """``read_latest`` with ``unreadable``: a record whose image digest is no digest (what
    ``build --skip-unchanged`` would hand to ``imagetools create``) counts as no record, said."""
    import pytest

    from bake.errors import RecordError
    from bake.plan.names import arch_of
    from bake.run.record import read_latest

    plan = {"target": {"jax": {"platforms": ["linux/amd64"], "tags": ["localhost:5555/x/jax:latest-amd64"]}}}
    refs = [ref for _, _, ref in records.latest_refs(plan)]
    assert refs and arch_of("linux/amd64") == "amd64"
    bad = {**record("jax", "sha256:" + "1" * 64, {"numpy": "1.0"}), "image_digest": "sha256:zz --help"}
    notes = lambda ref: {"io.bake-plan.record": json.dumps(bad)}  # noqa: E731
    said = []
    assert read_latest(plan, notes, unreadable=lambda target, ref, err: said.append((target, ref, str(err)))) == {}
    assert said and said[0][0] == "jax" and "an unreadable record: image_digest" in said[0][2]
    with pytest.raises(RecordError):  # without the callback the error is raised, as before
        read_latest(plan, notes)
