"""``bake-plan wheelhouse``: fill a directory with every wheel a chain's build needs, for the
image's Python version and each platform's wheel tags, so the build runs offline with
``--wheelhouse DIR`` (pip in the build: ``PIP_NO_INDEX=1 PIP_FIND_LINKS=/opt/wheelhouse``).

What is downloaded, per lock spec (:func:`bake.pip.lock.lock_specs`):

- the lock ``<locks>/<stage>[-<arch>].txt`` when it exists (exact pins, ``--no-deps``), else the
  chain's requirement lines, resolved by ``pip download`` with their dependencies;
- pip and pip-tools (:data:`TOOLS`), which the built-in ``base`` Dockerfile installs into
  ``/opt/pip-tools`` and the final stage runs;
- what pip leaves out because it evaluates environment markers for the host's Python and machine
  (``tomli; python_version < "3.11"`` on a 3.11 host, for a 3.9 image): see :func:`_marker_closure`.

Downloads use ``pip download --platform … --python-version … --implementation cp``, with the
manylinux tags of the platform (:func:`platform_tags`), and pip's own configuration (index, proxy,
certificates) plus the flags given: a lock's pins in one call per platform (``--prefer-binary
--no-deps``: a pin with no wheel for the platform comes as its sdist in that same call), lines
without a lock with their dependencies (``--only-binary=:all:``), every call side by side. The
sdists are then built into wheels on the host in one ``pip wheel`` run (right for pure-Python
packages; a compiled one gets the host's tags and is only useful on a matching host), by the pip
of bake-plan's own environment (``sys.executable -m pip``, at least :data:`MIN_BUILD_PIP`; never
the ``pip`` on ``PATH``). A pin that fails is named with pip's reason (:func:`pip_reason`), and
what was downloaded is kept. Files land in a temporary directory first; a wheel already in the
wheelhouse with the same name and bytes is left untouched (same mtime), so BuildKit's transfer of
the ``wheelhouse`` context stays incremental (``docs/benchmarks.md``).

Lock lines naming an in-image path are mapped to the host path the stages' ``host_paths``
declare; those the image builds itself are left out with a note (:func:`requirement_lines`). A
lock is checked as ``build --locked`` checks it (:func:`bake.pip.lock.checked_lock`), and no line
with a ``${VARIABLE}`` reaches pip (:func:`bake.pip.requirements.refuse_variables`).

Read back from the wheelhouse as untrusted input: its records (:class:`bake.owned.Record` checks
every name), the layout's ``state.json`` (its digest must be a sha256 of a manifest blob
bake-plan wrote, with those bytes), links (never followed). Two runs on one wheelhouse take turns
at its layout (``flock``, :func:`oci_layout`).
"""

from __future__ import annotations

import contextlib
import filecmp
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from bake.errors import LockError, OutputError, UsageError
from bake.owned import Record, file_sha256, kind_of, not_ours, own_directory
from bake.resources import cache_dir
from bake.pip.lock import LockSpec
from bake.plan.names import arch_of
from bake.plan.text import clipped, counted
from bake.processes import run_bounded

TOOLS = ("pip>=22.2,<25.3", "pip-tools==7.4.1")
"""What the built-in ``base`` Dockerfile installs from the wheelhouse into ``/opt/pip-tools``."""

GLIBC_MAX = 36
"""The newest glibc (2.36, Debian bookworm) whose manylinux wheels are taken."""

_MANYLINUX_ARCH = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le", "s390x": "s390x"}
_LEGACY = {5: "manylinux1", 12: "manylinux2010", 17: "manylinux2014"}


def platform_tags(platform: str, glibc_max: int = GLIBC_MAX) -> List[str]:
    """pip ``--platform`` values for ``os/arch``: ``manylinux_2_<N>_<machine>`` for N from
    ``glibc_max`` down to 17 (5 for x86_64), with the legacy aliases (``manylinux2014_…``,
    ``manylinux2010_…``, ``manylinux1_…``) where they exist for that machine.

    :raises UsageError: a platform that is not linux or whose arch has no manylinux tags.
    """
    os_name, _, _ = platform.partition("/")
    machine = _MANYLINUX_ARCH.get(arch_of(platform))
    if os_name != "linux" or machine is None:
        raise UsageError(f"--platform {platform}: no manylinux wheels for it (linux/{', linux/'.join(_MANYLINUX_ARCH)})")
    lowest = 5 if machine == "x86_64" else 17
    tags = []
    for minor in range(glibc_max, lowest - 1, -1):
        tags.append(f"manylinux_2_{minor}_{machine}")
        if minor in _LEGACY and (machine == "x86_64" or minor == 17):
            tags.append(f"{_LEGACY[minor]}_{machine}")
    return tags


