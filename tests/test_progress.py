"""What a bake reports, from buildx's ``--progress=rawjson`` (one JSON SolveStatus a line, as
buildx 0.29 writes them, and buildx's own text lines): which target a failing step belongs to,
which errors are harmless, what was finished before a run failed, the console shown from it, and
the step counts. The engine tests show the same on real builds; these need no engine."""

from __future__ import annotations

import base64
import hashlib
import json

from bake.run.progress import ProgressReader
from bake.run.sitrep import make_sitrep

ROOT_DOCKERFILE = 'FROM ${BASE_IMAGE} AS mealkit\nRUN bake-write-requirements base "${REQUIREMENTS}"\nFROM mealkit AS final\nRUN true\n'
BROKEN_DOCKERFILE = 'FROM base AS mealkit\nRUN echo "tf-broken fails on purpose" >&2 && exit 3\nFROM mealkit AS final\nRUN true\n'
T0 = "2026-12-01T03:16:41.135427621Z"
T1 = "2026-12-01T03:16:42.335427621Z"  # 1.2 s later


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


def _digest(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def vertex(key, name, started=T0, completed=None, **fields):
    """One ``vertexes`` line; ``key`` names the vertex (its digest is made from it)."""
    event = {"digest": _digest(key), "name": name, "started": started, "completed": completed, **fields}
    return json.dumps({"vertexes": [{k: v for k, v in event.items() if v is not None}]})


def status(key, status_id, completed=T1, **fields):
    """One ``statuses`` line of vertex ``key``."""
    return json.dumps({"statuses": [{"id": status_id, "vertex": _digest(key), "current": 0,
                                     "timestamp": "0001-01-01T00:00:00Z", "started": T0, "completed": completed,
                                     **fields}]})


def log(key, text, stream=1):
    """One ``logs`` line of vertex ``key``."""
    data = base64.b64encode(text.encode()).decode()
    return json.dumps({"logs": [{"vertex": _digest(key), "stream": stream, "data": data, "timestamp": T0}]})


def _read(lines, plan=None, sole_target=None):
    shown = []
    progress = ProgressReader(_plan() if plan is None else plan, sole_target, shown.append)
    for line in lines:
        progress.feed(line + "\n")
    progress.finish()
    return progress, "".join(shown)


def _report(lines, returncode=1):
    progress, _ = _read(lines)
    sitrep = make_sitrep(_plan(), "tf-broken build", returncode, progress.failed(), {}, {},
                         error=progress.last_error, failed_steps=progress.failed_steps(), exported=progress.exported(),
                         steps=progress.steps())
    return {name: t["outcome"] for name, t in sitrep["targets"].items()}, sitrep


CACHE_IMPORT = "[tf-root] importing cache manifest from localhost:5555/t/tf-root:cache-silo-tf-root-mealkit"
CACHE_MISS = [
    vertex("cache", CACHE_IMPORT),
    vertex("cache", CACHE_IMPORT, completed=T1, error="failed to configure registry cache importer: "
           "localhost:5555/t/tf-root:cache-silo-tf-root-mealkit: not found"),
]
BROKEN_STEP = '[tf-broken mealkit 1/2] RUN echo "tf-broken fails on purpose" >&2 && exit 3'


def test_a_meal_kit_step_shown_under_its_final_is_the_meal_kits():
    outcomes, sitrep = _report(CACHE_MISS + [
        vertex("broken", BROKEN_STEP),
        log("broken", "tf-broken fails on purpose\n", stream=2),
        vertex("broken", BROKEN_STEP, completed=T1, error='process "/bin/sh -c echo \\"tf-broken fails on purpose\\" '
               '>&2 && exit 3" did not complete successfully: exit code: 3'),
        vertex("export", "[tf-root-mealkit] exporting to image"),
        vertex("export", "[tf-root-mealkit] exporting to image", completed=T1, error="context canceled"),
        "Dockerfile:2",
        "--------------------",
        '   2 | >>> RUN echo "tf-broken fails on purpose" >&2 && exit 3',
        "--------------------",
        'ERROR: target tf-broken: failed to solve: process "/bin/sh -c echo ..." did not complete successfully: exit code: 3',
    ])
    # The missing cache is not a failure; tf-root was cancelled, not broken.
    assert outcomes == {"tf-root-mealkit": "not built", "tf-root": "not built", "tf-broken-mealkit": "fail",
                        "tf-broken": "fail"}
    assert sitrep["summary"].startswith("tf-broken build: failed: tf-broken-mealkit, tf-broken (ERROR: target tf-broken")
    assert sitrep["error"].startswith("ERROR: target tf-broken: failed to solve")


def test_a_parent_step_shown_under_a_child_is_the_parents():
    step = '[tf-broken mealkit 2/2] RUN bake-write-requirements base "beta"'
    outcomes, _ = _report([
        vertex("write", step),
        vertex("write", step, completed=T1, error="process did not complete successfully: exit code: 1"),
    ])
    # The instruction is in the root's Dockerfile (with ${REQUIREMENTS} expanded): the root's meal
    # kit failed, and everything built on it with it.
    assert outcomes == {"tf-root-mealkit": "fail", "tf-root": "fail", "tf-broken-mealkit": "fail", "tf-broken": "fail"}


def test_what_was_exported_before_a_failure_passes_with_its_digest():
    digest = "sha256:" + "4e" * 32
    outcomes, sitrep = _report([
        vertex("mealkit export", "[tf-root-mealkit] exporting to image"),
        status("mealkit export", "exporting manifest sha256:" + "dd" * 32),
        status("mealkit export", "exporting manifest list " + digest),
        status("mealkit export", f"pushing manifest for localhost:5555/t/tf-root:mealkit@{digest}"),
        vertex("mealkit export", "[tf-root-mealkit] exporting to image", completed=T1),
        vertex("final export", "[tf-root] exporting to image"),
        status("final export", "pushing layers", completed=None),
        vertex("final export", "[tf-root] exporting to image", completed=T1,
               error="failed to push localhost:5555/t/tf-root:latest: connection refused"),
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


def test_the_console_reads_like_plain_progress():
    progress, shown = _read(CACHE_MISS + [
        vertex("broken", BROKEN_STEP),
        log("broken", "first line\nsecond ", stream=1),
        log("broken", "half\n", stream=1),
        vertex("broken", BROKEN_STEP, completed=T1, error="exit code: 3"),
        vertex("root", '[tf-root mealkit 2/2] RUN bake-write-requirements base "beta"', completed=T1, cached=True),
        vertex("final", "[tf-root final 1/1] RUN true"),
        vertex("final", "[tf-root final 1/1] RUN true", completed=T1),
        "ERROR: target tf-broken: failed to solve: exit code: 3",
    ])
    lines = [line for line in shown.splitlines() if line]
    assert lines == [
        f"#1 {CACHE_IMPORT}",
        "#1 no cache there yet",  # a cache ref a first build has not written: no failure, no ERROR line
        f"#2 {BROKEN_STEP}",
        "#2 first line",
        "#2 second half",
        "#2 ERROR: exit code: 3",
        '#3 [tf-root mealkit 2/2] RUN bake-write-requirements base "beta"',
        "#3 CACHED",
        "#4 [tf-root final 1/1] RUN true",
        "#4 DONE 1.2s",
        "ERROR: target tf-broken: failed to solve: exit code: 3",
    ]
    assert progress.last_error == "ERROR: target tf-broken: failed to solve: exit code: 3"
    record = progress.records()
    assert [(v.stage, v.instruction, v.was_cached, v.duration_s) for v in record["tf-root"] if v.instruction] == [
        ("final", "RUN true", False, 1.2)]
    assert [v.name for v in record["tf-root"] if not v.instruction] == [CACHE_IMPORT]


def _single(name, dockerfile, **contexts):
    return {"dockerfile-inline": dockerfile, "contexts": contexts, "tags": []}


FROM = "FROM localhost:5555/stand-in/busybox:latest@sha256:" + "cb" * 32


def test_an_image_source_is_cached_unless_it_pulled_layers():
    plan = {"target": {"t-one": _single("t-one", "FROM busybox\nCOPY x /x\n")}}
    warm = []
    for arch in ("amd64", "arm64"):  # buildx names neither the sole target nor a stage here
        warm += [vertex(f"from {arch}", f"[linux/{arch} 1/2] {FROM}", completed=T1),
                 status(f"from {arch}", "resolve localhost:5555/stand-in/busybox:latest"),
                 vertex(f"copy {arch}", f"[linux/{arch} 2/2] COPY x /x", completed=T1, cached=True)]
    assert _read(warm, plan, "t-one")[0].steps() == {"t-one": {"cached": 4, "run": 0}}
    cold = [vertex("from", f"[linux/amd64 1/2] {FROM}"), status("from", "sha256:" + "ab" * 32, total=100, current=100),
            vertex("from", f"[linux/amd64 1/2] {FROM}", completed=T1),
            vertex("copy", "[linux/amd64 2/2] COPY x /x"), vertex("copy", "[linux/amd64 2/2] COPY x /x", completed=T1)]
    assert _read(cold, plan, "t-one")[0].steps() == {"t-one": {"cached": 0, "run": 2}}
    # A step whose result came from a registry cache as layers was not run.
    fetched = [vertex("copy", "[linux/amd64 2/2] COPY x /x"), status("copy", "sha256:" + "cd" * 32),
               vertex("copy", "[linux/amd64 2/2] COPY x /x", completed=T1)]
    assert _read(fetched, plan, "t-one")[0].steps() == {"t-one": {"cached": 1, "run": 0}}


def test_steps_of_unnamed_stages_belong_to_the_target_that_holds_them():
    plan = {"target": {"t-root": _single("t-root", "FROM busybox\nRUN make root\n"),
                       "t-leaf": _single("t-leaf", "FROM base\nRUN make leaf\n", base="target:t-root")}}
    lines = []
    for label in ("t-leaf", "t-root"):  # the root's steps are reported to the leaf's build too
        lines += [vertex("from", f"[{label} 1/2] {FROM}", completed=T1),
                  vertex("root", f"[{label} 2/2] RUN make root", completed=T1, cached=True)]
    lines += [vertex("leaf", "[t-leaf 2/2] RUN make leaf"), vertex("leaf", "[t-leaf 2/2] RUN make leaf", completed=T1)]
    assert _read(lines, plan)[0].steps() == {"t-root": {"cached": 2, "run": 0}, "t-leaf": {"cached": 0, "run": 1}}


def test_a_meal_kit_step_named_after_another_target_is_counted_for_its_own():
    lines = []
    for label in ("tf-broken", "tf-root", "tf-broken-mealkit", "tf-root-mealkit"):
        lines.append(vertex("write", f'[{label} mealkit 1/2] RUN bake-write-requirements base ""', completed=T1,
                            cached=True))
    lines += [vertex("true", "[tf-root final 1/1] RUN true", completed=T1),
              vertex("broken", BROKEN_STEP.replace("[tf-broken ", "[tf-broken-mealkit ")),
              vertex("broken", BROKEN_STEP, completed=T1)]
    assert _read(lines)[0].steps() == {"tf-root-mealkit": {"cached": 1, "run": 0}, "tf-root": {"cached": 0, "run": 1},
                                       "tf-broken-mealkit": {"cached": 0, "run": 1}}


def test_buildx_0_13_writes_each_status_over_many_lines():
    lines = []
    for line in [vertex("final", "[tf-root final 1/1] RUN true", completed=T1, cached=True),
                 "ERROR: failed to solve: something"]:
        lines += json.dumps(json.loads(line), indent=2).splitlines() if line.startswith("{") else [line]
    progress, shown = _read(lines)
    assert progress.steps() == {"tf-root": {"cached": 1, "run": 0}}
    assert [line for line in shown.splitlines() if line] == [
        "#1 [tf-root final 1/1] RUN true", "#1 CACHED", "ERROR: failed to solve: something"]


def test_each_targets_duration_spans_every_vertex_reported_under_its_name():
    """A target's build lasts from the first vertex reported under its name starting to the last
    completing, shared steps included (BuildKit reports those to every build that holds them); a
    vertex still running counts for none, and a target none of whose vertices completed has none."""
    t2, t3 = "2026-12-01T03:16:43.135427621Z", "2026-12-01T03:16:45.635427621+00:00"
    shared = '[tf-root mealkit 2/2] RUN bake-write-requirements base "beta"'
    progress, _ = _read([
        vertex("shared", shared, started=T0, completed=T1),
        vertex("shared", shared.replace("tf-root", "tf-broken-mealkit"), started=T0, completed=T1, cached=True),
        vertex("final", "[tf-root final 1/1] RUN true", started=T1, completed=t2),
        vertex("broken", "[tf-broken-mealkit mealkit 1/2] RUN exit 3", started=t2, completed=t3),
        vertex("running", "[tf-broken exporting to image]", started=t2),
        vertex("provenance", "[tf-root] resolving provenance for metadata file", started=t3, completed=t3.replace(
            "45.6", "49.6")),
    ])
    sole, _ = _read([vertex("bake", "[internal] load local bake definitions", started=T0, completed=T1),
                     vertex("step", "[2/2] RUN true", started=T1, completed=t2),
                     vertex("meta", "resolving provenance for metadata file", started=t2, completed=t3)],
                    plan={"target": {"one": _single("one", "FROM busybox\nRUN true\n")}}, sole_target="one")
    assert round(sole.durations()["one"], 6) == 0.8  # T1 → t2: buildx's own vertices are not the build
    durations = progress.durations()
    assert set(durations) == {"tf-root", "tf-broken-mealkit"}
    assert round(durations["tf-root"], 6) == 2.0  # T0 → t2
    assert round(durations["tf-broken-mealkit"], 6) == 4.5  # T0 (the shared step) → t3


def test_a_long_error_in_the_summary_is_cut_with_an_ellipsis():
    """The one-line summary quotes buildx's error up to 200 characters and says when it cut it
    (``bake.plan.text.clipped``); the sitrep's ``error`` keeps it whole."""
    long_error = "ERROR: failed to push localhost:5555/x/tf-root:latest: " + "unexpected status from PUT request " * 10
    sitrep = make_sitrep(_plan(), "tf-broken build", 1, ["tf-root"], {}, {}, error=long_error)
    quoted = sitrep["summary"].split(" (", 1)[1]
    assert quoted.endswith("…)") and len(quoted) == 201 and sitrep["error"] == long_error.strip()
    short = make_sitrep(_plan(), "tf-broken build", 1, ["tf-root"], {}, {}, error="ERROR: short")
    assert short["summary"].endswith("(ERROR: short)")
