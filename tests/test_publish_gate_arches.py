"""Arches that agree, without an engine: the size ratio between an image's arches, the differences
a stage declares or its per-arch locks predict, the ``--arch-size-ratio`` setting, what ``test``
records of each image's size, and the Markdown publish summary for ``$GITHUB_STEP_SUMMARY``."""

from __future__ import annotations

import datetime
import json

import pytest
from test_errors import assert_one_line_error
from test_report_bounds import HOSTILE, _render

from bake import Stage, hookimpl
from bake.api import make_plan
from bake.errors import ConfigError, StageError, UsageError
from bake.pip.lockfiles import lock_differences, locked_versions
from bake.plan.compose import PlanOptions
from bake.plan.gate import DEFAULT_SIZE_RATIO, Decision, arch_differences, decide, size_reason
from bake.plan.plugins import get_plugin_manager
from bake.plan.validate import validate
from bake.resources import stage_dir
from bake.run.imagetest import Case, image_sizes, merged_tests
from bake.run.publish import Manifest
from bake.run.release import Outcome, arch_comparison, publish_markdown
from bake.run.sitrep import SUMMARY_BYTES, make_tests
from bake.settings.merge import gather
from bake.settings.sitreps import read_sitreps
from bake.settings.values import size_ratio

CONTEXT = str(stage_dir("jax"))
DATE = datetime.date(2026, 11, 29)


# --- the size ratio -----------------------------------------------------------------------------

def test_the_default_bound_is_two():
    assert DEFAULT_SIZE_RATIO == 2.0


@pytest.mark.parametrize("sizes, bound, held", [
    ({"amd64": 200, "arm64": 100}, 2.0, False),  # exactly the bound: passes
    ({"amd64": 201, "arm64": 100}, 2.0, True),  # just past it
    ({"amd64": 100, "arm64": 100}, 2.0, False),
    ({"amd64": 4_454_000_000, "arm64": 765_000_000}, 2.0, True),  # the CUDA stack missing on arm64
    ({"amd64": 4_454_000_000, "arm64": 765_000_000}, 6.0, False),
    ({"amd64": 300, "arm64": 100}, 3.0, False),
    ({"amd64": 0, "arm64": 1}, 2.0, True),  # an empty image beside one that is not
    ({"amd64": 0, "arm64": 0}, 2.0, False),
    ({"amd64": 10**12}, 2.0, False),  # one arch: nothing to compare
    ({"amd64": 100, "arm64": 150, "ppc64le": 250}, 2.0, True),  # the largest against the smallest
])
def test_the_size_ratio_holds_only_past_the_bound(sizes, bound, held):
    assert (size_reason(sizes, bound) is not None) is held


def test_the_size_reason_names_both_sizes_and_arches():
    assert size_reason({"amd64": 4_454_000_000, "arm64": 765_000_000}) == (
        "image size differs between arches: 4,454,000,000 bytes on amd64, 765,000,000 bytes on arm64 "
        "(5.82 times, more than 2)")
    assert size_reason({"amd64": 0, "arm64": 7}, 2.5) == (
        "image size differs between arches: 7 bytes on arm64, 0 bytes on amd64 (an empty image beside, more than 2.5)")


# --- declared and predicted differences ---------------------------------------------------------

INSTALLED = {"amd64": {"numpy": "1.26.4", "nvidia-cublas-cu12": "12.4.5.8", "nvidia-nccl-cu12": "2.21.5", "jax": "0.4.30"},
             "arm64": {"numpy": "1.26.4", "jax": "0.4.31"}}


