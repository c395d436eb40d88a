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
  there is held too: nothing says they passed), the distributions installed agree across
  arches (:func:`arch_differences`: a difference the stage declares, ``Stage.arch_differences``,
  or its per-arch locks predict is not one), and the image's size on its largest arch is at most
  ``size_ratio`` times its size on the smallest (:func:`size_reason`; default
  :data:`DEFAULT_SIZE_RATIO`);
- an image held back keeps its floating tags where they were, and the report names why: which
  arch, which test, which ancestor.

The outcome of each image is recorded on its dated index as the annotation :data:`GATE_ANNOTATION`
(``pass`` or ``held``), so ``bake-plan promote`` can later refuse a date whose images did not pass.
"""

from __future__ import annotations

import datetime
import fnmatch
import math
import re
from dataclasses import dataclass, field
from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from bake.plan.compose import Composition, target_names
from bake.plan.names import PLATFORM_ARCH

PASS = "pass"
DEFAULT_SIZE_RATIO = 2.0
"""The largest arch's image may be at most this many times the size of the smallest arch's before
its floating tags are held (``publish --arch-size-ratio``, ``arch-size-ratio``): an arm64 image of
765 MB beside an amd64 one of 4,454 MB lacks what the other has."""
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
    :param sizes: ``(target, arch)`` → the tested image's size in bytes (from ``tests.sizes``);
        absent when the test sitrep did not record it.
    :param digests: ``(target, arch)`` → ``sha256:…``, the image a one-platform build sitrep
        pushed (its target's ``digest``), which its tests ran on; absent otherwise.
    :param files: the sitrep files read, for the report.
    :param documents: each sitrep file's JSON as read, in the order of ``files`` (the records are
        made from these: the files are read once).
    """

    builds: Dict[Tuple[str, str], str] = field(default_factory=dict)
    tests: List[TestResult] = field(default_factory=list)
    installed: Dict[Tuple[str, str], Dict[str, str]] = field(default_factory=dict)
    sizes: Dict[Tuple[str, str], int] = field(default_factory=dict)
    digests: Dict[Tuple[str, str], str] = field(default_factory=dict)
    files: List[str] = field(default_factory=list)
    documents: List[dict] = field(default_factory=list)

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


