"""The one reader of buildx's progress: ``--progress=rawjson`` (buildx 0.13+).

Each line buildx writes is either one JSON ``SolveStatus`` (``vertexes``: digest, name, inputs,
started, completed, cached, error; ``statuses``: id, vertex, current, total, started, completed;
``logs``: vertex, stream, base64 data; ``warnings``) or plain text (buildx's own lines: the
Dockerfile excerpt of a failed step, ``ERROR: target X: …``, the entitlements prompt).

:class:`ProgressReader` merges every event on a digest into one :class:`Vertex` and from those
records gives the console (plain-progress-like lines: ``#N [label] name``, its log lines,
``#N CACHED`` / ``#N DONE 1.2s`` / ``#N ERROR: …``; text lines as they came), and what the
sitrep needs: failing targets and steps (with each failed step's last output lines), exported
digests, the last error line, and per target how many Dockerfile steps were cached and how many
ran, how long its build took within this command, the bytes of context sent, and the images it
started from (docs/sitrep.md). Every console line has its control
characters escaped (:func:`bake.plan.text.printable`); the caller redacts
(:func:`bake.run.build.run_build` with :func:`bake.plan.secrets.redact`).

BuildKit reports a vertex to the build of every target whose graph holds it, each time prefixed
with that target's name (``[mx-leaf mealkit 1/2] RUN …`` may be ``mx-root-mealkit``'s step), and
buildx leaves the name out when the bake has one target. A step's target is resolved from the
plan with :func:`bake.run.sitrep.step_owner`, the same way for counts and for failures; a step
is counted once, under one target (:meth:`ProgressReader.owner`).
"""

from __future__ import annotations

import base64
import codecs
import collections
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from bake.plan.secrets import StreamRedactor, redact
from bake.plan.text import printable
from bake.run.sitrep import dependents, step_owner

# "[<target>] [<platform>] [<stage>] i/n] INSTRUCTION" (Dockerfile step), "[<target> internal] …",
# "[<target> context NAME] …", "[<target>] exporting to image", or no label at all.
_NAME = re.compile(r"\[([^\]]*)\] ?(.*)", re.DOTALL)
_STEP_NUMBER = re.compile(r"\d+/\d+")
_EXPORT = re.compile(r"exporting to (?:image|docker image format|oci image format)$")
# An export's digest, best first: pushed, else the manifest list, else the manifest.
_DIGESTS = (
    re.compile(r"pushing manifest for \S+@(sha256:[0-9a-f]{64})"),
    re.compile(r"exporting manifest list (sha256:[0-9a-f]{64})"),
    re.compile(r"exporting manifest (sha256:[0-9a-f]{64})"),
)
_STAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$")
_TARGET_ERROR = re.compile(r"ERROR: target ([A-Za-z0-9_.-]+):")
# buildx's own vertices around the builds: reading the bake files, and after them the metadata
# file, which a bake of several targets labels with each target ("[a] resolving provenance …").
_BUILDX_OWN = re.compile(r"(?:\[[^\]]*\] )?(?:\[internal\] load (?:local|remote) bake definitions"
                         r"|resolving provenance for metadata file)")
# Vertices whose errors do not fail a build: a registry cache that does not exist yet.
_HARMLESS = "importing cache manifest from "
# A cache export (``cache-to``): "exporting cache to registry", "… to client directory".
_CACHE_EXPORT = "exporting cache to "
_CANCELED = "context canceled"
# An image a build starts from: "[<target> <platform> internal] load metadata for REF" (a FROM,
# or a docker-image:// named context); a named context's own "[<target> context NAME] REF".
_LOAD_METADATA = re.compile(r"load metadata for (\S+)$")
_IMAGE_DIGEST = re.compile(r"(\S+)@(sha256:[0-9a-f]{64})$")
TAIL_LINES = 20
"""How many last output lines of a failed step the sitrep keeps (:meth:`ProgressReader.failures`)."""
TAIL_BYTES = 4096
"""How many bytes (UTF-8) those lines may hold together at most; the newest are kept."""
NO_CACHE_YET = "no cache there yet"
"""What the console says of a ``cache-from`` ref the registry does not have (a first build):
BuildKit's ``failed to configure registry cache importer: REF: not found`` is no failure."""


