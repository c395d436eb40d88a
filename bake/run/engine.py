"""The one module that reaches Docker: ``docker buildx bake`` and ``history`` through python-on-whales.

Imported only by commands that build, so planning never pays for python-on-whales' import.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from bake.errors import BakePlanError, RunError


class EngineError(BakePlanError):
    """The Docker engine or the docker CLI cannot be reached, so nothing was started (exit 2)."""


class RegistryError(RunError):
    """A registry could not be reached or refused a request part-way through the work (exit 1)."""


# buildx reports a failed target as "ERROR: target <name>: ..." (bake) or, with plain progress,
# as "#N [<name> <stage> i/n] ..." followed by "#N ERROR: ...".
_TARGET_ERROR = re.compile(r"^ERROR: target ([A-Za-z0-9_-]+):")
_VERTEX = re.compile(r"^#(\d+) \[([A-Za-z0-9_-]+)[ \]]")
_VERTEX_ERROR = re.compile(r"^#(\d+) ERROR:")
# A Dockerfile step's label: target, optional platform, Dockerfile stage (absent for an unnamed
# stage), step number: "#25 [tf-broken mealkit 1/2] RUN ...". BuildKit shows a step shared by
# several targets once, labelled with one of them (a meal kit's step may carry its final's name),
# so the stage is what tells which target the step is really in (sitrep.make_sitrep).
_STEP_LABEL = re.compile(
    r"^#(\d+) \[([A-Za-z0-9_-]+)(?: [a-z0-9]+/[a-z0-9]+(?:/[a-z0-9]+)?)?(?: ([^\s\]]+))? \d+/\d+\] (.*)")
# Vertices whose errors do not fail a build: a registry cache that does not exist yet.
_HARMLESS = (" importing cache manifest from ",)
# A target's export ("#14 [mx-root] exporting to image"; pushing is part of it) and the digest it
# made: pushed, else the manifest list, else the manifest. buildx writes --metadata-file only when
# the whole bake succeeds, so this is how a failed run still tells which targets were finished.
_EXPORT = re.compile(r"^#(\d+) \[([A-Za-z0-9_-]+)\] exporting to (?:image|docker image format|oci image format)")
_DONE = re.compile(r"^#(\d+) DONE\b")
_DIGESTS = (
    re.compile(r"^#(\d+) pushing manifest for \S+@(sha256:[0-9a-f]{64})"),
    re.compile(r"^#(\d+) exporting manifest list (sha256:[0-9a-f]{64})"),
    re.compile(r"^#(\d+) exporting manifest (sha256:[0-9a-f]{64})"),
)
# A Dockerfile instruction: "#8 [jax-mealkit linux/arm64 mealkit 2/5] RUN ...".
_STEP = re.compile(r"^#(\d+) \[([A-Za-z0-9_-]+)(?: [a-z0-9]+/[a-z0-9]+(?:/[a-z0-9]+)?)? [^\]]* \d+/\d+\] ")
# With one target, buildx leaves the target name out: "#8 [linux/arm64 mealkit 2/5] RUN ...".
_ANONYMOUS_STEP = re.compile(r"^#(\d+) \[(?:[a-z0-9]+/[a-z0-9]+(?:/[a-z0-9]+)? )?(?:[^\s\]]+ )?\d+/\d+\] ")
# A step whose result comes from a cache: "#8 CACHED", or its layer fetched from a registry
# cache instead of being made ("#14 sha256:<digest> 174B / 174B done").
_CACHED = re.compile(r"^#(\d+) (?:CACHED$|sha256:[0-9a-f]{64} )")


class StepCounter:
    """Counts Dockerfile steps per bake target from buildx's plain progress.

    BuildKit names a step shared by several targets once, after one of them; a step counts as
    cached when BuildKit says ``CACHED`` or fetched its layer from a registry cache.
    """

    def __init__(self, sole_target: Optional[str] = None):
        self.target: Dict[str, str] = {}
        self.cached: set = set()
        self.sole_target = sole_target  # a bake of one target: buildx does not name it

    def feed(self, line: str) -> None:
        """Take one line of progress (without its newline)."""
        match = _STEP.match(line)
        if match:
            self.target.setdefault(match.group(1), match.group(2))
            return
        match = _ANONYMOUS_STEP.match(line) if self.sole_target else None
        if match:
            self.target.setdefault(match.group(1), self.sole_target)
            return
        match = _CACHED.match(line)
        if match:
            self.cached.add(match.group(1))

    def counts(self) -> Dict[str, Dict[str, int]]:
        """``{target: {"cached": n, "run": m}}``."""
        out: Dict[str, Dict[str, int]] = {}
        for vertex, target in self.target.items():
            entry = out.setdefault(target, {"cached": 0, "run": 0})
            entry["cached" if vertex in self.cached else "run"] += 1
        return out


class Progress:
    """Reads buildx's plain progress line by line: which targets and Dockerfile steps failed, the
    last error line, and the step counts (:class:`StepCounter`)."""

    def __init__(self, sole_target: Optional[str] = None):
        self.failed: List[str] = []
        self.failed_steps: List[tuple] = []
        self.exported: Dict[str, Optional[str]] = {}
        self.last_error = ""
        self.steps = StepCounter(sole_target)
        self._target: Dict[str, str] = {}
        self._step: Dict[str, tuple] = {}
        self._harmless: set = set()
        self._export: Dict[str, str] = {}
        self._digest: Dict[str, tuple] = {}

    def feed(self, line: str) -> None:
        """Take one line of progress."""
        text = line.rstrip("\n")
        self.steps.feed(text)
        match = _VERTEX.match(text)
        if match:
            self._target.setdefault(match.group(1), match.group(2))
            if any(h in text for h in _HARMLESS):
                self._harmless.add(match.group(1))
        match = _STEP_LABEL.match(text)
        if match:
            self._step.setdefault(match.group(1), (match.group(2), match.group(3), match.group(4)))
        match = _VERTEX_ERROR.match(text)
        if match and match.group(1) not in self._harmless:
            if match.group(1) in self._step:
                self.failed_steps.append(self._step[match.group(1)])
            elif match.group(1) in self._target:
                self.failed.append(self._target[match.group(1)])
        match = _EXPORT.match(text)
        if match:
            self._export.setdefault(match.group(1), match.group(2))
        for rank, pattern in enumerate(_DIGESTS):
            match = pattern.match(text)
            if match and rank <= self._digest.get(match.group(1), (len(_DIGESTS),))[0]:
                self._digest[match.group(1)] = (rank, match.group(2))
        match = _DONE.match(text)
        if match and match.group(1) in self._export:
            vertex = match.group(1)
            self.exported[self._export[vertex]] = self._digest.get(vertex, (None, None))[1]
        match = _TARGET_ERROR.match(text)
        if match:
            self.failed.append(match.group(1))
        if text.startswith("ERROR:") or " ERROR: " in text:
            self.last_error = text


@dataclass
class BakeRun:
    """What one ``docker buildx bake`` did.

    :param returncode: buildx's exit status (0 when every target built).
    :param failed: targets buildx named as failing (may be empty when buildx died before naming one).
    :param metadata: the ``--metadata-file`` content: per target ``containerimage.digest``,
        ``image.name``, ``buildx.build.ref``.
    :param error: the last error line buildx printed, if any.
    :param steps: per target, Dockerfile steps ``{"cached": n, "run": m}`` (:class:`StepCounter`).
    :param failed_steps: ``(target label, Dockerfile stage or None, instruction)`` of every
        Dockerfile step that failed, as BuildKit labelled it.
    :param exported: targets whose export (and push) finished, with the digest made, as the
        progress showed them: what a run that failed part-way still finished.
    """

    returncode: int
    failed: List[str] = field(default_factory=list)
    failed_steps: List[tuple] = field(default_factory=list)
    exported: Dict[str, Optional[str]] = field(default_factory=dict)
    metadata: Dict[str, dict] = field(default_factory=dict)
    error: str = ""
    steps: Dict[str, Dict[str, int]] = field(default_factory=dict)
    interrupted: bool = False


def bake(
    plan_file: Path,
    targets: Sequence[str],
    metadata_file: Path,
    push: bool = False,
    load: bool = False,
    builder: Optional[str] = None,
    echo: Callable[[str], None] = lambda line: sys.stderr.write(line),
    extra_files: Sequence[str] = (),
    sole_target: Optional[str] = None,
) -> BakeRun:
    """Run ``docker buildx bake -f PLAN [-f EXTRA…] --progress plain --metadata-file F TARGETS``
    and stream its progress to ``echo`` line by line. ``extra_files`` are read after the plan
    (docker/metadata-action's bake files); ``sole_target`` names the one target of a one-target
    plan, which buildx's progress leaves unnamed.

    When interrupted (Ctrl-C, or SIGTERM turned into :class:`KeyboardInterrupt` by the CLI), buildx
    is sent SIGINT so it cancels its builds instead of running on as an orphan, and the run comes
    back with ``interrupted`` set.

    :raises EngineError: python-on-whales or the docker CLI is missing (the build never started).
    """
    try:
        from python_on_whales import DockerException, docker
        from python_on_whales.client_config import ClientNotFoundError
    except ImportError as err:  # pragma: no cover - a dependency of the distribution
        raise EngineError(f"python-on-whales is not installed: {err}") from None

    progress = Progress(sole_target)
    returncode = 0
    interrupted = False
    try:
        lines = docker.buildx.bake(
            targets=list(targets), files=[str(plan_file), *map(str, extra_files)], push=push, load=load,
            builder=builder, metadata_file=str(metadata_file), progress="plain", stream_logs=True,
            # buildx 0.17+ asks before reading contexts outside the working directory, and every
            # context of a bake-plan plan is (stages/, plugin packages). python-on-whales has no
            # --allow, and the contexts are the user's installed plugins, so grant them all.
            variables={"BUILDX_BAKE_ENTITLEMENTS_FS": "0"},
        )
        for line in lines:
            echo(line)
            progress.feed(line)
    except DockerException as err:
        returncode = err.return_code or 1
        stderr = (err.stderr or "").strip()
        if not progress.last_error and stderr:
            progress.last_error = stderr.splitlines()[-1]
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None
    except KeyboardInterrupt:
        interrupted, returncode = True, 130
        _stop_children()
        progress.last_error = "interrupted: buildx was told to cancel"

    metadata: Dict[str, dict] = {}
    if metadata_file.is_file():
        try:
            metadata = json.loads(metadata_file.read_text() or "{}")
        except ValueError:
            metadata = {}
    return BakeRun(returncode=returncode, failed=list(dict.fromkeys(progress.failed)), metadata=metadata,
                   error=progress.last_error, steps=progress.steps.counts(),
                   failed_steps=list(dict.fromkeys(progress.failed_steps)), exported=dict(progress.exported),
                   interrupted=interrupted)


def _stop_children(timeout: float = 20.0) -> None:
    """Send SIGINT to this process's children (the ``docker buildx bake`` python-on-whales started;
    buildx cancels its builds on SIGINT) and reap them, waiting up to ``timeout`` seconds.
    Linux's ``/proc/<pid>/task/<tid>/children`` lists them."""
    import glob
    import signal
    import time

    children = set()
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as handle:
                children.update(int(pid) for pid in handle.read().split())
        except OSError:
            continue
    for pid in children:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    children.discard(pid)
            except ChildProcessError:
                children.discard(pid)
        time.sleep(0.1)


