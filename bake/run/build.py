"""Execution: run a written plan with buildx and report what happened (the sitrep)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from bake.errors import OutputError
from bake.output import write_atomic
from bake.plan.compose import DEFAULT_GROUP, Composition
from bake.run import engine, sitrep


def run_build(
    composition: Composition,
    plan_file: Path,
    sitrep_dir: Path,
    metadata_file: Path,
    push: bool = False,
    load: bool = False,
    builder: Optional[str] = None,
) -> dict:
    """Build the plan's ``default`` group (every target of the chain, so meal kits are tagged and
    pushed too) and write ``sitrep.json``, ``badge.json`` and ``sitrep.md`` in ``sitrep_dir``; the
    Markdown is appended to ``$GITHUB_STEP_SUMMARY`` when that is set (GitHub Actions).

    :returns: the sitrep; its ``outcome`` is ``pass`` or ``fail``, and ``interrupted`` is true
        when Ctrl-C or SIGTERM stopped the build. A failed or interrupted build still writes all
        three files, naming the failing target.
    :raises bake.run.engine.EngineError: the engine cannot be reached (nothing was built).
    :raises bake.errors.OutputError: a report file cannot be written.
    """
    try:  # where the reports go, before anything is built: a bad path is bad input (exit 2)
        sitrep_dir.mkdir(parents=True, exist_ok=True)
        metadata_file.parent.mkdir(parents=True, exist_ok=True)
        if metadata_file.exists():
            metadata_file.unlink()  # a stale file would report digests of an older build
    except OSError as err:
        raise OutputError(f"cannot prepare {err.filename}: {err.strerror}") from None
    for directory in dict.fromkeys([sitrep_dir, metadata_file.parent]):
        try:  # writable now, so a finished build is never lost for want of a report
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".bake-plan-probe-"):
                pass
        except OSError as err:
            raise OutputError(f"cannot write reports in {directory}: {err.strerror or err}") from None
    if not engine.engine_reachable():
        host = os.environ.get("DOCKER_HOST", "the default socket")
        raise engine.EngineError(f"cannot reach a Docker engine at {host} (is dockerd running? is DOCKER_HOST right?)")
    built = composition.plan["group"][DEFAULT_GROUP]["targets"]
    run = engine.bake(plan_file, [DEFAULT_GROUP], metadata_file, push=push, load=load, builder=builder,
                      extra_files=composition.bake_files, sole_target=built[0] if len(built) == 1 else None,
                      plan=composition.plan)
    label = f"{', '.join(composition.requested)} build"
    report = sitrep.make_sitrep(composition.plan, label, run.returncode, run.failed, run.metadata,
                                engine.build_record, error=run.error, steps=run.steps,
                                failed_steps=run.failed_steps, exported=run.exported)
    report["interrupted"] = run.interrupted
    if run.interrupted:  # cancelled, not broken: what did not finish was not built
        for entry in report["targets"].values():
            if entry["outcome"] == sitrep.FAIL and not entry["digest"]:
                entry["outcome"] = sitrep.NOT_BUILT
        report["summary"] = f"{label}: interrupted"
    write_atomic(str(sitrep_dir / "sitrep.json"), sitrep.to_json(report), "the sitrep")
    write_atomic(str(sitrep_dir / "badge.json"), sitrep.to_json(sitrep.badge(report)), "the badge")
    summary = sitrep.markdown(report)
    write_atomic(str(sitrep_dir / "sitrep.md"), summary, "the summary")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(summary)
    return report
