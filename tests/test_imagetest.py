"""Image tests (``Stage.tests``, ``bake-plan test``): the field's checks, which tests run where, the
sitrep's ``tests`` block, its badge and Markdown; then on the real engine and registry a family
built for amd64 and arm64 (arm64 under QEMU) whose tests pass and fail."""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest
from test_build_engine import wheelhouse  # noqa: F401  (the fixture: pip-tools and test wheels made on the host)
from test_errors import assert_one_line_error

from bake import ImageTest, Stage, hookimpl
from bake.api import make_plan
from bake.errors import StageError
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.plan.validate import validate
from bake.resources import stage_dir
from bake.run import sitrep
from bake.run.imagetest import Case, cases, missing_images, run_cases
from bake.settings.values import parent_digests

CONTEXT = str(stage_dir("jax"))
DATE = datetime.date(2026, 11, 29)


def _stage(**fields) -> Stage:
    return Stage(**{"name": "t", "image": "t", "context": CONTEXT, "platforms": ("linux/amd64", "linux/arm64"),
                    "registry": "r.example/ns", **fields})


# --- the field ---------------------------------------------------------------------------------

def test_a_string_is_a_shell_command_on_every_platform_and_an_argv_runs_as_is():
    stage = validate(_stage(tests=("python -c 'import jax'", ImageTest(["python", "-V"], name="version",
                                                                         platforms=["linux/arm64"], timeout_s=5))),
                     "p")
    shell, argv = stage.tests
    assert shell == ImageTest(command="python -c 'import jax'", platforms=(), timeout_s=600.0)
    assert shell.argv == ["sh", "-c", "python -c 'import jax'"] and shell.label == "python -c 'import jax'"
    assert argv.command == ("python", "-V") and argv.argv == ["python", "-V"]
    assert argv.label == "version" and argv.platforms == ("linux/arm64",) and argv.timeout_s == 5.0
    assert validate(_stage(), "p").tests == ()


@pytest.mark.parametrize("tests, needle", [
    ("import jax", "field 'tests': expected a list or tuple, got str"),
    ((42,), "field 'tests': item 42 is int, expected str or ImageTest"),
    (("",), "field 'tests': command '' must be a non-empty string (run by sh -c) or a non-empty list"),
    ((ImageTest([]),), "field 'tests': command [] must be a non-empty string"),
    ((ImageTest(["python", ""]),), "field 'tests': command ['python', ''] must be"),
    ((ImageTest("a\0b"),), "without NUL"),
    (("true", "true"), "field 'tests': two tests are named 'true'; give one a name="),
    ((ImageTest("true", name="x"), ImageTest("false", name="x")), "two tests are named 'x'"),
    ((ImageTest("true", name="two\nlines"),), "field 'tests': test name 'two\\nlines' must be a non-empty line"),
    ((ImageTest("true", platforms=("linux/s390x",)),),
     "field 'tests': test 'true': platform linux/s390x is not one of the stage's (linux/amd64, linux/arm64)"),
    ((ImageTest("true", platforms="linux/amd64"),), "test 'true': platforms must be a list or tuple, got str"),
    ((ImageTest("true", platforms=("plan9",)),), "field 'tests': test 'true': platforms:"),
    ((ImageTest("true", timeout_s=0),), "test 'true': timeout_s 0 must be a positive number of seconds"),
    ((ImageTest("true", timeout_s="5"),), "timeout_s '5' must be a positive number"),
], ids=["a-string", "an-int", "empty", "empty-argv", "empty-arg", "nul", "same-twice", "same-name",
        "name-newline", "platform-not-the-stages", "platforms-a-string", "platform-malformed", "timeout-zero",
        "timeout-a-string"])
def test_malformed_tests_name_plugin_stage_and_field(tests, needle):
    with pytest.raises(StageError) as err:
        validate(_stage(tests=tests), "p")
    assert str(err.value).startswith("plugin 'p', stage 't', field 'tests'") and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_tests_on_a_stage_without_an_image_are_refused():
    with pytest.raises(StageError, match="field 'tests': a stage without an image has no image to test"):
        validate(_stage(image=None, tests=("true",)), "p")