@dataclass
class Vertex:
    """Everything buildx reported about one vertex (one digest), merged.

    :param number: the ``#N`` the console shows it under (order of first appearance).
    :param name: buildx's name of it, label included: ``[a mealkit 2/2] RUN make``.
    :param labels: the targets whose builds reported it, first first (the sole target when
        buildx names none).
    :param platform: ``linux/arm64`` when the label shows one.
    :param stage: the Dockerfile stage (``mealkit``), ``None`` for an unnamed stage.
    :param instruction: the Dockerfile instruction (``RUN make``) of a Dockerfile step (label
        ending ``i/n``); ``None`` for every other vertex (context loads, exports, cache imports).
    :param cached: BuildKit said it came from its cache.
    :param started: first start, seconds since the epoch; ``completed``: end of that run.
    :param ran_from: the first start BuildKit reported without ``cached`` (a run, not a cache
        hit), ``None`` when every report of it was cached.
    :param error: BuildKit's error text, ``""`` when none.
    :param layers: it transferred image layers (statuses ``sha256:…``): a pull, or a result
        fetched from a registry cache.
    :param tail: its last output lines (stdout and stderr of a ``RUN``), blank lines left out,
        per BuildKit stream number (1 stdout, 2 stderr): at most :data:`TAIL_LINES` each, each
        line cut to :data:`TAIL_BYTES` characters, as ``(order, chunk, line)``: when it was kept
        and the number of the log message that completed it.
    """

    digest: str
    number: int
    name: str = ""
    labels: List[str] = field(default_factory=list)
    platform: Optional[str] = None
    stage: Optional[str] = None
    instruction: Optional[str] = None
    cached: bool = False
    started: Optional[float] = None
    completed: Optional[float] = None
    ran_from: Optional[float] = None
    error: str = ""
    layers: bool = False
    statuses: Dict[str, dict] = field(default_factory=dict)
    tail: Dict[int, Deque[Tuple[int, int, str]]] = field(default_factory=dict)
    chunks: int = 0
    kept: int = 0
    _shown: bool = field(default=False, repr=False)  # header printed
    _done: bool = field(default=False, repr=False)  # end printed

    @property
    def duration_s(self) -> Optional[float]:
        """Seconds (to the microsecond) from start to completion of its first run; ``None`` until
        it completed."""
        if self.started is None or self.completed is None:
            return None
        return round(max(0.0, self.completed - self.started), 6)

    @property
    def sent_bytes(self) -> int:
        """Bytes the client sent the engine for this vertex: the last ``current`` of each
        ``transferring NAME:`` status (the build context, a local named context, its
        ``.dockerignore``), not the Dockerfile's (``transferring dockerfile:``). BuildKit sends
        only what changed since the engine last saw the directory, and a few bytes of file
        metadata even then."""
        return sum(int(event.get("current") or 0) for status_id, event in self.statuses.items()
                   if status_id.startswith("transferring ") and status_id != "transferring dockerfile:")

    def output(self) -> List[str]:
        """Its last output lines, oldest first: at most :data:`TAIL_LINES`, together at most
        :data:`TAIL_BYTES` bytes (the newest kept).

        Lines come in the order BuildKit delivered them, except that the lines of the last chunk
        it delivered on stderr come last. BuildKit reads a step's stdout and stderr as two pipes,
        each at its own pace, so their order between each other is not what the step wrote (a
        step that prints a hundred lines and then its reason on stderr is delivered with the
        reason in the middle); and a failing tool's reason (pip's, apt's, a shell's) is on
        stderr, written last."""
        last_err = max((chunk for _, chunk, _ in self.tail.get(2, ())), default=None)
        kept = sorted((order, stream, chunk, line) for stream, lines in self.tail.items()
                      for order, chunk, line in lines)
        ordered = [line for _, stream, chunk, line in kept if not (stream == 2 and chunk == last_err)]
        ordered += [line for _, stream, chunk, line in kept if stream == 2 and chunk == last_err]
        ordered = ordered[-TAIL_LINES:]
        out: List[str] = []
        size = 0
        for line in reversed(ordered):
            size += len(line.encode("utf-8", errors="replace")) + 1
            if out and size > TAIL_BYTES:
                break
            out.append(line)
        return out[::-1]

    @property
    def was_cached(self) -> bool:
        """A Dockerfile step's result was not made by running it: an image source (``FROM``) that
        transferred no layers, or any other step BuildKit marked cached or fetched as layers from
        a registry cache."""
        if (self.instruction or "").upper().startswith("FROM "):
            return not self.layers
        return self.cached or self.layers

    @property
    def failed(self) -> bool:
        """It failed in a way that fails its target (not cancelled, not a missing registry cache)."""
        return bool(self.error) and not self.error.endswith(_CANCELED) and _HARMLESS not in self.name

    def exported_digest(self) -> Tuple[bool, Optional[str]]:
        """``(True, digest or None)`` for a finished ``exporting to image`` vertex (digest: pushed,
        else the manifest list, else the manifest), else ``(False, None)``."""
        if not _EXPORT.search(self.name) or self.completed is None or self.error:
            return False, None
        for pattern in _DIGESTS:
            for status_id in self.statuses:
                match = pattern.match(status_id)
                if match:
                    return True, match.group(1)
        return True, None


