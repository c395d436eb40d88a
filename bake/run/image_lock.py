"""``bake-plan lock --in-image``: the final stage's own compile, run in the meal kit it is built on.

A meal kit may write a requirement line at build time, naming a wheel built in the image
(JAX-Toolbox: a ``kind="single"`` wheel-builder stage makes the wheel, the meal kit copies it in
through ``uses`` and writes ``name @ file:///opt/…/name-1.0-py3-none-any.whl``). The host lock
(:mod:`bake.pip.lock`) never sees such a line. This module makes the lock where the line is: for
each requested stage it adds one bake target, ``<stage>-pip-compile``, to the plan:

- ``FROM`` the stage's meal kit (the named context ``bake-plan-mealkit`` = ``target:<stage>-mealkit``,
  so the meal kits are built, from the build cache when nothing changed);
- one ``RUN`` of ``stages/scripts/pip-finalize.sh`` with ``BAKE_PIP_COMPILE_ONLY``: the compile
  the final stage runs (one ``pip-compile`` of every ``requirements-*.in``, with the image's own
  Python and pip settings, the plan's ``PIP_*`` args and ``wheelhouse`` context), no sync;
- ``FROM scratch`` with the compiled lock and the image's Python version, exported with
  ``output = type=local`` into a directory on the host.

The caller (``bake.commands.lock``) puts the header on each compiled lock
(:func:`bake.pip.image_lock.lock_texts`), so ``--locked`` takes it like a host lock. Everything
here is plain data in and out: this module does not import :mod:`bake.pip`.
"""

from __future__ import annotations

import collections
import copy
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Deque, Dict, Optional, Sequence, Tuple

from bake.errors import LockError
from bake.output import write_atomic
from bake.patterns import LazyPattern
from bake.plan.names import target_name
from bake.plan.render import read_paths
from bake.resources import stages_dir
from bake.run import engine

STEP_LINES = 15
"""How many of the last lines the build's steps printed a failed compile shows (pip-compile's reason)."""

_STEP_LINE = LazyPattern(r"^#(\d+) (.*)$")
"""A line of a step, as :class:`bake.run.progress.ProgressReader` shows it (``#12 text``)."""

_STEP_STATUS = LazyPattern(r"^(DONE|CACHED|WARN:|sha256:|\[internal\]|transferring|resolve |naming |exporting )")
"""A step's line that is buildx's status, not what the step printed."""

SUFFIX = "-pip-compile"
"""The bake target of a stage's in-image compile: ``<stage>-pip-compile``."""

MEALKIT_CONTEXT = "bake-plan-mealkit"
"""The named context the compile starts ``FROM``: ``target:<stage>-mealkit``."""

OUT = "/opt/bake-plan-lock"
"""Where the compile writes ``requirements.txt`` and ``python`` in the image."""

DOCKERFILE = f"""\
# bake-plan lock --in-image: the final stage's compile (bake-pip-finalize), nothing synced.
FROM scratch AS wheelhouse
FROM {MEALKIT_CONTEXT} AS compile
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
ARG PIP_TRUSTED_HOST
# A new value on every run: the compile runs again (the index may have moved), the meal kits do not.
ARG BAKE_PLAN_LOCK_RUN
RUN --mount=type=bind,from=wheelhouse,target=/opt/wheelhouse \\
    --mount=type=bind,target=/opt/bake-plan-scripts \\
    --mount=type=cache,target=/root/.cache \\
    BAKE_PIP_COMPILE_ONLY={OUT} bash /opt/bake-plan-scripts/pip-finalize.sh
FROM scratch
COPY --from=compile {OUT}/ /
"""


@dataclass(frozen=True)
class Compiled:
    """One stage's lock as its image compiled it on one platform.

    :param body: ``requirements.txt`` as ``bake-pip-finalize`` wrote it (index options a stage
        wrote at the top, then the pins, ``# via`` annotations; no header).
    :param python: the image's Python version (``"3.11.2"``).
    """

    body: str
    python: str


def compile_target(plan: dict, stage: str, platforms: Sequence[str], dest: Path) -> dict:
    """The bake target that compiles ``stage``'s lock in its meal kit for ``platforms`` and
    exports it into ``dest`` (a directory; per platform ``<os>_<arch>/`` when there are several).

    It takes the ``PIP_*`` args and the ``wheelhouse`` context of the stage's final target, so pip
    sees what the final stage's pip sees.

    :raises LockError: the plan has no meal kit target for ``stage``.
    """
    targets = plan["target"]
    mealkit = f"{target_name(stage)}-mealkit"
    final = targets.get(target_name(stage), {})
    if mealkit not in targets:
        raise LockError(f"lock --in-image: the plan has no meal kit target {mealkit} of '{stage}' to compile in")
    contexts = {MEALKIT_CONTEXT: f"target:{mealkit}"}
    if "wheelhouse" in final.get("contexts", {}):
        contexts["wheelhouse"] = final["contexts"]["wheelhouse"]
    args = {key: value for key, value in final.get("args", {}).items() if key.startswith("PIP_")}
    args["BAKE_PLAN_LOCK_RUN"] = f"{time.time_ns()}"
    return {"context": str(stages_dir() / "scripts"), "dockerfile-inline": DOCKERFILE, "contexts": contexts,
            "args": args, "platforms": list(platforms), "output": [_csv_row("type=local", f"dest={dest}")]}


def _csv_row(*fields: str) -> str:
    """``fields`` as one CSV row, as buildx reads an ``output`` entry (a path with a comma or a quote
    stays one field)."""
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(fields)
    return out.getvalue()


