"""The nightly record of an image, and the difference between two of them (``bake-plan diff``).

Pure: records are made from a plan (and a sitrep), read from JSON text, and compared here;
pushing them to the registry and reading them back is :mod:`bake.run.record`.

A record (docs/nightly-record.md) is one JSON object per bake target and arch::

    {"schema": "bake-plan.nightly-record/1", "target": "jax", "arch": "amd64",
     "platform": "linux/amd64", "date": "2026-11-29", "repository": "ghcr.io/nvidia/jax",
     "tags": [...], "input_digest": "sha256:…", "image_digest": "sha256:…" | null,
     "pins": {"numpy": "1.26.4", …} | null, "hashes": {"numpy": ["sha256:…"]} | null,
     "sources": {"JAX": {"url", "ref", "patches"}},
     "base_images": [{"image", "platform", "digest"}], "tests": [{"test", "outcome"}] | null,
     "size_bytes": 123 | null, "outcome": "pass" | null, "built_in": "nightly-2026-11-29"}
"""

from __future__ import annotations

import datetime
import json
import os
import re
import urllib.parse
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from bake.documents import DocumentError, parse_json
from bake.errors import UsageError
from bake.patterns import LazyPattern
from bake.plan.inputs import INPUT_DIGEST_LABEL
from bake.plan.names import arch_of
from bake.plan.secrets import shown
from bake.plan.text import clipped, control_fault

SCHEMA = "bake-plan.nightly-record/1"
"""The ``schema`` of a record this version writes and reads."""

RECORD_TAG_PREFIX = "record-"


def record_tag(target: str, date: datetime.date, arch: str) -> str:
    """The tag a record is pushed under, beside the image in its repository:
    ``record-<target>-<YYYY-MM-DD>-<arch>`` (the target is in it because a meal kit, a final
    image and the variants of a stage share one repository)."""
    return f"{RECORD_TAG_PREFIX}{target}-{date.isoformat()}-{arch}"


def repository_of(tag: str) -> str:
    """``host/path`` of ``host/path:tag`` (a digest, if any, dropped)."""
    ref = tag.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