class ProgressReader:
    """Reads buildx's ``--progress=rawjson`` output line by line (see the module docstring).

    :param plan: the plan being built (buildx's JSON shape); without it a step belongs to the
        target its label names.
    :param sole_target: the one target of a one-target bake, which buildx's labels leave out.
    :param echo: receives the console, one line at a time with its newline.
    :param only_errors: show only buildx's own text lines (its error report) and the vertices
        that failed (``--progress quiet``); everything is still read and recorded.
    """

    def __init__(self, plan: Optional[dict] = None, sole_target: Optional[str] = None,
                 echo: Callable[[str], None] = lambda line: None, only_errors: bool = False):
        self.plan = plan
        self.sole_target = sole_target
        self.echo = echo
        self.only_errors = only_errors
        self.vertices: Dict[str, Vertex] = {}
        self.named_failed: List[str] = []  # "ERROR: target X: …"
        self.last_error = ""
        self._current: Optional[str] = None  # the vertex the console shows now
        self._partial: Dict[Tuple[str, int], str] = {}  # unfinished log lines
        self._pretty: List[str] = []  # an indented status, until its closing "}"
        self._owners: Dict[Tuple[str, Optional[str], str], str] = {}  # step_owner, memoised

    # -- input -------------------------------------------------------------------------------

    def feed(self, line: str) -> None:
        """Take one line of buildx's output (with or without its newline)."""
        text = line.rstrip("\r\n")
        if self._pretty or text == "{":  # buildx < 0.14 indents each status over many lines
            self._pretty.append(text)
            if text != "}":
                return
            text, self._pretty = "".join(self._pretty), []
        status = None
        if text.startswith("{"):
            try:
                status = json.loads(text)
            except ValueError:
                status = None
        if not isinstance(status, dict):
            self._flush_logs()
            self._current = None
            match = _TARGET_ERROR.match(text)
            if match:
                self.named_failed.append(match.group(1))
            self._say(text)
            return
        for event in status.get("vertexes") or ():
            self._vertex(event)
        for event in status.get("statuses") or ():
            self._status(event)
        for event in status.get("logs") or ():
            self._log(event)
        for event in status.get("warnings") or ():
            vertex = self._get(event.get("vertex", ""))
            self._show(vertex, f"WARN: {_b64(event.get('short'))}")

    def finish(self) -> None:
        """Show what is still held back: log lines waiting for their newline, an unfinished
        indented status (as text). Call once buildx has exited."""
        pretty, self._pretty = self._pretty, []
        for text in pretty:
            self.feed(text)
        self._flush_logs()

    def _get(self, digest: str) -> Vertex:
        vertex = self.vertices.get(digest)
        if vertex is None:
            vertex = self.vertices[digest] = Vertex(digest, len(self.vertices) + 1)
        return vertex

    def _vertex(self, event: dict) -> None:
        vertex = self._get(event.get("digest", ""))
        name = event.get("name") or ""
        if name:
            self._label(vertex, name)
        vertex.cached = vertex.cached or bool(event.get("cached"))
        started, completed = _seconds(event.get("started")), _seconds(event.get("completed"))
        if vertex.started is None and started is not None:
            vertex.started = started
        if started is not None and not event.get("cached") and (vertex.ran_from is None or started < vertex.ran_from):
            vertex.ran_from = started
        if vertex.completed is None and completed is not None:
            vertex.started, vertex.completed = started if started is not None else vertex.started, completed
        error = event.get("error") or ""
        if started is not None and not vertex._shown:
            self._show(vertex)
        if vertex._done:
            if error and not vertex.error:
                vertex.error = error
                self._show(vertex, _end(vertex))
            return
        vertex.error = error or vertex.error
        if completed is not None:
            vertex._done = True
            self._show(vertex, _end(vertex))

    def _label(self, vertex: Vertex, name: str) -> None:
        match = _NAME.match(name)
        tokens, rest = (match.group(1).split(), match.group(2)) if match else ([], name)
        if self.sole_target:
            target = self.sole_target
            tokens = tokens[1:] if tokens[:1] == [target] else tokens
        elif tokens and tokens[0] != "internal" and "/" not in tokens[0]:
            target, tokens = tokens[0], tokens[1:]
        else:
            target = None
        if target and target not in vertex.labels:
            vertex.labels.append(target)
        if vertex.name:
            return
        vertex.name = name
        if tokens and _STEP_NUMBER.fullmatch(tokens[-1]):
            tokens = tokens[:-1]
            if tokens and "/" in tokens[0]:
                vertex.platform, tokens = tokens[0], tokens[1:]
            vertex.stage = tokens[0] if tokens else None
            vertex.instruction = rest

    def _status(self, event: dict) -> None:
        vertex = self._get(event.get("vertex", ""))
        status_id = event.get("id") or ""
        seen = vertex.statuses.get(status_id, {})
        vertex.statuses[status_id] = event
        if status_id.startswith("sha256:"):
            vertex.layers = True
        # A context's transfer is shown even after its vertex's end: BuildKit reports the vertex
        # done once before the transfer starts.
        transfer = status_id.startswith("transferring ")
        if event.get("completed") and not seen.get("completed") and (transfer or not vertex._done):
            total = event.get("total")
            if total:
                size = f" {_size(event.get('current') or 0)} / {_size(total)}"
            elif transfer:  # "#5 transferring context: 38B done", as plain progress
                size = f" {_size(event.get('current') or 0)}"
            else:
                size = ""
            self._show(vertex, f"{status_id}{size} done")

    def _log(self, event: dict) -> None:
        vertex = self._get(event.get("vertex", ""))
        stream = _stream_number(event.get("stream"))
        key = (vertex.digest, stream)
        vertex.chunks += 1
        text = self._partial.pop(key, "") + _b64(event.get("data"))
        *lines, rest = text.split("\n")
        for line in lines:
            _keep(vertex, line, stream)
            self._show(vertex, line)
        if rest:
            self._partial[key] = rest

    def _flush_logs(self) -> None:
        for (digest, stream), rest in list(self._partial.items()):
            _keep(self.vertices[digest], rest, stream)
            self._show(self.vertices[digest], rest)
        self._partial.clear()

    # -- console -----------------------------------------------------------------------------

    def _show(self, vertex: Vertex, text: Optional[str] = None) -> None:
        """The vertex's header when the console moves to it, then ``#N text``."""
        if self.only_errors and not (text or "").startswith("ERROR"):
            return
        if self._current != vertex.digest:
            self._current = vertex.digest
            vertex._shown = True
            self._say("")
            self._say(f"#{vertex.number} {vertex.name}".rstrip())
        if text is not None:
            self._say(f"#{vertex.number} {text}")

    def _say(self, text: str) -> None:
        if text.startswith("ERROR:") or " ERROR: " in text:
            self.last_error = text
        # A step's output may hold terminal controls (ESC [2K erases the line): shown escaped.
        self.echo(printable(text) + "\n")

    # -- the record --------------------------------------------------------------------------

    def owners(self, vertex: Vertex) -> List[str]:
        """The targets a vertex belongs to, as names of the plan's targets.

        A Dockerfile step: :func:`step_owner` of each target that reported it (preferring owners
        that reported it themselves), without those that build on another owner; more than one
        only when unrelated targets share an identical step. Any other vertex: the first target
        that reported it. Empty for buildx's own vertices (``[internal] load local bake
        definitions``)."""
        if self.plan is None or vertex.instruction is None:
            return vertex.labels[:1]
        owners = []
        for label in vertex.labels:
            if label in self.plan["target"]:
                key = (label, vertex.stage, vertex.instruction)
                if key not in self._owners:
                    self._owners[key] = step_owner(self.plan, label, vertex.stage, vertex.instruction)
                owners.append(self._owners[key])
        owners = [o for o in dict.fromkeys(owners) if o in vertex.labels] or list(dict.fromkeys(owners))
        return [o for o in owners if not any(o != other and o in dependents(self.plan, {other}) for other in owners)] \
            or vertex.labels[:1]

    def owner(self, vertex: Vertex) -> Optional[str]:
        """The one target a vertex is counted under: of its :meth:`owners` (the ancestor-most
        targets whose builds hold it), the first in the plan's order of targets; ``None`` for
        buildx's own vertices. BuildKit runs a vertex shared by several builds once, so it is
        counted once: two unrelated targets with an identical step count it under the first.
        Any other vertex (a context's transfer) is counted under the first in the plan's order
        of the targets that reported it."""
        owners = self.owners(vertex)
        if vertex.instruction is None and self.plan is not None:
            owners = [label for label in vertex.labels if label in self.plan["target"]] or owners
        if not owners:
            return None
        order = {name: i for i, name in enumerate(self.plan["target"])} if self.plan is not None else {}
        return min(owners, key=lambda name: (order.get(name, len(order)), owners.index(name)))

    def records(self) -> Dict[str, List[Vertex]]:
        """Per target, the vertices that belong to it (:meth:`owners`), in order of appearance."""
        out: Dict[str, List[Vertex]] = {}
        for vertex in self.vertices.values():
            for target in self.owners(vertex):
                out.setdefault(target, []).append(vertex)
        return out

    def steps(self) -> Dict[str, Dict[str, int]]:
        """``{target: {"cached": n, "run": m}}``: each Dockerfile step that started (a distinct
        vertex digest), once, under the one target it is counted under (:meth:`owner`), as cached
        or run (:attr:`Vertex.was_cached`). The counts of all targets add up to the number of
        distinct Dockerfile-step vertices BuildKit reported."""
        out: Dict[str, Dict[str, int]] = {}
        for vertex in self.vertices.values():
            if vertex.instruction is None or (vertex.started is None and not vertex.cached):
                continue
            target = self.owner(vertex)
            if target is None:
                continue
            seen = out.setdefault(target, {"cached": 0, "run": 0})
            seen["cached" if vertex.was_cached else "run"] += 1
        return out

    def caches(self) -> Dict[str, Dict[str, Optional[bool]]]:
        """``{target: {"read": …, "written": …}}``: what the builds said of their registry caches,
        under every target whose build reported the vertex (:attr:`Vertex.labels`).

        ``read``: ``True`` when one of its ``importing cache manifest from REF`` vertices finished
        without an error (a ``cache-from`` ref was there and read), ``False`` when each of them
        failed (not found, refused); ``written``: ``True`` when every ``exporting cache to …``
        vertex (a ``cache-to``) finished without an error, ``False`` when one failed (with
        ``ignore-error=true`` the build goes on). A target whose build showed no such vertex
        (no ``cache-from``/``cache-to``, not built, interrupted before) is left out of that key's
        answer: ``None``."""
        out: Dict[str, Dict[str, Optional[bool]]] = {}
        for vertex in self.vertices.values():
            if _HARMLESS in vertex.name:
                key, either = "read", True  # one cache read is a read
            elif _CACHE_EXPORT in vertex.name:
                key, either = "written", False  # every export must have finished
            else:
                continue
            if not vertex.error and vertex.completed is None:
                continue  # not finished: says nothing yet
            ok = not vertex.error
            for target in vertex.labels:
                seen = out.setdefault(target, {"read": None, "written": None})
                seen[key] = ok if seen[key] is None else ((seen[key] or ok) if either else (seen[key] and ok))
        return out

    def transfers(self) -> Dict[str, int]:
        """``{target: bytes}``: the bytes of the build context and local named contexts the client
        sent the engine (:attr:`Vertex.sent_bytes`), each transfer once, under the target it is
        counted under (:meth:`owner`); every target that reported a transfer, 0 included."""
        out: Dict[str, int] = {}
        for vertex in self.vertices.values():
            if not any(s.startswith("transferring ") and s != "transferring dockerfile:" for s in vertex.statuses):
                continue
            target = self.owner(vertex)
            if target is not None:
                out[target] = out.get(target, 0) + vertex.sent_bytes
        return out

    def failures(self) -> Dict[str, List[dict]]:
        """``{target: [step, …]}``: each Dockerfile step that failed, under each target it belongs
        to (:meth:`owners`), as ``{"platform": "linux/arm64" or None, "stage": Dockerfile stage or
        None, "step": the instruction, "error": BuildKit's error, "output": its last output lines
        (:meth:`Vertex.output`)}``."""
        out: Dict[str, List[dict]] = {}
        for target, vertices in self.records().items():
            for v in vertices:
                if v.failed and v.instruction is not None:
                    out.setdefault(target, []).append({"platform": v.platform, "stage": v.stage, "step": v.instruction,
                                                       "error": v.error, "output": v.output()})
        return out

    def images(self) -> Dict[str, List[Tuple[str, Optional[str], Optional[str]]]]:
        """``{target: [(image, platform or None, digest or None), …]}``: the images the builds
        started from, as BuildKit named them: ``[… internal] load metadata for REF`` (a ``FROM`` or
        a ``docker-image://`` named context), a ``FROM REF@sha256:…`` step (the digest BuildKit
        resolved REF to), a named context's own ``[T context NAME] REF`` vertex. Under every
        target that reported the vertex (its build holds the image); the platform is the label's
        (``None`` when the label shows none: one platform, or a named context)."""
        out: Dict[str, List[Tuple[str, Optional[str], Optional[str]]]] = {}
        for vertex in self.vertices.values():
            found = _image_of(vertex)
            if found is None:
                continue
            for target in vertex.labels:
                if found not in out.setdefault(target, []):
                    out[target].append(found)
        return out

    def failed(self) -> List[str]:
        """Targets that failed: named by buildx (``ERROR: target X``) or whose non-step vertex
        (an export, a push) failed; each once, in order."""
        out = list(self.named_failed)
        for target, vertices in self.records().items():
            if any(v.failed and v.instruction is None for v in vertices):
                out.append(target)
        return list(dict.fromkeys(out))

    def failed_steps(self) -> List[Tuple[str, Optional[str], str]]:
        """``(target, Dockerfile stage or None, instruction)`` of each failed Dockerfile step; the
        target is an owner (:meth:`owners`; what :func:`step_owner` gives again from it)."""
        out = []
        for target, vertices in self.records().items():
            out += [(target, v.stage, v.instruction) for v in vertices if v.failed and v.instruction is not None]
        return list(dict.fromkeys(out))

    def durations(self, since: Optional[float] = None, until: Optional[float] = None) -> Dict[str, float]:
        """``{target: seconds}``: from the first vertex of the target's build starting to the last
        one completing, as BuildKit timed them, within this command. Every vertex reported under
        the target's name counts, so the steps it shares with the targets it builds on do, as in
        BuildKit's record of the build (``docker buildx history``); buildx's own vertices around
        the builds do not (a one-target bake reports them under its name). A target none of whose
        vertices completed is left out.

        BuildKit gives a vertex another build already resolved (a result from its cache, or a
        step a concurrent build on the same engine is running) with that build's times, which
        may be minutes before this command. So a cached report's ``started`` is not a start (a
        vertex only ever reported cached counts from its completion), and every time is clamped
        to ``[since, until]`` (seconds since the epoch, this host's clock: when the command
        started and ended; BuildKit's clock is taken to agree): no duration is longer than the
        command.
        """
        spans: Dict[str, List[float]] = {}
        for vertex in self.vertices.values():
            if vertex.started is None or vertex.completed is None or _BUILDX_OWN.fullmatch(vertex.name):
                continue
            end = vertex.completed
            start = end if vertex.ran_from is None else min(vertex.ran_from, end)
            if since is not None:
                start, end = max(start, since), max(end, since)
            if until is not None:
                start, end = min(start, until), min(end, until)
            for target in vertex.labels:
                span = spans.setdefault(target, [start, end])
                span[0], span[1] = min(span[0], start), max(span[1], end)
        return {target: max(0.0, end - start) for target, (start, end) in spans.items()}

    def exported(self) -> Dict[str, Optional[str]]:
        """Targets whose export (and push) finished, with the digest made (``None`` when not
        shown): what a run that failed part-way still finished."""
        out: Dict[str, Optional[str]] = {}
        for target, vertices in self.records().items():
            for vertex in vertices:
                done, digest = vertex.exported_digest()
                if done:
                    out[target] = digest
        return out


