"""The nightly record in the registry: pushed beside each image, read back on a later run.

Each record (:mod:`bake.plan.records`, docs/nightly-record.md) is pushed as an OCI image index
of its own under ``<repository>:record-<target>-<date>-<arch>``: ``docker buildx imagetools
create`` of the image it describes (by digest, so the record pins it; no layer is copied) with
the record's JSON as the index annotation :data:`ANNOTATION`. Reading it back is
``imagetools inspect --raw`` of that tag. Both go through the docker CLI, with its
credentials and its time bound (:data:`bake.run.engine.REGISTRY_TIMEOUT_S`).
"""

from __future__ import annotations

import base64
import datetime
import gzip
import zlib
from typing import Callable, Collection, Dict, List, Optional, Sequence, Tuple

from bake.documents import MAX_BYTES, DocumentError, parse_json
from bake.errors import RecordError
from bake.patterns import LazyPattern
from bake.plan import records
from bake.plan.text import clipped
from bake.run.sitrep import diff_rows

ANNOTATION = "io.bake-plan.record"
"""The index annotation that holds a record's JSON."""
ANNOTATION_GZ = "io.bake-plan.record.gz"
"""The annotation that holds it gzip-compressed and base64-encoded, when the JSON is longer
than :data:`INLINE_LIMIT` (a command-line argument is at most 128 KiB on Linux)."""
INLINE_LIMIT = 64 * 1024
_DIGEST = LazyPattern(r"sha256:[0-9a-f]{64}")


def annotation_of(record: dict) -> str:
    """The ``KEY=VALUE`` index annotation that holds ``record`` (``imagetools create
    --annotation index:KEY=VALUE``, :func:`bake.run.engine.create_manifest`)."""
    text = records.to_text(record)
    if len(text.encode()) <= INLINE_LIMIT:
        return f"{ANNOTATION}={text}"
    packed = base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode("ascii")
    return f"{ANNOTATION_GZ}={packed}"


def _gunzip(data: bytes, ref: str) -> bytes:
    """``data`` gunzipped, at most :data:`bake.documents.MAX_BYTES` of it (a registry's
    annotation is untrusted: a few KB of gzip can expand to gigabytes).

    :raises RecordError: it expands past the bound. :raises zlib.error, EOFError: not gzip."""
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    out = inflate.decompress(data, MAX_BYTES + 1)
    if len(out) > MAX_BYTES or inflate.unconsumed_tail:
        raise RecordError(f"{ref}: the record expands past {MAX_BYTES // (1024 * 1024)} MiB: not a bake-plan record")
    if not inflate.eof:
        raise EOFError("the gzip stream ends early")
    return out


def record_from_annotations(notes: Dict[str, str], ref: str) -> dict:
    """The record an index's annotations hold.

    :raises RecordError: no record annotation, not JSON, another schema, or a field
        :func:`bake.plan.records.record_fault` refuses (naming ``ref`` and the field).
    """
    try:
        if ANNOTATION in notes:
            text = notes[ANNOTATION]
        elif ANNOTATION_GZ in notes:
            text = _gunzip(base64.b64decode(notes[ANNOTATION_GZ], validate=True), ref).decode()
        else:
            raise RecordError(f"{ref}: holds no bake-plan record (no {ANNOTATION} annotation)")
        data = parse_json(text)  # depth-bounded, as every document bake-plan reads back
    except DocumentError as err:
        raise RecordError(f"{ref}: the record is not readable JSON ({err})") from None
    except (ValueError, OSError, EOFError, zlib.error) as err:
        raise RecordError(f"{ref}: the record is not readable JSON ({err})") from None
    if not isinstance(data, dict) or data.get("schema") != records.SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise RecordError(f"{ref}: a record of schema {got!r}, not {records.SCHEMA!r}")
    fault = records.record_fault(data)
    if fault:
        raise RecordError(f"{ref}: an unreadable record: {fault}")
    return data