def test_malformed_tests_are_one_line_from_the_cli(cli, make_plugin, tmp_path):
    site = make_plugin(f"""
from bake import ImageTest, Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="odd", image="odd", context={CONTEXT!r}, platforms=("linux/amd64",), registry="r.example/ns",
                  tests=(ImageTest("true", platforms=("linux/arm64",)),))]
""", name="odd-tests")
    proc = cli("test", "--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'odd-tests', stage 'odd', field 'tests': test 'true': platform linux/arm64 "
                                "is not one of the stage's (linux/amd64)", cwd=tmp_path)


def _one_stage(make_plugin, tests: str, name: str) -> Path:
    return make_plugin(f"""
from bake import ImageTest, Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="one", image="one", context={CONTEXT!r}, platforms=("linux/amd64",), registry="r.example/ns",
                  tests={tests})]
""", name=name)


def test_a_stage_without_tests_passes_with_no_tests(cli, make_plugin, tmp_path):
    site = _one_stage(make_plugin, "()", "no-tests")
    proc = cli("test", "--target", "one", "--sitrep-dir", "r", cwd=tmp_path, pythonpath=[site],
               env=dict(os.environ, DOCKER_HOST="unix:///nonexistent.sock"))  # nothing to run: no engine asked
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "bake-plan: one tests: no tests declared\n"
    report = json.loads((tmp_path / "r" / "sitrep.json").read_text())
    assert report["tests"]["total"] == 0 and report["outcome"] == "pass"
    assert json.loads((tmp_path / "r" / "tests-badge.json").read_text())["message"] == "no tests"


@pytest.mark.parametrize("tests", ["()", '("true",)'], ids=["no-tests", "tests"])
def test_a_sitrep_that_cannot_be_read_is_refused_not_replaced(cli, make_plugin, tmp_path, tests):
    """A ``sitrep.json`` bake-plan wrote there that is not JSON any more: ``test`` refuses it in one
    line naming the file and why, before any engine call (none is reachable), and writes nothing."""
    from bake.owned import Record

    site = _one_stage(make_plugin, tests, "unreadable-sitrep")
    directory = tmp_path / "r"
    directory.mkdir()
    Record(directory).write("sitrep.json", '{"targets": {"x": ', "the sitrep")  # cut short
    Record(directory).write("tests-badge.json", '{"message": "1/1 passed"}\n', "the tests badge")
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    proc = cli("test", "--target", "one", "--sitrep-dir", "r", cwd=tmp_path, pythonpath=[site],
               env=dict(os.environ, DOCKER_HOST="unix:///nonexistent.sock"))
    assert_one_line_error(proc, "r/sitrep.json: cannot add the tests to this sitrep: not JSON: ",
                          "will not replace it")
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before


@pytest.mark.parametrize("text, why", [
    ("[]", "not a sitrep (no targets object)"),
    ('{"summary": "x"}', "not a sitrep (no targets object)"),
    ('{"targets": []}', "not a sitrep (no targets object)"),
    ("\udcff", "not UTF-8"),
])
def test_a_sitrep_that_is_not_one_is_refused_and_a_missing_one_is_fresh(tmp_path, text, why):
    from bake.errors import ReportUnreadable, RunError
    from bake.owned import Record
    from bake.run.imagetest import TestReports

    directory = tmp_path / "sitrep"
    reports = TestReports(directory, None)
    reports.prepare()
    assert reports.earlier() is None  # none yet: a fresh report
    Record(directory).write("sitrep.json", text.encode("utf-8", "surrogateescape"), "the sitrep")
    kept = (directory / "sitrep.json").read_bytes()
    with pytest.raises(ReportUnreadable, match=re.escape(f"sitrep.json: cannot add the tests to this sitrep: {why}")):
        reports.prepare()
    with pytest.raises(RunError, match=r"the tests ran \(x tests: 1/1 passed\), but .*sitrep.json: cannot add"):
        reports.write(sitrep.make_tests("x tests", [_result("a", "pass")]))
    assert (directory / "sitrep.json").read_bytes() == kept
    assert not (directory / "tests-badge.json").exists()


def test_tests_without_an_engine_are_one_line(cli, make_plugin, tmp_path):
    site = _one_stage(make_plugin, '("true",)', "some-tests")
    proc = cli("test", "--target", "one", cwd=tmp_path, pythonpath=[site],
               env=dict(os.environ, DOCKER_HOST="unix:///nonexistent.sock"))
    # as a build says it: the place, then the docker CLI's own reason
    assert_one_line_error(proc, "cannot reach a Docker engine at unix:///nonexistent.sock: Cannot connect to the "
                                "Docker daemon at unix:///nonexistent.sock")