def test_differences_the_stage_declares_for_an_arch_are_not_held():
    assert arch_differences(INSTALLED) == ["jax: 0.4.30 on amd64, 0.4.31 on arm64",
                                           "nvidia-cublas-cu12: 12.4.5.8 on amd64, absent on arm64",
                                           "nvidia-nccl-cu12: 2.21.5 on amd64, absent on arm64"]
    assert arch_differences(INSTALLED, {"arm64": ("nvidia-*",)}) == ["jax: 0.4.30 on amd64, 0.4.31 on arm64"]
    assert arch_differences(INSTALLED, {"arm64": ("NVIDIA_cublas*",)}) == [  # compared as pip normalises names
        "jax: 0.4.30 on amd64, 0.4.31 on arm64", "nvidia-nccl-cu12: 2.21.5 on amd64, absent on arm64"]
    assert arch_differences(INSTALLED, {"arm64": ("nvidia-*", "jax")}) == []
    # declared for amd64, the differences are still compared between the other arches (here: none)
    assert arch_differences(INSTALLED, {"amd64": ("nvidia-*",)}) == ["jax: 0.4.30 on amd64, 0.4.31 on arm64"]


def test_a_declaration_for_one_arch_still_compares_the_others():
    installed = {"amd64": {"x": "1"}, "arm64": {}, "ppc64le": {"x": "2"}}
    assert arch_differences(installed, {"arm64": ("x",)}) == ["x: 1 on amd64, 2 on ppc64le"]
    assert arch_differences({"amd64": {"x": "1"}, "arm64": {}, "ppc64le": {"x": "1"}}, {"arm64": ("x",)}) == []


def test_differences_the_per_arch_locks_predict_are_not_held():
    assert arch_differences(INSTALLED, predicted={"nvidia-cublas-cu12", "nvidia-nccl-cu12"}) == [
        "jax: 0.4.30 on amd64, 0.4.31 on arm64"]


def _lock(*lines) -> str:
    return "# bake-plan target: gpu\n--index-url https://mirror.example/simple\n" + "".join(f"{line}\n" for line in lines)


def test_the_per_arch_locks_predict_the_distributions_they_pin_differently(tmp_path):
    stage = Stage(name="gpu", image="gpu", context=CONTEXT)
    (tmp_path / "gpu-amd64.txt").write_text(_lock("jax==0.4.30 \\", "    --hash=sha256:00", "    # via gpu",
                                                  "Nvidia_CuBLAS-cu12==12.4.5.8 ; platform_machine == 'x86_64'",
                                                  "numpy==1.26.4"))
    (tmp_path / "gpu-arm64.txt").write_text(_lock("jax==0.4.31", "numpy==1.26.4"))
    assert locked_versions((tmp_path / "gpu-amd64.txt").read_text()) == {
        "jax": "==0.4.30", "nvidia-cublas-cu12": "==12.4.5.8", "numpy": "==1.26.4"}
    assert lock_differences([stage], tmp_path) == {"gpu": {"jax", "nvidia-cublas-cu12"}}
    (tmp_path / "gpu-arm64.txt").unlink()  # one per-arch lock left: nothing to compare, nothing predicted
    assert lock_differences([stage], tmp_path) == {}
    (tmp_path / "gpu-arm64.txt").symlink_to(tmp_path / "gpu-amd64.txt")  # a link is not read
    assert lock_differences([stage], tmp_path) == {}


# --- the stage field ----------------------------------------------------------------------------

def test_a_stage_declares_its_expected_differences_by_platform():
    stage = validate(Stage(name="gpu", image="gpu", context=CONTEXT,
                           arch_differences={"linux/arm64": ["nvidia-*", "nvidia-*", "jaxlib_cuda?"]}), "p")
    assert stage.arch_differences == {"linux/arm64": ("nvidia-*", "jaxlib_cuda?")}
    assert validate(Stage(name="cpu", context=CONTEXT), "p").arch_differences == {}


