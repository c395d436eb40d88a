"""Bounds on what ``bake-plan test`` reads and reports, and on the Markdown it writes.

- A test's output is read in bounded memory and time whatever it writes: many short lines, one
  huge line (:class:`bake.run.engine.OutputTail`); each line kept is cut at
  :data:`~bake.run.engine.TEST_LINE_BYTES`, a test's kept output at
  :data:`~bake.run.engine.TEST_OUTPUT_BYTES`, a summary at :data:`~bake.run.sitrep.SUMMARY_BYTES`,
  each cut visible.
- Every value from a plugin or a test that reaches the Markdown is escaped in one place
  (:func:`bake.run.sitrep.markdown_text`): no tag, link or image renders from it.
- ``bake-plan test --date D`` tests the tag that names D.
On the engine: a test writing 400,000 lines keeps its time bound, a stalled pull is bounded.
"""

from __future__ import annotations

import datetime
import os
import re
import time
from pathlib import Path

import pytest
from registry_proxy import silent_server

from bake import ImageTest, Stage, hookimpl
from bake.api import make_plan
from bake.errors import RunError, UsageError
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.resources import stage_dir
from bake.run import sitrep
from bake.run.engine import TEST_LINE_BYTES, TEST_OUTPUT_BYTES, ContainerRun, OutputTail
from bake.run.imagetest import Case, TestReports, bounded, cases, run_cases

CONTEXT = str(stage_dir("jax"))
DATE = datetime.date(2026, 11, 29)


# --- reading a test's output -----------------------------------------------------------------

def test_many_short_lines_are_read_in_linear_time_and_the_last_kept():
    tail = OutputTail(keep=20)
    data = b"".join(b"line %d\n" % i for i in range(400_000))
    started = time.monotonic()
    for at in range(0, len(data), 4096):  # as a pipe gives it: cut anywhere
        tail.feed(data[at:at + 4096])
    lines = tail.finish()
    assert time.monotonic() - started < 10
    assert lines == [f"line {i}" for i in range(399_980, 400_000)]


def test_a_huge_line_is_cut_with_a_visible_marker_and_not_held_whole():
    shown = []
    tail = OutputTail(keep=20, echo=shown.append)
    for _ in range(32):  # 2 MiB in one line, in 64 KiB reads
        tail.feed(b"a" * 65536)
        assert len(tail._line) <= TEST_LINE_BYTES  # what is held of it stays bounded
    tail.feed(b"\nafter\nno newline at the end")
    lines = tail.finish()
    assert lines[0] == "a" * TEST_LINE_BYTES + f"… [line cut: {32 * 65536} bytes]"
    assert lines[1:] == ["after", "no newline at the end"] and shown == lines