def distribution_name(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: lower case, runs of ``-_.`` one ``-``);
    ``*`` and ``?`` of a pattern are kept."""
    return re.sub(r"[-_.]+", "-", name).lower()


def arch_differences(installed: Mapping[str, Mapping[str, str]],
                     expected: Optional[Mapping[str, Sequence[str]]] = None,
                     predicted: AbstractSet[str] = frozenset()) -> List[str]:
    """Distributions that differ between arches: ``arch`` → ``{name: version}``; one line per
    distribution present on some arches only or at different versions
    (``numpy: 1.26.4 on amd64, 2.0.0 on arm64``; ``absent`` where missing). Fewer than two
    arches: no differences.

    :param expected: arch → distribution name patterns (``fnmatch``: ``nvidia-*``) that may be
        absent or differ there (``Stage.arch_differences``): such a distribution is compared
        only between the other arches.
    :param predicted: distribution names the stage's per-arch locks already give different
        lines (:func:`bake.pip.lockfiles.lock_differences`): not a difference.
    """
    if len(installed) < 2:
        return []
    arches = sorted(installed)
    names = sorted({n for dists in installed.values() for n in dists})
    out = []
    for name in names:
        if name in predicted:
            continue
        compared = [a for a in arches if not any(fnmatch.fnmatchcase(name, distribution_name(p))
                                                  for p in (expected or {}).get(a, ()))]
        seen = {arch: installed[arch].get(name) for arch in compared}
        if len(set(seen.values())) > 1:
            out.append(f"{name}: " + ", ".join(f"{v or 'absent'} on {a}" for a, v in seen.items()))
    return out


def size_reason(sizes: Mapping[str, int], bound: float = DEFAULT_SIZE_RATIO) -> Optional[str]:
    """Why an image's sizes on its arches (``arch`` → bytes) hold it back, or ``None``: the
    largest is more than ``bound`` times the smallest (exactly ``bound`` times passes; an arch
    of 0 bytes beside a larger one is held). Fewer than two arches: ``None``.

    :returns: ``image size differs between arches: 4,454,000,000 bytes on amd64, 765,000,000
        bytes on arm64 (5.82 times, more than 2)``.
    """
    if len(sizes) < 2:
        return None
    large = max(sorted(sizes), key=lambda a: sizes[a])
    small = min(sorted(sizes), key=lambda a: sizes[a])
    if sizes[large] <= sizes[small] * bound:
        return None
    ratio = sizes[large] / sizes[small] if sizes[small] else math.inf
    times = f"{ratio:.2f} times" if math.isfinite(ratio) else "an empty image beside"
    return (f"image size differs between arches: {sizes[large]:,} bytes on {large}, {sizes[small]:,} bytes on "
            f"{small} ({times}, more than {bound:g})")


@dataclass(frozen=True)
class Decision:
    """The gate's answer for one image (bake target).

    :param dated: its dated tags may be published (it built on every arch).
    :param floating: its floating tags may move.
    :param reasons: why not, one line each (empty when ``floating``).
    :param sizes: ``(arch, bytes)`` of the image's own size per arch, as the test sitreps recorded
        it (empty: none recorded), for the report's arch comparison.
    :param distributions: ``(arch, count)`` of the distributions installed per arch (empty: none recorded).
    :param differing: how many distributions differ between its arches and are held against it
        (declared and predicted differences left out).
    """

    target: str
    dated: bool
    floating: bool
    reasons: Tuple[str, ...] = ()
    sizes: Tuple[Tuple[str, int], ...] = ()
    distributions: Tuple[Tuple[str, int], ...] = ()
    differing: int = 0


def _stage_of(composition: Composition) -> Dict[str, str]:
    return {tname: stage.name for stage in composition.stages.values() for tname, _ in target_names(stage)}


def decide(composition: Composition, evidence: Evidence, limit: int = 20, size_ratio: float = DEFAULT_SIZE_RATIO,
           predicted: Optional[Mapping[str, AbstractSet[str]]] = None) -> Dict[str, Decision]:
    """The gate's :class:`Decision` of every published target of ``composition`` (a multi-arch
    plan, as ``publish`` composes it), from ``evidence``.

    :param limit: at most this many reasons are kept per image (the count of the rest is said).
    :param size_ratio: the bound of :func:`size_reason` (``publish --arch-size-ratio``).
    :param predicted: stage name → distribution names its per-arch locks give different lines
        (:func:`bake.pip.lockfiles.lock_differences`): those differences are not held.
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
        differing = 0
        for who in _chain(plan, name, stage_of):
            role = "" if stage_of.get(who) == stage_of.get(name) else f"ancestor {stage_of.get(who, who)}: "
            for arch in arches:
                outcome = evidence.builds.get((who, arch))
                if outcome is None:
                    reasons.append(f"{role}no build sitrep for {who} on {arch}")
                elif outcome != PASS:
                    reasons.append(f"{role}{who} {outcome if outcome != 'fail' else 'failed'} on {arch}")
            reasons += _test_reasons(composition, stage_of.get(who), arches, evidence, role)
            stage = composition.stages.get(stage_of.get(who, ""))
            expected = {arch_of_platform(p): tuple(names) for p, names in
                        (getattr(stage, "arch_differences", None) or {}).items()}
            differences = arch_differences({a: evidence.installed[(who, a)] for a in arches
                                            if (who, a) in evidence.installed}, expected,
                                           (predicted or {}).get(stage_of.get(who, ""), frozenset()))
            if who == name:
                differing = len(differences)
            for line in differences:
                reasons.append(f"{role}{who}: arches differ: {line}")
            size = size_reason({a: evidence.sizes[(who, a)] for a in arches if (who, a) in evidence.sizes},
                               size_ratio)
            if size:
                reasons.append(f"{role}{who}: {size}")
        reasons = list(dict.fromkeys(reasons))  # a meal kit and its final share their stage's tests
        if len(reasons) > limit:
            reasons = reasons[:limit] + [f"and {len(reasons) - limit} more"]
        out[name] = Decision(name, dated=not own, floating=not reasons, reasons=tuple(reasons),
                             sizes=tuple((a, evidence.sizes[(name, a)]) for a in arches if (name, a) in evidence.sizes),
                             distributions=tuple((a, len(evidence.installed[(name, a)])) for a in arches
                                                 if (name, a) in evidence.installed),
                             differing=differing)
    return out


def moved_since_tested(decisions: Mapping[str, Decision], evidence: Evidence,
                       now: Mapping[Tuple[str, str, str], Optional[str]]) -> Dict[str, Decision]:
    """``decisions`` with every image held (dated and floating tags alike) whose per-arch tag no
    longer holds the image its build sitrep pushed and tested: a later build moved it, so what
    publishing would merge is not what passed.

    :param now: ``(target, arch, per-arch tag)`` → the digest the registry gives for that tag now
        (``None``: no such image; said elsewhere as missing).
    :returns: target name → decision, in the order of ``decisions``.
    """
    reasons: Dict[str, List[str]] = {}
    for (target, arch, tag), digest in now.items():
        tested = evidence.digests.get((target, arch))
        if tested and digest and digest != tested:
            reasons.setdefault(target, []).append(
                f"{tag} now holds {digest[:19]}…, not {tested[:19]}…, which its sitrep built and tested "
                "(a later build moved the tag)")
    out: Dict[str, Decision] = {}
    for name, decision in decisions.items():
        if name in reasons:
            decision = Decision(name, dated=False, floating=False,
                                reasons=tuple(dict.fromkeys([*reasons[name], *decision.reasons])),
                                sizes=decision.sizes, distributions=decision.distributions,
                                differing=decision.differing)
        out[name] = decision
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