def test_an_unknown_target_is_one_line(cli, tmp_path):
    assert_one_line_error(cli("test", "--target", "jaxx", cwd=tmp_path), "unknown target 'jaxx'", cwd=tmp_path)


# --- which tests run where ---------------------------------------------------------------------

class _Family:
    @hookimpl
    def bake_plan_stages(self):
        return [
            Stage(name="root", image="root", context=CONTEXT, base_image="busybox:1.36", registry="r.example/ns",
                  tests=("root-only",)),
            Stage(name="leaf", image="leaf", parent="root", context=CONTEXT, registry="r.example/ns",
                  tests=("everywhere", ImageTest("uname -m", name="arm", platforms=("linux/arm64",)))),
            Stage(name="quiet", image="quiet", parent="root", context=CONTEXT, registry="r.example/ns"),
        ]


def _cases(*targets, platforms=()):
    pm = get_plugin_manager(plugins=[_Family()])
    return cases(make_plan(PlanOptions(targets=targets, date=DATE, platforms=platforms), pm))


def test_the_requested_stages_final_images_are_tested_per_platform_not_their_ancestors():
    found = _cases("leaf", "quiet")
    assert [(c.stage, c.target, c.platform, c.image, [t.label for t in c.tests], c.per_arch) for c in found] == [
        ("leaf", "leaf", "linux/amd64", "r.example/ns/leaf:latest", ["everywhere"], False),
        ("leaf", "leaf", "linux/arm64", "r.example/ns/leaf:latest", ["everywhere", "arm"], False),
    ]


def test_a_per_arch_plan_tests_its_per_arch_tag():
    found = _cases("leaf-mealkit", platforms=("linux/arm64",))
    assert [(c.platform, c.image, len(c.tests), c.per_arch) for c in found] == \
        [("linux/arm64", "r.example/ns/leaf:latest-arm64", 2, True)]


def test_a_missing_image_stops_before_any_test_naming_it_and_the_build_that_makes_it():
    found = _cases("leaf", "root", platforms=("linux/arm64",))
    asked = []

    def exists(ref):
        asked.append(ref)
        return False

    with pytest.raises(Exception) as err:
        missing_images(found, exists, local=False, build_flags=" --registry r.example/ns")
    assert str(err.value) == (
        "no image to test for stage 'leaf' (linux/arm64): r.example/ns/leaf:latest-arm64 is not in the registry; "
        "build it first: bake-plan build --target leaf --platform linux/arm64 --registry r.example/ns --push "
        "(or, for an image built with --load, bake-plan test --local) (1 more image(s) missing)")
    assert err.value.exit_status == 2 and err.value.details == ("missing r.example/ns/root:latest-arm64",)
    assert asked == ["r.example/ns/leaf:latest-arm64", "r.example/ns/root:latest-arm64"]
    with pytest.raises(Exception, match="is not in the engine's image store; build it first: bake-plan build "
                                        "--target leaf --load"):
        missing_images(_cases("leaf"), lambda ref: False, local=True)
    missing_images(found, lambda ref: True, local=False)  # all there: no error


# --- the report --------------------------------------------------------------------------------

def _result(test, outcome, platform="linux/amd64", output=()):
    return {"stage": "leaf", "target": "leaf", "platform": platform, "test": test, "command": test,
            "image": "r/leaf:latest", "outcome": outcome, "exit_code": 0 if outcome == "pass" else 3,
            "duration_s": 1.5, "timed_out": False, "output": list(output)}


def test_the_tests_block_badge_and_markdown():
    results = [_result("a", "pass"), _result("b", "fail", output=["looking", "``` not | here"]),
               _result("a", "pass", "linux/arm64"), _result("b", "pass", "linux/arm64")]
    block = sitrep.make_tests("leaf tests", results)
    assert {k: v for k, v in block.items() if k != "results"} == {
        "summary": "leaf tests: 3/4 passed (failed: leaf linux/amd64 b)", "badge_label": "leaf tests",
        "outcome": "fail", "passed": 3, "failed": 1, "total": 4}
    assert sitrep.tests_badge(block) == {"schemaVersion": 1, "label": "leaf tests", "message": "3/4 passed",
                                         "color": "yellow"}
    text = sitrep.tests_markdown(block)
    assert text.splitlines()[:4] == ["### ❌ leaf tests: 3/4 passed (failed: leaf linux/amd64 b)", "",
                                     "| stage | platform | test | outcome | exit | seconds |",
                                     "|---|---|---|---|---|---|"]
    assert "| `leaf` | linux/amd64 | `b` | fail | 3 | 1.5 |" in text
    # the failing test's last lines, fenced by more backticks than they hold
    assert "````\nlooking\n``` not | here\n````" in text
    assert sitrep.tests_badge(sitrep.make_tests("x", [_result("a", "pass")]))["color"] == "brightgreen"
    assert sitrep.tests_badge(sitrep.make_tests("x", [_result("a", "fail")]))["color"] == "red"
    assert sitrep.tests_badge(sitrep.make_tests("x", [])) == {"schemaVersion": 1, "label": "x",
                                                             "message": "no tests", "color": "lightgrey"}