@pytest.mark.parametrize("value, needle", [
    (["nvidia-*"], "expected a mapping of platform to distribution names, got list"),
    ({"linux/s390x": ["x"]}, "platform linux/s390x is not one of the stage's (linux/amd64, linux/arm64)"),
    ({"arm64": ["x"]}, "'arm64': "),
    ({"linux/arm64": "nvidia-*"}, "linux/arm64: expected a non-empty list of distribution names, got str"),
    ({"linux/arm64": []}, "linux/arm64: expected a non-empty list of distribution names"),
    ({"linux/arm64": ["a b"]}, "linux/arm64: 'a b' is not a distribution name or pattern"),
    ({"linux/arm64": ["x\n"]}, "is not a distribution name or pattern"),
    ({"linux/arm64": [3]}, "linux/arm64: 3 is not a distribution name or pattern"),
])
def test_a_bad_declaration_is_one_line_naming_plugin_stage_and_field(value, needle):
    with pytest.raises(StageError) as err:
        validate(Stage(name="gpu", image="gpu", context=CONTEXT, arch_differences=value), "acme")
    message = str(err.value)
    assert message.startswith("plugin 'acme', stage 'gpu', field 'arch_differences': ") and needle in message
    assert "\n" not in message


# --- the gate over a family ---------------------------------------------------------------------

class _Family:
    @hookimpl
    def bake_plan_stages(self):
        return [
            Stage(name="root", image="root", context=CONTEXT, base_image="busybox:1.36", registry="r.example/ns"),
            Stage(name="gpu", image="gpu", parent="root", context=CONTEXT, registry="r.example/ns",
                  arch_differences={"linux/arm64": ("nvidia-*",)}),
            Stage(name="leaf", image="leaf", parent="gpu", context=CONTEXT, registry="r.example/ns"),
        ]


TARGETS = ("root-mealkit", "root", "gpu-mealkit", "gpu", "leaf-mealkit", "leaf")


def _sitrep(arch: str, sizes=None, installed=None) -> dict:
    report = {"outcome": "pass", "targets": {
        name: {"outcome": "pass", "platforms": [f"linux/{arch}"], "tags": [], "digest": None} for name in TARGETS}}
    report["tests"] = {"results": [],
                       "sizes": [{"target": t, "platform": f"linux/{arch}", "size_bytes": n}
                                 for t, n in (sizes or {}).items()],
                       "installed": [{"target": t, "platform": f"linux/{arch}", "distributions": d}
                                     for t, d in (installed or {}).items()]}
    return report


def _decide(tmp_path, amd64, arm64, **options):
    for arch, report in (("amd64", amd64), ("arm64", arm64)):
        (tmp_path / arch).mkdir(exist_ok=True)
        (tmp_path / arch / "sitrep.json").write_text(json.dumps(report))
    composition = make_plan(PlanOptions(targets=("leaf",), date=DATE, per_arch=False),
                            get_plugin_manager(plugins=[_Family()]))
    return decide(composition, read_sitreps([str(tmp_path)]), **options)


def test_a_size_ratio_past_the_bound_holds_the_image_and_its_descendants_naming_both_sizes(tmp_path):
    decisions = _decide(tmp_path, _sitrep("amd64", {"gpu": 4_454_000_000, "root": 100}),
                        _sitrep("arm64", {"gpu": 765_000_000, "root": 100}))
    why = ("image size differs between arches: 4,454,000,000 bytes on amd64, 765,000,000 bytes on arm64 "
           "(5.82 times, more than 2)")
    assert decisions["root"].floating and decisions["root-mealkit"].floating
    assert decisions["gpu"].reasons == (f"gpu: {why}",) and decisions["gpu-mealkit"].reasons == (f"gpu: {why}",)
    assert decisions["leaf"].reasons == (f"ancestor gpu: gpu: {why}",)
    assert all(d.dated for d in decisions.values())  # every arch built: the dated tags go
    assert decisions["gpu"].sizes == (("amd64", 4_454_000_000), ("arm64", 765_000_000))
    assert decisions["root"].sizes == (("amd64", 100), ("arm64", 100)) and decisions["leaf"].sizes == ()


def test_a_size_ratio_of_exactly_the_bound_passes_and_the_bound_is_configurable(tmp_path):
    amd64, arm64 = _sitrep("amd64", {"gpu": 2000}), _sitrep("arm64", {"gpu": 1000})
    assert all(d.floating for d in _decide(tmp_path, amd64, arm64).values())
    assert not _decide(tmp_path, amd64, arm64, size_ratio=1.5)["gpu"].floating
    amd64 = _sitrep("amd64", {"gpu": 2001})
    assert not _decide(tmp_path, amd64, arm64)["gpu"].floating
    assert _decide(tmp_path, amd64, arm64, size_ratio=2.001)["gpu"].floating


