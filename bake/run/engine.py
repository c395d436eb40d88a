"""The one module that reaches Docker: ``docker buildx bake``, ``imagetools``, ``docker run``.

Imported only by commands that build, so planning never pays for python-on-whales' import. The
bake goes through python-on-whales (:func:`bake`); the engine probe before it is one short
``docker version`` run through :mod:`subprocess` while the plan is made (:class:`EngineProbe`),
with the buildx version remembered from an earlier ``docker info`` (:func:`known_buildx`).
Everything else goes through python-on-whales.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

from bake.errors import BakePlanError, RunError, UsageError
from bake.plan.render import shell_word
from bake.processes import run_bounded
from bake.resources import cache_dir
from bake.run.progress import ProgressReader, last_text_line


class EngineError(BakePlanError):
    """The Docker engine or the docker CLI cannot be reached, so nothing was started (exit 2)."""


class RegistryError(RunError):
    """A registry could not be reached or refused a request part-way through the work (exit 1)."""


REGISTRY_TIMEOUT_S = 120.0
"""How long one registry call (``imagetools inspect``/``create``) may take, in seconds: a registry
that accepts connections but never answers would otherwise hang a nightly job forever."""

# python-on-whales prints each command's whole environment (every credential in it) to stdout
# when PYTHON_ON_WHALES_DEBUG=1, past any redaction. This module is the only one that imports
# python-on-whales (tests/test_architecture.py), so dropping the variable here, once, means
# bake-plan never lets it print (docs/security.md, "One redaction for every output").
os.environ.pop("PYTHON_ON_WHALES_DEBUG", None)

DOCKER = "docker"
"""The docker CLI, looked up on ``PATH`` as python-on-whales looks it up."""

_TIMED_OUT = 124  # coreutils timeout(1)'s exit status when the command ran out of time
_NOT_FOUND = 127  # timeout(1): the command (docker) was not found


def _registry_docker(timeout_s: float):
    """A python-on-whales client whose every call is bounded by ``timeout_s`` seconds
    (``timeout(1)`` in front of ``docker``: SIGTERM, then SIGKILL 5 s later)."""
    from python_on_whales import DockerClient

    return DockerClient(client_call=["timeout", "--kill-after=5", f"{timeout_s:g}", "docker"])


def _buildx_words(timeout_s: float, argv: Sequence[str]) -> List[str]:
    """The words that run ``docker ARGV`` (``ARGV`` starting with ``buildx``) within ``timeout_s``
    seconds: ``timeout … /…/docker-buildx ARGV[1:]``, the buildx plugin the docker CLI would run
    (:func:`buildx_plugin`) run directly, else ``timeout … docker ARGV``. The docker CLI in front
    of a plugin starts it twice (its metadata, then the command): about half the CPU of a registry
    call, which ``publish`` makes once per per-arch image and per tag. ``-v`` shows either as
    ``docker buildx …`` (:func:`_shown_command`)."""
    words = list(_registry_docker(timeout_s).docker_cmd)
    plugin = buildx_plugin() if list(argv[:1]) == ["buildx"] else None
    return [*words[:-1], plugin, *argv[1:]] if plugin else [*words, *argv]


def _engine_docker():
    """A python-on-whales client for calls the engine alone answers (``buildx inspect``,
    ``image inspect``, ``bake --print``…), each bounded by :data:`ENGINE_TIMEOUT_S`."""
    return _registry_docker(ENGINE_TIMEOUT_S)


def _raise_if_engine_silent(err, what: str) -> None:
    """For a call made through :func:`_engine_docker`: :raises EngineError: it ran out of time."""
    if getattr(err, "return_code", None) == _TIMED_OUT:
        raise EngineError(f"{what}: the Docker engine did not answer within {ENGINE_TIMEOUT_S:g} s") from None


def _registry_of(ref: str) -> str:
    """The registry host of an image reference (``localhost:5555/x/y:t`` → ``localhost:5555``)."""
    first = ref.split("/", 1)[0]
    return first if "/" in ref and ("." in first or ":" in first or first == "localhost") else "docker.io"


@dataclass
class BakeRun:
    """What one ``docker buildx bake`` did.

    :param returncode: buildx's exit status (0 when every target built).
    :param failed: targets buildx named as failing (may be empty when buildx died before naming one).
    :param metadata: the ``--metadata-file`` content: per target ``containerimage.digest``,
        ``image.name``, ``buildx.build.ref``.
    :param error: the last error line buildx printed, if any.
    :param steps: per target, Dockerfile steps ``{"cached": n, "run": m}``
        (:meth:`bake.run.progress.ProgressReader.steps`).
    :param failed_steps: ``(target, Dockerfile stage or None, instruction)`` of every Dockerfile
        step that failed; the target is the step's owner when the plan was given, else the one
        BuildKit's label names.
    :param exported: targets whose export (and push) finished, with the digest made, as the
        progress showed them: what a run that failed part-way still finished.
    :param durations: per target, the seconds its build took, within the command's own run
        (:meth:`bake.run.progress.ProgressReader.durations`).
    :param transfers: per target, the bytes of build context and local named contexts sent to
        the engine (:meth:`bake.run.progress.ProgressReader.transfers`).
    :param failures: per target, its failed steps with their last output lines
        (:meth:`bake.run.progress.ProgressReader.failures`).
    :param images: per target, the images its build started from as BuildKit named them
        (:meth:`bake.run.progress.ProgressReader.images`).
    :param caches: per target, whether its registry cache was read and written
        (:meth:`bake.run.progress.ProgressReader.caches`).
    """

    returncode: int
    failed: List[str] = field(default_factory=list)
    failed_steps: List[tuple] = field(default_factory=list)
    exported: Dict[str, Optional[str]] = field(default_factory=dict)
    metadata: Dict[str, dict] = field(default_factory=dict)
    error: str = ""
    steps: Dict[str, Dict[str, int]] = field(default_factory=dict)
    durations: Dict[str, float] = field(default_factory=dict)
    interrupted: bool = False
    transfers: Dict[str, int] = field(default_factory=dict)
    failures: Dict[str, List[dict]] = field(default_factory=dict)
    images: Dict[str, List[tuple]] = field(default_factory=dict)
    caches: Dict[str, Dict[str, Optional[bool]]] = field(default_factory=dict)


BAKE_ENV_DROPPED = ("BUILDX_METADATA_PROVENANCE",)
"""Variables of the caller's environment :func:`bake` does not pass to buildx: set to
``disabled`` it leaves the base images' provenance out of the metadata file the sitrep reads."""