def test_a_failed_pull_fails_that_platforms_tests_and_the_others_still_run():
    from bake.errors import RunError
    from bake.run.engine import ContainerRun

    found = [Case("s", "s", "linux/amd64", "r/s:latest", (ImageTest("true"),)),
             Case("s", "s", "linux/arm64", "r/s:latest", (ImageTest("true"), ImageTest("false")))]
    ran = []

    def pull(ref, platform):
        if platform == "linux/amd64":
            raise RunError(f"cannot pull {ref} for {platform}: connection refused")

    def run(ref, platform, argv, timeout_s, keep, echo):
        ran.append((platform, argv))
        echo("hello")
        return ContainerRun(exit_code=0 if argv[-1] == "true" else 1, tail=["hello"], duration_s=0.1)

    shown = []
    results = run_cases(found, run, pull, echo=shown.append)
    assert [(r["platform"], r["test"], r["outcome"], r["exit_code"], r["output"]) for r in results] == [
        ("linux/amd64", "true", "fail", None, ["cannot pull r/s:latest for linux/amd64: connection refused"]),
        ("linux/arm64", "true", "pass", 0, ["hello"]),
        ("linux/arm64", "false", "fail", 1, ["hello"]),
    ]
    assert ran == [("linux/arm64", ["sh", "-c", "true"]), ("linux/arm64", ["sh", "-c", "false"])]
    assert "[s linux/arm64 false] hello" in shown and "[s linux/arm64 false] fail (exit 1) in 0.1 s" in shown


# --- on the engine -----------------------------------------------------------------------------

FAMILY = """
import os
from pathlib import Path
from bake import ImageTest, Stage, hookimpl

HERE = Path(__file__).resolve().parent


@hookimpl
def bake_plan_stages():
    tests = [ImageTest("grep -q cooked /opt/it-final && echo found it", name="cooked"),
             ImageTest(["sh", "-c", "uname -m | grep -qx aarch64"], name="arm64 only", platforms=("linux/arm64",))]
    if os.environ.get("IT_FAIL"):
        tests += [ImageTest(["sh", "-c", "echo looking for the answer; echo 'token=ghp_" + "a" * 36 + "' >&2; exit 3"],
                            name="answer"),
                  ImageTest("sleep 60", name="hangs", platforms=("linux/amd64",), timeout_s=3)]
    if os.environ.get("IT_HANG"):
        tests += [ImageTest("sleep 300", name="hangs long", platforms=("linux/amd64",), timeout_s=600)]
    return [Stage(name="it-root", image="it-root", context=HERE / "it-root", base_image="busybox:1.36",
                  registry="localhost:5555/imagetest", tests=tuple(tests))]
"""

DOCKERFILE = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE} AS mealkit
RUN mkdir -p /opt && uname -m > /opt/it-arch