_NAME = LazyPattern(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(==|===|@)\s*([^;\s]+)")


def _pin_lines(text: str) -> Iterable[Tuple[str, str, str]]:
    """``(normalised name, version or URL, the whole line)`` of each pin of a lock, its ``\\``
    continuations joined."""
    joined = re.sub(r"\\\r?\n", " ", text)
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        m = _NAME.match(line)
        if m:
            yield re.sub(r"[-_.]+", "-", m.group(1)).lower(), m.group(3), line


def pins_of(text: str) -> Dict[str, str]:
    """The pins of a lock (pip-compile/uv output: ``name==version`` lines, ``\\`` continuations,
    ``--hash`` options, comments): normalised distribution name (PEP 503) → version, or the URL
    of a ``name @ url`` line. Lines that pin nothing (options, ``-e`` paths) are left out."""
    return {name: version for name, version, _ in _pin_lines(text)}


_HASH = LazyPattern(r"--hash[=\s]\s*(sha256|sha384|sha512):([0-9A-Fa-f]+)")


def pin_hashes_of(text: str) -> Dict[str, List[str]]:
    """The hashes a lock gives each pin (its ``--hash=ALGO:HEX`` options, pip's hash-checking
    mode): normalised name → ``["sha256:<hex>", …]`` (lower-case hex, in the lock's order); a pin
    without a hash is left out."""
    out: Dict[str, List[str]] = {}
    for name, _, line in _pin_lines(text):
        found = [f"{algo}:{hexes.lower()}" for algo, hexes in _HASH.findall(line)]
        if found:
            out[name] = found
    return out


def _lock_text(directory: str, arch: Optional[str]) -> Optional[str]:
    """The lock in a ``pip-lock`` context directory: ``requirements-<arch>.lock``, else
    ``requirements.lock``; ``None`` when neither can be read."""
    names = ([f"requirements-{arch}.lock"] if arch else []) + ["requirements.lock"]
    for name in names:
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                return f.read()
        except (OSError, ValueError):
            continue
    return None


def sources_of(args: Mapping[str, str]) -> Dict[str, dict]:
    """The sources a target fetches, from its ``URLREF_<NAME>`` (``url#ref``) and
    ``PATCHES_<NAME>`` args: name → ``{"url", "ref", "patches"}``."""
    out = {}
    for key, value in sorted(args.items()):
        if key.startswith("URLREF_") and isinstance(value, str):
            name = key[len("URLREF_"):]
            url, _, ref = value.partition("#")
            patches = str(args.get(f"PATCHES_{name}") or "").split()
            out[name] = {"url": url, "ref": ref, "patches": patches}
    return out


def plan_records(plan: dict, date: Optional[datetime.date] = None) -> List[dict]:
    """A record of each target of a plan and each of its platforms, from the plan alone: no
    image digest, tests, size or outcome (``null``); the pins of a ``--locked`` target from its
    ``pip-lock`` context directory, when it is still there.

    :param plan: the plan in buildx's JSON shape (``target`` block).
    :param date: the plan's date, when known.
    """
    out = []
    built = plan.get("group", {}).get("default", {}).get("targets") or list(plan.get("target", {}))
    for name in built:
        target = plan["target"].get(name) or {}
        if "platforms" not in target:
            continue
        tags = list(target.get("tags") or [])
        lock_dir = (target.get("contexts") or {}).get("pip-lock")
        for platform in target.get("platforms") or []:
            arch = arch_of(platform)
            lock = _lock_text(lock_dir, arch) if lock_dir else None
            out.append({
                "schema": SCHEMA, "target": name, "arch": arch, "platform": platform,
                "date": date.isoformat() if date else None,
                "repository": repository_of(tags[0]) if tags else None, "tags": tags,
                "input_digest": (target.get("labels") or {}).get(INPUT_DIGEST_LABEL),
                "image_digest": None, "pins": pins_of(lock) if lock is not None else None,
                "hashes": pin_hashes_of(lock) if lock is not None else None,
                "sources": sources_of(target.get("args") or {}), "base_images": [],
                "tests": None, "size_bytes": None, "outcome": None,
                "built_in": f"nightly-{date.isoformat()}" if date else None,
            })
    return out


def make_records(plan: dict, sitrep: dict, date: datetime.date) -> List[dict]:
    """The records of a build: :func:`plan_records` with what the sitrep says of each target
    (``image_digest``, ``outcome``, ``base_images`` and ``size_bytes`` of the platform, and the
    outcomes of ``bake-plan test``'s tests of the target on that platform, when it ran, and its
    ``input_digest``: the one of the plan that built it, whatever ``plan`` gives). A target
    the sitrep lists for other platforms only is left out for the rest (another arch's job); a
    target without a lock gets as ``pins`` the distributions ``bake-plan test`` found installed.

    :param sitrep: ``sitrep.json``'s content (``targets``, optionally ``tests``).
    """
    entries = sitrep.get("targets") or {}
    results = ((sitrep.get("tests") or {}).get("results")) if isinstance(sitrep.get("tests"), dict) else None
    out = []
    installed = {(i.get("target"), i.get("platform")): i.get("distributions")
                 for i in ((sitrep.get("tests") or {}).get("installed") or []) if isinstance(i, dict)} \
        if isinstance(sitrep.get("tests"), dict) else {}
    for record in plan_records(plan, date):
        entry = entries.get(record["target"]) or {}
        platform = record["platform"]
        if isinstance(entry.get("platforms"), list) and platform not in entry["platforms"]:
            continue  # another arch's job: its own sitrep records it
        found = installed.get((record["target"], platform))
        if record["pins"] is None and isinstance(found, dict):  # what pip had installed in the image
            record["pins"] = {re.sub(r"[-_.]+", "-", str(k)).lower(): str(v) for k, v in found.items()}
        record["image_digest"] = entry.get("digest")
        record["outcome"] = entry.get("outcome")
        if isinstance(entry.get("input_digest"), str) and entry["input_digest"]:
            record["input_digest"] = entry["input_digest"]  # the plan that built it (a publish plans for every arch)
        if entry.get("unchanged_since"):  # not built tonight: the image of that nightly
            record["built_in"] = entry["unchanged_since"]
        if entry.get("tags"):
            record["tags"] = list(entry["tags"])
        record["base_images"] = [b for b in entry.get("base_images") or []
                                 if isinstance(b, dict) and b.get("platform") in (platform, None)]
        size = (entry.get("size_bytes") or {}).get(platform)
        record["size_bytes"] = size if isinstance(size, int) else None
        if results is not None:
            record["tests"] = [{"test": r.get("test"), "outcome": r.get("outcome")} for r in results
                               if isinstance(r, dict) and r.get("target") == record["target"]
                               and r.get("platform") == platform]
        out.append(record)
    return out


def to_text(record: dict) -> str:
    """A record as compact JSON (keys in order): what the registry holds."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False)


_DISTRIBUTION = LazyPattern(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
"""A distribution name as PEP 508 spells one (what :func:`packaging.utils.canonicalize_name` takes)."""
_RECORD_DIGEST = LazyPattern(r"sha256:[0-9a-f]{64}")


def _strings(value, path: str) -> Iterable[Tuple[str, str]]:
    """``(field path, string)`` of every string in a record's field (keys included)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _strings(item, f"{path}[{n}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, f"{path} key")
            yield from _strings(item, f"{path}.{key}" if isinstance(key, str) and not control_fault(key) else path)


_STR, _OPT_STR, _INT = (str,), (str, type(None)), (int, type(None))
_FIELDS = {"target": _STR, "arch": _STR, "date": _OPT_STR, "platform": _OPT_STR, "repository": _OPT_STR,
           "input_digest": _OPT_STR, "image_digest": _OPT_STR, "outcome": _OPT_STR, "built_in": _OPT_STR,
           "size_bytes": _INT, "pins": (dict, type(None)), "hashes": (dict, type(None)),
           "sources": (dict, type(None)), "base_images": (list, type(None)), "tests": (list, type(None)),
           "tags": (list, type(None))}
"""The type of each field of a record bake-plan reads (:func:`make_records`); others are kept, unread."""
_ITEM_FIELDS = {"sources": {"url": _STR, "ref": _STR, "patches": (list,)},
                "base_images": {"image": _STR, "digest": _OPT_STR, "platform": _OPT_STR},
                "tests": {"test": _OPT_STR, "outcome": _OPT_STR}}
"""The fields of each item of a record's ``sources`` (by name), ``base_images`` and ``tests``."""
RECORD_STRING_CHARS = 4096
"""The longest string a record read back may hold (a URL, a version, a test's name): a record
is shown whole in ``diff`` and the sitrep's ``since_last``, so nothing in it is larger."""
_DATE = LazyPattern(r"\d{4}-\d{2}-\d{2}")


def _type_name(kinds: tuple) -> str:
    names = {str: "a string", int: "an integer", dict: "an object", list: "a list", type(None): "null"}
    return " or ".join(names[k] for k in kinds)


def _shape_fault(record: dict) -> Optional[str]:
    """The first field of ``record`` that is not of a record's type (:data:`_FIELDS`), or ``None``."""
    for key, kinds in _FIELDS.items():
        value = record.get(key)
        if key not in record and kinds is not _STR:
            continue
        if not isinstance(value, kinds) or isinstance(value, bool) or (kinds is _STR and not value):
            return f"{key} is not {_type_name(kinds)}" + (" (empty)" if kinds is _STR and value == "" else "")
    if record.get("date") is not None and not _DATE.fullmatch(record["date"]):
        return f"date {clipped(record['date'], 40)!r} is not YYYY-MM-DD"
    for key, value in (record.get("hashes") or {}).items():
        if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
            return f"hashes.{key} is not a list of strings"
    if not all(isinstance(t, str) for t in record.get("tags") or ()):
        return "tags is not a list of strings"
    sources = record.get("sources") or {}
    items = [(f"sources.{name}", item, "sources") for name, item in sources.items()]
    items += [(f"{key}[{n}]", item, key) for key in ("base_images", "tests") for n, item in enumerate(record.get(key) or ())]
    for where, item, key in items:
        if not isinstance(item, dict):
            return f"{where} is not an object"
        for field, kinds in _ITEM_FIELDS[key].items():
            if not isinstance(item.get(field), kinds) or (kinds is _STR and not item.get(field)):
                return f"{where}.{field} is not {_type_name(kinds)}"
        if key == "sources" and not all(isinstance(p, str) for p in item["patches"]):
            return f"{where}.patches is not a list of strings"
    return None


def record_fault(record: dict) -> Optional[str]:
    """Why a record read back (a file, the registry) cannot be trusted as one, or ``None``: a
    field of another type than a record's (:data:`_FIELDS`: ``pins`` an object, each source an
    object with a string ``url``…, ``date`` as ``YYYY-MM-DD``), a ``pins``/``hashes`` name that
    is not a distribution name (PEP 508), an ``input_digest`` or ``image_digest`` that is neither
    ``null`` nor ``sha256:<64 lower-case hex>``, a ``pins`` value that is not a string, a string
    longer than :data:`RECORD_STRING_CHARS`, or a control character (a line break, ESC, a
    bidirectional control) in any string of the record but its ``tests`` (a test's name is by
    default its command, which may be several lines). Cheap: one pass over the record's strings.

    :returns: one phrase naming the field: ``"pins name 'x|y' is not a distribution name"``,
        ``"sources.X is not an object"``.
    """
    shape = _shape_fault(record)
    if shape:
        return shape
    for key in ("pins", "hashes"):
        for name in record.get(key) or {}:
            if not _DISTRIBUTION.fullmatch(name):
                return f"{key} name {clipped(name, 80)!r} is not a distribution name"
    for name, version in (record.get("pins") or {}).items():
        if not isinstance(version, str):
            return f"pins.{name} is not a string"
    for key in ("input_digest", "image_digest"):
        value = record.get(key)
        if value is not None and (not isinstance(value, str) or not _RECORD_DIGEST.fullmatch(value)):
            return f"{key} {clipped(str(value), 80)!r} is not a sha256:<64 hex> digest"
    for path, value in _strings(record, "record"):
        where = path.removeprefix('record.').removeprefix('record ')
        if len(value) > RECORD_STRING_CHARS:
            return f"{where} is longer than {RECORD_STRING_CHARS} characters"
        fault = control_fault(value, allow="") if not where.startswith("tests") else None
        if fault:
            return f"{where} holds {fault}"
    return None


def parse_records(text: str, where: str) -> List[dict]:
    """Records from JSON text: one record, a list of them, or a plan (``bake-plan plan --format
    json``, whose records are :func:`plan_records`).

    :raises UsageError: not JSON, nested deeper than :data:`bake.documents.MAX_DEPTH`, or none of
        those shapes, naming ``where`` and what is missing: ``FILE: not a bake-plan plan or nightly
        record (an empty list)``, ``(… lacks 'target', 'arch')``; or a record
        :func:`record_fault` refuses: ``FILE: item 0: an unreadable record: pins name 'x|y' is
        not a distribution name``.
    """
    try:
        data = parse_json(text)
    except DocumentError as err:  # not JSON, nested too deeply
        raise UsageError(f"{where}: {err}") from None
    if isinstance(data, dict) and isinstance(data.get("target"), dict):
        if not all(isinstance(t, dict) for t in data["target"].values()):
            raise _not_records(where, "a plan's 'target' block holding a target that is not a table")
        try:
            found = plan_records(data)
        except (AttributeError, TypeError):  # a plan's fields of the wrong types
            raise _not_records(where, "a plan whose fields are not of a plan's types") from None
        for rec in found:
            fault = record_fault(rec)
            if fault:
                raise UsageError(f"{where}: an unreadable record: target {rec['target']!r}: {fault}")
        return found
    items = data if isinstance(data, list) else [data]
    if not items:
        raise _not_records(where, "an empty list")
    for n, item in enumerate(items):
        at = f"item {n}: " if isinstance(data, list) else ""
        if not isinstance(item, dict) or item.get("schema") != SCHEMA:
            got = item.get("schema") if isinstance(item, dict) else type(item).__name__
            raise _not_records(where, f"{at}schema {got!r}, expected {SCHEMA!r}")
        missing = [k for k in ("target", "arch") if not isinstance(item.get(k), str) or not item[k]]
        missing += [k for k in ("input_digest",) if k not in item]
        if missing:
            raise _not_records(where, f"{at}a record without {', '.join(repr(k) for k in missing)}")
        if not isinstance(item.get("pins"), (dict, type(None))) or not isinstance(item.get("sources"), (dict, type(None))):
            raise _not_records(where, f"{at}'pins' and 'sources' must be objects or null")
        fault = record_fault(item)
        if fault:
            raise UsageError(f"{where}: {at}an unreadable record: {fault}")
    seen: Dict[Tuple[str, str], int] = {}
    for n, item in enumerate(items):  # two records of one image: which one the side means is not known
        first = seen.setdefault((item["target"], item["arch"]), n)
        if first != n:
            raise _not_records(where, f"items {first} and {n} are both the record of target {item['target']!r} "
                                      f"on {item['arch']!r}")
    return list(items)


def _not_records(where: str, why: str) -> UsageError:
    return UsageError(f"{where}: not a bake-plan plan or nightly record ({why})")


def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return None


def pin_changes(before: Optional[Mapping[str, str]], after: Optional[Mapping[str, str]]) -> Optional[dict]:
    """``{"added", "removed", "upgraded", "downgraded", "changed"}`` between two sets of pins
    (name → version); ``changed``: a pin whose versions do not compare (a URL). ``None`` when
    either side has no pins."""
    if before is None or after is None:
        return None
    out: dict = {"added": [], "removed": [], "upgraded": [], "downgraded": [], "changed": []}
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if old is None:
            out["added"].append({"name": name, "version": new})
        elif new is None:
            out["removed"].append({"name": name, "version": old})
        else:
            a, b = _version(old), _version(new)
            kind = "changed" if a is None or b is None else ("upgraded" if b > a else "downgraded")
            out[kind].append({"name": name, "from": old, "to": new})
    return out


def compare_link(url: str, old: str, new: str) -> Optional[str]:
    """A web page comparing two commits of a repository on github.com or gitlab.com
    (``…/compare/OLD...NEW``, ``…/-/compare/OLD...NEW``), else ``None``."""
    parts = urllib.parse.urlsplit(url if "://" in url else "ssh://" + url.replace(":", "/", 1))
    host = (parts.hostname or "").lower()
    path = parts.path.strip("/").removesuffix(".git")
    if not path or not re.fullmatch(r"[A-Za-z0-9_.\-/]+", path) or not all(
            re.fullmatch(r"[A-Za-z0-9_.\-/]+", r) for r in (old, new)):
        return None
    if host == "github.com":
        return f"https://github.com/{path}/compare/{old}...{new}"
    if host == "gitlab.com":
        return f"https://gitlab.com/{path}/-/compare/{old}...{new}"
    return None


def source_changes(before: Mapping[str, dict], after: Mapping[str, dict]) -> List[dict]:
    """Each source whose URL, ref or patches moved: ``{"name", "url", "from", "to", "patches_from",
    "patches_to", "compare"}`` (``compare``: :func:`compare_link`, when the URL is the same)."""
    out = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name) or {}, after.get(name) or {}
        if (a.get("url"), a.get("ref"), a.get("patches")) == (b.get("url"), b.get("ref"), b.get("patches")):
            continue
        same = a.get("url") == b.get("url") and a.get("ref") and b.get("ref")
        out.append({"name": name, "url": b.get("url") or a.get("url"), "from": a.get("ref"), "to": b.get("ref"),
                    "patches_from": a.get("patches"), "patches_to": b.get("patches"),
                    "compare": compare_link(b["url"], a["ref"], b["ref"]) if same and a["ref"] != b["ref"] else None})
    return out


