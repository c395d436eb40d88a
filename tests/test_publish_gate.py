"""The publish gate without an engine: reading the nightly's sitreps as untrusted input, the gate's
decision per image (its chain, its tests, its arches), which tags an all-or-nothing publish moves,
and which registry failures are retried, how long apart. The registry side is in
``test_publish_gate_engine.py``."""

from __future__ import annotations

import datetime
import json

import pytest
from test_errors import assert_one_line_error

from bake import ImageTest, Stage, hookimpl
from bake.api import make_plan
from bake.errors import RunError, UsageError
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.resources import stage_dir
from bake.plan.gate import arch_differences, decide, is_dated
from bake.run.publish import manifests
from bake.run.release import select
from bake.run.retry import Retries, passing, retry_after, retrying
from bake.settings.sitreps import read_sitreps

CONTEXT = str(stage_dir("jax"))
DATE = datetime.date(2026, 11, 29)


class _Family:
    @hookimpl
    def bake_plan_stages(self):
        return [
            Stage(name="root", image="root", context=CONTEXT, base_image="busybox:1.36", registry="r.example/ns",
                  tests=("true",)),
            Stage(name="mid", image="mid", parent="root", context=CONTEXT, registry="r.example/ns",
                  tests=(ImageTest("uname -m", name="arch", platforms=("linux/arm64",)),)),
            Stage(name="leaf", image="leaf", parent="mid", context=CONTEXT, registry="r.example/ns"),
            Stage(name="other", image="other", parent="root", context=CONTEXT, registry="r.example/ns"),
        ]


def _composition(*targets):
    return make_plan(PlanOptions(targets=targets or ("leaf", "other"), date=DATE, per_arch=False),
                     get_plugin_manager(plugins=[_Family()]))


TARGETS = ("root-mealkit", "root", "mid-mealkit", "mid", "leaf-mealkit", "leaf", "other-mealkit", "other")


def _sitrep(arch: str, outcomes=None, tests=None, installed=None) -> dict:
    """A per-arch sitrep of the shape build and test write."""
    report = {"outcome": "pass", "targets": {
        name: {"outcome": (outcomes or {}).get(name, "pass"), "platforms": [f"linux/{arch}"], "tags": [],
               "digest": None} for name in TARGETS}}
    results = [{"stage": "root", "target": "root", "platform": f"linux/{arch}", "test": "true", "outcome": "pass"}]
    if arch == "arm64":
        results.append({"stage": "mid", "target": "mid", "platform": "linux/arm64", "test": "arch", "outcome": "pass"})
    for (stage, test), outcome in (tests or {}).items():
        for r in results:
            if (r["stage"], r["test"]) == (stage, test):
                r["outcome"] = outcome
    report["tests"] = {"results": results, **({"installed": installed} if installed is not None else {})}
    return report


def _write(tmp_path, **per_arch) -> list:
    paths = []
    for arch, report in per_arch.items():
        (tmp_path / arch).mkdir()
        (tmp_path / arch / "sitrep.json").write_text(json.dumps(report))
        paths.append(str(tmp_path / arch / "sitrep.json"))
    return paths


def _decide(tmp_path, **per_arch):
    _write(tmp_path, **per_arch)
    return decide(_composition(), read_sitreps([str(tmp_path)]))


def test_every_image_passes_when_every_arch_built_and_tested(tmp_path):
    decisions = _decide(tmp_path, amd64=_sitrep("amd64"), arm64=_sitrep("arm64"))
    assert {n: (d.dated, d.floating, d.reasons) for n, d in decisions.items()} == \
        {n: (True, True, ()) for n in TARGETS}


def test_a_test_failing_on_arm64_holds_its_image_and_every_descendant_only(tmp_path):
    decisions = _decide(tmp_path, amd64=_sitrep("amd64"), arm64=_sitrep("arm64", tests={("mid", "arch"): "fail"}))
    held = {n: d.reasons for n, d in decisions.items() if not d.floating}
    assert held == {
        "mid-mealkit": ("test 'arch' of mid failed on arm64",),
        "mid": ("test 'arch' of mid failed on arm64",),
        "leaf-mealkit": ("ancestor mid: test 'arch' of mid failed on arm64",),
        "leaf": ("ancestor mid: test 'arch' of mid failed on arm64",),
    }
    assert all(d.dated for d in decisions.values())  # every arch built: the dated tags go


def test_a_build_failing_on_one_arch_holds_dated_and_floating_tags_naming_the_arch(tmp_path):
    decisions = _decide(tmp_path, amd64=_sitrep("amd64", {"root": "fail"}), arm64=_sitrep("arm64"))
    assert not decisions["root"].dated and decisions["root"].reasons == ("root failed on amd64",)
    assert [n for n, d in decisions.items() if not d.dated] == ["root"]
    # the stage passes or fails as a whole: its meal kit, and every image built on it, are held
    assert decisions["root-mealkit"].reasons == ("root failed on amd64",)
    assert decisions["leaf"].reasons == ("ancestor root: root failed on amd64",)
    assert not any(d.floating for d in decisions.values())