def test_the_gate_ignores_the_differences_a_stage_declares_and_not_the_others(tmp_path):
    amd64 = _sitrep("amd64", installed={"gpu": {"numpy": "1", "nvidia-cudnn-cu12": "9"}})
    arm64 = _sitrep("arm64", installed={"gpu": {"numpy": "1"}})
    decisions = _decide(tmp_path, amd64, arm64)
    assert decisions["gpu"].floating and decisions["leaf"].floating
    assert decisions["gpu"].distributions == (("amd64", 2), ("arm64", 1)) and decisions["gpu"].differing == 0
    arm64 = _sitrep("arm64", installed={"gpu": {"numpy": "2"}})
    decisions = _decide(tmp_path, amd64, arm64)
    assert decisions["gpu"].reasons == ("gpu: arches differ: numpy: 1 on amd64, 2 on arm64",)
    assert decisions["gpu"].differing == 1
    assert _decide(tmp_path, amd64, arm64, predicted={"gpu": {"numpy"}})["gpu"].floating  # the locks say so
    assert not _decide(tmp_path, amd64, arm64, predicted={"leaf": {"numpy"}})["gpu"].floating  # another stage's


@pytest.mark.parametrize("entry, needle", [
    ({"target": "gpu", "platform": "linux/amd64", "size_bytes": "12"}, "tests.sizes[0].size_bytes is not a number"),
    ({"target": "gpu", "platform": "linux/amd64", "size_bytes": -1}, "tests.sizes[0].size_bytes is not a number"),
    ({"target": "gpu", "platform": "linux/amd64", "size_bytes": True}, "tests.sizes[0].size_bytes is not a number"),
    ({"platform": "linux/amd64", "size_bytes": 1}, "tests.sizes[0].target is not a string"),
    ("gpu", "tests.sizes[0] is not a table"),
])
def test_a_malformed_size_is_one_line_naming_the_file_and_field(tmp_path, entry, needle):
    path = tmp_path / "sitrep.json"
    path.write_text(json.dumps({"targets": {}, "tests": {"results": [], "sizes": [entry]}}))
    with pytest.raises(UsageError) as err:
        read_sitreps([str(path)])
    assert str(err.value) == f"--sitrep {path}: {needle}" or str(err.value).startswith(f"--sitrep {path}: {needle}")


# --- the setting --------------------------------------------------------------------------------

@pytest.mark.parametrize("value, ratio", [("2", 2.0), ("2.5", 2.5), (3, 3.0), (1, 1.0), (1.25, 1.25)])
def test_a_size_ratio_is_a_finite_number_of_at_least_one(value, ratio):
    assert size_ratio(value, "--arch-size-ratio") == ratio


@pytest.mark.parametrize("value", ["0.99", "0", "-2", "inf", "nan", "two", True, [2], "1_0", "\uff12", " 2", "2\n"])
def test_a_bad_size_ratio_names_where_it_came_from(value):
    with pytest.raises(UsageError, match=r"^--arch-size-ratio: .* is not a size ratio: a number of at least 1"):
        size_ratio(value, "--arch-size-ratio")
    with pytest.raises(UsageError, match=r"^--arch-size-ratio: empty string$"):
        size_ratio("", "--arch-size-ratio")


