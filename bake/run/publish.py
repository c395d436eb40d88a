"""Publishing: merge per-arch images into multi-arch tags, only when every arch is there.

JAX-Toolbox builds each arch on its own runner and tags ``<tag>-amd64``/``<tag>-arm64``; the
nightly publish step joins them with ``docker buildx imagetools create`` (buildx docs,
"imagetools create": a new manifest list from existing manifests, no layer is copied).

A per-arch image built with attestations (``--provenance``, ``--sbom``) is itself an index: the
image manifest and its attestation manifest (platform ``unknown/unknown``, annotated
``vnd.docker.reference.type=attestation-manifest`` with the image's digest). ``imagetools create``
from such indexes copies every manifest of each, so the multi-arch tag keeps each platform's
provenance and SBOM (``tests/test_provenance_engine.py``, buildx 0.29 and 0.13 alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from bake.errors import BakePlanError, RunError
from bake.plan.compose import Composition
from bake.plan.names import arch_of


@dataclass(frozen=True)
class Manifest:
    """One multi-arch tag to create: ``tag`` (``repo:latest``) from per-arch ``sources``
    (``repo:latest-amd64``, ``repo:latest-arm64``), one per platform the target builds for, of
    the bake ``target`` (the image) it tags."""

    tag: str
    sources: List[str]
    target: str = ""


def manifests(composition: Composition) -> List[Manifest]:
    """Every tag of every published target of a multi-arch plan (composed without ``--platform``
    or with all arches), the tags it inherits from docker/metadata-action included, with the
    per-arch images it is made from. A stage that supports one arch publishes that arch alone."""
    out = []
    for name, target in composition.plan["target"].items():
        if "platforms" not in target:  # the metadata-action target itself: only inherited from
            continue
        arches = [arch_of(p) for p in target["platforms"]]
        for tag in [*target.get("tags", []), *composition.inherited_tags.get(name, [])]:
            out.append(Manifest(tag=tag, sources=[f"{tag}-{arch}" for arch in arches], target=name))
    return out


T = TypeVar("T")
Q = TypeVar("Q")

CHECKS_AT_ONCE = 8
"""How many per-arch images :func:`missing_sources` asks the registry about at once (each is a
docker CLI run of about a second, mostly waiting)."""


REFS_PER_CHECK = 64
"""How many per-arch images one ``all_exist`` question of :func:`missing_sources` names (one
buildx run each; a family's whole nightly is usually one)."""


def missing_sources(wanted: List[Manifest], exists: Callable[[str], bool],
                    all_exist: Optional[Callable[[List[str]], bool]] = None) -> List[str]:
    """The per-arch images that are not in the registry, in plan order (each asked once,
    :data:`CHECKS_AT_ONCE` at a time; ``exists`` must be safe to call from several threads).

    :param all_exist: a list of refs → whether every one is in the registry, asked first for
        :data:`REFS_PER_CHECK` refs at a time (:func:`bake.run.engine.all_resolve`); ``exists``
        is then asked ref by ref only about the lists it did not say yes to (to name what is
        missing, or why the registry refused).
    :raises bake.errors.BakePlanError: what ``exists`` (or ``all_exist``) raised for the first
        image, in plan order, it raised for (the questions not yet asked are not asked).
    """
    refs = list(dict.fromkeys(source for manifest in wanted for source in manifest.sources))
    if all_exist is not None:
        lists = [refs[i:i + REFS_PER_CHECK] for i in range(0, len(refs), REFS_PER_CHECK)]
        refs = [ref for part, yes in zip(lists, ask_all(lists, all_exist)) if not yes for ref in part]
    return [ref for ref, ok in zip(refs, ask_all(refs, exists)) if not ok]


def ask_all(refs: Sequence[Q], question: Callable[[Q], T]) -> List[T]:
    """``question(ref)`` of each of ``refs``, in order, :data:`CHECKS_AT_ONCE` at a time
    (``question`` must be safe to call from several threads).

    :raises bake.errors.BakePlanError: what ``question`` raised for the first ref, in order, it
        raised for (the questions not yet asked are not asked).
    """
    from concurrent.futures import ThreadPoolExecutor

    if len(refs) < 2:
        return [question(ref) for ref in refs]
    pool = ThreadPoolExecutor(max_workers=min(CHECKS_AT_ONCE, len(refs)))
    try:
        return list(pool.map(question, refs))
    finally:  # a failure or an interrupt does not wait for the questions not yet asked
        pool.shutdown(wait=False, cancel_futures=True)


def per_repository(items: Sequence[T], tag_of: Callable[[T], str]) -> Dict[str, List[T]]:
    """``items`` grouped by the repository of their tag (``tag_of(item)``, ``repo:tag``), in order:
    the groups a manifest list is written by, one repository's one after another and repositories
    side by side. distribution 2.8's filesystem storage (the stock ``registry:2``) rewrites a
    repository's link files in place, so two lists of one digest written at once in one
    repository (``latest`` and ``nightly-DATE``) can read each other's link empty and answer 500."""
    out: Dict[str, List[T]] = {}
    for item in items:
        out.setdefault(tag_of(item).rsplit(":", 1)[0], []).append(item)
    return out


CREATES_AT_ONCE = 4
"""How many manifest lists :func:`publish` creates at once (each is a buildx run that resolves
the sources and writes the list; mostly waiting on the registry, partly the process start)."""


class PublishIncomplete(RunError):
    """Creating a manifest list failed after the check passed (the registry went away or refused
    it): ``created`` were published (in plan order; the creations already under way when ``failed``
    failed are finished and counted) and ``failed`` was not. Exit status 1; a rerun finishes the
    work."""

    def __init__(self, created: List[Manifest], failed: Manifest, total: int, reason: str):
        self.created, self.failed, self.total, self.reason = created, failed, total, reason
        super().__init__(
            f"publishing stopped at {failed.tag}: {reason}; {len(created)} of {total} tags were published before it; "
            "rerun the same `bake-plan publish` to finish (every tag is made again from the per-arch images, "
            "so none is duplicated or lost)"
        )


def publish(wanted: List[Manifest], exists: Callable[[str], bool], create: Callable[[str, List[str]], None],
            on_created: Callable[[Manifest], None] = lambda manifest: None,
            all_exist: Optional[Callable[[List[str]], bool]] = None) -> List[str]:
    """Check every source exists, then create every manifest list, the lists of
    :data:`CREATES_AT_ONCE` repositories at a time (one repository's one after another). When any
    per-arch image is missing, nothing is created.

    :param create: ``(tag, sources)``; must be safe to call from several threads.
    :param all_exist: asked before ``exists``, as :func:`missing_sources` asks it.
    :param on_created: called after each manifest list is created, in plan order, from the calling
        thread (the CLI prints it at once, so an interrupted run shows what it did).
    :returns: the per-arch images that are missing (then nothing was created), or ``[]``.
    :raises PublishIncomplete: ``create`` failed; no creation starts after that, those under way
        finish, and the first failure in plan order is raised with every tag created.
    :raises bake.errors.RunError: the registry could not be asked whether a source exists.
    """
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    missing = missing_sources(wanted, exists, all_exist)
    if missing:
        return missing
    stop = threading.Event()

    def make(manifest: Manifest) -> Optional[str]:
        """``None`` once created, else why not (a failure, or not started after one)."""
        if stop.is_set():
            return ""
        try:
            create(manifest.tag, manifest.sources)  # idempotent: a rerun writes the same list again
        except BakePlanError as err:
            stop.set()
            return str(err)
        return None

    futures = {id(m): Future() for m in wanted}
    by_repository = per_repository(wanted, lambda m: m.tag)

    def make_all(manifests: List[Manifest]) -> None:
        for m in manifests:
            futures[id(m)].set_result(make(m))

    created: List[Manifest] = []
    failure: Optional[Tuple[Manifest, str]] = None
    pool = ThreadPoolExecutor(max_workers=max(1, min(CREATES_AT_ONCE, len(by_repository))))
    try:
        jobs = [pool.submit(make_all, group) for group in by_repository.values()]
        for manifest in wanted:
            future = futures[id(manifest)]
            while not future.done():  # a job that raised (an interrupt) sets none of its futures
                failed = next((j for j in jobs if j.done() and j.exception() is not None), None)
                if failed is not None:
                    raise failed.exception()
                try:
                    future.result(timeout=0.2)
                except FutureTimeout:
                    pass
            why = future.result()
            if why is None:
                created.append(manifest)
                on_created(manifest)
            elif why and failure is None:
                failure = (manifest, why)
    finally:  # an interrupt does not wait for the creations not yet started
        pool.shutdown(wait=False, cancel_futures=True)
    if failure is not None:
        raise PublishIncomplete(created, failure[0], len(wanted), failure[1])
    return []