FROM mealkit AS final
RUN echo cooked > /opt/it-final
"""


@pytest.fixture
def it(cli, engine, make_plugin, tmp_path):
    """Run bake-plan on the one-stage family ``it-root`` in a fresh registry namespace."""
    site = make_plugin(FAMILY, name="imagetest-family")
    module = next(site.glob("bake_plan_test_plugin_*.py")).stem
    (site / "it-root").mkdir()
    (site / "it-root" / "Dockerfile").write_text(DOCKERFILE)
    assert module
    namespace = f"{engine.registry}/it{uuid.uuid4().hex[:8]}"
    busybox = f"busybox:1.36={engine.registry}/stand-in/busybox:latest"

    def run(command, *args, fail=False, sitrep="sitrep", registry=namespace, step_summary=None, dated=True):
        env = dict(os.environ, PYTHONPATH=str(site))
        env.pop("GITHUB_STEP_SUMMARY", None)
        if step_summary:
            env["GITHUB_STEP_SUMMARY"] = str(step_summary)
        env.pop("IT_FAIL", None)
        if fail:
            env["IT_FAIL"] = "1"
        extra = ["--base-image", busybox] if command == "build" else []
        proc = subprocess.run([str(_console()), command, "--target", "it-root", "--registry", registry,
                               *(["--date", "2026-11-29"] if dated else []), "--config", os.devnull, "--sitrep-dir",
                               str(tmp_path / sitrep), *extra, *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        return proc

    run.namespace, run.tmp, run.site = namespace, tmp_path, site
    return run


def _console() -> Path:
    from conftest import console_script

    return console_script()


def _report(directory: Path) -> tuple:
    return (json.loads((directory / "sitrep.json").read_text()), json.loads((directory / "tests-badge.json").read_text()),
            (directory / "sitrep.md").read_text())


@pytest.mark.engine
def _test_containers(engine) -> set:
    """Containers named as bake-plan names its test containers, running or not."""
    return set(engine.docker("ps", "-a", "--filter", "name=bake-plan-test-", "--format", "{{.Names}}").stdout.split())


def test_tests_run_on_both_arches_and_the_sitrep_shows_each(engine, it):
    others = _test_containers(engine)  # another run's, on a shared engine: not this test's to judge
    proc = it("build", "--push")
    assert proc.returncode == 0, proc.stderr[-3000:]
    build_report = json.loads((it.tmp / "sitrep" / "sitrep.json").read_text())

    summary = it.tmp / "step-summary.md"
    summary.write_text("## the build's summary\n")
    proc = it("test", fail=True, step_summary=summary)
    assert proc.returncode == 1, proc.stderr[-3000:]
    appended = summary.read_text()  # the tests' section only: the build appended its own
    assert appended.startswith("## the build's summary\n### ❌ it-root tests: 3/6 passed") and "| target |" not in appended
    report, badge, md = _report(it.tmp / "sitrep")
    # The build's keys are as the build wrote them; the tests are beside them.
    assert {k: v for k, v in report.items() if k != "tests"} == build_report
    tests = report["tests"]
    got = {(r["platform"], r["test"]): (r["outcome"], r["exit_code"], r["timed_out"]) for r in tests["results"]}
    assert got == {
        ("linux/amd64", "cooked"): ("pass", 0, False), ("linux/amd64", "answer"): ("fail", 3, False),
        ("linux/amd64", "hangs"): ("fail", got[("linux/amd64", "hangs")][1], True),
        ("linux/arm64", "cooked"): ("pass", 0, False), ("linux/arm64", "arm64 only"): ("pass", 0, False),
        ("linux/arm64", "answer"): ("fail", 3, False),
    }
    # --date names the night: its tag is tested (the build pushed it beside latest)
    assert {r["image"] for r in tests["results"]} == {f"{it.namespace}/it-root:nightly-2026-11-29"}
    answer = next(r for r in tests["results"] if r["test"] == "answer")
    # stdout and stderr as they came (two pipes: their order between each other is not fixed)
    assert sorted(answer["output"]) == ["looking for the answer", "token=<redacted>"], "credentials redacted"
    assert answer["command"] == ["sh", "-c", answer["command"][2]] and answer["duration_s"] > 0
    hangs = next(r for r in tests["results"] if r["test"] == "hangs")
    assert 3 <= hangs["duration_s"] < 30 and hangs["output"][-1] == "bake-plan: stopped after 3 s (the test's timeout_s)"
    assert "fail (timed out after 3 s) in " in proc.stdout + proc.stderr  # the console says so too
    assert (tests["passed"], tests["total"], tests["outcome"]) == (3, 6, "fail")
    assert tests["summary"].startswith("it-root tests: 3/6 passed (failed: it-root linux/amd64 answer")
    assert badge == {"schemaVersion": 1, "label": "it-root tests", "message": "3/6 passed", "color": "yellow"}
    assert "### ❌ it-root tests: 3/6 passed" in md and "| `it-root` | linux/arm64 | `arm64 only` | pass | 0 |" in md
    assert md.startswith("## ✅ it-root build: all 2 targets built"), "the build's table stays first"
    assert "\nlooking for the answer\n" in md and "\ntoken=<redacted>\n" in md
    assert "ghp_" not in proc.stderr + md + json.dumps(report)
    assert f"bake-plan: {tests['summary']}" in proc.stderr
    # --parent-report still reads the sitrep: the digests the build pushed.
    assert parent_digests(str(it.tmp / "sitrep" / "sitrep.json"))["it-root"].digest == \
        build_report["targets"]["it-root"]["digest"]
    assert _test_containers(engine) <= others, "every test container is removed, the timed-out one too"

    proc = it("test", "-v")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, badge, _ = _report(it.tmp / "sitrep")
    assert [(r["platform"], r["test"], r["outcome"]) for r in report["tests"]["results"]] == [
        ("linux/amd64", "cooked", "pass"), ("linux/arm64", "cooked", "pass"), ("linux/arm64", "arm64 only", "pass")]
    assert badge["message"] == "3/3 passed" and badge["color"] == "brightgreen"
    assert "bake-plan: it-root tests: 3/3 passed" in proc.stdout
    # -v: each test's docker run, one shell line, runs as shown (another container name: it is unique)
    runs = [shlex.split(line.removeprefix("bake-plan: running: ")) for line in proc.stderr.splitlines()
            if line.startswith("bake-plan: running: docker run ") and "bake-plan-installed" not in line]
    assert report["tests"]["installed"] == []  # the listing of distributions ran: busybox has no Python
    assert len(runs) == 3 and {argv[argv.index("--platform") + 1] for argv in runs} == {"linux/amd64", "linux/arm64"}
    again = [w.replace("bake-plan-test-", "bake-plan-again-") for w in runs[0]]
    assert subprocess.run(again, capture_output=True, timeout=300).returncode == 0, again

    # A new build: the old tests ran on the old images, so their badge and block go.
    proc = it("build", "--push")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (it.tmp / "sitrep" / "tests-badge.json").exists()
    assert "tests" not in json.loads((it.tmp / "sitrep" / "sitrep.json").read_text())


@pytest.mark.engine
def test_an_interrupted_test_run_removes_the_container_it_started(engine, it):
    """SIGTERM (or Ctrl-C) while a test runs: the container is removed, not left running (its
    PID 1 ignores the SIGINT docker passes on, and nothing would stop it after bake-plan)."""
    import signal
    import time

    assert it("build", "--push").returncode == 0
    env = dict(os.environ, PYTHONPATH=str(it.site), IT_HANG="1")
    proc = subprocess.Popen([str(_console()), "test", "--target", "it-root", "--registry", it.namespace, "--date",
                             "2026-11-29", "--config", os.devnull, "--sitrep-dir", str(it.tmp / "sitrep")], cwd=it.tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def hanging() -> list:
        listed = engine.docker("ps", "-a", "--filter", "name=bake-plan-test-", "--format", "{{.Names}} {{.Command}}")
        return [line for line in listed.stdout.splitlines() if "sleep 300" in line]

    deadline = time.monotonic() + 180
    while not hanging():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the hanging test never started"
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert hanging() == [], "its container is removed"


@pytest.mark.engine
def test_per_arch_and_local_images_and_a_missing_one(engine, it):
    proc = it("build", "--platform", "linux/arm64", "--push", sitrep="arm64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = it("test", "--platform", "linux/arm64", sitrep="arm64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, badge, _ = _report(it.tmp / "arm64")
    # --date names the night: its per-arch tag is tested; without it, the latest one
    assert [(r["platform"], r["test"], r["image"]) for r in report["tests"]["results"]] == [
        ("linux/arm64", "cooked", f"{it.namespace}/it-root:nightly-2026-11-29-arm64"),
        ("linux/arm64", "arm64 only", f"{it.namespace}/it-root:nightly-2026-11-29-arm64")]
    assert badge["message"] == "2/2 passed"
    proc = it("test", "--platform", "linux/arm64", sitrep="arm64", dated=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, badge, _ = _report(it.tmp / "arm64")
    assert {r["image"] for r in report["tests"]["results"]} == {f"{it.namespace}/it-root:latest-arm64"}

    # Not pushed for amd64: exit 2, nothing run, the line says what is missing and how to make it.
    proc = it("test", "--platform", "linux/amd64", sitrep="amd64")
    assert_one_line_error(proc, f"no image to test for stage 'it-root' (linux/amd64): {it.namespace}/it-root:"
                                "nightly-2026-11-29-amd64 is not in the registry; build it first: bake-plan build --target "
                                f"it-root --platform linux/amd64 --registry {it.namespace} --date 2026-11-29 --push")
    assert not (it.tmp / "amd64" / "tests-badge.json").exists()

    # build --load then test --local: the engine's image store, nothing pulled; no build sitrep in
    # the directory, so the tests' own sitrep (readable by --parent-report: no targets).
    local = f"{engine.registry}/itlocal{uuid.uuid4().hex[:8]}"
    proc = it("test", "--platform", "linux/amd64", "--local", sitrep="local", registry=local)
    assert_one_line_error(proc, "is not in the engine's image store; build it first: bake-plan build --target "
                                f"it-root --platform linux/amd64 --registry {local} --date 2026-11-29 --load")
    proc = it("build", "--platform", "linux/amd64", "--load", sitrep="build-local", registry=local)
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        proc = it("test", "--platform", "linux/amd64", "--local", fail=True, sitrep="local", registry=local)
        assert proc.returncode == 1, proc.stderr[-3000:]
        report, badge, md = _report(it.tmp / "local")
        assert (report["outcome"], report["targets"], report["summary"]) == ("fail", {}, report["tests"]["summary"])
        assert badge["message"] == "1/3 passed"
        assert md.startswith("## ❌ it-root tests: 1/3 passed") and "| target |" not in md
        assert parent_digests(str(it.tmp / "local" / "sitrep.json")) == {}
        pushed = [t for t in engine.tags(f"{local}/it-root") if not t.startswith("cache-")]  # the build's cache
        assert pushed == [], "no image was pushed: the tests ran on the loaded one"
    finally:
        engine.docker("image", "rm", "-f", f"{local}/it-root:latest-amd64", f"{local}/it-root:mealkit-amd64",
                      f"{local}/it-root:nightly-2026-11-29-amd64", f"{local}/it-root:mealkit-2026-11-29-amd64",
                      check=False)


BASE_FAMILY = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir
from bake_plan_plugins.base import SMOKE_TESTS


@hookimpl
def bake_plan_stages():
    return [Stage(name="it-base", image="it-base", context=stage_dir("base"), base_image="python:3.11-slim-bookworm",
                  registry="localhost:5555/imagetest", platforms=("linux/amd64",),
                  args={"PIP_FIND_LINKS": "/opt/wheelhouse", "PIP_NO_INDEX": "1", "APT_PACKAGES": "python3 python3-venv"},
                  contexts={"wheelhouse": os.environ["IT_WHEELHOUSE"]},
                  tests=SMOKE_TESTS)]
"""