class LiveConsole:
    """``--progress tty``: the console of :class:`ProgressReader` as one status line rewritten in
    place (``[+] Building 12.3s (5/9) #7 [leaf 2/2] RUN make``: seconds so far, vertices finished
    of those seen, the latest), like buildx's own tty display but one line; a failed vertex (its header and
    ``#N ERROR: …``) and buildx's own text lines (its error report) stay on the screen.

    :param write: the terminal (stderr), written with ANSI ``ESC [K`` (erase the line).
    :param width: the terminal's width in columns, asked at each redraw.
    """

    _LINE = re.compile(r"#(\d+) (.*)", re.DOTALL)

    def __init__(self, write: Callable[[str], None], width: Callable[[], int] = lambda: 80,
                 clock: Callable[[], float] = None):
        import time

        self.write, self.width = write, width
        self.clock = clock or time.monotonic
        self.start = self.clock()
        self.names: Dict[str, str] = {}
        self.done: set = set()
        self.cached = 0
        self._latest = ""

    def __call__(self, line: str) -> None:
        text = line.rstrip("\n")
        if not text:
            return
        match = self._LINE.fullmatch(text)
        if match is None:  # buildx's own text: its error report
            self._keep(text)
            return
        number, rest = match.groups()
        if number not in self.names:
            self.names[number] = rest
        elif rest.startswith("ERROR"):
            self._keep(f"#{number} {self.names[number]}", text)
        elif rest == "CACHED" or rest == "CANCELED" or rest.startswith("DONE ") or rest == NO_CACHE_YET:
            self.cached += rest == "CACHED" and number not in self.done
            self.done.add(number)
        self._latest = f"#{number} {self.names[number]}"
        self._draw()

    def close(self) -> None:
        """Replace the status line by the tally: ``[+] Building 12.3s (9/9, 4 cached) FINISHED``."""
        self.write(f"\r\x1b[K[+] Building {self.clock() - self.start:.1f}s ({len(self.done)}/{len(self.names)}, "
                   f"{self.cached} cached) FINISHED\n")

    def _keep(self, *lines: str) -> None:
        self.write("\r\x1b[K" + "".join(f"{line}\n" for line in lines))
        self._draw()

    def _draw(self) -> None:
        status = f"[+] Building {self.clock() - self.start:.1f}s ({len(self.done)}/{len(self.names)}) {self._latest}"
        self.write("\r\x1b[K" + status[:max(10, self.width() - 1)])