def test_an_arch_without_a_sitrep_or_without_test_results_holds_the_floating_tags(tmp_path):
    no_tests = _sitrep("arm64")
    del no_tests["tests"]
    decisions = _decide(tmp_path, arm64=no_tests)
    assert decisions["other"].reasons[0] == "no build sitrep for other on amd64"
    assert not decisions["other"].dated
    assert "no result of test 'arch' of mid on arm64" in decisions["mid"].reasons
    assert "ancestor root: no result of test 'true' of root on arm64" in decisions["leaf"].reasons


def test_arches_that_differ_in_their_distributions_hold_the_image_naming_them(tmp_path):
    def installed(arch, numpy):
        return [{"target": "mid", "platform": f"linux/{arch}", "distributions": {"numpy": numpy, "six": "1.16.0"}}]

    decisions = _decide(tmp_path, amd64=_sitrep("amd64", installed=installed("amd64", "1.26.4")),
                        arm64=_sitrep("arm64", installed=installed("arm64", "2.0.0")))
    assert decisions["mid"].reasons == ("mid: arches differ: numpy: 1.26.4 on amd64, 2.0.0 on arm64",)
    assert decisions["leaf"].reasons == ("ancestor mid: mid: arches differ: numpy: 1.26.4 on amd64, 2.0.0 on arm64",)
    assert decisions["mid-mealkit"].reasons == decisions["mid"].reasons
    assert decisions["other"].floating
    assert arch_differences({"amd64": {"a": "1"}, "arm64": {}}) == ["a: 1 on amd64, absent on arm64"]


def test_all_or_nothing_moves_no_floating_tag_when_one_image_is_held(tmp_path):
    composition = _composition()
    decisions = _decide(tmp_path, amd64=_sitrep("amd64"), arm64=_sitrep("arm64", tests={("mid", "arch"): "fail"}))
    wanted = manifests(composition)
    dated, moving, held = select(wanted, DATE, decisions, all_or_nothing=False)
    assert {m.target for m in held} == {"mid-mealkit", "mid", "leaf-mealkit", "leaf"}
    assert {m.target for m in moving} == {"root-mealkit", "root", "other-mealkit", "other"}
    assert len(dated) == len(TARGETS) and all(is_dated(m.tag, DATE) for m in dated)
    dated, moving, held = select(wanted, DATE, decisions, all_or_nothing=True)
    assert moving == [] and len(held) == len(TARGETS) and len(dated) == len(TARGETS)


@pytest.mark.parametrize("content, needle", [
    ("{", "not JSON"),
    ("[]", "not a bake-plan sitrep.json (no 'targets' table)"),
    ('{"targets": {"x": 1}}', "targets.x is not a table"),
    ('{"targets": {"x": {"outcome": "pass"}}}', "targets.x.platforms is not a list of platforms"),
    ('{"targets": {"x": {"outcome": 7, "platforms": ["linux/amd64"]}}}', "targets.x.outcome is not a string"),
    ('{"targets": {}, "tests": {"results": [{"stage": "a"}]}}', "tests.results[0].target is not a string"),
    ('{"targets": {}, "tests": {"results": [], "installed": [{"target": "a", "platform": "linux/amd64", '
     '"distributions": {"numpy": 2}}]}}', "tests.installed[0].distributions.numpy is not a string"),
    ("[" * 5000, "nested too deeply"),
    ('{"targets": {}, "tests": {"results": [], "sizes": [{"target": "a", "platform": "linux/arm64\\nX", '
     '"size_bytes": 1}]}}', "tests.sizes[0].platform is not a platform bake-plan builds for (linux/amd64"),
    ('{"targets": {"x": {"outcome": "pass", "platforms": ["bogus"]}}}',
     "targets.x.platforms is not a platform bake-plan builds for"),
    ('{"targets": {"x": {"outcome": "pass", "platforms": ["linux/amd64"], "digest": 5}}}',
     "targets.x.digest is not a digest (sha256:<64 hex digits>)"),
], ids=["not-json", "a-list", "target-not-a-table", "no-platforms", "outcome-an-int", "result-without-target",
        "version-an-int", "deep", "size-of-an-unknown-platform", "unknown-platform", "digest-an-int"])
def test_a_malformed_sitrep_is_one_line_naming_the_file_and_field(tmp_path, content, needle):
    path = tmp_path / "sitrep.json"
    path.write_text(content)
    with pytest.raises(UsageError) as err:
        read_sitreps([str(path)])
    assert str(err.value).startswith(f"--sitrep {path}: ") and needle in str(err.value)
    assert "\n" not in str(err.value)