def test_the_size_ratio_comes_from_the_file_the_environment_or_the_flag(tmp_path):
    config = tmp_path / "bake-plan.toml"
    config.write_text("arch-size-ratio = 3\n")
    base = {"target": ["jax"], "registry": "r.example/ns", "config": str(config), "sitrep": ["x"]}
    assert gather("publish", base, environ={})["arch-size-ratio"] == 3.0
    assert gather("publish", base, environ={"BAKE_PLAN_ARCH_SIZE_RATIO": "4.5"})["arch-size-ratio"] == 4.5
    assert gather("publish", {**base, "arch_size_ratio": "1.5"},
                  environ={"BAKE_PLAN_ARCH_SIZE_RATIO": "4.5"})["arch-size-ratio"] == 1.5
    assert gather("publish", {**base, "config": None}, environ={})["arch-size-ratio"] == DEFAULT_SIZE_RATIO
    config.write_text('arch-size-ratio = "half"\n')
    with pytest.raises(ConfigError, match=r"bake-plan.toml: arch-size-ratio: 'half' is not a size ratio"):
        gather("publish", base, environ={})
    config.write_text("arch-size-ratio = [2]\n")
    with pytest.raises(ConfigError, match="arch-size-ratio.*expected a number, got"):
        gather("publish", base, environ={})


def test_a_bad_size_ratio_flag_is_exit_2_before_the_registry(cli, tmp_path):
    proc = cli("publish", "--config", "/dev/null", "--target", "jax", "--registry", "localhost:1/x",
               "--sitrep", str(tmp_path), "--arch-size-ratio", "0.5", cwd=tmp_path)
    assert_one_line_error(proc, "--arch-size-ratio: '0.5' is not a size ratio")
    proc = cli("publish", "--config", "/dev/null", "--target", "jax", "--registry", "localhost:1/x",
               "--arch-size-ratio", "3", cwd=tmp_path)
    assert_one_line_error(proc, "--arch-size-ratio is only used by publish's gate: add --sitrep")


# --- what test records --------------------------------------------------------------------------

def test_test_records_each_tested_images_size_once_per_platform_and_not_of_an_unrun_one():
    found = [Case("a", "a", "linux/amd64", "r/a:latest", ()), Case("a", "a", "linux/arm64", "r/a:latest", ()),
             Case("b", "b", "linux/amd64", "r/b:latest", ()), Case("c", "c", "linux/amd64", "r/c:latest", ())]
    results = [{"target": "b", "platform": "linux/amd64", "exit_code": None}]  # its pull failed
    asked = []

    def size(ref, platform):
        asked.append((ref, platform))
        return None if ref.endswith("c:latest") else {"linux/amd64": 300, "linux/arm64": 100}[platform]

    assert image_sizes(found, results, size) == [
        {"target": "a", "platform": "linux/amd64", "size_bytes": 300},
        {"target": "a", "platform": "linux/arm64", "size_bytes": 100}]
    assert ("r/b:latest", "linux/amd64") not in asked


def test_a_later_test_run_replaces_only_its_own_sizes():
    earlier = make_tests("t", [{"stage": "a", "target": "a", "platform": "linux/amd64", "test": "x", "outcome": "pass",
                                "timed_out": False, "exit_code": 0, "duration_s": 1.0, "output": []}])
    earlier["sizes"] = [{"target": "a", "platform": "linux/amd64", "size_bytes": 1},
                        {"target": "b", "platform": "linux/amd64", "size_bytes": 2}]
    later = make_tests("t", [{"stage": "b", "target": "b", "platform": "linux/amd64", "test": "x", "outcome": "pass",
                              "timed_out": False, "exit_code": 0, "duration_s": 1.0, "output": []}])
    later["sizes"] = [{"target": "b", "platform": "linux/amd64", "size_bytes": 3}]
    assert merged_tests(earlier, later)["sizes"] == [{"target": "a", "platform": "linux/amd64", "size_bytes": 1},
                                                     {"target": "b", "platform": "linux/amd64", "size_bytes": 3}]


# --- the Markdown publish summary ---------------------------------------------------------------

def _summary(name="gpu", reason="gpu: image size differs between arches", **options):
    decisions = {
        "root": Decision("root", True, True, (), (("amd64", 1_085_357), ("arm64", 1_037_795)),
                         (("amd64", 52), ("arm64", 52)), 0),
        name: Decision(name, True, False, (reason,), (("amd64", 4_454_000_000), ("arm64", 765_000_000))),
    }
    dated = [Manifest(f"r.example/ns/root:nightly-{DATE}", [], "root"), Manifest(f"r.example/ns/{name}:nightly-{DATE}", [], name)]
    moving = [Manifest("r.example/ns/root:latest", [], "root")]
    kept = [Manifest(f"r.example/ns/{name}:latest", [], name)]
    outcome = Outcome(created=[(m.tag, "sha256:" + "a" * 64) for m in [*dated, *moving]],
                      kept=[(kept[0].tag, "sha256:" + "b" * 64)])
    return publish_markdown(DATE, decisions, dated, moving, kept, outcome, **options)


