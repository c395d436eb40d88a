"""What a failed bake reports, from buildx's plain progress (lines as buildx 0.29 prints them):
which target a failing step belongs to, which errors are harmless, and what was finished before a
run failed. The engine tests show the same on real builds; these need no engine."""

from __future__ import annotations

from bake.run.engine import Progress
from bake.run.sitrep import make_sitrep

ROOT_DOCKERFILE = 'FROM ${BASE_IMAGE} AS mealkit\nRUN bake-write-requirements base "${REQUIREMENTS}"\nFROM mealkit AS final\nRUN true\n'
BROKEN_DOCKERFILE = 'FROM base AS mealkit\nRUN echo "tf-broken fails on purpose" >&2 && exit 3\nFROM mealkit AS final\nRUN true\n'


def _plan():
    def target(dockerfile, flavor, **contexts):
        return {"dockerfile-inline": dockerfile, "target": flavor, "contexts": contexts, "tags": []}

    return {"target": {
        "tf-root-mealkit": target(ROOT_DOCKERFILE, "mealkit"),
        "tf-root": target(ROOT_DOCKERFILE, "final", mealkit="target:tf-root-mealkit"),
        "tf-broken-mealkit": target(BROKEN_DOCKERFILE, "mealkit", base="target:tf-root-mealkit"),
        "tf-broken": target(BROKEN_DOCKERFILE, "final", base="target:tf-root-mealkit",
                            mealkit="target:tf-broken-mealkit"),
    }}


def _report(lines, returncode=1):
    progress = Progress()
    for line in lines:
        progress.feed(line + "\n")
    sitrep = make_sitrep(_plan(), "tf-broken build", returncode, progress.failed, {}, lambda ref: None,
                         error=progress.last_error, failed_steps=progress.failed_steps, exported=progress.exported)
    return {name: t["outcome"] for name, t in sitrep["targets"].items()}, sitrep


CACHE_MISS = [
    "#11 [tf-root] importing cache manifest from localhost:5555/t/tf-root:cache-silo-tf-root-mealkit",
    "#11 ERROR: failed to configure registry cache importer: localhost:5555/t/tf-root:cache-silo-tf-root-mealkit: not found",
]


def test_a_meal_kit_step_shown_under_its_final_is_the_meal_kits():
    outcomes, sitrep = _report(CACHE_MISS + [
        '#25 [tf-broken mealkit 1/2] RUN echo "tf-broken fails on purpose" >&2 && exit 3',
        '#25 ERROR: process "/bin/sh -c echo \\"tf-broken fails on purpose\\" >&2 && exit 3" did not complete successfully: exit code: 3',
        "#24 [tf-root-mealkit] exporting to image",
        "#24 CANCELED",
        'ERROR: target tf-broken: failed to solve: process "/bin/sh -c echo ..." did not complete successfully: exit code: 3',
    ])
    # The missing cache is not a failure; tf-root was cancelled, not broken.
    assert outcomes == {"tf-root-mealkit": "not built", "tf-root": "not built", "tf-broken-mealkit": "fail",
                        "tf-broken": "fail"}
    assert sitrep["summary"].startswith("tf-broken build: failed: tf-broken-mealkit, tf-broken (ERROR: target tf-broken")
    assert sitrep["error"].startswith("ERROR: target tf-broken: failed to solve")


def test_a_parent_step_shown_under_a_child_is_the_parents():
    outcomes, _ = _report([
        '#23 [tf-broken mealkit 2/2] RUN bake-write-requirements base "beta"',
        "#23 ERROR: process did not complete successfully: exit code: 1",
    ])
    # The instruction is in the root's Dockerfile (with ${REQUIREMENTS} expanded): the root's meal
    # kit failed, and everything built on it with it.
    assert outcomes == {"tf-root-mealkit": "fail", "tf-root": "fail", "tf-broken-mealkit": "fail", "tf-broken": "fail"}


def test_what_was_exported_before_a_failure_passes_with_its_digest():
    digest = "sha256:" + "4e" * 32
    outcomes, sitrep = _report([
        "#14 [tf-root-mealkit] exporting to image",
        "#14 exporting manifest sha256:" + "dd" * 32 + " done",
        "#14 exporting manifest list " + digest + " 0.0s done",
        f"#14 pushing manifest for localhost:5555/t/tf-root:mealkit@{digest} 0.0s done",
        "#14 DONE 0.3s",
        "#15 [tf-root] exporting to image",
        "#15 pushing layers",
        "#15 ERROR: failed to push localhost:5555/t/tf-root:latest: connection refused",
        "ERROR: failed to build: failed to receive status: rpc error: code = Unavailable desc = error reading from server: EOF",
    ])
    assert outcomes["tf-root-mealkit"] == "pass"
    assert sitrep["targets"]["tf-root-mealkit"]["digest"] == digest
    assert outcomes["tf-root"] == "fail"
    assert sitrep["outcome"] == "fail" and "EOF" in sitrep["error"]


def test_a_run_that_dies_without_naming_a_target_fails_what_it_did_not_finish():
    outcomes, sitrep = _report(["ERROR: failed to build: failed to receive status: rpc error: code = Unavailable"])
    assert set(outcomes.values()) == {"fail"}
    assert sitrep["summary"].endswith("(ERROR: failed to build: failed to receive status: rpc error: code = Unavailable)")


def test_sitrep_error_lines_are_redacted():
    _, sitrep = _report(["ERROR: target tf-root: failed to push https://bot:hunter2@registry.example/x: denied"])
    assert "hunter2" not in sitrep["error"] and "hunter2" not in sitrep["summary"]
    assert "https://bot:<redacted>@registry.example" in sitrep["error"]
