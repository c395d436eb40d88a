"""The publish gate: which images' floating tags may move, from the nightly's sitreps.

A nightly builds and tests each arch in its own job; each job's ``sitrep.json`` says which targets
built (``targets.<name>.outcome`` for its ``platforms``) and, after ``bake-plan test``, which image
tests passed (``tests.results``: stage, target, platform, test, outcome) and which distributions
each tested image holds (``tests.installed``). :class:`Evidence` is what all of them say together
(read by :func:`bake.settings.sitreps.read_sitreps`, which takes the files as untrusted input).

The policy (:func:`decide`):

- **dated tags** (``nightly-DATE``, ``mealkit-DATE``: a tag naming the day) of an image are
  published when the image built on every arch it is published for;
- **floating tags** (``latest``, ``mealkit``, a variant's own tag: every other tag) of an image
  move only when it and every ancestor in its chain built on every arch, every image test of
  their stages passed on every arch (a stage that declares tests for an arch and has no result
  there is held too: nothing says they passed), and the distributions installed agree across
  arches (:func:`arch_differences`);
- an image held back keeps its floating tags where they were, and the report names why: which
  arch, which test, which ancestor.

The outcome of each image is recorded on its dated index as the annotation :data:`GATE_ANNOTATION`
(``pass`` or ``held``), so ``bake-plan promote`` can later refuse a date whose images did not pass.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

from bake.plan.compose import Composition, target_names
from bake.plan.names import PLATFORM_ARCH

PASS = "pass"
GATE_ANNOTATION = "org.bake-plan.gate"
"""The index annotation ``publish --sitrep`` writes on each dated multi-arch index: ``pass`` (its
floating tags could move) or ``held`` (they could not); ``promote`` reads it."""

GATE_REASON_ANNOTATION = "org.bake-plan.gate.reason"
"""Beside :data:`GATE_ANNOTATION` on a held image: the first reason, cut to 200 characters."""


def arch_of_platform(platform: str) -> str:
    """``linux/arm64`` → ``arm64``; a platform bake-plan does not know stays as it is."""
    return PLATFORM_ARCH.get(platform, platform)


@dataclass(frozen=True)
class TestResult:
    """One image test on one arch, as a test sitrep gave it."""

    stage: str
    target: str
    arch: str
    test: str
    outcome: str


@dataclass
class Evidence:
    """What the given sitreps say, merged.

    :param builds: ``(target, arch)`` → outcome (``pass``, ``fail``, ``not built``…); when two
        sitreps disagree, anything but ``pass`` wins (a failure is never hidden by another file).
    :param tests: every test result, in file order.
    :param installed: ``(target, arch)`` → ``{distribution name (normalised): version}`` of the
        tested image (from ``tests.installed``); absent when the test sitrep did not record it.
    :param files: the sitrep files read, for the report.
    """

    builds: Dict[Tuple[str, str], str] = field(default_factory=dict)
    tests: List[TestResult] = field(default_factory=list)
    installed: Dict[Tuple[str, str], Dict[str, str]] = field(default_factory=dict)
    files: List[str] = field(default_factory=list)

    def add_build(self, target: str, arch: str, outcome: str) -> None:
        """Record a build outcome (a non-``pass`` one wins over a ``pass`` for the same key)."""
        if self.builds.get((target, arch)) in (None, PASS):
            self.builds[(target, arch)] = outcome


def is_dated(tag: str, date: datetime.date) -> bool:
    """Whether an image reference's tag names ``date`` (``…:nightly-2026-11-29``,
    ``…:mealkit-2026-11-29``): a dated tag, written once; every other tag floats."""
    return date.isoformat() in tag.rsplit("/", 1)[-1].partition(":")[2]


def ancestors(plan: dict, name: str) -> List[str]:
    """The targets ``name`` builds on, directly or not (its ``target:`` named contexts), nearest
    first, each once; targets outside ``plan`` are left out."""
    targets = plan["target"]
    out: List[str] = []
    queue = [name]
    while queue:
        current = queue.pop(0)
        for value in targets.get(current, {}).get("contexts", {}).values():
            if isinstance(value, str) and value.startswith("target:"):
                parent = value[len("target:"):]
                if parent in targets and parent not in out and parent != name:
                    out.append(parent)
                    queue.append(parent)
    return out


def arch_differences(installed: Mapping[str, Mapping[str, str]]) -> List[str]:
    """Distributions that differ between arches: ``arch`` → ``{name: version}``; one line per
    distribution present on some arches only or at different versions
    (``numpy: 1.26.4 on amd64, 2.0.0 on arm64``; ``absent`` where missing). Fewer than two
    arches: no differences."""
    if len(installed) < 2:
        return []
    arches = sorted(installed)
    names = sorted({n for dists in installed.values() for n in dists})
    out = []
    for name in names:
        seen = {arch: installed[arch].get(name) for arch in arches}
        if len(set(seen.values())) > 1:
            out.append(f"{name}: " + ", ".join(f"{v or 'absent'} on {a}" for a, v in seen.items()))
    return out


@dataclass(frozen=True)
class Decision:
    """The gate's answer for one image (bake target).

    :param dated: its dated tags may be published (it built on every arch).
    :param floating: its floating tags may move.
    :param reasons: why not, one line each (empty when ``floating``).
    """

    target: str
    dated: bool
    floating: bool
    reasons: Tuple[str, ...] = ()


def _stage_of(composition: Composition) -> Dict[str, str]:
    return {tname: stage.name for stage in composition.stages.values() for tname, _ in target_names(stage)}


def decide(composition: Composition, evidence: Evidence, limit: int = 20) -> Dict[str, Decision]:
    """The gate's :class:`Decision` of every published target of ``composition`` (a multi-arch
    plan, as ``publish`` composes it), from ``evidence``.

    :param limit: at most this many reasons are kept per image (the count of the rest is said).
    :returns: target name → decision, in plan order.
    """
    plan = composition.plan
    stage_of = _stage_of(composition)
    out: Dict[str, Decision] = {}
    for name, target in plan["target"].items():
        if "platforms" not in target:  # docker/metadata-action's target, only inherited from
            continue
        arches = [arch_of_platform(p) for p in target["platforms"]]
        own = [a for a in arches if evidence.builds.get((name, a)) != PASS]
        reasons: List[str] = []
        for who in _chain(plan, name, stage_of):
            role = "" if stage_of.get(who) == stage_of.get(name) else f"ancestor {stage_of.get(who, who)}: "
            for arch in arches:
                outcome = evidence.builds.get((who, arch))
                if outcome is None:
                    reasons.append(f"{role}no build sitrep for {who} on {arch}")
                elif outcome != PASS:
                    reasons.append(f"{role}{who} {outcome if outcome != 'fail' else 'failed'} on {arch}")
            reasons += _test_reasons(composition, stage_of.get(who), arches, evidence, role)
            for line in arch_differences({a: evidence.installed[(who, a)] for a in arches
                                          if (who, a) in evidence.installed}):
                reasons.append(f"{role}{who}: arches differ: {line}")
        reasons = list(dict.fromkeys(reasons))  # a meal kit and its final share their stage's tests
        if len(reasons) > limit:
            reasons = reasons[:limit] + [f"and {len(reasons) - limit} more"]
        out[name] = Decision(name, dated=not own, floating=not reasons, reasons=tuple(reasons))
    return out


def _chain(plan: dict, name: str, stage_of: Mapping[str, str]) -> List[str]:
    """``name``, the targets it builds on, and every other target of their stages (a stage passes
    or fails as a whole: a meal kit whose final image failed is held too), each once."""
    by_stage: Dict[str, List[str]] = {}
    for target in plan["target"]:
        if target in stage_of:
            by_stage.setdefault(stage_of[target], []).append(target)
    out: List[str] = []
    for who in [name, *ancestors(plan, name)]:
        for target in [who, *by_stage.get(stage_of.get(who, ""), [])]:
            if target not in out:
                out.append(target)
    return out


def _test_reasons(composition: Composition, stage_name: Optional[str], arches: Sequence[str], evidence: Evidence,
                  role: str) -> List[str]:
    """Why the tests of a stage hold an image back: a failed test, or declared tests with no result."""
    if stage_name is None:
        return []
    stage = composition.stages.get(stage_name)
    reasons = []
    for arch in arches:
        results = [r for r in evidence.tests if r.stage == stage_name and r.arch == arch]
        for result in results:
            if result.outcome != PASS:
                reasons.append(f"{role}test '{result.test}' of {stage_name} failed on {arch}")
        declared = [t for t in (stage.tests if stage else ()) if not t.platforms
                    or arch in {arch_of_platform(p) for p in t.platforms}]
        ran = {r.test for r in results}
        for test in declared:
            if test.label not in ran:
                reasons.append(f"{role}no result of test '{test.label}' of {stage_name} on {arch}")
    return reasons


def floating_of(decisions: Mapping[str, Decision]) -> Set[str]:
    """The targets whose floating tags may move."""
    return {name for name, d in decisions.items() if d.floating}