def test_the_summary_shows_per_image_dated_tags_floating_tags_why_the_arches_and_retries():
    text = _summary(retries=2, waited_s=3.5)
    lines = text.splitlines()
    assert lines[0] == "### ⚠️ publish 2026-11-29: 2 image(s), floating tags moved for 1, held for 1"
    assert lines[2] == "| image | dated tags | floating tags | why | arches |"
    assert lines[4] == ("| `root` | `root:nightly-2026-11-29` | moved `root:latest` | passed | amd64 1.09 MB, arm64 "
                        "1.04 MB (1.05×); 52 distributions on amd64, 52 on arm64, 0 differ |")
    assert lines[5] == ("| `gpu` | `gpu:nightly-2026-11-29` | held `gpu:latest` | gpu: image size differs between "
                        "arches | amd64 4.45 GB, arm64 765.00 MB (5.82×) |")
    assert "2 registry call(s) retried (3.5 s waited)" in lines
    html = _render(text)
    assert html.count("<tr>") == 3 and "<h3>" in html


def test_a_dry_run_summary_says_what_it_would_do_and_no_gate_is_said():
    decisions = None
    dated = [Manifest(f"r/x:nightly-{DATE}", [], "x")]
    moving = [Manifest("r/x:latest", [], "x")]
    text = publish_markdown(DATE, decisions, dated, moving, [], None)
    assert text.splitlines()[0] == ("### ✅ would publish 2026-11-29: 1 image(s), floating tags moved for 1, "
                                    "held for 0 (no gate applied: no --sitrep)")
    assert "| `x` | `x:nightly-2026-11-29` | moved `x:latest` |  |  |" in text


def test_a_rollback_and_a_failure_are_in_the_summary():
    outcome = Outcome(created=[(f"r/x:nightly-{DATE}", "sha256:1")], failed="moving r/y:latest failed: 403",
                      rolled_back=[("r/x:latest", "sha256:0", "restored")])
    text = publish_markdown(DATE, {}, [Manifest(f"r/x:nightly-{DATE}", [], "x")], [], [], outcome)
    assert text.startswith("### ❌ publish 2026-11-29")
    assert "Stopped: moving r/y:latest failed: 403" in text
    assert "Rolled back (restored): `r/x:latest` on `sha256:0`" in text


def test_records_not_pushed_make_the_summary_a_failure_saying_why():
    outcome = Outcome(created=[(f"r/x:nightly-{DATE}", "sha256:1")])
    text = publish_markdown(DATE, {}, [Manifest(f"r/x:nightly-{DATE}", [], "x")], [], [], outcome,
                            unrecorded="imagetools create r/x:record-x-2026-11-29-amd64 failed: denied")
    assert text.startswith("### ❌ publish 2026-11-29")
    assert ("Published, but not their nightly records: imagetools create r/x:record-x-2026-11-29-amd64 "
            "failed: denied") in text


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_and_reasons_render_as_text_never_as_html_or_links(hostile):
    text = _summary(name=hostile, reason=f"test {hostile!r} failed on arm64 {hostile}")
    html = _render(text)
    assert "<img" not in html and "<a " not in html and "<script" not in html and "<del>" not in html
    assert "<em>" not in html and "<strong>" not in html and "<h1>" not in html and "<details" not in html
    assert html.count("<tr>") == 3  # one row per image, whatever the name holds
    row = [line for line in text.splitlines() if line.startswith("| `") and "root" not in line.split("|")[1]]
    assert len(row) == 1 and row[0].replace("\\|", "").count("|") == 6