def diff(before: Sequence[dict], after: Sequence[dict]) -> List[dict]:
    """Per ``(target, arch)`` of ``after`` (the plan, in its order): whether the input digest
    changed, the pin changes (:func:`pin_changes`) and the sources that moved
    (:func:`source_changes`). A target ``before`` lacks is ``"new"``.

    :returns: ``[{"target", "arch", "status": "changed" | "unchanged" | "new" | "unknown",
        "input_from", "input_to", "python": {…} | None, "sources": […]}]``; ``unknown``: a side
        has no input digest.
    """
    old = {(r.get("target"), r.get("arch")): r for r in before}
    out = []
    for rec in after:
        key = (rec.get("target"), rec.get("arch"))
        prev = old.get(key)
        entry = {"target": key[0], "arch": key[1], "input_from": None, "input_to": rec.get("input_digest"),
                 "python": None, "sources": []}
        if prev is None:
            entry["status"] = "new"
        else:
            entry["input_from"] = prev.get("input_digest")
            if not entry["input_from"] or not entry["input_to"]:
                entry["status"] = "unknown"
            else:
                entry["status"] = "unchanged" if entry["input_from"] == entry["input_to"] else "changed"
            entry["python"] = pin_changes(prev.get("pins"), rec.get("pins"))
            entry["sources"] = source_changes(prev.get("sources") or {}, rec.get("sources") or {})
        out.append(entry)
    return out


