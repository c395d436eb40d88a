"""The situation report ("sitrep") of a build, in JAX-Toolbox's shape.

Three files: ``sitrep.json`` (``summary``, ``badge_label``, ``outcome``, per target: outcome,
tags, digest, duration in seconds, steps cached and run), a shields.io endpoint badge
(https://shields.io/badges/endpoint-badge: ``schemaVersion``, ``label``, ``message``, ``color``)
and a Markdown summary fit for ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import json
from typing import Callable, Dict, List, Optional, Sequence

PASS, FAIL, NOT_BUILT = "pass", "fail", "not built"


def make_sitrep(
    plan: dict,
    label: str,
    returncode: int,
    failed: Sequence[str],
    metadata: Dict[str, dict],
    record: Callable[[str], Optional[dict]],
    error: str = "",
    steps: Optional[Dict[str, Dict[str, int]]] = None,
) -> dict:
    """Build the sitrep of one bake run.

    :param plan: the plan that was built (buildx's JSON shape).
    :param label: the badge label, e.g. ``"upstream-pax build"``.
    :param failed: targets buildx named as failing.
    :param metadata: the ``--metadata-file`` content, by target.
    :param record: ``buildx.build.ref`` → BuildKit's build record (``Duration`` in ns) or ``None``.
    :param steps: per target, Dockerfile steps ``{"cached": n, "run": m}`` read from the progress.
    :returns: the ``sitrep.json`` content; ``outcome`` is ``fail`` when buildx failed or any
        target did not build.
    """
    failed = set(failed)
    # BuildKit names a step shared by a final and its meal kit after either target, so a meal
    # kit's failing step may be reported under the final: a meal kit that did not build under a
    # failed final is where it failed.
    for name in list(failed):
        mealkit = plan["target"].get(name, {}).get("contexts", {}).get("mealkit", "")
        if mealkit.startswith("target:") and mealkit[len("target:"):] not in metadata:
            failed.add(mealkit[len("target:"):])
    targets: Dict[str, dict] = {}
    built = plan.get("group", {}).get("default", {}).get("targets") or list(plan["target"])
    for name in built:  # the default group: not targets only inherited from (docker/metadata-action)
        target = plan["target"][name]
        meta = metadata.get(name, {})
        entry = {
            "outcome": PASS if meta else (FAIL if name in failed else NOT_BUILT),
            "tags": list(target.get("tags", [])),
            "digest": meta.get("containerimage.digest"),
            "duration_s": None,
            "steps_cached": None,
            "steps_run": None,
        }
        ref = meta.get("buildx.build.ref")
        rec = record(ref) if ref else None
        if rec and rec.get("Duration") is not None:
            entry["duration_s"] = round(int(rec["Duration"]) / 1e9, 3)
        if steps is not None:
            counted = steps.get(name, {"cached": 0, "run": 0})
            entry["steps_cached"], entry["steps_run"] = counted["cached"], counted["run"]
        targets[name] = entry
    if returncode != 0 and not any(t["outcome"] == FAIL for t in targets.values()):
        # buildx failed without naming a target: every target it did not finish failed.
        for entry in targets.values():
            if entry["outcome"] == NOT_BUILT:
                entry["outcome"] = FAIL
    failing = [n for n, t in targets.items() if t["outcome"] == FAIL]
    outcome = PASS if returncode == 0 and all(t["outcome"] == PASS for t in targets.values()) else FAIL
    if outcome == PASS:
        summary = f"{label}: all {len(targets)} targets built"
    else:
        summary = f"{label}: failed: {', '.join(failing) or 'the build'}"
        if error:
            summary += f" ({error.strip()[:200]})"
    return {"summary": summary, "badge_label": label, "outcome": outcome, "targets": targets}


def badge(sitrep: dict) -> dict:
    """The shields.io endpoint badge of a sitrep."""
    ok = sitrep["outcome"] == PASS
    return {"schemaVersion": 1, "label": sitrep["badge_label"], "message": PASS if ok else FAIL,
            "color": "brightgreen" if ok else "red"}


def markdown(sitrep: dict) -> str:
    """A Markdown summary: the outcome line and one table row per target."""
    icon = "✅" if sitrep["outcome"] == PASS else "❌"
    lines: List[str] = [f"## {icon} {sitrep['summary']}", "",
                        "| target | outcome | digest | seconds | steps cached | steps run | tags |",
                        "|---|---|---|---|---|---|---|"]
    for name, t in sitrep["targets"].items():
        digest = (t["digest"] or "")[:19]
        cells = [f"`{name}`", t["outcome"], f"`{digest}`" if digest else "",
                 _num(t["duration_s"]), _num(t["steps_cached"]), _num(t["steps_run"]),
                 "<br>".join(f"`{tag}`" for tag in t["tags"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(value) -> str:
    return "" if value is None else str(value)


def to_json(data: dict) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