def bake_environment(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment buildx runs in for :func:`bake`: ``environ`` (default this process's)
    without :data:`BAKE_ENV_DROPPED`."""
    return {k: v for k, v in (os.environ if environ is None else environ).items() if k not in BAKE_ENV_DROPPED}


def bake_command(
    plan_file: Path,
    targets: Sequence[str],
    metadata_file: Path,
    push: bool = False,
    load: bool = False,
    pull: bool = False,
    builder: Optional[str] = None,
    extra_files: Sequence[str] = (),
    allow: Sequence[str] = (),
    progress: str = "rawjson",
    no_cache: bool = False,
    entitlements: Sequence[str] = (),
) -> List[str]:
    """The arguments after ``docker`` of ``docker buildx bake --file PLAN [--file EXTRA…]
    [--allow=fs.read=PATH…] --progress MODE --metadata-file F [--push] [--load] [--pull]
    [--no-cache] [--builder B] TARGETS``: what :func:`bake` runs, and what ``build --dry-run`` prints.

    :param allow: the local paths the plan reads (:func:`bake.plan.render.read_paths`), each
        granted with ``--allow=fs.read=PATH`` (buildx 0.17+ asks before reading outside the
        working directory; older buildx refuses the flag: give it none, :data:`FS_ENTITLEMENTS`).
    :param progress: buildx's ``--progress`` word (``rawjson`` for :func:`bake`).
    :param entitlements: the privileges the user granted that the plan asks for
        (:func:`bake.plan.render.granted`), each as ``--allow=ENTITLEMENT``.
    """
    argv = ["buildx", "bake"]
    for name in (plan_file, *extra_files):
        argv += ["--file", str(name)]
    argv += [f"--allow=fs.read={path}" for path in allow]
    argv += [f"--allow={entitlement}" for entitlement in entitlements]
    argv += ["--progress", progress, "--metadata-file", str(metadata_file)]
    argv += [flag for flag, wanted in (("--push", push), ("--load", load), ("--pull", pull), ("--no-cache", no_cache))
             if wanted]
    if builder is not None:
        argv += ["--builder", builder]
    return argv + list(targets)


def imagetools_create_command(tag: str, sources: Sequence[str], annotations: Sequence[str] = ()) -> List[str]:
    """The arguments after ``docker`` of ``docker buildx imagetools create --tag TAG SOURCES…``,
    what :func:`create_manifest` runs (``publish --dry-run`` and ``-v`` print it); each of
    ``annotations`` (``KEY=VALUE``) goes on the index (``--annotation index:KEY=VALUE``)."""
    return ["buildx", "imagetools", "create", *(f"--annotation=index:{a}" for a in annotations), "--tag", tag,
            *sources]


def imagetools_resolve_command(refs: Sequence[str]) -> List[str]:
    """The arguments after ``docker`` of the check :func:`all_resolve` runs: ``docker buildx
    imagetools create --dry-run REFS…``, which resolves every ref in the registry (side by side)
    and prints the manifest list it would make, pushing nothing."""
    return ["buildx", "imagetools", "create", "--dry-run", *refs]


def imagetools_inspect_command(ref: str) -> List[str]:
    """The arguments after ``docker`` of the check :func:`image_digest` runs (the descriptor of
    ``ref``'s manifest or manifest list, as JSON)."""
    return ["buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}", ref]


def command_line(argv: Sequence[str]) -> str:
    """``docker ARGV`` as one line a POSIX shell runs as is, each argument one shell word
    (:func:`bake.plan.render.shell_word`)."""
    return " ".join(shell_word(word) for word in ("docker", *argv))


_show: Optional[Callable[[str], None]] = None


def show_commands(show: Optional[Callable[[str], None]]) -> None:
    """``-v``: pass every docker command this module runs to ``show``, as :func:`command_line`
    gives it, just before it runs; ``None`` stops that.

    Two ways cover every call: the engine probe (run here through :mod:`subprocess`) and the bake
    (python-on-whales' streaming runner, which logs nothing) are shown by :func:`_running`, and
    every other python-on-whales call (``imagetools``,
    ``buildx inspect``, ``docker run``…) through python-on-whales' own log: ``python_on_whales.utils``
    logs ``Running command: <the words>`` at DEBUG before each one (python-on-whales 0.80+). The
    ``timeout(1)`` bake-plan puts in front of registry calls (:func:`_registry_docker`) is left out
    of the line: what is shown is the docker command.
    """
    global _show
    was, _show = _show, show
    if show is None and was is None:
        return  # nothing to undo (and no logging import on a build's path)
    import logging

    logger = logging.getLogger("python_on_whales.utils")
    for handler in [h for h in logger.handlers if h.get_name() == _COMMAND_LOG]:
        logger.removeHandler(handler)
    if show is None:
        return

    class CommandLog(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.startswith("Running command: "):
                import shlex

                line = _shown_command(shlex.split(message[len("Running command: "):]))
                if line is not None:
                    show(line)

    handler = CommandLog(logging.DEBUG)
    handler.set_name(_COMMAND_LOG)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


_COMMAND_LOG = "bake-plan: docker commands"  # the name of show_commands' handler, to replace it


def _running(argv: Sequence[str]) -> None:
    """Show ``docker ARGV`` (:func:`show_commands`) before this module runs it itself."""
    if _show is not None:
        _show(command_line(argv))


def _shown_command(words: Sequence[str]) -> Optional[str]:
    """The docker command in python-on-whales' words (``[timeout …] docker ARGV``) as
    :func:`command_line` gives it; ``None`` when they hold no docker command."""
    words = list(words)
    while words and os.path.basename(words[0]) not in (DOCKER, "docker-buildx"):
        words.pop(0)  # timeout(1) and its arguments
    if words and os.path.basename(words[0]) == "docker-buildx":  # the plugin run directly (_buildx_words)
        words = [DOCKER, "buildx", *words[1:]]
    return command_line(words[1:]) if words else None


def bake(
    argv: Sequence[str],
    metadata_file: Path,
    console: Callable[[str], None] = lambda line: sys.stderr.write(line),
    raw: Optional[Callable[[str], None]] = None,
    only_errors: bool = False,
    sole_target: Optional[str] = None,
    plan: Optional[dict] = None,
) -> BakeRun:
    """Run ``docker ARGV`` (:func:`bake_command` with ``progress="rawjson"``), read its progress
    (:class:`bake.run.progress.ProgressReader`, the one reader of it, so the sitrep is whole
    whatever is shown) and show it: readable lines to ``console``, one at a time with the newline
    (only the errors when ``only_errors``), and each line buildx wrote, as written, to ``raw`` when
    given (``--progress rawjson``). ``sole_target`` names the one target of a one-target plan,
    which buildx's progress leaves unnamed; ``plan`` (the plan's JSON shape) tells which target a
    step shared by several targets belongs to (without it: the target BuildKit named).

    buildx writes its progress on stderr; stdout, where ``bake`` prints nothing else, is read with
    it as one stream, so no line waits on the other pipe.

    When interrupted (Ctrl-C, or SIGTERM turned into :class:`KeyboardInterrupt` by the CLI), buildx
    is sent SIGINT so it cancels its builds instead of running on as an orphan (SIGKILL after
    :data:`CANCEL_TIMEOUT_S`), and the run comes back with ``interrupted`` set.

    python-on-whales runs it (its streaming runner, for the reasons at :data:`_BAKE_SHELL`); buildx
    runs in this process's environment without :data:`BAKE_ENV_DROPPED` (:func:`bake_environment`),
    stdin from ``/dev/null``; each target's duration is bounded by the command's own run (the
    host's clock from start to exit, :meth:`bake.run.progress.ProgressReader.durations`).

    :raises EngineError: the docker CLI or its buildx plugin is missing (the build never started).
    """
    from python_on_whales import DockerClient, DockerException
    from python_on_whales.utils import stream_stdout_and_stderr

    progress = ProgressReader(plan, sole_target, console, only_errors=only_errors)
    interrupted = False
    if shutil.which(DOCKER) is None:
        raise EngineError(f"the docker CLI was not found: no {DOCKER!r} on PATH")
    # python-on-whales runs the bake. Not through docker.buildx.bake(): it has no --allow
    # (fs.read=PATH, the entitlements the plan was granted), and it yields the lines without the
    # process. So its streaming runner (python_on_whales.utils.stream_stdout_and_stderr, what
    # docker.buildx.bake(stream_logs=True) runs) gets the very words of bake_command, through a
    # client whose call is _BAKE_SHELL in front of docker:
    # - it keeps every stderr line in one bytes object, re-made at each line (quadratic in the
    #   log: seconds on a long build's rawjson progress); buildx writes its progress on stderr, so
    #   the shell sends stderr to stdout and python-on-whales keeps nothing;
    # - its env can only add to this process's environment, so the shell drops BAKE_ENV_DROPPED;
    # - stdin is /dev/null, as buildx must never wait for a prompt.
    # Interrupts: the process python-on-whales started is found among this process's children
    # (_children_running) and cancelled with its tree, as before (_cancel).
    client = DockerClient(client_call=["sh", "-c", _BAKE_SHELL, "sh", DOCKER])
    _running(argv)
    since = time.time()  # what BuildKit reports from an earlier build is clamped to this run
    lines = stream_stdout_and_stderr(client.docker_cmd + list(argv))
    text: Deque[str] = collections.deque(maxlen=20)  # buildx's last own lines, for its error
    # Lines before buildx's first progress line are held: when the docker CLI refuses the command
    # itself (no buildx plugin), its usage text is not shown above the one line that says so.
    held: Optional[List[str]] = []

    def show(line: str) -> None:
        if raw is not None:
            raw(line)
        progress.feed(line)

    def release() -> None:
        nonlocal held
        for early in held or ():
            show(early)
        held = None

    returncode = 0
    try:
        for _, chunk in lines:
            line = chunk.decode(errors="replace")
            if not line.startswith("{"):
                text.append(line)
            if held is not None and not line.startswith("{"):
                held.append(line)
                continue
            release()
            show(line)
    except DockerException as err:  # buildx ended with a failure: its words are in ``text``
        returncode = err.return_code
    except KeyboardInterrupt:
        interrupted, returncode = True, 130
        lines.close()
        for pid in _children_running(argv):
            _cancel(pid)
        progress.last_error = "interrupted: buildx was told to cancel"
    if returncode and not interrupted and held is not None:  # no progress: docker may have refused it
        _require_buildx_plugin("".join(text))
    release()
    if returncode and not progress.last_error:
        progress.last_error = last_text_line("".join(text))

    until = time.time()
    progress.finish()
    metadata: Dict[str, dict] = {}
    if metadata_file.is_file():
        try:
            metadata = json.loads(metadata_file.read_text() or "{}")
        except ValueError:
            metadata = {}
    return BakeRun(returncode=returncode, failed=progress.failed(), metadata=metadata, error=progress.last_error,
                   steps=progress.steps(), failed_steps=progress.failed_steps(), exported=progress.exported(),
                   durations=progress.durations(since, until), interrupted=interrupted,
                   transfers=progress.transfers(), failures=progress.failures(), images=progress.images(),
                   caches=progress.caches())


def print_plan(plan_file: Path, targets: Sequence[str]) -> dict:
    """``docker buildx bake -f PLAN --print TARGETS``: the plan as buildx reads it (its JSON, every
    target the given ones need), nothing built.

    :raises EngineError: the docker CLI or buildx is missing, or buildx refuses the plan (its last
        error line).
    """
    from python_on_whales import DockerException
    from python_on_whales.client_config import ClientNotFoundError

    try:
        return _engine_docker().buildx.bake(targets=list(targets), files=[str(plan_file)], print=True)
    except DockerException as err:
        _raise_if_engine_silent(err, f"buildx bake --print {plan_file}")
        _require_buildx_plugin(err.stderr or "")
        raise EngineError(f"buildx bake --print {plan_file}: {last_text_line(err.stderr or '') or err}") from None
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None


_BAKE_SHELL = "".join(f"unset {name}; " for name in BAKE_ENV_DROPPED) + 'exec "$@" </dev/null 2>&1'
"""The POSIX shell words :func:`bake` puts in front of ``docker buildx bake`` (its reasons there):
buildx's stderr joined to its stdout, stdin from ``/dev/null``, :data:`BAKE_ENV_DROPPED` unset;
``exec``: the shell becomes docker."""


def _children_running(argv: Sequence[str]) -> List[int]:
    """The pids of this process's children whose command line ends with ``argv`` (``docker
    ARGV``, or the shell of :data:`_BAKE_SHELL` just before it becomes that)."""
    tail = [os.fsencode(word) for word in argv]
    found = []
    for path in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        try:
            with open(path) as handle:
                pids = [int(child) for child in handle.read().split()]
        except OSError:
            continue
        for pid in pids:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    words = handle.read().split(b"\0")[:-1]
            except OSError:
                continue
            if tail and words[-len(tail):] == tail:
                found.append(pid)
    return found


CANCEL_TIMEOUT_S = 20.0
"""How long an interrupted bake may take to cancel its builds, in seconds, before it is killed."""


def _cancel(proc, timeout: float = CANCEL_TIMEOUT_S) -> None:
    """Send SIGINT to the ``docker buildx bake`` :func:`bake` started and to every process under it
    (the buildx plugin, and the real docker CLI when ``docker`` is a wrapper script; buildx cancels
    its builds on SIGINT) and wait up to ``timeout`` seconds for it to end; then, or at a second
    interrupt, SIGKILL them all, so no buildx is left running. They stay in bake-plan's process
    group, so a signal to the whole group (a terminal's hang-up, a CI runner) reaches them too.

    :param proc: a :class:`subprocess.Popen`, or the pid of a child of this process.
    """
    sys.stderr.write(f"bake-plan: interrupted: buildx is cancelling its builds (up to {timeout:g} s; "
                     "interrupt again to stop it at once)\n")
    _signal_tree(proc, signal.SIGINT)
    try:
        if _waited(proc, timeout):
            return
    except KeyboardInterrupt:
        pass
    _signal_tree(proc, signal.SIGKILL)
    _waited(proc, None)


def _waited(proc, timeout: Optional[float]) -> bool:
    """Wait up to ``timeout`` seconds (``None``: as long as it takes) for ``proc`` (a Popen or a
    child's pid) to end. :returns: whether it ended."""
    if isinstance(proc, subprocess.Popen):
        try:
            proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            done, _ = os.waitpid(proc, os.WNOHANG)
        except ChildProcessError:  # reaped already (subprocess reaps a Popen it dropped)
            return True
        if done:
            return True
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _signal_tree(proc, number: int) -> None:
    """Send signal ``number`` to ``proc`` (a Popen or a pid) and every process under it (Linux's
    ``/proc/<pid>/task/<tid>/children``), the deepest first."""
    tree, todo = [], [getattr(proc, "pid", proc)]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        for path in glob.glob(f"/proc/{pid}/task/*/children"):
            try:
                with open(path) as handle:
                    todo += [int(child) for child in handle.read().split()]
            except OSError:
                continue
    for pid in reversed(tree):
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def repository_of(ref: str) -> str:
    """``host:port/path`` of ``host:port/path:tag@sha256:…`` (distribution/reference: a tag is after
    the last ``/``)."""
    name = ref.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def pushed_sizes(ref: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> Dict[str, int]:
    """The compressed size of a pushed image per platform, in bytes: its config and layers as its
    manifest lists them (what a pull downloads), from the registry
    (``docker buildx imagetools inspect --raw``; attestation manifests left out).

    :param ref: ``repo@sha256:…`` or ``repo:tag`` of an image or an index.
    :returns: ``{"linux/amd64": bytes, …}``; empty when the registry cannot tell.
    """
    from python_on_whales.utils import run

    def raw(one: str) -> dict:
        return json.loads(run(_buildx_words(timeout_s, ["buildx", "imagetools", "inspect", "--raw", one])))

    def size(manifest: dict) -> int:
        return int(manifest.get("config", {}).get("size", 0)) + sum(int(la.get("size", 0)) for la in manifest.get("layers", []))

    try:
        top = raw(ref)
        if "manifests" not in top:
            return {"": size(top)}
        repo = repository_of(ref)
        out = {}
        for entry in top["manifests"]:
            platform = entry.get("platform", {})
            if platform.get("os") in (None, "unknown"):
                continue
            name = "/".join(p for p in (platform.get("os"), platform.get("architecture"), platform.get("variant")) if p)
            out[name] = size(raw(f"{repo}@{entry['digest']}"))
        return out
    except Exception:  # no registry answer, not pushed: no size
        return {}


def buildx_version() -> Optional[Tuple[int, int, int]]:
    """The version of the buildx the docker CLI runs (``docker buildx version``: ``github.com/docker/buildx
    v0.13.1 …`` or a distribution's ``0.29.1+ds1``), or ``None`` when it cannot be told."""
    try:
        words = _engine_docker().buildx.version().split()
    except Exception:  # no buildx, no docker CLI: bake itself says so, in its own words
        return None
    return _version_of(words[1]) if len(words) > 1 else None


def _version_of(word: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """``(major, minor, patch)`` of ``v0.13.1`` or ``0.29.1+ds1``; ``None`` for anything else."""
    match = re.match(r"v?(\d+)\.(\d+)\.(\d+)", word or "")
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


@dataclass(frozen=True)
class EngineFacts:
    """What one ``docker info`` tells a build before it starts (:func:`engine_facts`), so the
    engine is asked once: it answers, which buildx the docker CLI runs, and its image store.

    :param buildx: the buildx plugin's version from the docker CLI's own plugin list
        (``ClientInfo.Plugins``: the plugin's metadata, the version ``docker buildx version``
        prints, found the same way, ``$DOCKER_CONFIG/cli-plugins`` first), or ``None`` when the
        list has no buildx (then ask :func:`buildx_version`).
    :param store: the image store's ``driver-type`` (:data:`CONTAINERD_STORE` for the containerd
        one), or ``None``.
    :param storage_driver: the engine's storage driver (``overlay2``, ``overlayfs``), for messages.
    """

    buildx: Optional[Tuple[int, int, int]]
    store: Optional[str]
    storage_driver: Optional[str]
    whole: bool = True
    """``False``: from ``docker version`` alone (:class:`EngineProbe` with the buildx version
    remembered): the engine answered, ``store`` and ``storage_driver`` were not asked."""


ENGINE_TIMEOUT_S = 60.0
"""How long ``docker info`` may take to answer, in seconds: an engine that accepts connections but
never answers is no engine (a build would otherwise wait forever)."""


class EngineProbe:
    """One engine probe, started when made and read when its answer is wanted (:meth:`facts`): a
    build starts it before it plans, so the engine answers while bake-plan loads its plugins and
    writes the plan. :meth:`close` stops it when bake-plan ends first (bad input, an interrupt).
    ``DOCKER_HOST`` and ``DOCKER_CONTEXT`` are honoured.

    When the version of the buildx the docker CLI runs is remembered (:func:`known_buildx`), the
    probe is ``docker version --format '{{json .Server}}'`` (:data:`LIGHT_ARGV`: the engine answers;
    it starts no CLI plugin, 0.02–0.1 s); else ``docker info --format '{{json .}}'``
    (:data:`ARGV`), whose ``ClientInfo.Plugins`` the docker CLI fills by running every CLI plugin's
    metadata command (0.3–0.7 s), and the buildx version it gives is remembered
    (:func:`remember_buildx`). Either exits 1 when the engine does not answer, and says why on
    stderr (:attr:`reason`).
    """

    ARGV = ("info", "--format", "{{json .}}")
    """The arguments after ``docker`` when the buildx version is not remembered."""
    LIGHT_ARGV = ("version", "--format", "{{json .Server}}")
    """The arguments after ``docker`` when it is."""

    def __init__(self, whole: bool = False) -> None:
        """:param whole: ``docker info`` whatever is remembered (:func:`engine_facts`: the image store)."""
        self._missing: Optional[str] = None
        self._facts: Optional[EngineFacts] = None
        self._read = False
        self.reason = ""
        """Why the engine did not answer, in the docker CLI's words (its last line), or a timeout."""
        self._plugin = buildx_plugin()
        self._known = None if whole else known_buildx(self._plugin)
        self.argv = self.LIGHT_ARGV if self._known is not None else self.ARGV
        """The arguments after ``docker`` this probe runs."""
        _running(self.argv)
        try:
            self._proc: Optional[subprocess.Popen] = subprocess.Popen(
                [DOCKER, *self.argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as err:
            self._proc, self._missing = None, str(err)

    def facts(self) -> Optional[EngineFacts]:
        """:class:`EngineFacts` (``whole`` false from ``docker version``), or ``None`` when the
        engine does not answer (within :data:`ENGINE_TIMEOUT_S`); waits for the CLI.

        :raises EngineError: the docker CLI is missing.
        """
        if self._missing is not None:
            raise EngineError(f"the docker CLI was not found: {self._missing}")
        if not self._read:
            try:
                out, err = self._proc.communicate(timeout=ENGINE_TIMEOUT_S)
                self.reason = last_text_line(err.decode(errors="replace"))
            except subprocess.TimeoutExpired:
                self.close()
                out, self.reason = b"", f"no answer within {ENGINE_TIMEOUT_S:g} s"
            self._read = True
            if self._proc.returncode:
                self._facts = None
            elif self._known is not None:
                self._facts = _server_of(out, self._known)
            else:
                self._facts = _facts_of(out)
                if self._facts is not None and self._facts.buildx is not None:
                    remember_buildx(self._plugin, self._facts.buildx)
        return self._facts

    def answered(self) -> EngineFacts:
        """:meth:`facts` of an engine that answered.

        :raises EngineError: the one line for an engine that does not answer: where it was looked
            for (``DOCKER_HOST``, a ``DOCKER_CONTEXT``, else the default socket) and the docker
            CLI's own reason; or the docker CLI is missing.
        """
        facts = self.facts()
        if facts is None:
            context = os.environ.get("DOCKER_CONTEXT")
            host = os.environ.get("DOCKER_HOST") or (f"context {context}" if context else "the default socket")
            why = f": {self.reason}" if self.reason else " (is dockerd running? is DOCKER_HOST right?)"
            raise EngineError(f"cannot reach a Docker engine at {host}{why}")
        return facts

    def buildx(self) -> Optional[Tuple[int, int, int]]:
        """The version of the buildx the docker CLI runs: from :meth:`facts`, else
        :func:`buildx_version`; ``None`` when neither tells (no docker CLI, no buildx)."""
        try:
            facts = self.facts()
        except EngineError:
            return None
        return (facts.buildx if facts else None) or buildx_version()

    def close(self) -> None:
        """Stop ``docker info`` (and what runs under it, when ``docker`` is a wrapper script) if it
        is still running."""
        if self._proc is not None and self._proc.poll() is None:
            _signal_tree(self._proc, signal.SIGKILL)
            self._proc.wait()


def _facts_of(out: bytes) -> Optional[EngineFacts]:
    """:class:`EngineFacts` of ``docker info``'s JSON; ``None`` for an answer that is no engine's."""
    try:
        info = json.loads(out)
    except ValueError:
        return None
    if not isinstance(info, dict) or info.get("ServerErrors") or not info.get("ID"):
        return None
    plugins = (info.get("ClientInfo") or {}).get("Plugins") or []
    buildx = next((_version_of(p.get("Version")) for p in plugins if isinstance(p, dict) and p.get("Name") == "buildx"),
                  None)
    status = {pair[0]: pair[1] for pair in info.get("DriverStatus") or [] if isinstance(pair, list) and len(pair) == 2}
    return EngineFacts(buildx=buildx, store=status.get("driver-type"), storage_driver=info.get("Driver") or None)


def _server_of(out: bytes, buildx: Tuple[int, int, int]) -> Optional[EngineFacts]:
    """:class:`EngineFacts` (``whole`` false) of ``docker version``'s ``.Server`` JSON and the
    remembered ``buildx``; ``None`` for an answer that is no engine's."""
    try:
        server = json.loads(out)
    except ValueError:
        return None
    if not isinstance(server, dict) or not (server.get("Version") or server.get("ApiVersion")):
        return None
    return EngineFacts(buildx=buildx, store=None, storage_driver=None, whole=False)


SYSTEM_PLUGIN_DIRS = ("/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
                      "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins")
"""Where the docker CLI looks for its plugins on Linux after ``$DOCKER_CONFIG/cli-plugins`` and
its configuration's ``cliPluginsExtraDirs`` (docker/cli's ``pluginmanager``)."""


def _docker_config_dir() -> str:
    """``$DOCKER_CONFIG``, else ``~/.docker``, as the docker CLI reads it."""
    return os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")


def buildx_plugin() -> Optional[str]:
    """The ``docker-buildx`` file the docker CLI runs for ``docker buildx``, found as it finds it,
    without running anything: ``$DOCKER_CONFIG/cli-plugins``, then the configuration's
    ``cliPluginsExtraDirs``, then :data:`SYSTEM_PLUGIN_DIRS`; ``None`` when there is none."""
    config = _docker_config_dir()
    extra: List[str] = []
    try:
        from bake.documents import read_json

        listed = read_json(os.path.join(config, "config.json")).get("cliPluginsExtraDirs")
        extra = [d for d in listed if isinstance(d, str)] if isinstance(listed, list) else []
    except Exception:  # no configuration, or one the docker CLI reads its own way: its default dirs
        extra = []
    for directory in (os.path.join(config, "cli-plugins"), *extra, *SYSTEM_PLUGIN_DIRS):
        path = os.path.join(directory, "docker-buildx")
        if os.path.isfile(path):
            return path
    return None


def _buildx_cache() -> Optional[str]:
    """``$XDG_CACHE_HOME/bake-plan/buildx-version.json`` (``~/.cache`` by default); ``None`` when
    there is no cache directory."""
    base = cache_dir()
    return None if base is None else os.path.join(base, "buildx-version.json")


def _plugin_stamp(plugin: Optional[str]) -> Optional[list]:
    """What the remembered version holds for: the plugin's path and its file's identity (device,
    inode, size, modification time), and the docker CLI on ``PATH``; ``None`` without a plugin."""
    if plugin is None:
        return None
    stamp: list = [plugin]
    for path in (plugin, shutil.which(DOCKER)):
        try:
            st = os.stat(path or "")
        except OSError:
            return None
        stamp += [path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
    return stamp


def known_buildx(plugin: Optional[str] = None) -> Optional[Tuple[int, int, int]]:
    """The version of the buildx plugin ``plugin`` (default :func:`buildx_plugin`), as an earlier
    run's ``docker info`` gave it (:func:`remember_buildx`), while that file and the docker CLI are
    the same files; ``None`` when not remembered. Runs nothing: ``build --dry-run`` asks no docker."""
    stamp = _plugin_stamp(plugin if plugin is not None else buildx_plugin())
    path = _buildx_cache()
    if stamp is None or path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            cached = json.load(handle)
        if cached.get("stamp") == stamp:
            return _version_of(cached.get("version"))
    except (OSError, ValueError, AttributeError):
        pass
    return None


def remember_buildx(plugin: Optional[str], version: Tuple[int, int, int]) -> None:
    """Remember ``version`` for the plugin file ``plugin`` (:func:`known_buildx`); a cache that
    cannot be written is left as it is (the next run asks ``docker info`` again)."""
    stamp, path = _plugin_stamp(plugin), _buildx_cache()
    if stamp is None or path is None:
        return
    from bake.output import write_atomic

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(path, json.dumps({"stamp": stamp, "version": _dotted(version)}), "the buildx version cache")
    except (OSError, BakePlanError):
        pass


def installed_buildx() -> Optional[Tuple[int, int, int]]:
    """What ``build --dry-run`` knows of buildx without running anything: the version an earlier
    build remembered (:func:`known_buildx`), else ``None`` (also when there is no docker CLI on
    ``PATH``: the command is printed all the same).

    :raises EngineError: (:data:`NO_BUILDX`) the docker CLI is on ``PATH`` and there is no
        ``docker-buildx`` where it looks for it (:func:`buildx_plugin`).
    """
    if shutil.which(DOCKER) is None:
        return None
    plugin = buildx_plugin()
    if plugin is None:
        raise EngineError(NO_BUILDX)
    return known_buildx(plugin)


def engine_facts() -> Optional[EngineFacts]:
    """``docker info`` now (:class:`EngineProbe`): :class:`EngineFacts`, or ``None`` when the
    engine does not answer.

    :raises EngineError: the docker CLI is missing.
    """
    return EngineProbe(whole=True).facts()


class BuildxTooOld(EngineError):
    """This buildx cannot build this plan, and a newer one can (exit 2: nothing was started)."""


SAME_TARGET_TWICE = (0, 15)
"""The first buildx that sends two named contexts on one bake target both as that target's
result (docker/buildx#2444); older ones send one as ``target:…`` and the build fails with
``unsupported context source target``."""

FS_ENTITLEMENTS = (0, 17)
"""The first buildx whose bake asks before reading a path outside the working directory, and
takes ``--allow=fs.read=PATH`` (older ones refuse the flag)."""

PLATFORM_SUBSET = (0, 20)
"""The first buildx that lets a target on several platforms build on a target on more
(docker/buildx#2877); older ones refuse any two multi-platform targets whose platforms differ."""


def buildx_needed(plan: dict) -> Optional[Tuple[Tuple[int, int], str]]:
    """The oldest buildx that builds ``plan`` (buildx's JSON shape), when that is newer than
    0.13, and why: ``((0, 20), "target 'b' (…) builds on target 'a' (…), which …")``; ``None``
    when buildx 0.13 builds it. Read from the finished plan, so a plugin's
    ``bake_plan_adjust_target`` counts too."""
    targets = plan.get("target", {})
    needs = []
    for name, target in targets.items():
        linked: Dict[str, List[str]] = {}
        for ctx, value in (target.get("contexts") or {}).items():
            if isinstance(value, str) and value.startswith("target:"):
                linked.setdefault(value[len("target:"):], []).append(ctx)
        for other, names in linked.items():
            if len(names) > 1:
                needs.append((SAME_TARGET_TWICE, f"target '{name}' has {len(names)} contexts on target '{other}' "
                                                 f"({', '.join(names)}), which buildx before {_dotted(SAME_TARGET_TWICE)} "
                                                 "does not resolve (docker/buildx#2444)"))
            mine, theirs = target.get("platforms") or [], (targets.get(other) or {}).get("platforms") or []
            if len(mine) > 1 and len(theirs) > 1 and set(mine) != set(theirs):
                needs.append((PLATFORM_SUBSET, f"target '{name}' ({', '.join(mine)}) builds on target '{other}' "
                                               f"({', '.join(theirs)}), which buildx before {_dotted(PLATFORM_SUBSET)} "
                                               "refuses for differing platforms (docker/buildx#2877); or build one "
                                               "platform per job with --platform"))
    return max(needs, key=lambda need: need[0]) if needs else None


def require_buildx(plan: dict, version: Optional[Tuple[int, int, int]]) -> None:
    """Stop before building when ``version`` (:func:`buildx_version`) is too old for ``plan``
    (:func:`buildx_needed`); an unknown version is let through (buildx then says it itself).

    :raises BuildxTooOld: one line naming this buildx, the one needed and the target that needs it.
    """
    need = buildx_needed(plan)
    if version is None or need is None or version[:2] >= need[0]:
        return
    raise BuildxTooOld(f"buildx {_dotted(version)} cannot build this plan, buildx {_dotted(need[0])} or newer "
                       f"can: {need[1]}")


def _dotted(version: Sequence[int]) -> str:
    return ".".join(map(str, version))


def check_builder(name: str, given_as: str = "--builder") -> None:
    """That ``name`` is a buildx builder ``docker buildx bake --builder NAME`` would find
    (``docker buildx inspect NAME``: a builder instance or a Docker context).

    :param given_as: where the name came from, for the message: ``--builder``, or buildx's own
        ``BUILDX_BUILDER`` variable.
    :raises bake.errors.UsageError: there is none of that name (exit 2, nothing was built), naming
        where it came from and the builders there are.
    """
    from python_on_whales import DockerException

    docker = _engine_docker()
    try:
        docker.buildx.inspect(name)
    except DockerException as err:
        _raise_if_engine_silent(err, f"{given_as} {name!r}: docker buildx inspect")
        _require_buildx_plugin(err.stderr or "")
        try:
            known = ", ".join(b.name for b in docker.buildx.list())
        except DockerException:
            known = ""
        why = _last_line(err) or f"no builder {name!r}"
        raise UsageError(f"{given_as} {name!r}: {why}" + (f" (builders: {known})" if known else "")) from None


CONTAINERD_STORE = "io.containerd.snapshotter.v1"
"""``docker info``'s ``driver-type`` of the containerd image store, the engine store that holds
image indexes and so attestation manifests (Docker docs, "containerd image store")."""


def require_attestation_store(plan: dict, load: bool, builder: Optional[str],
                              facts: Optional[EngineFacts] = None) -> None:
    """Stop before building when the plan attaches attestations (bake's ``attest``: ``--provenance``,
    ``--sbom``) and the images go through an engine image store that cannot hold them: the classic
    store (a graph driver such as overlay2) with ``--load``, or with the ``docker`` driver, which
    builds every image into it (buildx then fails with "Attestation is not supported for the docker
    driver"; a ``--load`` through another driver would drop them unsaid). The containerd image store
    keeps them.

    ``facts``: the engine's :func:`engine_facts` when the caller has them (else, or when they
    are not ``whole``, asked here: only a plan with attestations asks ``docker info``).

    :raises UsageError: one line naming the options, the store, and the ways out.
    """
    if not any(target.get("attest") for target in plan.get("target", {}).values()):
        return
    from python_on_whales import DockerException

    try:
        facts = facts if facts is not None and facts.whole else engine_facts()  # the store: docker info
        driver = _engine_docker().buildx.inspect(builder).driver if not load else None
    except DockerException:  # the build itself says what is wrong, in buildx's words
        return
    if facts is None:
        return
    store = facts.store
    if store == CONTAINERD_STORE or (not load and driver != "docker"):
        return
    how = "--load" if load else f"the docker driver of builder '{builder or 'default'}'"
    raise UsageError(f"--provenance/--sbom: this engine's image store ({facts.storage_driver}) cannot hold attestations, "
                     f"and {how} puts the images there; turn on the containerd image store, or --push through "
                     "a docker-container builder (--builder)")


NO_BUILDX = ("the docker CLI has no buildx plugin ('docker buildx' is not a docker command): install buildx "
             "(Debian's docker-buildx, Docker's docker-buildx-plugin), or put docker-buildx in ~/.docker/cli-plugins")
"""The line for a docker CLI without buildx (exit 2: nothing could be built, checked or published)."""


def _require_buildx_plugin(said: str) -> None:
    """After a buildx command failed, saying ``said`` (its stderr): :raises EngineError:
    (:data:`NO_BUILDX`) the docker CLI has no buildx plugin.

    The docker CLI itself refused the command when ``said`` holds ``Run 'docker --help'`` (buildx
    names its own subcommand there). It then does not always say why: it reads the flags of a
    command it does not know as its own (``unknown flag: --format``), so
    :func:`require_buildx_plugin` asks.
    """
    if "'docker --help'" in said:
        require_buildx_plugin()


def require_buildx_plugin() -> None:
    """:raises EngineError: (:data:`NO_BUILDX`) the docker CLI has no buildx plugin, as a bare
    ``docker buildx version`` tells: ``unknown command: docker buildx`` (docker 25+) or ``'buildx'
    is not a docker command`` (before). No docker CLI at all is left to the caller."""
    _running(["buildx", "version"])
    try:
        proc = run_bounded([DOCKER, "buildx", "version"], 60)
    except (OSError, subprocess.TimeoutExpired):
        return
    if proc.returncode and ("unknown command: docker buildx" in proc.stderr
                            or "'buildx' is not a docker command" in proc.stderr):
        raise EngineError(NO_BUILDX)


def run_docker(argv: Sequence[str], timeout_s: float) -> Tuple[int, str, str]:
    """Run ``docker ARGV`` (shown under ``-v``) within ``timeout_s`` seconds: ``bake-plan lint``'s
    ``buildx build --call=check``.

    :returns: (exit status, stdout, stderr).
    :raises EngineError: no docker CLI, or it did not finish in time.
    """
    _running(argv)
    try:
        proc = run_bounded([DOCKER, *argv], timeout_s)
    except FileNotFoundError:
        raise EngineError("no docker CLI on PATH: install docker and buildx") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"docker {' '.join(argv[:2])} did not finish within {timeout_s:g} s") from None
    return proc.returncode, proc.stdout, proc.stderr


def _last_line(err) -> str:
    lines = (getattr(err, "stderr", None) or str(err)).strip().splitlines()
    return lines[-1].removeprefix("ERROR: ").strip() if lines else ""


def _raise_if_unanswered(err, what: str, ref: str, timeout_s: float) -> None:
    """For a registry call run under :func:`_registry_docker`: :raises EngineError: the docker CLI
    or its buildx plugin is missing; :raises RegistryError: the registry did not answer within
    ``timeout_s``; :raises UsageError: ``BUILDX_BUILDER`` names no builder (:func:`check_builder`)."""
    if err.return_code == _NOT_FOUND:
        raise EngineError("the docker CLI was not found") from None
    if err.return_code == _TIMED_OUT:
        raise RegistryError(f"{what}: the registry {_registry_of(ref)} did not answer within {timeout_s:g} s") from None
    _require_buildx_plugin(err.stderr or "")
    builder = os.environ.get("BUILDX_BUILDER")
    if builder and f'no builder "{builder}" found' in (err.stderr or ""):  # buildx's choice, wrong: exit 2
        check_builder(builder, "BUILDX_BUILDER")


def _registry_call(argv: Sequence[str], what: str, ref: str, timeout_s: float) -> Tuple[Optional[str], str]:
    """Run ``docker ARGV`` (``ARGV`` starting with ``buildx``, :func:`_buildx_words`) within
    ``timeout_s`` seconds: ``(its output, "")``, or ``(None, buildx's last line)`` when buildx
    refused; the one runner of :func:`image_digest`, :func:`all_resolve`, :func:`index_annotations`
    and :func:`create_manifest`.

    :param what: names the call in the error line when the registry did not answer (``cannot check REF``).
    :raises RegistryError: the registry did not answer within ``timeout_s``.
    :raises EngineError: the docker CLI or its buildx plugin is missing.
    """
    from python_on_whales import DockerException
    from python_on_whales.client_config import ClientNotFoundError
    from python_on_whales.utils import run

    try:
        return run(_buildx_words(timeout_s, argv)), ""
    except DockerException as err:
        _raise_if_unanswered(err, what, ref, timeout_s)
        return None, _last_line(err)
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None


def _not_found(refused: str) -> bool:
    """Whether buildx's last line says the registry has no such image (not another refusal)."""
    return refused.endswith("not found") or "manifest unknown" in refused or "name unknown" in refused.lower()


def image_exists(ref: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> bool:
    """True when ``ref`` resolves in its registry (:func:`image_digest`).

    :param timeout_s: how long the registry may take to answer, in seconds.
    :raises RegistryError: the registry did not answer, or not in time (not the same as "not found").
    :raises EngineError: the docker CLI is missing.
    """
    return image_digest(ref, timeout_s) is not None


def image_digest(ref: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> Optional[str]:
    """The digest (``sha256:…``) ``ref`` resolves to in its registry, of the image or of the
    manifest list (``docker buildx imagetools inspect --format '{{json .Manifest}}'``: the
    descriptor's ``digest``), or ``None`` when the registry has no such image.

    :param timeout_s: how long the registry may take to answer, in seconds.
    :raises RegistryError: the registry did not answer, or not in time (not the same as "not found").
    :raises EngineError: the docker CLI is missing.
    """
    out, refused = _registry_call(imagetools_inspect_command(ref), f"cannot check {ref}", ref, timeout_s)
    if out is None:
        if _not_found(refused):
            return None
        raise RegistryError(f"cannot check {ref}: {refused}")
    try:
        return json.loads(out)["digest"]
    except (ValueError, KeyError, TypeError):
        raise RegistryError(f"cannot check {ref}: imagetools inspect gave no digest") from None


def all_resolve(refs: Sequence[str], timeout_s: float = REGISTRY_TIMEOUT_S) -> bool:
    """True when every one of ``refs`` resolves in its registry, asked in one buildx run
    (:func:`imagetools_resolve_command`) instead of one :func:`image_digest` run per ref: each
    run costs a process start (about 0.1 CPU-s) that ``publish``'s 32 checks paid 32 times.
    ``False`` when buildx refused any of them (not found, or any other answer): which one and why
    is for :func:`image_digest` to say, ref by ref.

    :param timeout_s: how long the registry may take to answer, in seconds.
    :raises RegistryError: the registry did not answer within ``timeout_s``.
    :raises EngineError: the docker CLI or its buildx plugin is missing.
    """
    if not refs:
        return True
    out, _ = _registry_call(imagetools_resolve_command(refs), f"cannot check {refs[0]} and {len(refs) - 1} more",
                            refs[0], timeout_s)
    return out is not None


def index_annotations(ref: str, timeout_s: float = REGISTRY_TIMEOUT_S) -> Optional[Dict[str, str]]:
    """The annotations of ``ref``'s manifest or manifest list (``docker buildx imagetools inspect
    --raw``: its ``annotations``; ``{}`` when it has none), or ``None`` when the registry has no
    such image. Values that are not strings are left out.

    :param timeout_s: how long the registry may take to answer, in seconds.
    :raises RegistryError: the registry did not answer, or not in time, or gave no JSON.
    :raises EngineError: the docker CLI is missing.
    """
    out, refused = _registry_call(["buildx", "imagetools", "inspect", "--raw", ref], f"cannot read {ref}", ref,
                                  timeout_s)
    if out is None:
        if _not_found(refused):
            return None
        raise RegistryError(f"cannot read {ref}: {refused}")
    try:
        notes = json.loads(out).get("annotations") or {}
    except (ValueError, AttributeError):
        raise RegistryError(f"cannot read {ref}: imagetools inspect --raw gave no JSON object") from None
    return {str(k): v for k, v in notes.items() if isinstance(v, str)} if isinstance(notes, dict) else {}


def create_manifest(tag: str, sources: Sequence[str], timeout_s: float = REGISTRY_TIMEOUT_S, *,
                    annotations: Sequence[str] = ()) -> None:
    """``docker buildx imagetools create -t TAG SOURCES…``: a manifest list of the sources'
    platforms, pushed as ``tag``. One source that is itself a manifest list (``repo@sha256:…``)
    is pushed as it is, under the same digest (how ``publish`` moves a tag onto an index).

    :param timeout_s: how long the registry may take, in seconds.
    :param annotations: ``KEY=VALUE`` annotations of the index (``publish --sitrep`` records the
        gate's outcome so).
    :raises RegistryError: the registry refused it or did not answer in time.
    """
    # what publish --dry-run prints (docker buildx …), the plugin run directly
    out, refused = _registry_call(imagetools_create_command(tag, sources, annotations),
                                  f"imagetools create {tag} failed", tag, timeout_s)
    if out is None:
        raise RegistryError(f"imagetools create {tag} failed: {refused}")


TEST_LINE_BYTES = 4096
"""How many bytes of one line of a test's output are kept (shown, and put in the reports); a longer
line is cut there and ends in ``… [line cut: N bytes]``."""

TEST_OUTPUT_BYTES = 16384
"""How many bytes of a test's last output lines are kept in all (:attr:`ContainerRun.tail`)."""

PULL_TIMEOUT_S = 1800.0
"""How long ``docker pull`` of an image to test may take, in seconds (a large image pulls in
minutes; a registry that stalls is stopped here)."""

REMOVE_TIMEOUT_S = 60.0
"""How long removing a test's container may take, in seconds."""


@dataclass
class ContainerRun:
    """What one command run in an image did (:func:`run_in_image`).

    :param exit_code: the command's exit status (``docker run`` passes it on; 125–127 are
        docker's own: the container could not start, the command cannot run or is not found);
        when it timed out, the status the stopped docker CLI gave.
    :param tail: its last output lines, stdout and stderr together in the order docker wrote
        them, undecorated; each at most :data:`TEST_LINE_BYTES` bytes, all together at most
        :data:`TEST_OUTPUT_BYTES`.
    :param duration_s: wall-clock seconds from ``docker run`` to its end.
    :param timed_out: it was stopped for running past its timeout.
    """

    exit_code: int
    tail: List[str]
    duration_s: float
    timed_out: bool = False


class OutputTail:
    """The last lines of a byte stream, with bounded memory whatever the stream: each line is
    cut at ``line_bytes`` (the rest of it is counted, not kept), and at most ``keep`` lines of at
    most ``tail_bytes`` bytes in all are kept. Each line goes to ``echo`` (cut as kept) as it ends.

    :param echo: gets each line, decoded (UTF-8, undecodable bytes replaced), without its newline.
    """

    def __init__(self, keep: int, line_bytes: int = TEST_LINE_BYTES, tail_bytes: int = TEST_OUTPUT_BYTES,
                 echo: Callable[[str], None] = lambda line: None):
        self.keep, self.line_bytes, self.tail_bytes, self.echo = keep, line_bytes, tail_bytes, echo
        self.lines: Deque[str] = collections.deque()
        self._size = 0  # bytes of self.lines
        self._line = bytearray()  # the line being read, up to line_bytes
        self._dropped = 0  # bytes of it past line_bytes
        self._any = False

    def feed(self, data: bytes) -> None:
        """Take the next bytes of the stream."""
        self._any = self._any or bool(data)
        start = 0
        while start < len(data):
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            room = self.line_bytes - len(self._line)
            self._line += piece[:max(room, 0)]
            self._dropped += max(len(piece) - max(room, 0), 0)
            if end < 0:
                return
            self._end_line()
            start = end + 1

    def finish(self) -> List[str]:
        """The stream ended: the last line, if unfinished, is kept too. :returns: the kept lines."""
        if self._line or self._dropped:
            self._end_line()
        return list(self.lines)

    def _end_line(self) -> None:
        text = bytes(self._line).decode("utf-8", "replace")
        if self._dropped:
            text += f"… [line cut: {len(self._line) + self._dropped} bytes]"
        self._line, self._dropped = bytearray(), 0
        self.echo(text)
        self.lines.append(text)
        self._size += len(text.encode("utf-8", "replace"))
        while len(self.lines) > 1 and (len(self.lines) > self.keep or self._size > self.tail_bytes):
            self._size -= len(self.lines.popleft().encode("utf-8", "replace"))


def run_in_image(ref: str, platform: str, argv: Sequence[str], timeout_s: float, keep: int = 20,
                 echo: Callable[[str], None] = lambda line: None) -> ContainerRun:
    """``docker run --rm --pull never --network none --platform PLATFORM REF ARGV…`` (an arm64
    image on an amd64 engine runs under QEMU emulation), bounded by ``timeout_s`` seconds: then
    the container is removed by name and the docker CLI stopped. No network: a smoke test checks
    the image as built, not what it could download. Each output line goes to ``echo`` as it comes
    (without its newline); the last ``keep`` are kept, in bounded memory (:class:`OutputTail`).

    The docker CLI runs through :mod:`subprocess`, stdout and stderr on one pipe read in chunks,
    not through python-on-whales' streamed ``run``: that one reads line by line with no bound on a
    line and adds each stderr line to one ``bytes`` (time quadratic in the output: a test writing
    400,000 short lines kept bake-plan busy for minutes past its ``timeout_s``).

    :raises EngineError: the docker CLI is missing.
    """
    import selectors
    import uuid

    name = f"bake-plan-test-{uuid.uuid4().hex[:12]}"
    words = ["run", "--rm", "--pull", "never", "--network", "none", "--name", name, "--platform", platform, ref,
             *argv]
    tail = OutputTail(keep, echo=echo)
    _running(words)
    started = time.monotonic()
    deadline = started + timeout_s
    try:
        proc = subprocess.Popen([DOCKER, *words], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    except OSError as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None
    timed_out = False
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if not selector.select(min(left, 1.0)):
                    continue
                data = os.read(proc.stdout.fileno(), 65536)
                if not data:
                    break
                tail.feed(data)
        if timed_out:  # the container first: stopping the docker CLI would leave it running
            _remove_container(name)
            _signal_tree(proc, signal.SIGKILL)
        try:
            code = proc.wait(max(deadline - time.monotonic(), 0) + 10)
        except subprocess.TimeoutExpired:  # output closed, the CLI hangs on: stopped as at a timeout
            timed_out = True
            _remove_container(name)
            _signal_tree(proc, signal.SIGKILL)
            code = proc.wait()
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM: the container would run on (PID 1 ignores SIGINT)
        _remove_container(name)
        _signal_tree(proc, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        proc.stdout.close()
    duration = time.monotonic() - started
    return ContainerRun(exit_code=code if code >= 0 else 128 - code, tail=tail.finish(),
                        duration_s=round(duration, 3), timed_out=timed_out)


def _remove_container(name: str) -> None:
    """``docker container rm --force NAME``, quietly, within :data:`REMOVE_TIMEOUT_S`: a test's
    container left running when its ``docker run`` was stopped (a timeout, an interrupt); one
    already gone is no error."""
    try:
        run_bounded([DOCKER, "container", "rm", "--force", name], REMOVE_TIMEOUT_S, cleanup=True)
    except (OSError, subprocess.TimeoutExpired):
        pass


def pull_image(ref: str, platform: str, timeout_s: float = PULL_TIMEOUT_S) -> None:
    """``docker pull --platform PLATFORM REF`` into the engine's image store, bounded by
    ``timeout_s`` seconds (:data:`PULL_TIMEOUT_S`; ``timeout(1)`` in front of ``docker``, as for
    every registry call).

    :raises RegistryError: the registry refused, or did not answer in time (exit 1).
    :raises EngineError: the docker CLI is missing.
    """
    from python_on_whales import DockerException
    from python_on_whales.client_config import ClientNotFoundError

    try:
        _registry_docker(timeout_s).image.pull(ref, platform=platform, quiet=True)
    except DockerException as err:
        if err.return_code == _NOT_FOUND:
            raise EngineError("the docker CLI was not found") from None
        if err.return_code == _TIMED_OUT:
            raise RegistryError(f"cannot pull {ref} for {platform}: the registry {_registry_of(ref)} did not "
                                f"answer within {timeout_s:g} s") from None
        raise RegistryError(f"cannot pull {ref} for {platform}: {_last_line(err)}") from None
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None


def image_size(ref: str, platform: str, timeout_s: float = ENGINE_TIMEOUT_S) -> Optional[int]:
    """The size of ``ref`` for ``platform`` in the engine's image store, in bytes, as ``docker
    image inspect --platform PLATFORM --format {{.Size}}`` gives it (the image's layers as the
    store keeps them; with the containerd image store, the platform's content there); an engine
    without ``--platform`` is asked without it (its store holds one platform per tag). Each call is
    bounded by ``timeout_s`` seconds.

    :returns: the bytes, or ``None`` when the engine did not tell (no such image, no answer).
    """
    for words in (["--platform", platform], []):
        try:
            code, out, _ = run_docker(["image", "inspect", *words, "--format", "{{.Size}}", ref], timeout_s)
        except EngineError:
            return None
        if code == 0 and out.strip().isdigit():
            return int(out.strip())
    return None


def local_image_exists(ref: str) -> bool:
    """True when ``ref`` is in the engine's image store (``docker image inspect``, bounded by
    :data:`ENGINE_TIMEOUT_S`).

    :raises EngineError: the docker CLI is missing, or the engine did not answer (in time).
    """
    from python_on_whales import DockerException
    from python_on_whales.client_config import ClientNotFoundError

    try:
        return _engine_docker().image.exists(ref)
    except DockerException as err:
        _raise_if_engine_silent(err, f"docker image inspect {ref}")
        raise EngineError(f"docker image inspect {ref}: {_last_line(err)}") from None
    except (FileNotFoundError, ClientNotFoundError) as err:
        raise EngineError(f"the docker CLI was not found: {err}") from None