def short(digest: Optional[str]) -> str:
    """A digest cut for a line of text: ``sha256:`` and its first 12 hex digits, ``…``."""
    if not digest:
        return "none"
    return digest[:19] + "…" if len(digest) > 19 else digest


def pin_words(python: Optional[dict]) -> List[str]:
    """:func:`pin_changes` as words: ``+ name 1.0``, ``- name 1.0``, ``↑ name 1.0 → 2.0``,
    ``↓ name 2.0 → 1.0``, ``~ name url → url``."""
    if not python:
        return []
    words = [f"+ {p['name']} {p['version']}" for p in python["added"]]
    words += [f"- {p['name']} {p['version']}" for p in python["removed"]]
    words += [f"↑ {p['name']} {p['from']} → {p['to']}" for p in python["upgraded"]]
    words += [f"↓ {p['name']} {p['from']} → {p['to']}" for p in python["downgraded"]]
    words += [f"~ {p['name']} {p['from']} → {p['to']}" for p in python["changed"]]
    left = sum((python.get("left_out") or {}).values())
    return words + ([f"… {left} more (bake-plan diff lists them)"] if left else [])


def source_words(s: dict) -> str:
    """One :func:`source_changes` entry as words: ``NAME: URL OLD → NEW [compare link]``."""
    text = f"{s['name']}: {s['url']} {s['from'] or 'none'} → {s['to'] or 'none'}"
    if s["patches_from"] != s["patches_to"]:
        old, new = (" ".join(s[k] or []) or "none" for k in ("patches_from", "patches_to"))
        text += f" (patches {old} → {new})"
    return text + (f" {s['compare']}" if s["compare"] else "")