@pytest.mark.engine
def test_the_built_in_base_stages_tests_pass_in_its_image(engine, make_plugin, wheelhouse, tmp_path):  # noqa: F811
    """The built-in ``base`` Dockerfile on the Python stand-in (what the engine can build of the
    built-in family), with the base plugin's own smoke tests, loaded and tested locally."""
    site = make_plugin(BASE_FAMILY, name="imagetest-base")
    namespace = f"{engine.registry}/itbase{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, PYTHONPATH=str(site), IT_WHEELHOUSE=str(wheelhouse[0]))
    common = ["--target", "it-base", "--registry", namespace, "--date", "2026-11-29", "--config", os.devnull,
              "--platform", "linux/amd64", "--sitrep-dir", str(tmp_path / "sitrep")]
    run = lambda *args: subprocess.run([str(_console()), *args], cwd=tmp_path, env=env, capture_output=True,  # noqa: E731
                                       text=True, timeout=900)
    proc = run("build", *common, "--load", "--base-image",
               f"python:3.11-slim-bookworm={engine.registry}/stand-in/python:bookworm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    try:
        proc = run("test", *common, "--local")
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
        assert [(r["test"], r["outcome"]) for r in report["tests"]["results"]] == [
            ("python is /opt/venv", "pass"), ("pip-tools runs", "pass"), ("helper scripts on PATH", "pass")]
        assert report["targets"]["it-base"]["outcome"] == "pass", "the build's sitrep, with the tests beside it"
        helpers = next(r for r in report["tests"]["results"] if r["test"] == "helper scripts on PATH")
        assert helpers["output"] == ["/usr/local/bin/bake-fetch-source", "/usr/local/bin/bake-write-requirements",
                                     "/usr/local/bin/bake-pip-finalize"]
    finally:
        for tag in ("latest", "mealkit", "nightly-2026-11-29", "mealkit-2026-11-29"):
            engine.docker("image", "rm", "-f", f"{namespace}/it-base:{tag}-amd64", check=False)


def test_a_build_drops_the_tests_badge_bake_plan_wrote_and_leaves_anothers(tmp_path):
    from bake.errors import OutputError
    from bake.run.build import Reports
    from bake.run.imagetest import TestReports

    directory = tmp_path / "sitrep"
    tests = TestReports(directory, None)
    tests.prepare()
    report = tests.write(sitrep.make_tests("x tests", [_result("a", "pass")]))
    assert report["tests"]["summary"] == "x tests: 1/1 passed" and report["targets"] == {}
    assert json.loads((directory / "tests-badge.json").read_text())["message"] == "1/1 passed"
    build = Reports(directory, directory / "bake-metadata.json", None)
    build.prepare(tmp_path / "docker-bake.hcl")
    assert not (directory / "tests-badge.json").exists() and not (directory / "sitrep.json").exists()

    (directory / "tests-badge.json").write_text("{}\n")  # someone else's file of that name
    build.prepare(tmp_path / "docker-bake.hcl")
    assert (directory / "tests-badge.json").read_text() == "{}\n", "a build leaves it alone"
    with pytest.raises(OutputError, match="bake-plan did not write this file"):
        tests.prepare()  # and test will not replace it


def test_a_later_test_run_merges_its_results_into_the_tests_block(tmp_path):
    """``test --target root`` after ``test --target leaf``: leaf's results stay; a run of the same
    target and platform again replaces only that pair's results."""
    from bake.run.imagetest import TestReports

    directory = tmp_path / "sitrep"
    summary = tmp_path / "step-summary.md"
    reports = TestReports(directory, str(summary))
    reports.prepare()

    def result(stage, test, outcome, platform="linux/amd64"):
        return {**_result(test, outcome, platform), "stage": stage, "target": stage}

    leaf = sitrep.make_tests("leaf tests", [result("leaf", "a", "pass"), result("leaf", "a", "fail", "linux/arm64")])
    leaf["installed"] = [{"target": "leaf", "platform": "linux/amd64", "distributions": {"numpy": "2.0"}}]
    reports.write(leaf, ran=[("leaf", "linux/amd64"), ("leaf", "linux/arm64")], requested=["leaf"])
    root = sitrep.make_tests("root tests", [result("root", "r", "pass")])
    root["installed"] = [{"target": "root", "platform": "linux/amd64", "distributions": {}}]
    report = reports.write(root, ran=[("root", "linux/amd64")], requested=["root"])
    on_disk = json.loads((directory / "sitrep.json").read_text())
    assert on_disk == report
    tests = report["tests"]
    assert [(r["target"], r["platform"], r["outcome"]) for r in tests["results"]] == [
        ("leaf", "linux/amd64", "pass"), ("leaf", "linux/arm64", "fail"), ("root", "linux/amd64", "pass")]
    assert tests["summary"] == "leaf, root tests: 2/3 passed (failed: leaf linux/arm64 a)"
    assert (tests["passed"], tests["failed"], tests["total"], tests["outcome"]) == (2, 1, 3, "fail")
    assert [i["target"] for i in tests["installed"]] == ["leaf", "root"]
    assert json.loads((directory / "tests-badge.json").read_text())["message"] == "2/3 passed"
    # each run appended its own section to the one step summary: no row twice
    rows = [line for line in summary.read_text().splitlines() if line.startswith("| `")]
    assert [row.split("|")[1].strip() for row in rows] == ["`leaf`", "`leaf`", "`root`"], rows
    # leaf's arm64 run again, now passing: only that pair is replaced
    again = sitrep.make_tests("leaf tests", [result("leaf", "a", "pass", "linux/arm64")])
    tests = reports.write(again, ran=[("leaf", "linux/arm64")], requested=["leaf"])["tests"]
    assert [(r["target"], r["platform"], r["outcome"]) for r in tests["results"]] == [
        ("leaf", "linux/amd64", "pass"), ("root", "linux/amd64", "pass"), ("leaf", "linux/arm64", "pass")]
    assert tests["summary"] == "leaf, root tests: 3/3 passed" and tests["outcome"] == "pass"
    assert sitrep.tests_badge(tests)["message"] == "3/3 passed"
    # a target run again whose tests are now gone: its earlier results go with them
    tests = reports.write(sitrep.make_tests("root tests", []), ran=[("root", "linux/amd64")], requested=["root"])["tests"]
    assert {r["target"] for r in tests["results"]} == {"leaf"}