def download_argv(python_version: str, platform: str, dest: Path, pip_args: Sequence[str] = (),
                  python: str = sys.executable, only_binary: bool = True) -> List[str]:
    """``pip download`` for wheels of ``platform`` (:func:`platform_tags`) and ``python_version``
    (``3.11``), into ``dest``; requirements are appended by the caller.

    :param only_binary: ``--only-binary=:all:`` (what pip requires to resolve dependencies for
        another platform); ``False``: ``--prefer-binary --no-deps`` (exact pins: a pin with no wheel
        for the platform comes as its sdist, in the same call).
    """
    tags = [arg for tag in platform_tags(platform) for arg in ("--platform", tag)]
    binary = ["--only-binary=:all:"] if only_binary else ["--prefer-binary", "--no-deps"]
    return [python, "-m", "pip", "--disable-pip-version-check", "download", "--quiet", "--dest", str(dest),
            *binary, "--implementation", "cp", "--python-version", python_version, *tags, *pip_args]


Runner = Callable[..., subprocess.CompletedProcess]
"""How pip is run: ``runner(argv, timeout=SECONDS)``, :func:`bake.processes.run_bounded`'s shape
(output captured as text; :class:`subprocess.TimeoutExpired` at the bound)."""

PIP_TIMEOUT = 3600
"""Seconds one pip run (a download, or the build of the sdists) may take."""

MIN_BUILD_PIP = (23, 1)
"""The oldest pip bake-plan builds sdists with: the pip of bake-plan's own environment
(``sys.executable -m pip``, never the ``pip`` on the user's ``PATH``), which bake-plan's
dependencies keep at least this recent (``pyproject.toml``). Older ones (Debian's ``python3 -m
venv`` gives 23.0.1) are refused, naming the version, before any build."""

_BOILERPLATE = ("error: subprocess-exited-with-error", "note: This error originates from a subprocess",
                "note: This is an issue with the package", "See above for output", "[end of output]",
                "ERROR: Failed to build", "Failed to build", "ERROR: Could not build wheels",
                "error: failed-wheel-build", "ERROR: Failed building wheel", "hint:", "WARNING:",
                "Building wheel for", "Running setup.py", "Created wheel for", "Stored in directory",
                "Successfully built", "Processing ", "DEPRECATION:", "[notice]", "Preparing metadata",
                "Getting requirements to build", "Installing build dependencies", "Building wheels for")
REASON_LINES = 5
"""How many of pip's last meaningful lines an error quotes."""
REASON_CHARS = 600
"""How long pip's quoted reason may be, in characters."""


def _run(argv: List[str], runner: Runner, what: str) -> subprocess.CompletedProcess:
    try:
        return runner(argv, timeout=PIP_TIMEOUT)
    except OSError as err:
        raise UsageError(f"{what}: cannot run {argv[0]}: {err.strerror or err}") from None
    except subprocess.TimeoutExpired:
        raise LockError(f"{what}: pip did not finish in {PIP_TIMEOUT} s") from None


def pip_reason(stderr: str) -> str:
    """pip's reason for a failure, on one line: its last :data:`REASON_LINES` meaningful lines
    (its generic closing words, box drawing and hints left out), joined with `` | ``, at most
    :data:`REASON_CHARS` characters. ``(no output)`` when pip said nothing."""
    import re

    lines = []
    for raw in stderr.splitlines():
        line = re.sub(r"^[\s│╰─>×║╭╮╯]+", "", raw).strip()
        if line and not line.startswith(_BOILERPLATE) and set(line) - set("-=*╰─>│ "):
            lines.append(line)
    if not lines:
        return "(no output)"
    return clipped(" | ".join(line.replace("\t", " ") for line in lines[-REASON_LINES:]), REASON_CHARS)


