"""Execution: run a written plan with buildx and report what happened (the sitrep)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from bake import engine, sitrep
from bake.compose import DEFAULT_GROUP, Composition
from bake.errors import OutputError
from bake.output import write_atomic


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

    :returns: the sitrep; its ``outcome`` is ``pass`` or ``fail``. A failed build still writes
        all three files, naming the failing target.
    :raises bake.engine.EngineError: the engine cannot be reached (nothing was built).
    :raises bake.errors.OutputError: a report file cannot be written.
    """
    try:  # where the reports go, before anything is built: a bad path is bad input (exit 2)
        sitrep_dir.mkdir(parents=True, exist_ok=True)
        metadata_file.parent.mkdir(parents=True, exist_ok=True)
        if metadata_file.exists():
            metadata_file.unlink()  # a stale file would report digests of an older build
    except OSError as err:
        raise OutputError(f"cannot prepare {err.filename}: {err.strerror}") from None
    if not engine.engine_reachable():
        host = os.environ.get("DOCKER_HOST", "the default socket")
        raise engine.EngineError(f"cannot reach a Docker engine at {host} (is dockerd running? is DOCKER_HOST right?)")
    run = engine.bake(plan_file, [DEFAULT_GROUP], metadata_file, push=push, load=load, builder=builder,
                      extra_files=composition.bake_files)
    label = f"{', '.join(composition.requested)} build"
    report = sitrep.make_sitrep(composition.plan, label, run.returncode, run.failed, run.metadata,
                                engine.build_record, error=run.error, steps=run.steps,
                                failed_steps=run.failed_steps, exported=run.exported)
    write_atomic(str(sitrep_dir / "sitrep.json"), sitrep.to_json(report), "the sitrep")
    write_atomic(str(sitrep_dir / "badge.json"), sitrep.to_json(sitrep.badge(report)), "the badge")
    summary = sitrep.markdown(report)
    write_atomic(str(sitrep_dir / "sitrep.md"), summary, "the summary")
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(summary)
    return report