def test_the_summary_is_kept_under_its_byte_bound():
    many = {f"img{i}": Decision(f"img{i}", True, False, ("x" * 150,) * 20) for i in range(400)}
    dated = [Manifest(f"r/img{i}:nightly-{DATE}", [], f"img{i}") for i in range(400)]
    kept = [Manifest(f"r/img{i}:latest", [], f"img{i}") for i in range(400)]
    text = publish_markdown(DATE, many, dated, [], kept, None, limit=SUMMARY_BYTES)
    assert len(text.encode()) <= SUMMARY_BYTES
    assert "table row" in text.splitlines()[-1] and "left out" in text.splitlines()[-1]
    assert "| `img0` |" in text


def test_the_arch_comparison_is_empty_without_records():
    assert arch_comparison(None) == "" and arch_comparison(Decision("x", True, True)) == ""
    assert arch_comparison(Decision("x", True, True, (), (("amd64", 0), ("arm64", 10)))) == "amd64 0 B, arm64 10 B"


CONTROLS = ["\x1b[2Kspoofed", "two\nlines", "<script>alert(1)</script>", "x|y</td><img src=x>", "bidi\u202eevil"]


@pytest.mark.parametrize("hostile", CONTROLS)
def test_a_control_character_in_a_reason_or_name_is_escaped_as_sitrep_md_escapes_it(hostile):
    text = _summary(name=hostile, reason=f"test {hostile} failed on arm64")
    assert "\x1b" not in text and "\u202e" not in text
    assert len(text.splitlines()) == 6  # heading, blank, table head, rule, two rows: no line break let through
    html = _render(text)
    assert "<script" not in html and "<img" not in html and "\x1b" not in html and html.count("<tr>") == 3
    if "\x1b" in hostile:
        assert "\\x1b[2Kspoofed" in html  # shown as its escape, as sitrep.md shows it


def test_the_publish_summary_escapes_a_test_name_from_a_sitrep_as_sitrep_md_does():
    from bake.run.sitrep import markdown, tests_markdown

    tests = make_tests("t tests", [{"stage": "s", "target": "s", "platform": "linux/amd64", "test": "evil\x1b[2K",
                                    "command": "true", "image": "i", "outcome": "fail", "exit_code": 1,
                                    "duration_s": 1.0, "timed_out": False, "output": []}])
    reason = f"tests failed: {tests['results'][0]['test']}"
    published = _summary(reason=reason)
    assert "\x1b" not in published and "\x1b" not in tests_markdown(tests)
    assert "evil\\\\x1b\\[2K" in published and "evil\\\\x1b\\[2K" in tests_markdown(tests)


def _append(tmp_path, held: int, **options):
    from bake.run.release import append_summary

    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * held)
    append_summary(str(path), lambda room: "\n" + _summary(limit=room - 1, **options))
    return path.read_bytes()


@pytest.mark.parametrize("held", [SUMMARY_BYTES - 100, SUMMARY_BYTES - 1, SUMMARY_BYTES, SUMMARY_BYTES + 5])
def test_a_nearly_full_step_summary_is_never_grown_past_the_bound(tmp_path, held):
    data = _append(tmp_path, held)
    assert len(data) <= max(SUMMARY_BYTES, held)
    added = data[held:].decode()
    assert "sitrep.json" not in added and "-1" not in added and "under 99 " not in added
    assert added in ("", "\n_publish summary left out: $GITHUB_STEP_SUMMARY is full (1,000,000 bytes)_\n")
    if held == SUMMARY_BYTES - 100:
        assert added.startswith("\n_publish summary left out")


def test_a_step_summary_with_room_for_some_rows_says_the_rest_are_in_the_publish_log(tmp_path):
    held = SUMMARY_BYTES - 700
    data = _append(tmp_path, held, reason="r " * 60)
    added = data[held:].decode()
    assert len(data) <= SUMMARY_BYTES and added.startswith("\n### ")
    assert added.splitlines()[-1] == ("_1 table row left out: $GITHUB_STEP_SUMMARY is kept under 1,000,000 bytes; "
                                      "the publish log lists every tag_")
