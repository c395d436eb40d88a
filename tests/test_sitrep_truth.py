"""What the sitrep says of a build, from buildx's ``--progress=rawjson`` lines, without an engine:
a step shared by unrelated targets counted once, durations bounded by the command, the images a
build started from, a failed step's last output lines, and the bytes of context sent. The engine
tests (``tests/test_sitrep_truth_engine.py``) show the same on real builds."""

from __future__ import annotations

import re

from test_progress import T0, T1, _digest, log, status, vertex

from bake.run.progress import TAIL_BYTES, TAIL_LINES, ProgressReader, _seconds
from bake.run.sitrep import base_images, make_sitrep, markdown

BUSYBOX = "localhost:5555/stand-in/busybox:latest"
INDEX = "sha256:" + "f5" * 32
SHARED = f"FROM {BUSYBOX}\nCOPY a.txt /a.txt\nRUN cat /a.txt > /b.txt\n"


def _plan():
    def target(own):
        return {"dockerfile-inline": SHARED + own, "platforms": ["linux/amd64", "linux/arm64"], "tags": []}

    return {"target": {"sx-one": target("RUN echo one > /one\n"), "sx-two": target("RUN echo two > /two\n")}}


def _read(lines, plan=None):
    progress = ProgressReader(_plan() if plan is None else plan, None, lambda line: None)
    for line in lines:
        progress.feed(line + "\n")
    progress.finish()
    return progress


def _both(key, name, **fields):
    """A vertex BuildKit reports to both builds: once under each target's name."""
    return [vertex(key, f"[{target} {name}", completed=T1, **fields) for target in ("sx-two", "sx-one")]


def test_a_step_unrelated_targets_share_is_counted_once_under_the_first_in_plan_order():
    lines = []
    for platform in ("linux/amd64", "linux/arm64"):
        lines += _both(f"from {platform}", f"{platform} 1/4] FROM {BUSYBOX}@{INDEX}")
        lines += _both(f"copy {platform}", f"{platform} 2/4] COPY a.txt /a.txt")
        lines += _both(f"cat {platform}", f"{platform} 3/4] RUN cat /a.txt > /b.txt")
        lines.append(vertex(f"one {platform}", f"[sx-one {platform} 4/4] RUN echo one > /one", completed=T1))
        lines.append(vertex(f"two {platform}", f"[sx-two {platform} 4/4] RUN echo two > /two", completed=T1))
    steps = _read(lines).steps()
    # BuildKit ran 10 distinct steps; sx-two reported the shared ones first, but sx-one is first in the plan.
    assert steps == {"sx-one": {"cached": 2, "run": 6}, "sx-two": {"cached": 0, "run": 2}}
    assert sum(c["cached"] + c["run"] for c in steps.values()) == 10


def test_a_duration_never_reaches_before_the_command_or_past_its_end():
    """A cached vertex (or one a concurrent build ran) comes with the times of the build that
    resolved it: minutes before this command started."""
    long_ago = "2026-12-01T03:15:00.135427621Z"  # 101.0 s before T0
    t2 = "2026-12-01T03:16:43.135427621Z"  # T0 + 2.0
    lines = [vertex("from", f"[sx-one linux/amd64 1/4] FROM {BUSYBOX}@{INDEX}", started=long_ago, completed=long_ago,
                    cached=True),
             vertex("shared", "[sx-one linux/amd64 3/4] RUN sleep 60", started=long_ago, completed=T1),
             vertex("own", "[sx-one linux/amd64 4/4] RUN echo one > /one", started=T1, completed=t2)]
    progress = _read(lines)
    unbounded = progress.durations()
    assert round(unbounded["sx-one"], 6) == 103.0, "BuildKit's own times reach back 101 s"
    since, until = _seconds(T0), _seconds(t2) + 0.5
    bounded = progress.durations(since, until)
    assert round(bounded["sx-one"], 6) == 2.0  # T0 → t2: within the command's 2.5 s
    only_cached = _read([vertex("from", f"[sx-one linux/amd64 1/4] FROM {BUSYBOX}@{INDEX}", started=long_ago,
                                completed=T1, cached=True)])
    assert only_cached.durations()["sx-one"] == 0.0, "a cache hit's start is not a start"