def diff_text(entries: Iterable[dict]) -> str:
    """The diff for a terminal: one line per target and arch, then its pin and source changes
    indented; each line as a person is shown text from a file or a registry
    (:func:`bake.plan.secrets.shown`: credentials redacted, control characters escaped)."""
    lines = []
    for e in entries:
        head = f"{e['target']} ({e['arch']}): {e['status']}"
        if e["status"] == "changed":
            head += f" (input {short(e['input_from'])} → {short(e['input_to'])})"
        elif e["status"] == "unchanged":
            head += f" (input {short(e['input_to'])})"
        lines.append(head)
        lines += [f"  python {w}" for w in pin_words(e["python"])]
        lines += [f"  source {source_words(s)}" for s in e["sources"]]
    return "\n".join(shown(line) for line in lines) + "\n"


def diff_json(entries: Sequence[dict]) -> str:
    """The diff as JSON: ``{"schema": "bake-plan.diff/1", "targets": [...]}`` (:func:`diff`'s entries)."""
    return json.dumps({"schema": "bake-plan.diff/1", "targets": list(entries)}, indent=2, ensure_ascii=False) + "\n"


def record_refs(plan: dict, date: datetime.date) -> List[Tuple[str, str, str]]:
    """``(target, arch, record ref)`` of every tagged target of a plan and each platform:
    where the nightly of ``date`` put its records (:func:`record_tag`)."""
    out = []
    for rec in plan_records(plan):
        if rec["repository"]:
            out.append((rec["target"], rec["arch"],
                        f"{rec['repository']}:{record_tag(rec['target'], date, rec['arch'])}"))
    return out