def requirement_lines(spec: LockSpec, locks_dir: Optional[Path],
                      notes: Optional[List[str]] = None) -> Tuple[List[str], bool, Optional[Path]]:
    """The lines to download for ``spec``: ``(lines, pinned, lock path)``.

    From the lock file in ``locks_dir`` when there is one (``pinned``: every line an exact pin),
    checked as ``build --locked`` checks it (:func:`bake.pip.lock.checked_lock`: an out-of-date
    lock is refused in the same words); else the stages' host lines (in-image paths mapped).

    A line naming a local path is mapped to the host path the stages' ``host_paths`` declare
    (:func:`bake.pip.requirements.to_host`); a lock line whose host path is a wheel is downloaded
    (copied) with the rest. Lines the image builds or installs from its own path (a directory or
    sdist there, an in-image path with no host path, an editable) are left out, each with a note
    appended to ``notes``: the image installs them from that path, not from the wheelhouse (a
    lock pins their dependencies as lines of their own).

    :raises UsageError: a line holds a ``${VARIABLE}`` reference (pip would expand it:
        :func:`bake.pip.requirements.refuse_variables`), or the lock is refused.
    """
    from bake.pip import requirements as reqs
    from bake.pip.lock import checked_lock

    notes = [] if notes is None else notes
    if locks_dir is not None:
        path = locks_dir / spec.filename
        if kind_of(path) is not None:
            text = checked_lock(spec, locks_dir, who="wheelhouse")
            lines = []
            for number, raw in enumerate(text.splitlines(), 1):
                line = raw.split(" #", 1)[0].strip()
                if not line or line.startswith("#"):
                    continue
                reqs.refuse_variables(line, f"line {number} of the lock {path}")
                option, value = reqs.split_option(line)
                if option in ("-e", "--editable"):
                    notes.append(f"left out {line!r} of {path}: an editable, installed in the image from its path")
                    continue
                if option is not None:
                    continue  # index options: pip's configuration and the flags given say where to look
                host, missing = reqs.to_host(line, spec.host_paths)
                if host is None:
                    notes.append(f"left out {line!r} of {path}: in-image path {missing} has no host path "
                                 "(the image builds or installs it there)")
                    continue
                loc = reqs.location(host)
                local = reqs.local_path(loc) if loc and host != line else None
                if local is not None and not (local.endswith(".whl") and kind_of(local) == "file"):
                    notes.append(f"left out {line!r} of {path}: built in the image from its in-image path "
                                 f"(host path {local} is no wheel to copy)")
                    continue
                lines.append(host)
            return lines, True, path
    lines = []
    for line in spec.lines:
        if line.host is None:
            notes.append(f"left out {line.text!r} of {line.who()}: in-image path {line.missing} has no host path "
                         "(the image builds or installs it there)")
            continue
        reqs.refuse_variables(line.host, f"{line.who()}, requirement line {line.text!r}")
        if line.host.lstrip().startswith(("-e", "--editable")):
            notes.append(f"left out {line.text!r} of {line.who()}: an editable, installed in the image from its path")
            continue
        lines.append(line.host)
    return lines, False, None


DEFAULT_PYTHON_VERSION = "3.11"
"""The Python wheels are fetched for when neither ``--python-version`` nor the stage says."""


class _Job:
    """One ``pip download``: its command line, what it is for, its own destination."""

    def __init__(self, argv: List[str], where: str, dest: Path, lines: List[str], pinned: bool,
                 closure: Optional[Tuple[str, str]] = None):
        self.argv, self.where, self.dest, self.lines, self.pinned = argv, where, dest, lines, pinned
        self.closure = closure  # (python version, platform): fetch what pip's markers left out
        self.failure: Optional[str] = None