def redact_raw(line: str, redact: Callable[[str], str]) -> str:
    """One line of buildx's ``--progress=rawjson`` output, taken alone, with ``redact`` applied to
    every text in it, the base64 ``data`` of its logs decoded first (a secret a step prints is there
    encoded); a JSON status is written again compactly, a text line is redacted as it is. A build's
    stream of lines goes through :class:`RawRedactor`, which also sees a secret cut across two
    log chunks."""
    status = _status_of(line)
    if status is None:
        return redact(line)
    return json.dumps(_redacted_status(status, redact), separators=(",", ":")) + "\n"


def _status_of(line: str) -> Optional[dict]:
    text = line.rstrip("\r\n")
    try:
        status = json.loads(text) if text.startswith("{") else None
    except ValueError:
        status = None
    return status if isinstance(status, dict) else None


def _redacted_status(status: dict, redact: Callable[[str], str], skip_logs_data: bool = False) -> dict:
    """``status`` with ``redact`` applied to every string in it, the base64 texts of logs and
    warnings (``data``, ``short``, ``detail``) decoded first; with ``skip_logs_data`` the logs'
    ``data`` is left as it is (the caller redacts it as a stream)."""

    def walk(value, key=None, in_logs=False):
        if isinstance(value, dict):
            return {k: (v if in_logs and k == "data" and skip_logs_data else walk(v, k, False))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, key, key == "logs") for v in value]
        if isinstance(value, str):
            if key in ("data", "short", "detail"):  # logs' and warnings' text, base64
                shown = _b64(value)
                hidden = redact(shown)
                return value if hidden == shown else base64.b64encode(hidden.encode("utf-8")).decode("ascii")
            return redact(value)
        return value

    return walk(status)