def test_installed_names_compare_as_pip_normalises_them(tmp_path):
    """``NVIDIA_CuBLAS`` in a sitrep is ``nvidia-cublas``; ``Foo.Bar`` and ``foo_bar`` are one."""
    path = tmp_path / "sitrep.json"
    path.write_text(json.dumps({"targets": {}, "tests": {"results": [], "installed": [
        {"target": "a", "platform": "linux/amd64", "distributions": {"NVIDIA_CuBLAS": "12", "Foo.Bar": "1"}}]}}))
    assert read_sitreps([str(path)]).installed[("a", "amd64")] == {"nvidia-cublas": "12", "foo-bar": "1"}


def test_a_missing_sitrep_or_an_empty_directory_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no such file or directory"):
        read_sitreps([str(tmp_path / "nope.json")])
    with pytest.raises(UsageError, match="no sitrep.json in this directory"):
        read_sitreps([str(tmp_path)])


def test_publish_with_a_bad_sitrep_stops_before_the_registry(cli, tmp_path):
    (tmp_path / "bad.json").write_text('{"targets": []}')
    proc = cli("publish", "--target", "jax", "--registry", "localhost:1/x", "--sitrep", str(tmp_path / "bad.json"),
               cwd=tmp_path)
    assert_one_line_error(proc, f"--sitrep {tmp_path / 'bad.json'}: not a bake-plan sitrep.json")


# --- retries ------------------------------------------------------------------------------------

@pytest.mark.parametrize("line, retried", [
    ("imagetools create r/x:latest failed: toomanyrequests: slow down", True),
    ("unexpected status from PUT request to http://r/v2/x/manifests/latest: 429 Too Many Requests", True),
    ("unexpected status from HEAD request to http://r/v2/x/manifests/latest: 503 Service Unavailable", True),
    ("failed to do request: Head \"http://r/v2/\": read tcp 1.2.3.4:5->6.7.8.9:10: read: connection reset by peer",
     True),
    ("cannot check r/x:latest: the registry r did not answer within 120 s", True),
    ("failed to do request: Head \"https://r/v2/\": dial tcp: i/o timeout", True),
    ("unexpected status from PUT request to https://r/v2/x/manifests/latest: 401 Unauthorized", False),
    ("failed to authorize: denied: requested access to the resource is denied", False),
    ("unexpected status: 403 Forbidden", False),
    ("r/x:latest: not found", False),
    ("invalid reference format", False),
    ("connection refused", False),
    ("sha256:4290a1b5f03e4291234f5037429500000000000000000000000000000000000 manifest invalid", False),
])
def test_passing_failures_are_retried_and_refusals_are_not(line, retried):
    assert passing(line) is retried


def test_retries_back_off_exponentially_honour_retry_after_and_stop_at_the_bound():
    waits, calls = [], []

    def busy():
        calls.append(1)
        raise RunError("imagetools create r/x:latest failed: 503 Service Unavailable")

    retries = Retries()
    with pytest.raises(RunError, match=r"503 Service Unavailable \(after 4 tries\)$"):
        retrying(busy, "imagetools create r/x:latest", retries, sleep=waits.append)
    assert len(calls) == 4 and waits == [1.0, 2.0, 4.0] and retries.count == 3 and retries.waited_s == 7.0
    assert retry_after("429 Too Many Requests; Retry-After: 7") == 7.0
    assert retry_after("Retry-After: 99999") == 60.0

    refused = []

    def forbidden():
        refused.append(1)
        raise RunError("imagetools create r/x:latest failed: 403 Forbidden")

    with pytest.raises(RunError, match=r"403 Forbidden$"):
        retrying(forbidden, "x", Retries(), sleep=waits.append)
    assert len(refused) == 1

    answers = iter([RunError("toomanyrequests"), RunError("toomanyrequests"), "sha256:ab"])

    def third_time():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    retries = Retries()
    assert retrying(third_time, "x", retries, sleep=lambda s: None) == "sha256:ab" and retries.count == 2


def test_the_listing_of_distributions_is_kept_only_when_whole():
    from bake.run.engine import ContainerRun
    from bake.run.imagetest import _listing

    whole = ["bake-plan-installed 2", "numpy 2.0.0", "six 1.16.0"]
    assert _listing(ContainerRun(0, whole, 1.0)) == {"numpy": "2.0.0", "six": "1.16.0"}
    assert _listing(ContainerRun(0, whole[:2], 1.0)) is None  # cut short: unknown, not "six is absent"
    assert _listing(ContainerRun(0, whole[1:], 1.0)) is None  # the head was dropped (the output bound)
    assert _listing(ContainerRun(127, [], 1.0)) is None  # no Python in the image
    assert _listing(ContainerRun(0, whole, 120.0, timed_out=True)) is None