def fill(specs: Sequence[LockSpec], out: Path, python_version: Optional[str], locks_dir: Optional[Path] = None,
         pip_args: Sequence[str] = (), python: str = sys.executable, runner: Runner = run_bounded,
         report: Callable[[str], None] = lambda msg: None, tools_cache: Optional[Path] = None) -> Dict[str, int]:
    """Download every wheel ``specs`` need into ``out`` (created), for ``python_version`` (default:
    the Python each chain's stage declares, else :data:`DEFAULT_PYTHON_VERSION`) and each spec's
    platforms, plus :data:`TOOLS`.

    One ``pip download`` per spec and platform (all of them side by side, up to one per CPU), plus
    one for :data:`TOOLS` per Python and platform: a lock's pins with ``--prefer-binary
    --no-deps``, so a pin without a wheel for the platform comes as its sdist in the same call;
    lines without a lock resolved with their dependencies (``--only-binary=:all:``). Then every
    sdist is built in one ``pip wheel`` run, with the pip of bake-plan's own environment
    (:data:`MIN_BUILD_PIP`). Whatever was downloaded or built is moved into ``out`` even when
    something else failed.

    :param tools_cache: where the wheels of :data:`TOOLS` are kept between runs
        (:func:`default_tools_cache`, which the command passes); ``None``: pip is asked every time.
    :returns: ``{"added": n, "kept": n, "built": n}``: wheels new in ``out``, already there with
        the same bytes (left untouched), and built on the host from an sdist.
    :raises LockError: pip could not find, download or build something: the pin or the spec,
        the platform, the Python version and pip's reason (:func:`pip_reason`), and how many
        wheels were kept.
    :raises UsageError: an out-of-date lock, a line with a ``${VARIABLE}`` (see
        :func:`requirement_lines`).
    :raises OutputError: ``out`` cannot be made or written, or a wheel would replace a file of
        that name bake-plan did not put there (its record, :class:`bake.owned.Record`), which is
        left as it is.
    """
    plans = []
    for spec in specs:  # every lock checked and every line read before anything runs
        notes: List[str] = []
        lines, pinned, lock = requirement_lines(spec, locks_dir, notes)
        plans.append((spec, lines, pinned, lock, notes))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot make the wheelhouse {out}: {err.strerror or err}") from None
    counts = {"added": 0, "kept": 0, "built": 0}
    with tempfile.TemporaryDirectory(prefix=".bake-wheelhouse-", dir=out.parent) as tmp:
        staging = Path(tmp) / "wheels"
        staging.mkdir()
        jobs: List[_Job] = []
        tools = set()
        for spec, lines, pinned, lock, notes in plans:
            for note in notes:
                report(f"note: {note}")
            version = python_version or spec.python or DEFAULT_PYTHON_VERSION
            for platform in spec.platforms:
                where = f"{spec.describe()} for Python {version} on {platform}"
                report(f"downloading {counted(len(lines), 'pinned requirement' if pinned else 'requirement')} of {where}"
                       + (f" (from {lock})" if lock else ""))
                if lines:
                    dest = Path(tmp) / f"job-{len(jobs)}"
                    argv = download_argv(version, platform, dest, pip_args, python, only_binary=not pinned)
                    jobs.append(_Job(argv + ["-r", str(_requirements_file(dest, lines))], where, dest, lines,
                                     pinned, None if pinned else (version, platform)))
                if (version, platform) not in tools:
                    tools.add((version, platform))
                    dest = Path(tmp) / f"job-{len(jobs)}"
                    jobs.append(_Job(download_argv(version, platform, dest, pip_args, python) + list(TOOLS),
                                     f"pip and pip-tools for Python {version} on {platform}", dest, list(TOOLS),
                                     False, (version, platform)))
        failure: Optional[LockError] = None
        caches = {id(job): _tools_cache(tools_cache, job, pip_args)
                  for job in jobs if tools_cache is not None and job.lines == list(TOOLS)}
        hits = {key for key, cache in caches.items() if cache is not None
                and _from_cache(cache, next(job.dest for job in jobs if id(job) == key))}
        try:
            _run_jobs([job for job in jobs if id(job) not in hits], runner)
            failed = [job for job in jobs if job.failure is not None]
            if failed:
                raise LockError(f"pip download failed for {failed[0].where}: {failed[0].failure}")
            for job in jobs:
                if job.closure is not None:
                    base = download_argv(*job.closure, job.dest, pip_args, python)
                    _marker_closure(base, job.lines, *job.closure, job.dest, Path(tmp), job.where, runner,
                                    python, pip_args, counts)
                if caches.get(id(job)) is not None and id(job) not in hits:
                    _to_cache(job.dest, caches[id(job)])
            sdists = _gather(jobs, staging)
            if sdists:
                _build(sdists, staging, Path(tmp) / "built", python, pip_args, runner, counts)
        except LockError as err:
            failure = err
            _gather(jobs, staging)  # the wheels the other downloads brought are kept too
        _move_in(staging, out, counts)
        if failure is not None:
            kept = counts["added"] + counts["kept"]
            raise LockError(f"{failure}; the {counted(kept, 'wheel')} downloaded before it "
                            f"{'is' if kept == 1 else 'are'} kept in {out}" if kept else str(failure))
    return counts


TOOLS_CACHE_DAYS = 7
"""How long the wheels of :data:`TOOLS` for one Python, platform and set of pip options are taken
from bake-plan's cache (``$XDG_CACHE_HOME/bake-plan/wheelhouse-tools/``) instead of asking pip
again: their resolution is a second ``pip download`` beside the pins', and pip-tools is pinned."""


def default_tools_cache() -> Optional[Path]:
    """``$XDG_CACHE_HOME/bake-plan/wheelhouse-tools`` (``~/.cache`` by default), where ``bake-plan
    wheelhouse`` keeps the wheels of :data:`TOOLS`; ``None`` when there is no cache directory (no
    absolute ``$XDG_CACHE_HOME`` and no home)."""
    base = cache_dir()
    return None if base is None else Path(base, "wheelhouse-tools")


def _tools_cache(root: Path, job: _Job, pip_args: Sequence[str]) -> Path:
    """Where the wheels of ``job`` (a :data:`TOOLS` download) are kept: one directory per Python,
    platform and set of pip options."""
    key = json.dumps([TOOLS, job.closure, list(pip_args)]).encode()
    return root / hashlib.sha256(key).hexdigest()[:24]