LATEST = "latest"
"""The word in the tag of the newest record of a target and arch: ``record-<target>-latest-<arch>``."""


def latest_tag(target: str, arch: str) -> str:
    """The tag of the newest record of a target and arch (pushed with each dated one)."""
    return f"{RECORD_TAG_PREFIX}{target}-{LATEST}-{arch}"


def latest_refs(plan: dict) -> List[Tuple[str, str, str]]:
    """``(target, arch, ref)`` of the newest record of every tagged target and platform of a plan."""
    return [(rec["target"], rec["arch"], f"{rec['repository']}:{latest_tag(rec['target'], rec['arch'])}")
            for rec in plan_records(plan) if rec["repository"]]


def unchanged_targets(plan: dict, latest: Mapping[Tuple[str, str], dict]) -> Dict[str, dict]:
    """The targets of a one-platform plan that need no build: their input digest equals the one of
    their newest record (``latest``: ``(target, arch)`` → record), whose image passed and was pushed.

    :returns: target → that record.
    """
    out = {}
    for rec in plan_records(plan):
        if len((plan["target"][rec["target"]].get("platforms") or [])) != 1:
            continue  # a record is of one arch: a multi-platform target is always built
        old = latest.get((rec["target"], rec["arch"]))
        if (old and rec["input_digest"] and old.get("input_digest") == rec["input_digest"]
                and old.get("outcome") == "pass" and old.get("image_digest") and old.get("repository")):
            out[rec["target"]] = old
    return out


