"""Publishing with a gate, all or nothing, and promoting a dated night: the registry side.

``publish --sitrep`` (:func:`publish_gated`) makes each image's multi-arch indexes from the
per-arch images pinned by the digests it checked: first every dated index (``nightly-DATE``,
annotated with the gate's outcome, :data:`bake.plan.gate.GATE_ANNOTATION`), then it moves each
floating tag (``latest``) of an image that passed onto the dated index of the same per-arch
images (one source that is an index is pushed as it is: the floating tag gets the very digest of
the dated one). Before any floating tag moves, the digest it points at is recorded; with
``all_or_nothing`` a move that fails part-way puts every tag already moved back on its recorded
digest (a tag that did not exist before cannot be put back: the report says it stays).

``promote`` (:func:`promote`) moves the floating tags of a chain's images onto the dated indexes
of another night, refusing a night whose images did not pass the gate unless forced.

Registry calls are :class:`Registry`'s callables (:mod:`bake.run.engine`'s, each retried by
:func:`bake.run.retry.retrying` in the CLI).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from bake.errors import BakePlanError, OutputError
from bake.run.engine import repository_of
from bake.plan.gate import GATE_ANNOTATION, GATE_REASON_ANNOTATION, PASS, Decision, is_dated
from bake.run.publish import Manifest
from bake.run.sitrep import SUMMARY_BYTES, _bytes, _within, markdown_text


@dataclass
class Registry:
    """The registry calls :func:`publish_gated` and :func:`promote` make.

    :param digest: reference → its digest now, ``None`` when the registry has no such image
        (:func:`bake.run.engine.image_digest`).
    :param create: ``(tag, sources, annotations)``: push a manifest list of ``sources`` as ``tag``
        (:func:`bake.run.engine.create_manifest`).
    :param annotations: reference → the annotations of its index (``{}`` when none), ``None`` when
        the registry has no such image (:func:`bake.run.engine.index_annotations`).
    :param all_exist: references → whether every one is in the registry, in one question
        (:func:`bake.run.engine.all_resolve`); ``None`` asks ``digest`` of each.
    """

    digest: Callable[[str], Optional[str]]
    create: Callable[[str, List[str], Sequence[str]], None]
    annotations: Callable[[str], Optional[Dict[str, str]]] = lambda ref: {}
    all_exist: Optional[Callable[[List[str]], bool]] = None


@dataclass
class Outcome:
    """What :func:`publish_gated` or :func:`promote` did.

    :param created: ``(tag, digest or None)`` of every tag made or moved, in order.
    :param kept: floating tags not moved, with the digest they keep (``None``: the tag does not exist).
    :param missing: per-arch images not in the registry (then nothing was created).
    :param previous: floating tag → its digest before the move (``None``: it did not exist).
    :param rolled_back: ``(tag, digest or None, how)`` of each tag moved before a failure, last
        first: ``how`` is ``restored`` (back on ``digest``), ``new`` (it did not exist before: it
        stays on the new index) or ``failed`` (putting it back failed too; ``digest`` is where it was).
    :param failed: the error line that stopped the work, or ``None``.
    """

    created: List[Tuple[str, Optional[str]]] = field(default_factory=list)
    kept: List[Tuple[str, Optional[str]]] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    previous: Dict[str, Optional[str]] = field(default_factory=dict)
    rolled_back: List[Tuple[str, Optional[str], str]] = field(default_factory=list)
    failed: Optional[str] = None


def _pinned(ref: str, digest: str) -> str:
    return f"{repository_of(ref)}@{digest}"


def gate_annotations(decision: Optional[Decision]) -> List[str]:
    """The ``KEY=VALUE`` annotations of a dated index: the gate's outcome and first reason; none
    when no gate was applied."""
    if decision is None:
        return []
    if decision.floating:
        return [f"{GATE_ANNOTATION}={PASS}"]
    reason = " ".join((decision.reasons[0] if decision.reasons else "held").split())[:200]
    return [f"{GATE_ANNOTATION}=held", f"{GATE_REASON_ANNOTATION}={reason}"]


def select(wanted: Sequence[Manifest], date: datetime.date, decisions: Optional[Mapping[str, Decision]],
           all_or_nothing: bool) -> Tuple[List[Manifest], List[Manifest], List[Manifest]]:
    """``(dated to publish, floating to move, floating held)`` of ``wanted``. Without
    ``decisions`` (no gate) every tag goes. With ``all_or_nothing`` one image held holds every
    floating tag."""
    dated = [m for m in wanted if is_dated(m.tag, date)]
    floating = [m for m in wanted if not is_dated(m.tag, date)]
    if decisions is None:
        return dated, floating, []
    dated = [m for m in dated if m.target not in decisions or decisions[m.target].dated]
    moving = [m for m in floating if m.target not in decisions or decisions[m.target].floating]
    if all_or_nothing and len(moving) < len(floating):
        moving = []
    held = [m for m in floating if m not in moving]
    return dated, moving, held


def publish_gated(wanted: Sequence[Manifest], date: datetime.date, decisions: Optional[Mapping[str, Decision]],
                  registry: Registry, all_or_nothing: bool = False,
                  on_created: Callable[[str, List[str]], None] = lambda tag, sources: None) -> Outcome:
    """Publish ``wanted`` through the gate (see the module's docstring).

    :param decisions: target → the gate's decision (:func:`bake.plan.gate.decide`), ``None``: no gate.
    :param on_created: ``(tag, sources)`` after each tag is made or moved (the CLI prints it at once).
    :returns: what was done; ``missing`` non-empty means nothing was created; ``failed`` says
        what stopped the work part-way (with ``all_or_nothing`` after the rollback).
    :raises bake.errors.BakePlanError: the registry could not be asked whether a source exists
        (nothing was created).
    """
    out = Outcome()
    dated, moving, held = select(wanted, date, decisions, all_or_nothing)
    sources: Dict[str, Optional[str]] = {}
    for manifest in [*dated, *moving]:
        for ref in manifest.sources:
            if ref not in sources:
                sources[ref] = registry.digest(ref)
    out.missing = [ref for ref, digest in sources.items() if digest is None]
    if out.missing:
        return out
    for manifest in [*moving, *held]:
        if manifest.tag not in out.previous:
            out.previous[manifest.tag] = registry.digest(manifest.tag)
    out.kept = [(m.tag, out.previous[m.tag]) for m in held]
    made: Dict[Tuple[str, Tuple[str, ...]], str] = {}  # (repository, source digests) → dated index digest
    try:
        for manifest in dated:  # phase 1: the dated indexes, from the per-arch images by digest
            pinned = [_pinned(ref, sources[ref]) for ref in manifest.sources]
            registry.create(manifest.tag, pinned,
                            gate_annotations(decisions.get(manifest.target) if decisions is not None else None))
            digest = registry.digest(manifest.tag)
            out.created.append((manifest.tag, digest))
            on_created(manifest.tag, manifest.sources)
            if digest:
                made[(repository_of(manifest.tag), tuple(sources[r] for r in manifest.sources))] = digest
    except BakePlanError as err:
        out.failed = f"publishing stopped at {manifest.tag}: {err}"
        return out
    moved: List[str] = []
    try:
        for manifest in moving:  # phase 2: move each floating tag, onto an index made above when one fits
            moved.append(manifest.tag)
            index = made.get((repository_of(manifest.tag), tuple(sources[r] for r in manifest.sources)))
            if index:
                registry.create(manifest.tag, [_pinned(manifest.tag, index)], [])
            else:
                decision = decisions.get(manifest.target) if decisions is not None else None
                registry.create(manifest.tag, [_pinned(ref, sources[ref]) for ref in manifest.sources],
                                gate_annotations(decision))
            out.created.append((manifest.tag, index or registry.digest(manifest.tag)))
            on_created(manifest.tag, manifest.sources)
    except BakePlanError as err:
        out.failed = f"moving {manifest.tag} failed: {err}"
        if all_or_nothing:
            out.rolled_back = roll_back(moved, out.previous, registry)
    return out


def roll_back(moved: Sequence[str], previous: Mapping[str, Optional[str]],
              registry: Registry) -> List[Tuple[str, Optional[str], str]]:
    """Put each tag of ``moved`` (the last one may or may not have moved) back on its digest in
    ``previous``, last moved first. :returns: :attr:`Outcome.rolled_back`'s entries."""
    out: List[Tuple[str, Optional[str], str]] = []
    for tag in reversed(moved):
        before = previous.get(tag)
        if before is None:
            out.append((tag, None, "new"))
            continue
        try:
            registry.create(tag, [_pinned(tag, before)], [])
            out.append((tag, before, "restored"))
        except BakePlanError:
            out.append((tag, before, "failed"))
    return out


@dataclass(frozen=True)
class Promotion:
    """One floating tag to move onto a dated index: ``tag`` (``repo:latest``) ← ``dated``
    (``repo:nightly-2026-11-29``) of image ``target``."""

    target: str
    tag: str
    dated: str


def promotions(wanted: Sequence[Manifest], date: datetime.date) -> Tuple[List[Promotion], List[str]]:
    """The floating tags of each image and the dated tag of the same image and repository they
    move onto; and the images with floating tags but no dated tag of that day (nothing to move to)."""
    out, without = [], []
    by_target: Dict[str, List[Manifest]] = {}
    for manifest in wanted:
        by_target.setdefault(manifest.target, []).append(manifest)
    for target, manifests in by_target.items():
        dated = [m.tag for m in manifests if is_dated(m.tag, date)]
        for manifest in manifests:
            if is_dated(manifest.tag, date):
                continue
            same = [d for d in dated if repository_of(d) == repository_of(manifest.tag)] or dated
            if not same:
                without.append(target)
                continue
            out.append(Promotion(target, manifest.tag, same[0]))
    return out, list(dict.fromkeys(without))


def promote(moves: Sequence[Promotion], registry: Registry, force: bool = False,
            on_moved: Callable[[Promotion, str], None] = lambda move, digest: None) -> Tuple[Outcome, List[str]]:
    """Move every floating tag of ``moves`` onto its dated index, all or nothing.

    Each dated index is looked up first (its digest and its gate annotation); a missing one, or
    one not annotated ``pass`` (held, or published without ``--sitrep``) refuses the whole
    promotion unless ``force`` (a missing one always refuses). The floating tags' digests are
    recorded, then each tag moves; a failure part-way puts the tags already moved back.

    :returns: ``(outcome, refusals)``: when ``refusals`` (one line per image) is non-empty nothing
        was moved.
    :raises bake.errors.BakePlanError: the registry could not be asked (nothing was moved).
    """
    out = Outcome()
    refusals: List[str] = []
    digests: Dict[str, Optional[str]] = {}
    for move in moves:
        if move.dated in digests:
            continue
        digests[move.dated] = registry.digest(move.dated)
        if digests[move.dated] is None:
            refusals.append(f"{move.target}: {move.dated} is not in the registry")
            continue
        notes = registry.annotations(move.dated) or {}
        gate = notes.get(GATE_ANNOTATION)
        if gate != PASS and not force:
            why = notes.get(GATE_REASON_ANNOTATION)
            if gate:
                refusals.append(f"{move.target}: {move.dated} did not pass the gate" + (f" ({why})" if why else ""))
            else:
                refusals.append(f"{move.target}: {move.dated} was published without a gate (publish --sitrep)")
    if refusals:
        return out, refusals
    for move in moves:
        if move.tag not in out.previous:
            out.previous[move.tag] = registry.digest(move.tag)
    moved: List[str] = []
    try:
        for move in moves:
            moved.append(move.tag)
            registry.create(move.tag, [_pinned(move.dated, digests[move.dated])], [])
            out.created.append((move.tag, digests[move.dated]))
            on_moved(move, digests[move.dated])
    except BakePlanError as err:
        out.failed = f"moving {move.tag} failed: {err}"
        out.rolled_back = roll_back(moved, out.previous, registry)
    return out, refusals


def arch_comparison(decision: Optional[Decision]) -> str:
    """The arch comparison of one image as the reports show it: ``amd64 4.45 GB, arm64 765.00 MB
    (5.82×); 120 distributions on amd64, 118 on arm64, 2 differ``; ``""`` when the test sitreps
    recorded neither."""
    if decision is None:
        return ""
    parts = []
    if decision.sizes:
        sizes = dict(decision.sizes)
        text = ", ".join(f"{arch} {_bytes(size)}" for arch, size in decision.sizes)
        if len(sizes) > 1 and min(sizes.values()):
            text += f" ({max(sizes.values()) / min(sizes.values()):.2f}×)"
        parts.append(text)
    if decision.distributions:
        counts = ", ".join(f"{n} on {arch}" if i else f"{n} distributions on {arch}"
                           for i, (arch, n) in enumerate(decision.distributions))
        parts.append(f"{counts}, {decision.differing} differ" if len(decision.distributions) > 1 else counts)
    return "; ".join(parts)


def publish_markdown(date: datetime.date, decisions: Optional[Mapping[str, Decision]],
                     dated: Sequence[Manifest], moving: Sequence[Manifest], kept: Sequence[Manifest],
                     outcome: Optional[Outcome], retries: int = 0, waited_s: float = 0.0,
                     all_or_nothing: bool = False, limit: int = SUMMARY_BYTES, unrecorded: str = "") -> str:
    """The publish summary for ``$GITHUB_STEP_SUMMARY``: a heading, one table row per image
    (its dated tags published, its floating tags moved or held and why, the arch comparison:
    :func:`arch_comparison`), then the retries, a rollback and a failure, at most ``limit`` bytes
    (UTF-8; rows past it are left out and a line says so). Every name, tag and reason is escaped by
    the summaries' one escaping (:func:`bake.run.sitrep.markdown_text`).

    :param outcome: what :func:`publish_gated` did; ``None`` for a dry run (what it would do).
    :param retries: registry calls tried again; ``waited_s`` the seconds waited between them.
    :param unrecorded: why the nightly records could not be pushed (the publish fails), or ``""``.
    """
    done = {tag for tag, _ in outcome.created} if outcome is not None else {m.tag for m in [*dated, *moving]}
    if outcome is not None and outcome.missing:
        done = set()
    targets = list(dict.fromkeys([*(decisions or {}), *(m.target for m in [*dated, *moving, *kept])]))
    held = [t for t in targets if any(m.target == t for m in kept)]
    failed = outcome is not None and bool(outcome.missing or outcome.failed or unrecorded)
    icon = "❌" if failed else ("⚠️" if held else "✅")
    verb = "would publish" if outcome is None else "publish"
    moved_for = {m.target for m in moving if m.tag in done}
    head = [f"### {icon} {markdown_text(f'{verb} {date.isoformat()}')}: {len(targets)} image(s), floating tags "
            f"moved for {len(moved_for)}, held for {len(held)}"
            + ("" if decisions is not None else " (no gate applied: no --sitrep)"), ""]
    rows = ["| image | dated tags | floating tags | why | arches |", "|---|---|---|---|---|"]

    def tags(manifests, target) -> List[str]:
        return [markdown_text(_short(m.tag), "code") for m in manifests if m.target == target]

    for target in targets:
        decision = (decisions or {}).get(target)
        published = tags([m for m in dated if m.tag in done], target)
        moved = tags([m for m in moving if m.tag in done], target)
        stayed = tags(kept, target)
        floating = "<br>".join(([f"moved {', '.join(moved)}"] if moved else [])
                               + ([f"held {', '.join(stayed)}"] if stayed else []))
        if decision is not None and decision.reasons:
            why = "<br>".join(markdown_text(r) for r in decision.reasons)
        elif stayed and all_or_nothing:
            why = "--all-or-nothing: another image is held"
        else:
            why = "passed" if decision is not None else ""
        rows.append("| " + " | ".join([markdown_text(target, "code"), ", ".join(published), floating, why,
                                       markdown_text(arch_comparison(decision))]) + " |")
    tail: List[List[str]] = []
    if retries:
        tail.append(["", f"{retries} registry call(s) retried ({waited_s:g} s waited)"])
    if outcome is not None:
        if outcome.missing:
            tail.append(["", f"Not published: {len(outcome.missing)} per-arch image(s) missing; no tag was created."])
        if outcome.failed:
            tail.append(["", f"Stopped: {markdown_text(outcome.failed)}"])
        if unrecorded:
            tail.append(["", f"Published, but not their nightly records: {markdown_text(unrecorded)}"])
        for tag, digest, how in outcome.rolled_back:
            tail.append(["", f"Rolled back ({how}): {markdown_text(tag, 'code')}"
                             + (f" on {markdown_text(digest, 'code')}" if digest else "")])
    return _within(head, rows, tail, limit, why=f"{GITHUB_SUMMARY_NOTE}; the publish log lists every tag")


GITHUB_SUMMARY_NOTE = f"$GITHUB_STEP_SUMMARY is kept under {SUMMARY_BYTES:,} bytes"
"""Why a publish summary is cut (or left out): GitHub drops a larger step summary whole."""

FULL_NOTE = f"\n_publish summary left out: $GITHUB_STEP_SUMMARY is full ({SUMMARY_BYTES:,} bytes)_\n"
"""What :func:`append_summary` appends instead of a summary that does not fit (when this fits)."""


def _short(tag: str) -> str:
    """``repo/name:latest`` → ``name:latest`` (the repository's last part and the tag)."""
    return tag.rsplit("/", 1)[-1]


def append_summary(path: str, render: Callable[[int], str]) -> None:
    """Append ``render(room)`` to ``$GITHUB_STEP_SUMMARY`` at ``path``: ``room`` (bytes, never
    negative) is what is left of :data:`bake.run.sitrep.SUMMARY_BYTES` beside what the file holds
    already (GitHub drops a larger summary whole). A rendering longer than ``room`` (UTF-8) is not
    appended: :data:`FULL_NOTE` is, when that fits, else nothing, so the file never grows past
    the bound. Checked first by :func:`bake.run.build._appendable`.

    :raises OutputError: it cannot be appended to (one line naming it).
    """
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    try:
        room = max(SUMMARY_BYTES - size, 0)
        text = render(room)
        if len(text.encode("utf-8", "replace")) > room:
            text = FULL_NOTE if len(FULL_NOTE.encode("utf-8")) <= room else ""
        if not text:
            return
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as err:
        raise OutputError(f"cannot append to $GITHUB_STEP_SUMMARY {path}: {err.strerror or err}") from None