class RawRedactor:
    """``--progress rawjson``: each line buildx writes, redacted (:func:`bake.plan.secrets.redact`
    with the build's ``--secret`` values), as it is to be shown.

    A step's output reaches buildx's JSON cut into log chunks anywhere (two writes of a step are
    two chunks), so each vertex's stream (stdout, stderr) is redacted as one byte stream
    (:class:`bake.plan.secrets.StreamRedactor`): the end of a chunk that could begin a secret is
    held back and goes out with the next chunk of the same stream, or in one more logs line at
    :meth:`finish`. Bytes are decoded with ``surrogateescape``, so output that is no UTF-8 comes
    out as it went in, and a character cut between two chunks is whole.

    :param known: the current values of the build's secrets.
    """

    def __init__(self, known: Sequence[str] = ()):
        self.known = tuple(v for v in known if v)
        self._streams: Dict[Tuple[str, int], Tuple[codecs.IncrementalDecoder, StreamRedactor]] = {}

    def _redact(self, text: str) -> str:
        return redact(text, self.known)

    def __call__(self, line: str) -> str:
        """One line buildx wrote → the line to show (a JSON status written again compactly)."""
        status = _status_of(line)
        if status is None:
            return self._redact(line)
        out = _redacted_status(status, self._redact, skip_logs_data=True)
        for event in out.get("logs") or ():
            if isinstance(event, dict) and isinstance(event.get("data"), str):
                event["data"] = self._stream(event, _raw_b64(event["data"]), final=False)
        return json.dumps(out, separators=(",", ":")) + "\n"

    def _stream(self, event: dict, data: bytes, final: bool) -> str:
        key = (str(event.get("vertex", "")), _stream_number(event.get("stream")))
        if key not in self._streams:
            self._streams[key] = (codecs.getincrementaldecoder("utf-8")("surrogateescape"),
                                  StreamRedactor(self.known))
        decoder, stream = self._streams[key]
        text = stream.feed(decoder.decode(data, final))
        if final:
            text += stream.finish()
        return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")

    def finish(self) -> str:
        """The output still held back, as one more JSON line of logs events (``""`` when none is):
        call once buildx has exited."""
        events = []
        for (vertex, number), (decoder, stream) in list(self._streams.items()):
            data = self._stream({"vertex": vertex, "stream": number}, b"", final=True)
            if data:
                events.append({"vertex": vertex, "stream": number, "data": data})
        self._streams.clear()
        return json.dumps({"logs": events}, separators=(",", ":")) + "\n" if events else ""