def lock_plan(plan: dict, wanted: Dict[str, Sequence[str]], out_dir: Path) -> dict:
    """``plan`` (buildx's JSON shape) with a compile target per stage of ``wanted`` (stage →
    platforms), exporting into ``out_dir/<stage>``; nothing else of it writes anything: no target
    pushes, loads, writes a registry cache or attaches attestations (the meal kits are built only
    as the compile's base)."""
    out = copy.deepcopy(plan)
    for target in out["target"].values():
        for key in ("cache-to", "output", "attest", "push", "load"):
            target.pop(key, None)
    for stage, platforms in wanted.items():
        out["target"][target_name(stage) + SUFFIX] = compile_target(plan, stage, platforms, out_dir / stage)
    out["group"] = {"default": {"targets": [target_name(stage) + SUFFIX for stage in wanted]}}
    return out


def _platform_dir(platform: str) -> str:
    """The directory buildx's local exporter gives a platform of a multi-platform build
    (``linux/arm64/v8`` → ``linux_arm64_v8``)."""
    return platform.replace("/", "_")


def check_builder(builder: Optional[str]) -> None:
    """That ``builder`` (``--builder``; ``None``: buildx's own ``BUILDX_BUILDER``, when set) is a
    buildx builder: the check and the one line of ``build`` (:func:`bake.run.engine.check_builder`),
    made before anything is built.

    :raises bake.errors.UsageError: there is no builder of that name (exit 2).
    """
    if builder is not None:
        engine.check_builder(builder)
    elif os.environ.get("BUILDX_BUILDER"):  # buildx's own choice of builder: as much a mistake when wrong
        engine.check_builder(os.environ["BUILDX_BUILDER"], "BUILDX_BUILDER")


def compile_in_images(plan: dict, wanted: Dict[str, Sequence[str]], builder: Optional[str] = None,
                      console: Callable[[str], None] = lambda line: sys.stderr.write(line),
                      buildx: Optional[Tuple[int, int, int]] = None) -> Dict[str, Dict[str, Compiled]]:
    """Build the meal kits of ``wanted`` (stage → platforms) and compile each stage's lock in its
    meal kit, per platform, with one ``docker buildx bake``.

    :param plan: the plan (buildx's JSON shape) the stages' targets come from, as composed for
        their build (base images, wheelhouse, args).
    :param console: where buildx's progress lines go (plain lines, each with its newline).
    :param buildx: the buildx version (``None``: unknown), for the ``--allow`` entitlements.
    :returns: stage → platform → :class:`Compiled`.
    :raises LockError: the compile failed in an image (the requirements conflict, a wheel is
        missing…): one line with buildx's last error, the failing steps as details.
    :raises bake.run.engine.EngineError: no engine or buildx (nothing was built).
    """
    with tempfile.TemporaryDirectory(prefix="bake-plan-lock-in-image-") as tmp:
        tmp_path = Path(tmp)
        out_dir = tmp_path / "out"
        full = lock_plan(plan, wanted, out_dir)
        plan_file = tmp_path / "docker-bake.json"
        write_atomic(str(plan_file), json.dumps(full, indent=2) + "\n", "the in-image lock's plan")
        grant = buildx is None or buildx[:2] >= engine.FS_ENTITLEMENTS
        argv = engine.bake_command(plan_file, ["default"], tmp_path / "metadata.json", builder=builder,
                                   allow=read_paths(full) if grant else ())
        if grant:
            argv[2:2] = [f"--allow=fs.write={out_dir}"]
        said: Dict[str, Deque[str]] = {}  # step number → its last lines, as the console showed them
        state = {"blank": True, "failed": None}

        def show(line: str) -> None:
            step = _STEP_LINE.match(line.rstrip("\n"))
            if step:
                number, text = step.groups()
                if text.startswith("ERROR:"):
                    state["failed"] = state["failed"] or number
                elif not state["blank"] and not _STEP_STATUS.match(text) and text.strip(" ^"):
                    # not the step's name (shown after a blank line), buildx's status or a traceback's ^^^ marks
                    said.setdefault(number, collections.deque(maxlen=STEP_LINES)).append(text.rstrip())
            state["blank"] = not line.strip()
            console(line)

        run = engine.bake(argv, tmp_path / "metadata.json", console=show, plan=full)
        if run.interrupted:
            raise KeyboardInterrupt
        if run.returncode != 0:
            steps = [f"{target}: {instruction}" for target, _, instruction in run.failed_steps]
            raise LockError(f"lock --in-image: the compile in the image of "
                            f"{', '.join(repr(s) for s in wanted)} failed: {run.error or 'buildx failed'}",
                            [*steps, *said.get(state["failed"] or "", ())])
        compiled: Dict[str, Dict[str, Compiled]] = {}
        for stage, platforms in wanted.items():
            compiled[stage] = {}
            for platform in platforms:
                where = out_dir / stage / (_platform_dir(platform) if len(platforms) > 1 else "")
                try:
                    body = (where / "requirements.txt").read_text(encoding="utf-8")
                    python = (where / "python").read_text(encoding="utf-8").strip()
                except OSError as err:
                    raise LockError(f"lock --in-image: the compile of '{stage}' for {platform} exported no lock "
                                    f"({err.strerror or err})") from None
                if not re.fullmatch(r"\d+\.\d+(\.\d+)?", python):
                    raise LockError(f"lock --in-image: the image of '{stage}' for {platform} did not say its "
                                    f"Python version (it said {python[:40]!r})")
                compiled[stage][platform] = Compiled(body, python)
        return compiled