def test_the_images_a_build_started_from_come_from_its_progress():
    named = "[mx-root context busybox:1.36]"
    lines = [vertex("meta amd64", f"[sx-one linux/amd64 internal] load metadata for {BUSYBOX}", completed=T1),
             vertex("meta amd64", f"[sx-two linux/amd64 internal] load metadata for {BUSYBOX}", completed=T1),
             vertex("from arm64", f"[sx-one linux/arm64 1/4] FROM {BUSYBOX}@{INDEX}", completed=T1),
             vertex("named", f"{named} {BUSYBOX}", completed=T1),
             vertex("named meta", f"{named} load metadata for {BUSYBOX}", completed=T1),
             vertex("cache", "[sx-one] importing cache manifest from localhost:5555/x/sx-one:cache", completed=T1)]
    images = _read(lines).images()
    assert images == {"sx-one": [(BUSYBOX, "linux/amd64", None), (BUSYBOX, "linux/arm64", INDEX)],
                      "sx-two": [(BUSYBOX, "linux/amd64", None)],
                      "mx-root": [(BUSYBOX, None, None)]}
    asked = []

    def resolve(ref):
        asked.append(ref)
        return "sha256:" + "ab" * 32

    # No provenance in the metadata (a multi-platform build): the pinned digest, else the registry's;
    # in the order of image and platform, whichever BuildKit reported first.
    assert base_images({}, (), images["sx-one"], ["linux/amd64", "linux/arm64"], resolve) == [
        {"image": BUSYBOX, "platform": "linux/amd64", "digest": "sha256:" + "ab" * 32},
        {"image": BUSYBOX, "platform": "linux/arm64", "digest": INDEX}]
    assert asked == [BUSYBOX]
    # A named context shows no platform: the image stands for each of the target's.
    assert [(b["platform"], b["digest"]) for b in base_images({}, (), images["mx-root"], ["linux/amd64", "linux/arm64"],
                                                              lambda ref: INDEX)] == \
        [("linux/amd64", INDEX), ("linux/arm64", INDEX)]
    # Provenance, when buildx wrote it, comes first; the progress adds nothing it already has.
    meta = {"buildx.build.provenance": {"materials": [
        {"uri": "pkg:docker/localhost%3A5555/stand-in/busybox@latest?platform=linux%2Famd64",
         "digest": {"sha256": "cd" * 32}}]}}
    assert base_images(meta, (), images["sx-one"], ["linux/amd64"], lambda ref: None) == [
        {"image": BUSYBOX, "platform": "linux/amd64", "digest": "sha256:" + "cd" * 32},
        {"image": BUSYBOX, "platform": "linux/arm64", "digest": INDEX}]


def test_a_failed_steps_last_lines_reach_the_sitrep_and_the_summary():
    step = "[sx-one linux/arm64 3/4] RUN cat /a.txt > /b.txt"
    noise = "".join(f"noise line {i}\n" for i in range(100))
    reason = "ERROR: No matching distribution found for alpha==9"
    lines = [vertex("step", step), log("step", noise), log("step", "\n   \n"), log("step", reason[:10], stream=2),
             log("step", reason[10:] + "\n", stream=2),
             vertex("step", step, completed=T1, error='process "/bin/sh -c cat /a.txt > /b.txt" did not complete '
                    'successfully: exit code: 1'),
             "ERROR: target sx-one: failed to solve: process did not complete successfully: exit code: 1"]
    progress = _read(lines)
    failures = progress.failures()
    assert list(failures) == ["sx-one"]
    [failed] = failures["sx-one"]
    assert failed["output"][-1] == reason, "a line cut across two log chunks is one line; blank lines are left out"
    assert failed["output"] == [f"noise line {i}" for i in range(100 - TAIL_LINES + 1, 100)] + [reason]
    assert failed["platform"] == "linux/arm64" and failed["step"] == "RUN cat /a.txt > /b.txt"
    assert failed["error"].endswith("exit code: 1")
    report = make_sitrep(_plan(), "sx build", 1, progress.failed(), {}, {}, failures=failures,
                         failed_steps=progress.failed_steps())
    assert report["targets"]["sx-one"]["failed_steps"] == [failed] and report["targets"]["sx-two"]["failed_steps"] == []
    summary = markdown(report)
    assert reason in summary and "noise line 99" in summary and "noise line 10\n" not in summary
    # Long lines: at most TAIL_BYTES bytes in all, the newest kept.
    wide = _read([vertex("step", step), log("step", ("x" * 3000 + "\n") * 3 + "last\n"),
                  vertex("step", step, completed=T1, error="exit code: 1")]).failures()["sx-one"][0]["output"]
    assert wide == ["x" * 3000, "last"] and sum(len(line) + 1 for line in wide) <= TAIL_BYTES