def _from_cache(cache: Path, dest: Path) -> bool:
    """Copy the cached wheels into ``dest``. Each is read back as untrusted: a plain ``*.whl`` name,
    a regular file (no link), the sha256 its manifest says. :returns: whether all were there."""
    import time

    try:
        manifest = cache / "manifest.json"
        if time.time() - os.lstat(manifest).st_mtime > TOOLS_CACHE_DAYS * 86400:
            return False
        wheels = json.loads(_read_own(manifest))["wheels"]
        if not isinstance(wheels, dict) or not wheels:
            return False
        for name, digest in wheels.items():
            if not (isinstance(name, str) and name.endswith(".whl") and "/" not in name and not name.startswith(".")
                    and isinstance(digest, str) and file_sha256(cache / name) == digest):
                return False
        dest.mkdir(parents=True, exist_ok=True)
        for name in wheels:
            shutil.copyfile(cache / name, dest / name, follow_symlinks=False)
        return True
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return False


def _to_cache(dest: Path, cache: Path) -> None:
    """Keep the wheels of a :data:`TOOLS` download for later runs (best effort: a cache that cannot
    be written is no error)."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=".tools-", dir=cache.parent))
    except OSError:
        return
    try:
        wheels = {}
        for path in sorted(dest.glob("*.whl")):
            shutil.copyfile(path, fresh / path.name)
            wheels[path.name] = file_sha256(fresh / path.name)
        (fresh / "manifest.json").write_text(json.dumps({"wheels": wheels}), encoding="utf-8")
        if kind_of(cache) == "directory":
            shutil.rmtree(cache)
        os.replace(fresh, cache)
    except OSError:
        shutil.rmtree(fresh, ignore_errors=True)


def _requirements_file(dest: Path, lines: Sequence[str]) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    req = dest.parent / f"{dest.name}.txt"
    req.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return req


def _run_jobs(jobs: Sequence[_Job], runner: Runner) -> None:
    """Run every job's ``pip download``, up to one per CPU at once; each failure is kept on its job."""
    from concurrent.futures import ThreadPoolExecutor

    def one(job: _Job) -> None:
        job.dest.mkdir(parents=True, exist_ok=True)
        proc = _run(job.argv, runner, "pip download")
        if proc.returncode != 0:
            job.failure = pip_reason(proc.stderr)

    if len(jobs) <= 1:
        for job in jobs:
            one(job)
        return
    with ThreadPoolExecutor(max_workers=max(2, min(len(jobs), os.cpu_count() or 1))) as pool:
        list(pool.map(one, jobs))


def _gather(jobs: Sequence[_Job], staging: Path) -> Dict[Path, Tuple[str, str]]:
    """Move every downloaded wheel into ``staging`` (one of each name); :returns: the sdists the
    pinned downloads brought, ``{path: (pin, where)}`` (one of each file name)."""
    sdists: Dict[Path, Tuple[str, str]] = {}
    names = set()
    for job in jobs:
        for path in sorted(job.dest.iterdir()) if job.dest.is_dir() else ():
            if kind_of(path) != "file":
                continue
            if path.name.endswith(".whl"):
                if not (staging / path.name).exists():
                    os.replace(path, staging / path.name)
            elif job.pinned and path.name not in names:
                names.add(path.name)
                sdists[path] = (_pin_of(path.name, job.lines), job.where)
    return sdists