def _stream_number(value) -> int:
    try:
        return int(value or 1)
    except (TypeError, ValueError):
        return 1


def _raw_b64(data: str) -> bytes:
    try:
        return base64.b64decode(data or "")
    except ValueError:
        return b""


_SIZE_UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def bytes_sent(log: str, blob: str, context: Optional[str] = None) -> int:
    """Bytes of one blob a plain-progress log shows sent to the engine: the largest
    ``sha256:<blob> N / M`` of its transfer (buildx's ``--progress=plain`` and this reader's
    console write it alike: ``#7 sha256:… 177.32MB / 177.32MB done``), or of
    ``transferring CONTEXT: N`` when ``context`` names a local directory context. 0 when the
    engine had it already (no such line).

    :param blob: the layer's digest, hex without ``sha256:``.
    :returns: bytes, decimal units as buildx shows them (``kB`` = 1,000).
    """
    found = re.findall(rf"sha256:{re.escape(blob)} ([\d.]+)([kMG]?B) / ", log)
    if context:
        found += re.findall(rf"transferring {re.escape(context)}: ([\d.]+)([kMG]?B)", log)
    return int(max([float(n) * _SIZE_UNITS[u] for n, u in found], default=0))


def last_text_line(text: str) -> str:
    """The last line of buildx's stderr that is not a JSON status (``""`` when there is none)."""
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("{")]
    return lines[-1] if lines else ""