def test_context_bytes_sent_are_counted_once_and_shown():
    shown = []
    progress = ProgressReader(_plan(), None, shown.append)
    for line in [vertex("ctx", "[sx-two internal] load build context", completed=T1),
                 vertex("ctx", "[sx-one internal] load build context", completed=T1),
                 status("ctx", "transferring context:", current=1_234_567),
                 vertex("dockerfile", "[sx-one internal] load build definition from Dockerfile", completed=T1),
                 status("dockerfile", "transferring dockerfile:", current=143),
                 vertex("named", "[sx-two context wheels] load from client", completed=T1),
                 status("named", "transferring wheels:", current=5000)]:
        progress.feed(line + "\n")
    assert progress.transfers() == {"sx-one": 1_234_567, "sx-two": 5000}
    assert "#1 transferring context: 1.23MB done\n" in shown
    report = make_sitrep(_plan(), "sx build", 0, [], {}, {}, transfers=progress.transfers())
    assert [t["context_bytes"] for t in report["targets"].values()] == [1_234_567, 5000]
    assert "| 1.23 MB |" in markdown(report)
    assert make_sitrep(_plan(), "sx build", 0, [], {}, {})["targets"]["sx-one"]["context_bytes"] is None


def test_buildx_runs_without_a_variable_that_drops_provenance():
    from bake.run.engine import bake_environment

    env = bake_environment({"PATH": "/bin", "BUILDX_METADATA_PROVENANCE": "disabled", "DOCKER_HOST": "unix:///x"})
    assert env == {"PATH": "/bin", "DOCKER_HOST": "unix:///x"}


def test_docs_sitrep_gives_every_field_its_meaning_and_source():
    """docs/sitrep.md has a table row (field, meaning, source) for each key of a sitrep and of its
    targets, and no row for a key the sitrep does not have."""
    import re

    from conftest import ROOT

    doc = (ROOT / "docs" / "sitrep.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \|(.*)\|$", doc, re.MULTILINE)}
    report = make_sitrep(_plan(), "sx build", 0, [], {}, {}, steps={}, transfers={}, failures={}, images={})
    unchanged = make_sitrep(_plan(), "sx build", 0, [], {}, {}, unchanged={"sx-old": {
        "input_digest": "sha256:1", "image_digest": "sha256:2", "date": "2026-11-28"}})["targets"]["sx-old"]
    # interrupted, tests and a target's since_last are added after make_sitrep (an interrupt, bake-plan
    # test, build --push: bake.run.build.add_since_last)
    keys = set(report) | {"interrupted", "tests", "since_last"} | set(report["targets"]["sx-one"]) | set(unchanged)
    assert keys == set(rows), (keys ^ set(rows))
    for key, cells in rows.items():
        meaning, source = cells.split(" | ")[:2]
        assert meaning.strip() and source.strip(), key


def test_the_target_table_keeps_nine_cells_whatever_a_name_or_tag_holds():
    report = make_sitrep(_plan(), "sx build", 0, [], {}, {})
    report["targets"]["sx-one"]["tags"] = ["r/x:a|b", "r/x:`c`"]
    row = next(line for line in markdown(report).splitlines() if line.startswith("| `sx-one`"))
    cells = re.split(r"(?<!\\)\|", row)[1:-1]
    assert len(cells) == 9, row
    assert cells[-1].strip() == "`r/x:a\\|b`<br>`r/x:'c'`"