def _canonical(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def _sdist_project(filename: str) -> str:
    """The canonical project name of an sdist's file name (``Promise-2.3.tar.gz`` → ``promise``)."""
    stem = filename
    for ext in (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".zip", ".tar"):
        if stem.endswith(ext):
            stem = stem[:-len(ext)]
            break
    return _canonical(stem.rsplit("-", 1)[0])


def _pin_of(filename: str, lines: Sequence[str]) -> str:
    """The line of ``lines`` an sdist ``filename`` (``promise-2.3.tar.gz``) was downloaded for."""
    project = _sdist_project(filename)
    for line in lines:
        head = line.split(";", 1)[0].split("@", 1)[0]
        for sep in ("===", "==", ">=", "<=", "~=", "!=", "<", ">", "[", " "):
            head = head.split(sep, 1)[0]
        if _canonical(head.strip()) == project:
            return line
    return filename


def build_pip_version(python: str = sys.executable, runner: Runner = run_bounded) -> Tuple[int, ...]:
    """The version of ``python -m pip`` (bake-plan's own environment's pip by default), as a tuple.

    :raises UsageError: it cannot be run or says no version.
    """
    import re

    proc = _run([python, "-m", "pip", "--version"], runner, "pip --version")
    match = re.match(r"pip (\d+(?:\.\d+)*)", proc.stdout or "")
    if proc.returncode != 0 or not match:
        raise UsageError(f"{python} -m pip --version: no pip there ({pip_reason(proc.stderr)}); bake-plan builds "
                         "sdists with the pip of its own environment: install pip there")
    return tuple(int(part) for part in match.group(1).split("."))


def _build(sdists: Dict[Path, Tuple[str, str]], staging: Path, built: Path, python: str, pip_args: Sequence[str],
           runner: Runner, counts: Dict[str, int]) -> None:
    """Build every sdist into a wheel in one ``pip wheel`` run (PEP 517, isolated), with the pip of
    bake-plan's environment; the wheels built go to ``staging`` even when another sdist fails.

    :raises LockError: that pip is older than :data:`MIN_BUILD_PIP`, or an sdist was not built
        (the first one's pin, where it was for, and pip's reason).
    """
    version = build_pip_version(python, runner)
    shown = ".".join(map(str, version))
    first = next(iter(sdists.values()))
    if version < MIN_BUILD_PIP:
        raise LockError(f"cannot build a wheel of {first[0]!r} ({first[1]}) from its sdist: the pip of bake-plan's "
                        f"environment ({python} -m pip) is {shown}, older than "
                        f"{'.'.join(map(str, MIN_BUILD_PIP))}: `{python} -m pip install -U pip` there")
    built.mkdir(parents=True, exist_ok=True)
    argv = [python, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps", "--use-pep517",
            "--wheel-dir", str(built), *pip_args, *[str(path) for path in sdists]]
    proc = _run(argv, runner, "pip wheel")
    have = {_canonical(p.name.split("-", 1)[0]) for p in built.glob("*.whl")}
    for path in sorted(built.glob("*.whl")):
        if not (staging / path.name).exists():
            os.replace(path, staging / path.name)
            counts["built"] += 1
    missing = [(pin, where) for path, (pin, where) in sdists.items() if _sdist_project(path.name) not in have]
    if missing or proc.returncode != 0:
        pin, where = (missing or [first])[0]
        more = f" (and {counted(len(missing) - 1, 'other pin')})" if len(missing) > 1 else ""
        raise LockError(f"cannot build a wheel of {pin!r}{more} ({where}) from its sdist with pip {shown} "
                        f"({python} -m pip): {pip_reason(proc.stderr)}")


def _move_in(staging: Path, out: Path, counts: Dict[str, int]) -> None:
    """Move the wheels of ``staging`` into ``out``: one with the same name and bytes is left as it
    is (same mtime); every name is checked against ``out``'s record before any wheel is moved."""
    record = Record(out)
    moves = []
    for wheel in sorted(staging.iterdir()):
        target = out / wheel.name
        if kind_of(target) == "file" and filecmp.cmp(wheel, target, shallow=False):
            counts["kept"] += 1
            continue
        record.check(wheel.name, "a wheel of the wheelhouse")
        moves.append(wheel)
    for wheel in moves:
        target = out / wheel.name
        digest = file_sha256(wheel)
        try:
            os.replace(wheel, target)
        except OSError:
            shutil.move(str(wheel), str(target))
        record.adopt(wheel.name, digest, "the wheelhouse")
        counts["added"] += 1


def _download(base: List[str], lines: List[str], pinned: bool, staging: Path, tmp: Path, where: str,
              runner: Runner, python: str, pip_args: Sequence[str], counts: Dict[str, int]) -> None:
    """One ``pip download`` of ``lines`` with their dependencies, into ``staging``."""
    if not lines:
        return
    req = tmp / "closure-requirements.txt"
    req.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _run(base + ["-r", str(req)], runner, "pip download")
    if proc.returncode != 0:
        raise LockError(f"pip download failed for {where}: {pip_reason(proc.stderr)}")


def marker_environments(python_version: str, platform: str) -> List[Dict[str, str]]:
    """PEP 508 marker environments of an image with Python ``python_version`` (``3.9``) on
    ``platform`` (``linux/amd64``): two, the first and a late patch release, so a marker on
    ``python_full_version`` counts when it holds for either."""
    machine = _MANYLINUX_ARCH.get(arch_of(platform), arch_of(platform))
    common = {"python_version": python_version, "platform_machine": machine, "sys_platform": "linux",
              "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
              "platform_python_implementation": "CPython", "platform_release": "", "platform_version": "",
              "extra": ""}
    return [dict(common, python_full_version=f"{python_version}.{patch}",
                 implementation_version=f"{python_version}.{patch}") for patch in (0, 99)]


def _wheel_requires(wheel: Path) -> List[str]:
    """The ``Requires-Dist`` lines of a wheel's METADATA ([] when it has none or cannot be read)."""
    import email.parser
    import zipfile
    try:
        with zipfile.ZipFile(wheel) as zf:
            name = next((n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None:
                return []
            meta = email.parser.Parser().parsestr(zf.read(name).decode("utf-8", "replace"), headersonly=True)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return []
    return meta.get_all("Requires-Dist") or []


def _wheels_for(staging: Path, machine: str) -> Dict[str, List[str]]:
    """``{project: [versions]}`` of the wheels in ``staging`` that fit ``machine`` (pure or its tags)."""
    import re
    have: Dict[str, List[str]] = {}
    for wheel in staging.glob("*.whl"):
        parts = wheel.name[:-4].split("-")
        if len(parts) < 5 or not (parts[-1] == "any" or machine in parts[-1]):
            continue
        have.setdefault(re.sub(r"[-_.]+", "-", parts[0]).lower(), []).append(parts[1])
    return have


def _marker_closure(base: List[str], lines: Sequence[str], version: str, platform: str, staging: Path,
                    tmp: Path, where: str, runner: Runner, python: str, pip_args: Sequence[str],
                    counts: Dict[str, int]) -> None:
    """Download what the image's Python and platform need but ``pip download`` left out.

    pip evaluates environment markers (``tomli; python_version < "3.11"``) for the Python and
    machine that run it, whatever ``--python-version``/``--platform`` say, so a wheelhouse for
    another Python would lack such requirements. Here every requirement (the lines, and the
    ``Requires-Dist`` of every wheel fetched) whose marker holds for the image
    (:func:`marker_environments`) and that no wheel in ``staging`` satisfies is downloaded too,
    with its dependencies, until nothing is missing."""
    import re
    try:
        from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # packaging comes with pip-tools (build); without it, pip's own result stands
        return
    envs = marker_environments(version, platform)
    machine = envs[0]["platform_machine"]
    asked = set()
    for _ in range(20):
        have = _wheels_for(staging, machine)
        texts = [*lines, *(r for wheel in sorted(staging.glob("*.whl")) for r in _wheel_requires(wheel))]
        missing: List[str] = []
        for text in texts:
            try:
                req = Requirement(text.split(" #", 1)[0].strip())
            except (InvalidRequirement, ValueError):
                continue
            if req.marker is None or req.url:
                continue
            try:
                if not any(req.marker.evaluate(env) for env in envs):
                    continue
            except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
                continue
            name = re.sub(r"[-_.]+", "-", req.name).lower()
            if any(req.specifier.contains(v, prereleases=True) for v in have.get(name, ())):
                continue
            req.marker = None
            if str(req) not in asked:
                asked.add(str(req))
                missing.append(str(req))
        if not missing:
            return
        _download(base, missing, False, staging, tmp, f"{where} (requirements whose markers hold there)",
                  runner, python, pip_args, counts)
    raise LockError(f"pip download for {where}: requirements with markers kept coming after 20 rounds")


LAYOUT_DIR = ".bake-plan-oci"
"""Under the wheelhouse: the OCI image layout of its wheels (:func:`oci_layout`)."""

_LAYER = "application/vnd.oci.image.layer.v1.tar"


class _Hashing:
    """A write-only file that hashes what goes through it (sha256) and counts its bytes."""

    def __init__(self, handle):
        self.handle, self.sha, self.size = handle, hashlib.sha256(), 0

    def write(self, data):
        self.sha.update(data)
        self.size += len(data)
        return self.handle.write(data)


def oci_layout(wheelhouse: str) -> str:
    """The wheelhouse as a named-context value that BuildKit fetches by content, not by file:
    ``oci-layout://<wheelhouse>/.bake-plan-oci@sha256:…``, an OCI image layout of one
    uncompressed layer holding every ``*.whl`` at its root (mtimes 0, owner root). BuildKit keeps
    the layer by its digest, so an unchanged wheelhouse is not sent again, whatever the buildx
    state or the files' mtimes (``docs/benchmarks.md``).

    The layout is made anew only when the wheels' names, sizes or mtimes changed since
    (``state.json`` beside it); then the old blobs bake-plan wrote are removed. The layout's
    directories are made as real directories (no link followed), and only files in its record
    (:class:`bake.owned.Record`) are replaced or removed. What is read back from the layout is
    untrusted: the record's names must be plain names inside it (else it is refused), and
    ``state.json``'s digest is taken only when it is a sha256 of a manifest blob bake-plan wrote
    that still has those bytes. Two runs on one wheelhouse take turns (``flock`` on
    :data:`LOCK_FILE`), so neither finds the other's blobs half recorded.

    :raises OutputError: the layout cannot be written (a read-only wheelhouse), a part of it is a
        symbolic link, a file bake-plan did not write is in the way, or its record names a path
        out of it.
    """
    root = Path(wheelhouse)
    layout = root / LAYOUT_DIR
    own_directory(layout / "blobs" / "sha256", root, "the wheelhouse's image layout")
    with _layout_lock(layout):  # two plans on one wheelhouse: one writes, the other reads what it wrote
        wheels = sorted(p for p in root.iterdir() if p.name.endswith(".whl") and kind_of(p) == "file")
        listing = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in wheels]
        record = Record(layout)
        try:
            old = json.loads(_read_own(layout / "state.json"))
            digest = old["digest"]
            # read back from the directory: the digest goes into the plan only when it is one, of a
            # manifest blob bake-plan wrote whose bytes still have that digest
            if (old["files"] == listing and isinstance(digest, str) and _DIGEST.match(digest)
                    and record.ours(f"blobs/sha256/{digest[7:]}")
                    and file_sha256(layout / "blobs" / "sha256" / digest[7:]) == digest):
                return f"oci-layout://{layout}@{digest}"
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError):
            pass
        try:
            digest = _write_layout(layout, wheels, record)
            record.write("state.json", json.dumps({"files": listing, "digest": digest}) + "\n", "the layout's state")
        except OSError as err:
            raise OutputError(f"cannot write the wheelhouse's image layout {layout}: {err.strerror or err}") from None
    return f"oci-layout://{layout}@{digest}"


_DIGEST = __import__("re").compile(r"sha256:[0-9a-f]{64}\Z")
LOCK_FILE = ".bake-plan.lock"
"""In the layout: the file two bake-plan runs on one wheelhouse lock (``flock``) while one of them
reads or writes the layout, so neither finds the other's half-recorded blobs."""


@contextlib.contextmanager
def _layout_lock(layout: Path):
    """Hold an exclusive ``flock`` on :data:`LOCK_FILE` in ``layout`` (opened without following a
    link) while the block runs; where ``flock`` is missing, nothing is held.

    :raises OutputError: the lock file cannot be opened (a link, a read-only wheelhouse).
    """
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    path = layout / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError as err:
        if kind_of(path) == "symbolic link":
            raise not_ours(path, "symbolic link", "the lock of the wheelhouse's image layout") from None
        raise OutputError(f"cannot write the wheelhouse's image layout {layout}: {err.strerror or err}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise not_ours(path, "special file", "the lock of the wheelhouse's image layout")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing it lets the lock go


def _read_own(path: Path) -> str:
    """A file of the layout, read without following a link. :raises OSError: missing, or a link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, encoding="utf-8") as handle:
        return handle.read()


def _put_blob(record: Record, name: str, source, what: str) -> None:
    """Put a blob (content-addressed: ``blobs/sha256/<its sha256>``) in the layout: a file already
    there with that content is taken as it is, anything else under that name is refused."""
    path = record.directory / name
    digest = "sha256:" + name.rsplit("/", 1)[-1]
    if kind_of(path) == "file" and file_sha256(path) == digest:
        record.adopt(name, digest, what)
        if isinstance(source, str):
            os.unlink(source)
        return
    record.check(name, what)
    if isinstance(source, str):  # a finished temporary file beside it
        os.replace(source, path)
        record.adopt(name, digest, what)
    else:
        record.write(name, source, what)


def _write_layout(layout: Path, wheels: List[Path], record: Record) -> str:
    blobs = layout / "blobs" / "sha256"
    what = "the wheelhouse's image layout"

    def put(data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        _put_blob(record, f"blobs/sha256/{digest}", data, what)
        return digest

    with tempfile.NamedTemporaryFile(dir=blobs, prefix=".layer-", delete=False) as handle:
        hashing = _Hashing(handle)
        with tarfile.open(fileobj=hashing, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for wheel in wheels:
                info = tar.gettarinfo(str(wheel), arcname=wheel.name)
                info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
                with open(wheel, "rb") as data:
                    tar.addfile(info, data)
    layer = hashing.sha.hexdigest()
    try:
        _put_blob(record, f"blobs/sha256/{layer}", handle.name, what)
    finally:
        if os.path.lexists(handle.name):
            os.unlink(handle.name)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer}"]}}).encode()
    config_digest = put(config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": f"sha256:{config_digest}",
                   "size": len(config)},
        "layers": [{"mediaType": _LAYER, "digest": f"sha256:{layer}", "size": hashing.size}],
    }).encode()
    manifest_digest = put(manifest)
    record.write("oci-layout", '{"imageLayoutVersion":"1.0.0"}', what)
    index = {"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": f"sha256:{manifest_digest}",
        "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "wheelhouse"}}]}
    record.write("index.json", json.dumps(index) + "\n", what)
    keep = {f"blobs/sha256/{d}" for d in (layer, config_digest, manifest_digest)}
    for name in sorted(record.written):  # only blobs bake-plan wrote; anything else stays
        if name.startswith("blobs/sha256/") and name not in keep:
            if record.ours(name):
                record.remove(name, what)
            else:
                record.forget([name], what)
    return f"sha256:{manifest_digest}"