def drop_unchanged(plan: dict, unchanged: Mapping[str, dict]) -> List[str]:
    """Take the ``unchanged`` targets out of a plan (in place): out of every group and the ``target``
    block; a target that builds on one gets its recorded image instead
    (``docker-image://<repository>@<image digest>``); an untagged target left with no user (a wheel
    builder only an unchanged target copied from) goes too.

    :returns: every target taken out, in plan order.
    """
    targets = plan["target"]
    gone = set(unchanged)
    for name, target in targets.items():
        if name in gone:
            continue
        contexts = target.get("contexts") or {}
        for key, value in contexts.items():
            dep = value[len("target:"):] if isinstance(value, str) and value.startswith("target:") else None
            if dep in unchanged:
                contexts[key] = f"docker-image://{unchanged[dep]['repository']}@{unchanged[dep]['image_digest']}"

    def users(keep: bool) -> set:
        return {v[len("target:"):] for n, t in targets.items() if (n not in gone) == keep
                for v in (t.get("contexts") or {}).values() if isinstance(v, str) and v.startswith("target:")}

    while True:  # an untagged target only gone targets built on
        orphans = {n for n in users(False) - users(True)
                   if n in targets and n not in gone and not targets[n].get("tags")}
        if not orphans:
            break
        gone |= orphans
    order = [n for n in targets if n in gone]
    for n in order:
        del targets[n]
    for name, group in list(plan.get("group", {}).items()):
        group["targets"] = [t for t in group.get("targets", []) if t not in gone]
        if not group["targets"] and name != "default":
            del plan["group"][name]
    return order


def unchanged_entry(record: dict) -> dict:
    """The sitrep entry of a target not built because it is unchanged since ``record``'s nightly:
    ``outcome`` pass, its recorded image, and ``unchanged_since`` (``nightly-<date>``)."""
    return {"outcome": "pass", "platforms": [record.get("platform")], "tags": list(record.get("tags") or []),
            "base_images": list(record.get("base_images") or []), "digest": record.get("image_digest"),
            "input_digest": record.get("input_digest"), "unchanged_since": built_in(record),
            "duration_s": None, "steps_cached": None, "steps_run": None, "context_bytes": None,
            "failed_steps": [], "size_bytes": {}, "cache_read": None, "cache_written": None, "cache_warning": None,
            "error": None}


def unchanged_line(target: str, record: dict) -> str:
    """``<target>: unchanged since nightly-<date> (input sha256:…)``."""
    return f"{target}: unchanged since {built_in(record)} (input {record.get('input_digest')})"


def built_in(record: dict) -> str:
    """``nightly-<date>`` of the build that made a record's image (an unchanged target's record
    keeps the night it was built in)."""
    return record.get("built_in") or f"nightly-{record.get('date')}"


def base_image_changes(before: Sequence[dict], after: Sequence[dict]) -> List[dict]:
    """The base images (a record's ``base_images``: ``{"image", "platform", "digest"}``) whose
    digest moved between two records of one target and arch: ``[{"image", "from", "to"}]``, by
    image name; ``from``/``to`` ``None`` for an image one side does not start from. An image a side
    gives no digest of (not resolved) is left out: unknown is not a change."""
    def digests(images: Sequence[dict]) -> Dict[str, str]:
        return {b["image"]: b["digest"] for b in images or ()
                if isinstance(b, dict) and isinstance(b.get("image"), str) and isinstance(b.get("digest"), str)}

    old, new = digests(before), digests(after)
    unresolved = {b.get("image") for b in list(before or ()) + list(after or ())
                  if isinstance(b, dict) and not isinstance(b.get("digest"), str)}
    return [{"image": image, "from": old.get(image), "to": new.get(image)}
            for image in sorted(set(old) | set(new))
            if old.get(image) != new.get(image) and image not in unresolved]