def write_records(plan: dict, sitrep: dict, date: datetime.date,
                  create: Optional[Callable[..., None]] = None,
                  dry_run: bool = False, only: Optional[Collection[str]] = None,
                  on_pushed: Callable[[str], None] = lambda ref: None) -> List[Tuple[str, Optional[str]]]:
    """Push a record of each target the sitrep names as pushed (``outcome`` pass and an image
    digest), one per platform, beside its image (:func:`bake.plan.records.record_tag`), and again
    as the newest record of the target and arch (:func:`bake.plan.records.latest_tag`).

    What ``publish --sitrep`` (for the images it published) and ``bake-plan record`` call.

    :param plan: the plan that was built (buildx's JSON shape).
    :param sitrep: its ``sitrep.json`` content (and ``tests`` when ``bake-plan test`` ran).
    :param date: the nightly's date (the plan's ``--date``).
    :param create: ``create(tag, sources, annotations=[...])``; default
        :func:`bake.run.engine.create_manifest`.
    :param dry_run: push nothing; return the refs that would be pushed.
    :param only: the targets to record (``publish``: those whose tags it made); ``None``: all.
    :param on_pushed: called with each record's ref once it is pushed (so a registry failing
        part-way leaves a line for each record pushed before it).
    :returns: ``(record ref, None)`` for each pushed record and ``(target@arch, why not)`` for
        each target with no image to record (not built, not pushed, untagged).
    :raises bake.run.engine.RegistryError: the registry refused a record or did not answer.
    """
    if create is None:
        from bake.run.engine import create_manifest as create
    out: List[Tuple[str, Optional[str]]] = []
    for record in records.make_records(plan, sitrep, date):
        if only is not None and record["target"] not in only:
            continue
        where = f"{record['target']}@{record['arch']}"
        if not record["repository"]:
            out.append((where, "untagged: no repository to put a record in"))
            continue
        if record["outcome"] != "pass" or not record["image_digest"]:
            out.append((where, f"no pushed image (outcome {record['outcome']!r})"))
            continue
        if not isinstance(record["image_digest"], str) or not _DIGEST.fullmatch(record["image_digest"]):
            out.append((where, "the sitrep's digest is not a sha256 digest"))  # a sitrep is another job's file
            continue
        ref = f"{record['repository']}:{records.record_tag(record['target'], date, record['arch'])}"
        if not dry_run:
            source = [f"{record['repository']}@{record['image_digest']}"]
            create(ref, source, annotations=[annotation_of(record)])
            # the newest record of the target and arch, which build --skip-unchanged reads
            latest = records.latest_tag(record["target"], record["arch"])
            create(f"{record['repository']}:{latest}", source, annotations=[annotation_of(record)])
            on_pushed(ref)
        out.append((ref, None))
    return out


def read_record(ref: str, annotations: Optional[Callable[[str], Optional[Dict[str, str]]]] = None,
                expect: Optional[Tuple[str, str]] = None) -> Optional[dict]:
    """The record at ``ref``, or ``None`` when the registry has no such tag.

    :param annotations: ``annotations(ref)`` → the index's annotations or ``None``; default
        :func:`bake.run.engine.index_annotations`.
    :param expect: ``(target, arch)`` the tag is of: a record there of another is refused.
    :raises RecordError: the tag holds something that is not a record (or not of ``expect``).
    :raises bake.run.engine.RegistryError: the registry did not answer.
    """
    if annotations is None:
        from bake.run.engine import index_annotations as annotations
    notes = annotations(ref)
    found = None if notes is None else record_from_annotations(notes, ref)
    if found is not None and expect is not None and (found["target"], found["arch"]) != expect:
        raise RecordError(f"{ref}: an unreadable record: it is the record of {clipped(found['target'], 80)!r} on "
                          f"{clipped(found['arch'], 20)!r}, not of {expect[0]!r} on {expect[1]!r}")
    return found


def read_records(plan: dict, date: datetime.date,
                 annotations: Optional[Callable[[str], Optional[Dict[str, str]]]] = None) -> List[dict]:
    """The records the nightly of ``date`` pushed for the targets of ``plan`` (each tagged
    target and platform; a missing one is left out)."""
    out = []
    for target, arch, ref in records.record_refs(plan, date):
        found = read_record(ref, annotations, (target, arch))
        if found is not None:
            out.append(found)
    return out


def read_latest(plan: dict, annotations: Optional[Callable[[str], Optional[Dict[str, str]]]] = None,
                unreadable: Optional[Callable[[str, str, RecordError], None]] = None
                ) -> Dict[Tuple[str, str], dict]:
    """The newest record of every tagged target and platform of ``plan`` that has one:
    ``(target, arch)`` → record (:func:`bake.plan.records.latest_refs`).

    :param unreadable: ``(target, ref, error)`` for a record that is there but cannot be read
        (:class:`RecordError`): that target counts as having none. ``None``: the error is raised.
    """
    out = {}
    for target, arch, ref in records.latest_refs(plan):
        try:
            found = read_record(ref, annotations, (target, arch))
        except RecordError as err:
            if unreadable is None:
                raise
            unreadable(target, ref, err)
            continue
        if found is not None:
            out[(target, arch)] = found
    return out


def diff_markdown(entries: Sequence[dict]) -> str:
    """:func:`bake.plan.records.diff` as a Markdown table (a CI job summary), every cell escaped
    by the summaries' one escaping (:func:`bake.run.sitrep.markdown_text`): :func:`bake.run.sitrep.diff_rows`."""
    return "\n".join(diff_rows(entries)) + "\n"