def build_record(ref: str) -> Optional[dict]:
    """BuildKit's record of one build (``docker buildx history inspect --format json``, buildx
    0.23+): ``Duration`` in nanoseconds, ``NumCompletedSteps``, ``NumCachedSteps``, ``Status``.

    :returns: the record, or ``None`` when this buildx or builder keeps no history.
    """
    from python_on_whales import docker
    from python_on_whales.utils import run

    build_id = ref.rsplit("/", 1)[-1]  # "builder/node/id"
    try:
        out = run(docker.docker_cmd + ["buildx", "history", "inspect", build_id, "--format", "json"])
        return json.loads(out)
    except Exception:  # no history (old buildx, other driver), or no docker CLI: no duration
        return None


def engine_reachable() -> bool:
    """True when ``docker info`` answers (``DOCKER_HOST`` is honoured)."""
    from python_on_whales import DockerException, docker

    from python_on_whales.client_config import ClientNotFoundError

    try:
        docker.info()
        return True
    except (DockerException, FileNotFoundError):
        return False
    except ClientNotFoundError as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None


def _last_line(err) -> str:
    lines = (getattr(err, "stderr", None) or str(err)).strip().splitlines()
    return lines[-1].removeprefix("ERROR: ").strip() if lines else ""


def image_exists(ref: str) -> bool:
    """True when ``ref`` resolves in its registry (``docker buildx imagetools inspect``).

    :raises RegistryError: the registry did not answer (not the same as "not found").
    :raises EngineError: the docker CLI is missing.
    """
    from python_on_whales import DockerException, docker
    from python_on_whales.client_config import ClientNotFoundError

    try:
        docker.buildx.imagetools.inspect(ref)
        return True
    except DockerException as err:
        last = _last_line(err)
        if last.endswith("not found") or "manifest unknown" in last or "name unknown" in last.lower():
            return False
        raise RegistryError(f"cannot check {ref}: {last}") from None
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None


def create_manifest(tag: str, sources: Sequence[str]) -> None:
    """``docker buildx imagetools create -t TAG SOURCES…``: a manifest list of the sources'
    platforms, pushed as ``tag``.

    :raises RegistryError: the registry refused it or did not answer.
    """
    from python_on_whales import DockerException, docker

    try:
        docker.buildx.imagetools.create(sources=list(sources), tags=[tag])
    except DockerException as err:
        raise RegistryError(f"imagetools create {tag} failed: {_last_line(err)}") from None
    except FileNotFoundError as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None