_PLATFORM = re.compile(r"(?:linux|windows|darwin|freebsd)/[a-z0-9_]+(?:/v\d+)?")


def _image_of(vertex: Vertex) -> Optional[Tuple[str, Optional[str], Optional[str]]]:
    """``(image, platform or None, digest or None)`` of a vertex that names an image a build starts
    from (:meth:`ProgressReader.images`), else ``None``."""
    match = _NAME.match(vertex.name)
    if not match:
        return None
    tokens, rest = match.group(1).split(), match.group(2).strip()
    platform = next((t for t in tokens if _PLATFORM.fullmatch(t)), None)
    if vertex.instruction is not None:
        words = vertex.instruction.split()
        ref = words[1] if len(words) > 1 and words[0].upper() == "FROM" else ""
        pinned = _IMAGE_DIGEST.fullmatch(ref)
        return (pinned.group(1), vertex.platform, pinned.group(2)) if pinned else None
    loaded = _LOAD_METADATA.fullmatch(rest)
    if loaded and ("internal" in tokens or "context" in tokens):
        ref = loaded.group(1)
    elif "context" in tokens and rest and " " not in rest:
        ref = rest  # a docker-image:// named context's own source vertex
    else:
        return None
    pinned = _IMAGE_DIGEST.fullmatch(ref)
    return (pinned.group(1), platform, pinned.group(2)) if pinned else (ref, platform, None)


def _keep(vertex: Vertex, line: str, stream: int) -> None:
    """Keep a log line of ``vertex`` for :meth:`Vertex.output` (not a blank one), cut to
    :data:`TAIL_BYTES` bytes, with its stream and the number of the chunk that completed it."""
    line = line.rstrip("\r")
    if line.strip():
        vertex.kept += 1
        lines = vertex.tail.setdefault(stream, collections.deque(maxlen=TAIL_LINES))
        lines.append((vertex.kept, vertex.chunks, line.encode("utf-8")[:TAIL_BYTES].decode("utf-8", errors="ignore")))


def _end(vertex: Vertex) -> str:
    if vertex.error:
        error = " ".join(vertex.error.split("\n"))
        if vertex.error.endswith(_CANCELED):
            return "CANCELED"
        if _HARMLESS in vertex.name:  # a registry cache not there (yet): the build goes on without it
            return NO_CACHE_YET if error.endswith(": not found") else f"cache not read: {error}"
        return "ERROR: " + error
    if vertex.cached:
        return "CACHED"
    return f"DONE {vertex.duration_s or 0:.1f}s"


def _b64(data: Optional[str]) -> str:
    try:
        return base64.b64decode(data or "").decode("utf-8", errors="replace")
    except ValueError:
        return ""


def _seconds(stamp: Optional[str]) -> Optional[float]:
    """An RFC 3339 time (nanoseconds allowed) as seconds since the epoch; ``None`` for none or
    Go's zero time."""
    match = _STAMP.match(stamp or "")
    if not match or stamp.startswith("0001-"):
        return None
    zone = match.group(8) or "Z"
    try:  # the fields by hand: strptime's first call compiles its locale's patterns (tens of ms)
        when = datetime(*map(int, match.group(1, 2, 3, 4, 5, 6)), tzinfo=timezone.utc)
    except ValueError:  # a month 13, a second 61: no time
        return None
    offset = 0 if zone == "Z" else (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60) * (1 if zone[0] == "+" else -1)
    return when.timestamp() - offset + float("0" + (match.group(7) or ""))


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.2f}{unit}"
        n /= 1000
    return f"{n}B"  # pragma: no cover
