"""The situation report ("sitrep") of a build, in JAX-Toolbox's shape.

Three files: ``sitrep.json`` (``summary``, ``badge_label``, ``outcome``, ``error``, per target:
outcome, platforms, tags as buildx gave them, the base images with their digests, digest,
compressed size per platform when pushed, duration in seconds, steps cached and run, bytes of
context sent, failed steps with their last output lines; docs/sitrep.md gives each field's
meaning and source), a shields.io endpoint badge
(https://shields.io/badges/endpoint-badge: ``schemaVersion``, ``label``, ``message``, ``color``)
and a Markdown summary fit for ``$GITHUB_STEP_SUMMARY``.

``bake-plan test`` adds a ``tests`` block to the same ``sitrep.json`` (:func:`make_tests`), its
own badge ``tests-badge.json`` (:func:`tests_badge`: ``"5/6 passed"``) and a tests section to the
Markdown (:func:`tests_markdown`); the build's keys stay as the build wrote them.
"""

from __future__ import annotations

import functools
import json
import re
import urllib.parse
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

from bake.plan import dockerfile
from bake.plan.compose import sbom_generators
from bake.plan.inputs import INPUT_DIGEST_LABEL
from bake.plan.names import normalise_reference
from bake.plan.secrets import shown
from bake.plan.text import clipped, counted, printable

PASS, FAIL, NOT_BUILT, INTERRUPTED = "pass", "fail", "not built", "interrupted"
TESTS_BADGE = "tests-badge.json"
"""The image tests' badge (:func:`tests_badge`), beside the build's ``badge.json``."""


_HELPER_LINE = re.compile(r"bake-[a-z][a-z-]*: \S")
"""A line of one of bake-plan's helper scripts in the image (``bake-check-python: …``,
``bake-pip-finalize: …``): its own reason for stopping the step."""


def step_reason(steps: Sequence[dict]) -> Optional[str]:
    """Why failed steps (``failed_steps`` entries: ``{"error", "output", …}``) failed, as one line:
    a step's last output line when a bake-plan helper script wrote it (``bake-…: …``: the line it
    stops with, which names the cause; an earlier one, ``bake-pip-finalize: compiling …``, is only
    where the step was when another tool failed), else the first step's BuildKit error
    (``process … exit code: 1``); ``None`` for no step."""
    for step in reversed(steps):
        last = (step.get("output") or [""])[-1]
        if _HELPER_LINE.match(last):
            return last
    return next((step.get("error") for step in steps if step.get("error")), None)


def _builds_on(target: dict) -> List[str]:
    """The targets a target builds on or copies from (its ``target:`` named contexts)."""
    return [v[len("target:"):] for v in target.get("contexts", {}).values() if v.startswith("target:")]


def step_owner(plan: dict, label: str, stage: Optional[str], instruction: str = "") -> str:
    """The target a failing Dockerfile step belongs to.

    BuildKit labels a step shared by several targets with one of them: ``[tf-broken mealkit 1/2]``
    may be the meal kit's own step shown under its final, or a step of the parent's meal kit the
    final builds on. The candidates are the labelled target and what it builds on (breadth first)
    whose Dockerfile ``target`` is the step's stage; the first whose Dockerfile holds the
    instruction wins (``${…}`` matches anything: BuildKit shows args expanded), else the first
    candidate, else the labelled target.
    """
    targets = plan["target"]
    queue, seen, candidates = [label], set(), []
    while queue and stage:
        name = queue.pop(0)
        if name in seen or name not in targets:
            continue
        seen.add(name)
        if targets[name].get("target") == stage:
            candidates.append(name)
        queue.extend(_builds_on(targets[name]))
    if len(candidates) > 1 and instruction:
        text = " ".join(instruction.split())
        holding = [c for c in candidates if any(p.match(text) for p in _instructions(targets[c]))]
        candidates = holding or candidates
    return candidates[0] if candidates else label