def test_a_tests_kept_output_is_bounded_in_bytes_as_well_as_lines():
    tail = OutputTail(keep=20)
    tail.feed((("b" * 3000) + "\n").encode() * 20)
    lines = tail.finish()
    assert sum(len(line) + 1 for line in lines) <= TEST_OUTPUT_BYTES and len(lines) == TEST_OUTPUT_BYTES // 3001
    assert bounded(["x" * 10, "é" * 5000]) == ["x" * 10, "é" * (TEST_LINE_BYTES // 2) + "… [line cut: 10000 bytes]"]


def test_a_failing_tests_huge_line_reaches_no_report_whole(tmp_path):
    huge = "z" * 2_000_000

    def run(ref, platform, argv, timeout_s, keep, echo):  # a runner that does not bound (a library user's)
        return ContainerRun(exit_code=1, tail=["before", huge], duration_s=0.1)

    found = [Case("s", "s", "linux/amd64", "r/s:latest", (ImageTest("huge"),))]
    results = run_cases(found, run, None)
    assert results[0]["output"] == ["before", "z" * TEST_LINE_BYTES + "… [line cut: 2000000 bytes]"]
    summary = tmp_path / "step-summary.md"
    summary.write_text("x" * 900_000)  # what earlier steps of the job wrote
    reports = TestReports(tmp_path / "sitrep", str(summary))
    reports.prepare()
    reports.write(sitrep.make_tests("s tests", results))
    for name in ("sitrep.json", "sitrep.md"):
        text = (tmp_path / "sitrep" / name).read_text()
        assert huge not in text and "… [line cut: 2000000 bytes]" in text
    assert summary.stat().st_size < sitrep.SUMMARY_BYTES < 1 << 20


# --- the summary's bound -----------------------------------------------------------------------

def _result(test, outcome="fail", output=(), platform="linux/amd64"):
    return {"stage": "leaf", "target": "leaf", "platform": platform, "test": test, "command": test,
            "image": "r/leaf:latest", "outcome": outcome, "exit_code": 0 if outcome == "pass" else 3,
            "duration_s": 1.5, "timed_out": False, "output": list(output)}


def test_the_summary_stays_under_its_bound_and_says_what_it_left_out():
    many = [_result(f"t{i}", output=["o" * 4000] * 4) for i in range(400)]  # 6 MB of output blocks
    block = sitrep.make_tests("leaf tests", many)
    text = sitrep.tests_markdown(block)
    assert len(text.encode()) <= sitrep.SUMMARY_BYTES
    assert text.count("| `leaf` |") == 400  # every row fits; the output blocks after them do not all
    assert "output blocks left out: the summary is kept under 1,000,000 bytes; sitrep.json has every result" in text
    small = sitrep.tests_markdown(block, limit=5_000)
    assert len(small.encode()) <= 5_000 and "table rows and " in small
    whole = sitrep.markdown({"summary": "x", "outcome": "fail", "targets": {}, "tests": block})
    assert len(whole.encode()) <= sitrep.SUMMARY_BYTES
    assert "left out" not in sitrep.tests_markdown(sitrep.make_tests("t", [_result("one", output=["o"])]))


# --- Markdown and HTML from plugins and tests ------------------------------------------------

HOSTILE = ["<img src=x onerror=alert(1)>", "[click](https://evil.example/x)", "![i](https://evil.example/i.png)",
           "<https://evil.example>", "https://evil.example/raw", "www.evil.example", "me@evil.example",
           "<script>alert(1)</script>", "a | b | c", "*bold* _em_ ~~gone~~ `code`", "line\nbreak\r\n# heading",
           "&lt;already&gt; &amp;", "<details open>", "</details></summary>"]


def _render(markdown: str) -> str:
    """HTML as a CommonMark + GFM-table renderer makes it (markdown-it-py, a test dependency)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough").render(markdown)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_tests_name_renders_as_its_text_and_never_as_a_tag_or_link(name):
    block = sitrep.make_tests("leaf tests", [_result(name, output=["out"]), _result("ok", "pass")])
    text = sitrep.tests_markdown(block)
    lines = text.splitlines()
    assert lines[0].startswith("### ❌ leaf tests: 1/2 passed (failed: leaf linux/amd64 ")
    # one line per heading and row, whatever the name holds; one row per test
    assert sum(line.startswith("| `leaf` |") for line in lines) == 2
    assert all(line.count(" | ") == 5 for line in lines if line.startswith("| `leaf` |"))
    plain = text.replace(f"`{name}`", "")  # in a code span (the table's cell) it is text already
    assert plain.count("<details>") == plain.count("</details>") == plain.count("</summary>") == 1
    for raw in ("<img", "<script", "<https", "<details open"):
        if raw in name:
            assert raw not in text.replace(f"`{name}`", ""), raw
    assert not re.search(r"(?<!\\)[\[<]", lines[0]), "no unescaped link or tag in the heading"
    html = _render(text)
    assert "<h3>" in html
    if html:
        assert "<img" not in html and "<a " not in html and "<script" not in html and "<del>" not in html
        assert "<em>" not in html and "<strong>" not in html and "<h1>" not in html
        assert html.count("<tr>") == 3 and html.count("<details>") == 1


def test_markdown_text_is_the_one_escaping_and_reads_back_as_the_text():
    escape = sitrep.markdown_text
    assert escape("<img src=x>") == "&lt;img src=x&gt;"
    assert escape("[a](https://e.x)") == "\\[a\\](https\\://e.x)"
    assert escape("a|b\nc") == "a\\|b c"
    assert escape("it-root tests: 3/6 passed") == "it-root tests: 3/6 passed"  # ordinary text stays readable
    assert escape("a`b|c", "code") == "`a'b\\|c`"
    assert escape('<b title="x">&', "html") == "&lt;b title=&quot;x&quot;&gt;&amp;"
    html = _render(f"### {escape(' '.join(HOSTILE))}\n")
    if html:
        import html as html_module

        text = html_module.unescape(html.removeprefix("<h3>").removesuffix("</h3>\n"))
        assert text == " ".join(" ".join(HOSTILE).replace("\r\n", " ").replace("\n", " ").split(" "))
        assert "<" not in html.removeprefix("<h3>").removesuffix("</h3>\n")


def test_a_build_summary_heading_is_escaped_too():
    text = sitrep.markdown({"summary": "x build: failed: x (ERROR: <img src=y> [a](b))", "outcome": "fail",
                            "targets": {}})
    assert "<img" not in text and "\\[a\\](b)" in text


# --- which image a dated run tests -----------------------------------------------------------

class _Family:
    @hookimpl
    def bake_plan_stages(self):
        return [Stage(name="leaf", image="leaf", context=CONTEXT, base_image="busybox:1.36", registry="r.example/ns",
                      tests=("true",))]


class _Undated:
    @hookimpl
    def bake_plan_tags(self, stage, flavor, date):
        return ["edge"] if flavor != "mealkit" else ["edge-mealkit"]


def _cases(date=None, platforms=(), plugins=()):
    pm = get_plugin_manager(plugins=[_Family(), *plugins])
    return cases(make_plan(PlanOptions(targets=("leaf",), date=DATE, platforms=platforms), pm), date)


def test_a_named_date_tests_that_nights_tag_and_no_date_the_latest():
    assert [c.image for c in _cases(DATE)] == ["r.example/ns/leaf:nightly-2026-11-29"] * 2
    assert [c.image for c in _cases()] == ["r.example/ns/leaf:latest"] * 2
    per_arch = _cases(DATE, platforms=("linux/arm64",))
    assert [(c.image, c.per_arch) for c in per_arch] == [("r.example/ns/leaf:nightly-2026-11-29-arm64", True)]


def test_a_named_date_no_tag_names_is_one_line():
    with pytest.raises(UsageError, match=r"^--date 2026-11-29: stage 'leaf' has no tag naming that date "
                                         r"\(its tags: leaf:edge\); without --date its first tag is tested$"):
        _cases(DATE, plugins=[_Undated()])


def test_the_cli_passes_a_named_date_and_not_a_policy(monkeypatch, tmp_path):
    from bake import commands

    seen = {}

    def fake_run(composition, reports, local=False, build_flags="", echo=None, date=None, date_from="--date"):
        seen.update(date=date, date_from=date_from)
        return {"summary": "s", "outcome": "pass"}

    monkeypatch.setattr("bake.run.imagetest.run_image_tests", fake_run)
    from bake.settings.merge import gather
    from bake.cli import parse_args

    for argv, want in ((["--date", "2026-11-29"], (DATE, "--date")), (["--date", "today"], (None, "--date")),
                       ([], (None, "date"))):
        args = parse_args(["test", "--target", "base", "--config", os.devnull, "--sitrep-dir",
                           str(tmp_path / "s"), *argv])
        assert commands.test(gather(args.command, vars(args), environ={})) == 0
        assert (seen["date"], seen["date_from"]) == want, argv


# --- on the engine ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def busybox(engine):
    ref = f"{engine.registry}/stand-in/busybox:latest"
    engine.docker("pull", "--platform", "linux/amd64", ref)
    return ref


@pytest.mark.engine
def test_a_test_writing_400000_lines_keeps_its_time_bound(engine, busybox):
    from bake.run.engine import run_in_image

    script = "i=0; while [ $i -lt 400000 ]; do echo e$i >&2; i=$((i+1)); done; echo done >&2"
    started = time.monotonic()
    ran = run_in_image(busybox, "linux/amd64", ["sh", "-c", script], 60, keep=20)
    took = time.monotonic() - started
    assert ran.exit_code == 0 and not ran.timed_out, ran
    assert ran.tail[-1] == "done" and ran.tail[-2] == "e399999" and len(ran.tail) == 20
    assert took < 60
    # the same with a bound it cannot meet: stopped at it, not minutes later
    started = time.monotonic()
    ran = run_in_image(busybox, "linux/amd64", ["sh", "-c", f"{script}; sleep 60"], 5, keep=20)
    assert ran.timed_out and time.monotonic() - started < 5 + 30
    assert ran.tail and all(len(line.encode()) <= TEST_LINE_BYTES for line in ran.tail)


@pytest.mark.engine
def test_a_tests_2mb_line_is_cut_as_it_is_read(engine, busybox):
    from bake.run.engine import run_in_image

    ran = run_in_image(busybox, "linux/amd64", ["sh", "-c", "head -c 2000000 /dev/zero | tr '\\0' a; echo; exit 3"],
                       60, keep=20)
    assert ran.exit_code == 3 and ran.tail == ["a" * TEST_LINE_BYTES + "… [line cut: 2000000 bytes]"]


@pytest.mark.engine
def test_a_stalled_pull_is_bounded_and_names_the_registry(engine):
    from bake.run.engine import pull_image

    with silent_server() as registry:
        started = time.monotonic()
        with pytest.raises(RunError, match=rf"^cannot pull {registry}/team/app:latest for linux/amd64: "
                                           rf"the registry {registry} did not answer within 3 s$"):
            pull_image(f"{registry}/team/app:latest", "linux/amd64", timeout_s=3)
        assert time.monotonic() - started < 30


def test_the_bounds_are_what_the_docs_say():
    from bake.run import engine

    security = (Path(__file__).resolve().parent.parent / "docs" / "security.md").read_text()
    for name, value in (("TEST_LINE_BYTES", engine.TEST_LINE_BYTES), ("TEST_OUTPUT_BYTES", engine.TEST_OUTPUT_BYTES),
                        ("SUMMARY_BYTES", sitrep.SUMMARY_BYTES), ("PULL_TIMEOUT_S", engine.PULL_TIMEOUT_S),
                        ("REGISTRY_TIMEOUT_S", engine.REGISTRY_TIMEOUT_S),
                        ("REMOVE_TIMEOUT_S", engine.REMOVE_TIMEOUT_S)):
        assert f"`{name}`" in security, name
        assert f"{value:,g}" in security or f"{value:g}" in security or f"{int(value):,}" in security, (name, value)


def test_a_long_test_name_is_cut_in_the_summary_line_and_the_table():
    block = sitrep.make_tests("leaf tests", [_result("x" * 100_000, output=["o"])])
    assert len(block["summary"]) < 300 and block["summary"].endswith("x…)")
    assert all(len(line) < 400 for line in sitrep.tests_markdown(block).splitlines())


@pytest.fixture
def silent_engine(tmp_path, monkeypatch):
    """``DOCKER_HOST``: a Unix socket that accepts and never answers."""
    import shutil

    if shutil.which("docker") is None:
        pytest.skip("no docker CLI")
    with silent_server(str(tmp_path / "silent.sock")) as path:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
        yield


def test_the_engines_own_calls_are_bounded_too(silent_engine, monkeypatch):
    from bake.run import engine

    monkeypatch.setattr(engine, "ENGINE_TIMEOUT_S", 2.0)
    started = time.monotonic()
    with pytest.raises(engine.EngineError, match=r"^docker image inspect r/x:latest: the Docker engine did not answer "
                                                 r"within 2 s$"):
        engine.local_image_exists("r/x:latest")
    assert time.monotonic() - started < 20