NO_EARLIER_RECORD = "no earlier nightly record of this target and arch"
UNTAGGED = "untagged: no nightly record is kept of it"
FAULT_CHARS = 300
"""How many characters of why a newest record could not be read ``since_last`` keeps (one line)."""


def since_last(after: Sequence[dict], latest: Mapping[Tuple[str, str], dict],
               faults: Optional[Mapping[Tuple[str, str], str]] = None) -> Dict[str, List[dict]]:
    """What changed in each target of a build since its newest nightly record: the sitrep's
    ``since_last`` (docs/sitrep.md).

    :param after: the records this build would write (:func:`make_records`; for a target
        ``build --skip-unchanged`` did not build, its newest record itself).
    :param latest: ``(target, arch)`` → its newest record, read from the registry.
    :param faults: ``(target, arch)`` → why its newest record could not be read (unreadable,
        hostile, the registry did not answer): kept as one line of at most :data:`FAULT_CHARS`.
    :returns: target → one entry per arch, in ``after``'s order: ``{"arch", "from"
        ("nightly-<date>" of the record, or ``None``), "status" ("changed" | "unchanged" | "new" |
        "unknown", as :func:`diff`), "input_from", "input_to", "python" (:func:`pin_changes` or
        ``None``), "sources" (:func:`source_changes`), "base_images" (:func:`base_image_changes`),
        "reason" (why there is nothing to compare with, else ``None``)}``.
    """
    out: Dict[str, List[dict]] = {}
    for rec in after:
        key = (rec.get("target"), rec.get("arch"))
        prev = latest.get(key)
        if prev is None:
            fault = (faults or {}).get(key)
            reason = (clipped(" ".join(str(fault).split()), FAULT_CHARS) if fault
                      else (NO_EARLIER_RECORD if rec.get("repository") else UNTAGGED))
            entry = {"arch": key[1], "from": None, "status": "unknown" if fault or not rec.get("repository") else "new",
                     "input_from": None, "input_to": rec.get("input_digest"), "python": None, "sources": [],
                     "base_images": [], "reason": reason}
        else:
            found = diff([prev], [rec])[0]
            entry = {"arch": key[1], "from": f"nightly-{prev['date']}" if prev.get("date") else built_in(prev),
                     **{k: found[k] for k in ("status", "input_from", "input_to", "sources")},
                     "python": _bounded_pins(found["python"]),
                     "base_images": base_image_changes(prev.get("base_images") or [], rec.get("base_images") or []),
                     "reason": None}
        out.setdefault(key[0], []).append(entry)
    return out


SINCE_LAST_PINS = 100
"""At most this many pins of each kind (added, removed, upgraded…) in a ``since_last`` entry, each
version cut at :data:`SINCE_LAST_VERSION_CHARS`; ``left_out`` counts the rest (``diff`` has all)."""
SINCE_LAST_VERSION_CHARS = 200


def _bounded_pins(python: Optional[dict]) -> Optional[dict]:
    """:func:`pin_changes` cut to :data:`SINCE_LAST_PINS` of each kind (a sitrep stays small
    whatever a record in the registry held), with ``left_out``: kind → how many were cut."""
    if python is None:
        return None
    out: dict = {}
    left: Dict[str, int] = {}
    for kind, items in python.items():
        out[kind] = [{k: clipped(v, SINCE_LAST_VERSION_CHARS) if k != "name" else v for k, v in item.items()}
                     for item in items[:SINCE_LAST_PINS]]
        if len(items) > SINCE_LAST_PINS:
            left[kind] = len(items) - SINCE_LAST_PINS
    if left:
        out["left_out"] = left
    return out


def since_last_changed(entry: dict) -> bool:
    """Whether a :func:`since_last` entry has something to say: a status other than
    ``unchanged``, a reason, or a pin, source or base image that moved."""
    python = entry.get("python") or {}
    return bool(entry.get("status") != "unchanged" or entry.get("reason") or any(python.values())
                or entry.get("sources") or entry.get("base_images"))