def _instructions(target: dict) -> Tuple["re.Pattern[str]", ...]:
    """Patterns of a target's Dockerfile instructions (:func:`bake.plan.dockerfile.instructions`),
    ``${…}`` and ``$NAME`` as wildcards; empty when the Dockerfile cannot be read."""
    return _patterns(dockerfile.read(target.get("context", ""), target.get("dockerfile", "Dockerfile"),
                                     target.get("dockerfile-inline")) or "")


@functools.lru_cache(maxsize=256)
def _patterns(text: str) -> Tuple["re.Pattern[str]", ...]:
    """:func:`_instructions` of one Dockerfile's text, compiled once (a meal kit and its final
    share a Dockerfile, and every counted or failed step asks)."""
    return tuple(re.compile(".*?".join(re.escape(p) for p in _ARG_REF.split(line)) + r"\Z", re.IGNORECASE | re.DOTALL)
                 for line in dockerfile.instructions(text))


_ARG_REF = re.compile(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*")


def dependents(plan: dict, failed: Set[str]) -> Set[str]:
    """``failed`` and every target of ``plan`` that builds on one of them, directly or not."""
    out = set(failed)
    changed = True
    while changed:
        changed = False
        for name, target in plan["target"].items():
            if name not in out and any(dep in out for dep in _builds_on(target)):
                out.add(name)
                changed = True
    return out


def tags_of(target: dict, meta: dict) -> List[str]:
    """The tags a target was given: buildx's ``image.name`` (comma-separated, what it really tagged,
    docker/metadata-action's inherited tags included) when it built, else the plan's own."""
    named = [t for t in meta.get("image.name", "").split(",") if t]
    return named or list(target.get("tags", []))


def _sizes(target: dict, entry: dict, sizes: Callable[[str], Dict[str, int]]) -> Dict[str, int]:
    """A built target's compressed size per platform (``{}`` when not pushed or unknown)."""
    if not entry["digest"] or not entry["tags"]:
        return {}
    found = sizes(f"{entry['tags'][0].split('@', 1)[0]}@{entry['digest']}")
    platforms = target.get("platforms", [])
    if set(found) == {""} and len(platforms) == 1:
        return {platforms[0]: found[""]}
    return found


def base_images(meta: dict, tools: Sequence[str] = (), seen: Sequence[tuple] = (), platforms: Sequence[str] = (),
                resolve: Callable[[str], Optional[str]] = lambda ref: None) -> List[dict]:
    """The images a target's build started from, with the digest BuildKit resolved for each:
    ``[{"image": "localhost:5555/stand-in/busybox:latest", "platform": "linux/amd64",
    "digest": "sha256:…"}]``, one per image and platform, in the order of image and platform.

    First from the SLSA provenance buildx puts in its metadata file (``buildx.build.provenance``,
    or ``buildx.build.provenance/<platform>`` per platform; its ``materials`` are package URLs
    ``pkg:docker/<name>@<tag>?platform=…``), which buildx leaves out of a multi-platform build
    and of any build under ``BUILDX_METADATA_PROVENANCE=disabled``; then from BuildKit's progress
    (``seen``: ``(image, platform or None, digest or None)``,
    :meth:`bake.run.progress.ProgressReader.images`): the digest of a ``FROM REF@sha256:…`` step,
    else ``resolve(image)`` (the registry's digest of it now, ``None`` when unknown). An image
    seen without a platform stands for each of ``platforms`` (the target's). ``tools``:
    normalised images BuildKit pulled to run, not to build on (the SBOM generator,
    :func:`bake.plan.compose.sbom_generators`), left out."""
    out = []
    for key, provenance in sorted(meta.items()):
        if not key.startswith("buildx.build.provenance") or not isinstance(provenance, dict):
            continue
        for material in provenance.get("materials") or ():
            uri, digest = material.get("uri", ""), (material.get("digest") or {}).get("sha256")
            if not uri.startswith("pkg:docker/") or not digest:
                continue
            name, _, query = uri[len("pkg:docker/"):].partition("?")
            name, _, version = name.rpartition("@")
            params = dict(urllib.parse.parse_qsl(query))
            entry = {"image": urllib.parse.unquote(f"{name}:{version}"), "platform": params.get("platform"),
                     "digest": f"sha256:{digest}"}
            if entry not in out and not _is_one_of(entry["image"], tools):
                out.append(entry)
    have = {(image_spelling(e["image"]), e["platform"]) for e in out}
    for image, platform, digest in sorted(seen, key=lambda found: found[2] is None):  # pinned ones first
        if _is_one_of(image, tools):
            continue
        for one in [platform] if platform else (list(platforms) or [None]):
            if (image_spelling(image), one) in have:
                continue
            have.add((image_spelling(image), one))
            out.append({"image": image, "platform": one, "digest": digest or resolve(image)})
    return sorted(out, key=lambda entry: (entry["image"], entry["platform"] or ""))


def image_spelling(image: str) -> str:
    """One spelling per image (:func:`bake.plan.names.normalise_reference`), else as it is: how
    two names of one image (``busybox``, ``docker.io/library/busybox:latest``) compare equal."""
    try:
        return normalise_reference(image)
    except ValueError:
        return image


def _is_one_of(image: str, normalised: Sequence[str]) -> bool:
    try:
        return normalise_reference(image) in normalised
    except ValueError:
        return False


def make_sitrep(
    plan: dict,
    label: str,
    returncode: int,
    failed: Sequence[str],
    metadata: Dict[str, dict],
    durations: Dict[str, float],
    error: str = "",
    steps: Optional[Dict[str, Dict[str, int]]] = None,
    failed_steps: Sequence[tuple] = (),
    exported: Optional[Dict[str, Optional[str]]] = None,
    known: Sequence[str] = (),
    sizes: Callable[[str], Dict[str, int]] = lambda ref: {},
    transfers: Optional[Dict[str, int]] = None,
    failures: Optional[Dict[str, List[dict]]] = None,
    images: Optional[Dict[str, List[tuple]]] = None,
    resolve: Callable[[str], Optional[str]] = lambda ref: None,
    unchanged: Optional[Dict[str, dict]] = None,
    caches: Optional[Dict[str, Dict[str, Optional[bool]]]] = None,
) -> dict:
    """Build the sitrep of one bake run.

    :param plan: the plan that was built (buildx's JSON shape).
    :param label: the badge label, e.g. ``"upstream-pax build"``.
    :param failed: targets buildx named as failing.
    :param metadata: the ``--metadata-file`` content, by target.
    :param durations: per target, the seconds its build took, read from the progress
        (:meth:`bake.run.progress.ProgressReader.durations`); a target it lacks has none.
    :param steps: per target, Dockerfile steps ``{"cached": n, "run": m}`` read from the progress.
    :param failed_steps: ``(label, Dockerfile stage, instruction)`` of each failing step
        (:func:`step_owner`).
    :param exported: target → digest of the targets the progress showed exported (and pushed):
        buildx writes no metadata when the bake fails, so these still ``pass`` in a failed run.
    :param unchanged: ``build --skip-unchanged``: target → the nightly record it was not built
        against (its input digest the same); listed first, ``pass`` with ``unchanged_since``.
    :param sizes: ``repo@digest`` of a pushed image → its compressed size in bytes per platform
        (``""`` for a single-platform image); the default knows none (nothing was pushed).
    :param known: the current values of the build's secrets, redacted wherever they appear.
    :param transfers: per target, bytes of context sent to the engine
        (:meth:`bake.run.progress.ProgressReader.transfers`) → ``context_bytes``; ``None``: not
        read (every ``context_bytes`` is ``None``).
    :param failures: per target, its failed steps with their last output lines
        (:meth:`bake.run.progress.ProgressReader.failures`) → ``failed_steps``.
    :param images: per target, the images BuildKit's progress showed its build starting from
        (:meth:`bake.run.progress.ProgressReader.images`), for :func:`base_images`.
    :param resolve: an image reference → its registry's digest now, or ``None``: for an image
        whose digest neither the metadata nor the progress gave (:func:`base_images`).
    :param caches: per target, ``{"read": bool or None, "written": bool or None}`` of its registry
        cache (:meth:`bake.run.progress.ProgressReader.caches`) → ``cache_read``, ``cache_written``;
        ``cache_warning`` is ``None`` until :func:`add_cache_warnings`.
    :returns: the ``sitrep.json`` content; ``outcome`` is ``fail`` when buildx failed or any
        target did not build. A target ``fail``s when it, or a target it builds on, failed; a
        target buildx cancelled because another one failed is ``not built``. ``error`` is
        buildx's last error line (credentials redacted, control characters escaped) or ``None``.
    """
    culprits = {n for n in failed if n in plan["target"]}
    culprits |= {step_owner(plan, *step) for step in failed_steps if step[0] in plan["target"]}
    broken = dependents(plan, culprits)
    targets: Dict[str, dict] = {}
    exported = exported or {}
    built = plan.get("group", {}).get("default", {}).get("targets") or list(plan["target"])
    for name in built:  # the default group: not targets only inherited from (docker/metadata-action)
        target = plan["target"][name]
        meta = metadata.get(name, {})
        if not meta and name in exported:
            meta = {"containerimage.digest": exported[name]}
        entry = {
            "outcome": PASS if meta else (FAIL if name in broken else NOT_BUILT),
            "platforms": list(target.get("platforms", [])),
            "tags": tags_of(target, meta),
            "base_images": base_images(meta, sbom_generators(target), (images or {}).get(name, ()),
                                       target.get("platforms", ()), resolve),
            "digest": meta.get("containerimage.digest"),
            "input_digest": (target.get("labels") or {}).get(INPUT_DIGEST_LABEL),
            "duration_s": None,
            "steps_cached": None,
            "steps_run": None,
            "context_bytes": None if transfers is None else transfers.get(name, 0),
            "failed_steps": list((failures or {}).get(name, ())),
            "cache_read": ((caches or {}).get(name) or {}).get("read"),
            "cache_written": ((caches or {}).get(name) or {}).get("written"),
            "cache_warning": None,
        }
        entry["error"] = step_reason(entry["failed_steps"])
        entry["size_bytes"] = _sizes(target, entry, sizes)
        if name in durations and entry["outcome"] != NOT_BUILT:  # steps buildx cancelled are no build time
            entry["duration_s"] = round(durations[name], 3)
        if steps is not None:
            seen = steps.get(name, {"cached": 0, "run": 0})
            entry["steps_cached"], entry["steps_run"] = seen["cached"], seen["run"]
        targets[name] = entry
    if unchanged:
        from bake.plan.records import unchanged_entry

        targets = {**{name: unchanged_entry(rec) for name, rec in unchanged.items()}, **targets}
    if returncode != 0 and not any(t["outcome"] == FAIL for t in targets.values()):
        # buildx failed without naming a target: every target it did not finish failed.
        for entry in targets.values():
            if entry["outcome"] == NOT_BUILT:
                entry["outcome"] = FAIL
    failing = [n for n, t in targets.items() if t["outcome"] == FAIL]
    outcome = PASS if returncode == 0 and all(t["outcome"] == PASS for t in targets.values()) else FAIL
    error = shown(error.strip(), known) if error and error.strip() else None
    helper = next((t["error"] for t in targets.values()
                   if t["outcome"] == FAIL and t.get("error") and _HELPER_LINE.match(t["error"])), None)
    if helper is not None:  # buildx says "exit code: 1"; the helper's own line says why
        error = shown(helper, known)
    if outcome == PASS:
        built_now = len(targets) - len(unchanged or ())
        summary = (f"{label}: {'' if built_now == 1 else 'all '}{counted(built_now, 'target')} built" if built_now
                   else f"{label}: nothing to build")
        if unchanged:
            summary += f", {counted(len(unchanged), 'target')} unchanged since {_since(unchanged)}"
    else:
        summary = f"{label}: failed: {', '.join(failing) or 'the build'}"
        if error:
            summary += f" ({clipped(error, 200)})"
    return {"summary": summary, "badge_label": label, "outcome": outcome,
            "error": error if outcome == FAIL else None, "targets": targets, "warnings": []}


def add_cache_warnings(report: dict, expected: Dict[str, Tuple[str, str]]) -> List[str]:
    """Warn of each target that was expected to come from the cache but ran steps: its input
    digest equals ``expected[target][0]`` (the input digest of its previous nightly, read from its
    newest record), yet ``steps_run`` is above 0. Sets the target's ``cache_warning`` and adds the
    line to the report's ``warnings`` (each shown on the console and in the Markdown summary).

    :param report: a sitrep (:func:`make_sitrep`), changed in place.
    :param expected: target → ``(input digest, since)``: ``since`` names where that digest was
        found (``nightly-2026-11-29``).
    :returns: the warnings added, one line each:
        ``cache not working for T: input unchanged since nightly-DATE (sha256:…) but N steps ran``.
    """
    added = []
    for name, entry in report["targets"].items():
        digest, since = expected.get(name, (None, ""))
        ran = entry.get("steps_run")
        if not digest or digest != entry.get("input_digest") or not ran or entry.get("unchanged_since"):
            continue
        how = {True: "it was read", False: "it could not be read", None: "no cache import was shown"}
        line = (f"cache not working for {name}: input unchanged since {since} ({digest[:19]}…) but "
                f"{counted(ran, 'step')} ran (registry cache: {how[entry.get('cache_read')]})")
        entry["cache_warning"] = line
        added.append(line)
    report.setdefault("warnings", []).extend(added)
    return added


def _since(unchanged: Dict[str, dict]) -> str:
    """``nightly-<date>`` of the records, or the dates joined when they differ."""
    from bake.plan.records import built_in

    return ", ".join(sorted({built_in(r) for r in unchanged.values()}))


def redacted(node, known: Sequence[str] = ()):
    """A report (or any JSON-shaped value) with every string, keys included, as shown to a person
    (:func:`bake.plan.secrets.shown`: credentials and ``known`` secret values redacted, control
    characters escaped). What every report file is written from."""
    if isinstance(node, str):
        return shown(node, known)
    if isinstance(node, list):
        return [redacted(v, known) for v in node]
    if isinstance(node, dict):
        return {redacted(k, known) if isinstance(k, str) else k: redacted(v, known) for k, v in node.items()}
    return node


def badge(sitrep: dict) -> dict:
    """The shields.io endpoint badge of a sitrep."""
    outcome = sitrep["outcome"]
    colors = {PASS: "brightgreen", INTERRUPTED: "lightgrey"}
    return {"schemaVersion": 1, "label": sitrep["badge_label"], "message": outcome if outcome in colors else FAIL,
            "color": colors.get(outcome, "red")}


def markdown(sitrep: dict) -> str:
    """A Markdown summary: the outcome line and one table row per target, the last output lines
    of each failed step (:func:`failed_steps_markdown`), then the image tests
    (:func:`tests_markdown`) when the sitrep has them."""
    icon = {PASS: "✅", INTERRUPTED: "⏹️"}.get(sitrep["outcome"], "❌")
    lines: List[str] = [f"## {icon} {markdown_text(sitrep['summary'])}", ""]
    lines += [f"> ⚠️ **warning**: {markdown_text(w)}" for w in sitrep.get("warnings") or ()]
    if sitrep.get("warnings"):
        lines.append("")
    if sitrep["targets"] or "tests" not in sitrep:
        lines += ["| target | outcome | digest | seconds | steps cached | steps run | registry cache | context sent "
                  "| tags |", "|---|---|---|---|---|---|---|---|---|"]
    for name, t in sitrep["targets"].items():
        digest = (t["digest"] or "")[:19]
        cells = [_cell(name), markdown_text(t["outcome"], "cell"), _cell(digest) if digest else "",
                 _num(t["duration_s"]), _num(t["steps_cached"]), _num(t["steps_run"]), _cache_cell(t),
                 _bytes(t.get("context_bytes")), "<br>".join(_cell(tag) for tag in t["tags"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += failed_steps_markdown(sitrep["targets"])
    text = "\n".join(lines) + "\n"
    room = SUMMARY_BYTES - len(text.encode("utf-8", "replace")) - 1
    since = since_last_markdown(sitrep["targets"], room // 2 if "tests" in sitrep else room)
    if since:
        text += "\n" + since
    return text + "\n" + tests_markdown(sitrep["tests"], SUMMARY_BYTES - len(text.encode("utf-8", "replace")) - 1) \
        if "tests" in sitrep else text


def diff_rows(entries: Sequence[dict], base_images: bool = False) -> List[str]:
    """:func:`bake.plan.records.diff` entries as the lines of a Markdown table: the head, the rule
    and a row per entry (target, arch, inputs, Python distributions, sources; ``base_images``: and
    the base images whose digest moved, :func:`bake.plan.records.base_image_changes`). An entry's
    ``reason``, when it has one, follows its status. Every cell is a code span escaped by the
    summaries' one escaping (:func:`markdown_text`): no value can add a cell, a link or HTML."""
    from bake.plan.records import pin_words, short, source_words

    head = "| target | arch | inputs | Python distributions | sources |" + (" base images |" if base_images else "")
    rows = [head, "|---|---|---|---|---|" + ("---|" if base_images else "")]
    for e in entries:
        inputs = e["status"] if e["status"] != "changed" else f"changed, now {short(e['input_to'])}"
        if e.get("reason"):
            inputs += f": {e['reason']}"
        cells = [e["target"], e["arch"], inputs, "; ".join(pin_words(e["python"])),
                 "; ".join(source_words(s) for s in e["sources"])]
        if base_images:
            cells.append("; ".join(f"{b['image']} {short(b['from'])} → {short(b['to'])}"
                                   for b in e.get("base_images") or ()))
        rows.append("| " + " | ".join(markdown_text(c, "code") if c else "" for c in cells) + " |")
    return rows


def since_last_markdown(targets: Dict[str, dict], limit: Optional[int] = None) -> str:
    """The summary's section "Changed since nightly-<date>": a row (:func:`diff_rows`) for each
    target and arch of the sitrep's ``since_last`` that has something to say
    (:func:`bake.plan.records.since_last_changed`), or one line saying nothing changed; at most
    ``limit`` bytes (default :data:`SUMMARY_BYTES`; :func:`_within`: the rows that do not fit are
    left out, said in one line).
    ``""`` when no target has ``since_last`` (no ``--push``, or ``--no-since-last``)."""
    entries = [{**e, "target": name} for name, t in targets.items() for e in t.get("since_last") or ()
               if isinstance(e, dict)]
    if not entries:  # a build without --push (the warm --load path): nothing imported, nothing said
        return ""
    from bake.plan.records import since_last_changed

    limit = SUMMARY_BYTES if limit is None else limit
    dates = sorted({e["from"] for e in entries if isinstance(e.get("from"), str)})
    head = [f"### Changed since {markdown_text(', '.join(dates)) if dates else 'the last nightly'}", ""]
    rows = []
    for e in entries:  # sitrep.json read back (bake-plan test): an entry not of this shape is left out
        try:
            if since_last_changed(e):
                rows.append(diff_rows([e], base_images=True)[2])
        except (KeyError, TypeError, AttributeError, ValueError):
            continue
    if not rows:
        return _within(head + ["Nothing changed: every target's inputs are as they were."], [], [], limit)
    return _within(head + diff_rows([], base_images=True), rows, [], limit)


def _cache_cell(target: dict) -> str:
    """``read, written`` / ``not read`` / …: what the build said of the target's registry cache."""
    words = [{True: "read", False: "not read"}.get(target.get("cache_read"), ""),
             {True: "written", False: "not written"}.get(target.get("cache_written"), "")]
    return ", ".join(w for w in words if w)


def _num(value) -> str:
    return "" if value is None else str(value)


def _bytes(value) -> str:
    """A byte count as buildx shows one (decimal units: ``38 B``, ``1.20 MB``); ``""`` for none."""
    if value is None:
        return ""
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    return ""  # pragma: no cover


def failed_steps_markdown(targets: Dict[str, dict]) -> List[str]:
    """Markdown lines for each target's failed steps (``failed_steps``): a collapsible block
    naming the target, platform and step, with BuildKit's error and the step's last output lines
    in a fenced block (a fence longer than any run of backticks in them)."""
    lines: List[str] = []
    for name, t in targets.items():
        for step in t.get("failed_steps") or ():
            body = [*step.get("output", []), step.get("error", "")]
            fence = "`" * max(3, 1 + max((len(run) for line in body for run in re.findall(r"`+", line)), default=0))
            where = " ".join(w for w in (name, step.get("platform") or "", step.get("stage") or "") if w)
            lines += ["", f"<details open><summary>{_html(where)}: <code>{_html(clipped(step['step'], 200))}</code> "
                      "failed</summary>", "", fence, *body, fence, "", "</details>"]
    return lines


def to_json(data: dict) -> str:
    """A report as written: UTF-8 JSON, two-space indent, newline at the end."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def make_tests(label: str, results: Sequence[dict]) -> dict:
    """The ``tests`` block of a sitrep: what ``bake-plan test`` ran.

    :param label: the badge label, e.g. ``"upstream-pax tests"``.
    :param results: one entry per test and platform, in run order: ``stage``, ``target``,
        ``platform``, ``test`` (its name), ``command`` (a string run by ``sh -c``, or an argv
        list), ``image`` (the reference run), ``outcome`` (``pass``/``fail``), ``exit_code``
        (``None`` when it never ran: the pull failed), ``duration_s`` (seconds), ``timed_out``,
        ``output`` (its last output lines).
    :returns: ``{"summary", "badge_label", "outcome", "passed", "failed", "total", "results"}``;
        ``outcome`` is ``pass`` when every test passed (none run is a pass too: nothing failed).
    """
    passed = sum(1 for r in results if r["outcome"] == PASS)
    failing = [r for r in results if r["outcome"] != PASS]
    if not results:
        summary = f"{label}: no tests declared"
    else:
        summary = f"{label}: {passed}/{len(results)} passed"
        if failing:
            summary += " (failed: " + ", ".join(f"{r['stage']} {r['platform']} {clipped(r['test'], NAME_CHARS)}"
                                               for r in failing[:5])
            summary += f" and {len(failing) - 5} more)" if len(failing) > 5 else ")"
    return {"summary": summary, "badge_label": label, "outcome": FAIL if failing else PASS,
            "passed": passed, "failed": len(failing), "total": len(results), "results": list(results)}


def tests_badge(tests: dict) -> dict:
    """The shields.io endpoint badge of a ``tests`` block: ``"5/6 passed"``; brightgreen when all
    passed, red when none did, yellow between (JAX-Toolbox's test badges); ``"no tests"`` grey."""
    passed, total = tests["passed"], tests["total"]
    if not total:
        message, color = "no tests", "lightgrey"
    else:
        message = f"{passed}/{total} passed"
        color = "brightgreen" if passed == total else ("red" if passed == 0 else "yellow")
    return {"schemaVersion": 1, "label": tests["badge_label"], "message": message, "color": color}


SUMMARY_BYTES = 1_000_000
"""The most bytes a Markdown summary may have (``sitrep.md``; what ``bake-plan test`` appends to
``$GITHUB_STEP_SUMMARY``, with what the file already holds): GitHub drops a step summary over
1 MiB whole. Past it, the failing tests' output blocks (then table rows) are left out, and one line
says how many."""

NAME_CHARS = 200
"""How many characters of a test's name (by default its command) a summary shows."""


def tests_markdown(tests: dict, limit: int = SUMMARY_BYTES) -> str:
    """The tests section of the Markdown summary: the outcome line, one table row per test and
    platform, and the last output lines of each failing test in a fenced block; at most ``limit``
    bytes (UTF-8): what does not fit is left out, and its last line says so. Every value from a
    plugin or a test (names, output) is escaped (:func:`markdown_text`)."""
    icon = "✅" if tests["outcome"] == PASS else "❌"
    head = [f"### {icon} {markdown_text(tests['summary'])}", ""]
    rows: List[str] = []
    if tests["results"]:
        rows += ["| stage | platform | test | outcome | exit | seconds |", "|---|---|---|---|---|---|"]
    for r in tests["results"]:
        outcome = r["outcome"] + (" (timed out)" if r["timed_out"] else "")
        cells = [markdown_text(r["stage"], "code"), markdown_text(r["platform"], "cell"),
                 markdown_text(clipped(r["test"], NAME_CHARS), "code"), outcome, _num(r["exit_code"]),
                 _num(r["duration_s"])]
        rows.append("| " + " | ".join(cells) + " |")
    blocks = []
    for r in tests["results"]:
        if r["outcome"] == PASS:
            continue
        fence = "`" * max(3, 1 + max((len(run) for line in r["output"] for run in re.findall(r"`+", line)), default=0))
        what = markdown_text(f"{r['stage']} {r['platform']} {clipped(r['test'], NAME_CHARS)}", "html")
        blocks.append(["", f"<details><summary>{what}: last output lines</summary>", "", fence, *r["output"], fence,
                       "", "</details>"])
    return _within(head, rows, blocks, limit)


def _within(head: List[str], rows: List[str], blocks: List[List[str]], limit: int,
            why: Optional[str] = None) -> str:
    """``head``, ``rows`` and ``blocks`` as Markdown lines, as many as fit in ``limit`` bytes with
    the line that says what was left out (the rows first, then the blocks, in order) and ``why``
    (default: the bound and that ``sitrep.json`` has every result). The head and that line are
    always there: a ``limit`` too small for them is the caller's to refuse
    (:func:`bake.run.release.append_summary`)."""
    size = lambda lines: sum(len(line.encode("utf-8", "replace")) + 1 for line in lines)  # noqa: E731
    room = limit - size(head) - 200  # the closing line
    out, left_rows, left_blocks = list(head), 0, 0
    for row in rows:
        if size([row]) <= room and not left_rows:
            out.append(row)
            room -= size([row])
        else:
            left_rows += 1
    for block in blocks:
        if size(block) <= room and not left_rows and not left_blocks:
            out += block
            room -= size(block)
        else:
            left_blocks += 1
    if left_rows or left_blocks:
        parts = [counted(n, what) for n, what in ((left_rows, "table row"), (left_blocks, "output block")) if n]
        if why is None:
            why = f"the summary is kept under {max(limit, 0):,} bytes; sitrep.json has every result"
        out += ["", f"_{' and '.join(parts)} left out: {why}_"]
    return "\n".join(out) + "\n"


_MARKDOWN_INLINE = re.compile(r"[\\`*_\[\]|~#!&<>\"]|:(?=//)|(?<=[wW]{3})\.|@")
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def markdown_text(text: str, context: str = "inline") -> str:
    """``text`` from a user, a plugin, a test or buildx, as it is to read in the Markdown summary
    (GitHub Flavored Markdown): the one escaping of the summaries. Every line break becomes a space
    (a heading, a table row, an HTML line is one line), every other control character (ESC, a
    bidirectional control) is written as its escape (:func:`bake.plan.text.printable`: ``\\x1b``),
    and by ``context``:

    - ``inline`` (a heading, the text of a table cell): ``&``, ``<``, ``>``, ``"`` as HTML
      entities (no tag, no ``<…>`` autolink), and each of ``\\ ` * _ [ ] | ~ # !`` and what
      starts an autolink (``://``, ``www.``, ``@``) escaped with a backslash, so no emphasis,
      link, image, strikethrough or extra cell;
    - ``cell``: the same (a table cell);
    - ``code``: a code span in a table cell: backticks become ``'``, ``|`` is ``\\|`` (GFM
      splits the row before it reads the span);
    - ``html``: inside a raw HTML line (``<summary>``): only the HTML entities.
    """
    text = printable(_LINE_BREAK.sub(" ", text))
    if context == "code":
        return "`" + text.replace("`", "'").replace("|", "\\|") + "`"
    if context == "html":
        return re.sub(r'[&<>"]', lambda m: _ENTITIES[m.group()], text)
    return _MARKDOWN_INLINE.sub(lambda m: _ENTITIES.get(m.group()) or "\\" + m.group(), text)


def _cell(text: str) -> str:
    """Text in a Markdown table cell, as code (:func:`markdown_text`)."""
    return markdown_text(text, "code")


def _html(text: str) -> str:
    """Text in a raw HTML line (:func:`markdown_text`)."""
    return markdown_text(text, "html")
