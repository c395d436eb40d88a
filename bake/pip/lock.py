"""``bake-plan lock``: compile a chain's requirements on the host, before any build.

A stage's final image pip-compiles every ``requirements-*.in`` its meal kit chain wrote into
``/opt/pip-tools.d`` (design.md). The lock runs that same compile on the host, from the
``requirements`` lines the chain's stages declare, so a conflict between two stages shows in
seconds, naming the stages and plugins, instead of hours into a build (JAX-Toolbox: protobuf
between paxml and t5x, typing_extensions between TE and t5x). ``--locked`` builds then install
exactly the lock.

What goes in: for the requested stage and its parents (the meal kits its final stage is built
on; stages it only ``uses``, such as ``te``, contribute no ``.in`` file), root first, each
stage's lines as ``requirements-<stage>.in`` (the file names the image uses, so the
``# via -r requirements-<stage>.in`` annotations name the stage). uv resolves them, as a
subprocess ``uv pip compile`` (:data:`UV_OPTIONS`: pip-compile's output format, the one the final
stage's ``stages/scripts/pip-finalize.sh`` writes with pip-tools in the image); the index and
find-links options pass through. uv is a dependency of bake-plan; pip-tools is not needed on the
host (the image keeps it, and ``bake-plan wheelhouse`` fetches it for the image).

Lines naming a path in the image (``-e file:///opt/delta``, ``gamma @ file:///opt/wheels/…``)
are resolved from the host path the stage declares in ``Stage.host_paths``, and the lock names
the in-image path again. A line with no host path is skipped: the lock says so in its header,
``lock`` prints a note, and ``--locked`` refuses such a partial lock.

Per arch: each line's environment marker is evaluated for every platform the stage supports
(``platform_machine``: ``x86_64``, ``aarch64``…). When that leaves the same lines on every
platform there is one lock, ``<locks>/<stage>.txt``; otherwise one per arch,
``<locks>/<stage>-<arch>.txt``.

Which Python: a stage that declares ``python = "3.10"`` (or inherits it from a parent) is
resolved with ``--python-version 3.10 --python-platform <arch>-manylinux_2_28`` for each arch, so
dependencies' markers, ``Requires-Python`` and wheel tags are the image's, and no interpreter of
that version is needed on the host; when the arches' results differ, there is one lock per arch.
A stage that declares none is resolved for an interpreter's own markers, uv's ``--python``: the
one ``--python`` names, else the Python running bake-plan (so ``--python`` means "resolve for
this interpreter"; with a declared Python it must be of that version). The header records the
Python (and the uv platform when there is one) and ``resolver: uv``; ``bake-pip-finalize``
refuses a lock made for another Python.

Speed (docs/benchmarks.md, "The lock at resolver speed"): one uv run per lock and platform, all
of them side by side (:func:`resolve_all`); no probe of the interpreter bake-plan runs on; a
requirement line without a marker is never parsed. What is left on top of uv is bake-plan's
start-up (interpreter, plugins, composing the chain).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from bake.errors import LockConflict, LockError, OutputError, UsageError
from bake.output import write_atomic
from bake.owned import kind_of, not_ours, own_directory, sha256
from bake.patterns import LazyPattern
from bake.pip import requirements as reqs
from bake.plan.compose import Composition, declared_python
from bake.plan.names import arch_of, target_name
from bake.plan.stage import Stage
from bake.plan.text import clipped
from bake.processes import run_bounded

CONTEXT_DIR = ".pip-lock"
"""Under the locks directory: ``<stage>/requirements[-<arch>].lock``, the ``pip-lock`` named
context of a ``--locked`` build (a copy of the lock, refreshed on every locked plan). bake-plan
makes it as real directories and keeps only its lock copies in it (:func:`_context_dir`)."""

HEADER = "# bake-plan "
# Index settings are never written into a lock (credentials in an index URL would land in the
# image); pip-sync reads them from the environment, and index options a stage wrote itself are put
# back at the top of the lock. uv writes pip-compile's format (stages/scripts/pip-finalize.sh runs
# ``pip-compile --no-header --strip-extras --allow-unsafe --no-emit-index-url …`` in the image):
# no index options unless asked, extras stripped, ``# via`` on lines of their own; pip and
# setuptools are kept, in name order (pip-compile puts them last, under a comment), which pip-sync
# takes either way. It ignores any uv configuration file and never downloads an interpreter.
# Index rule: pip (and so pip-compile in the image) takes the best version any index or find-links
# location offers; uv's default takes a project from the first index that has it (and puts
# --extra-index-url before --index-url), so ``-i A --extra-index-url B`` could pin B's older
# release where the image takes A's newer one. ``--index-strategy unsafe-best-match`` is pip's rule.
UV_OPTIONS = ("--quiet", "--no-progress", "--no-config", "--no-python-downloads", "--color", "never",
              "--no-header", "--annotation-style", "split", "--index-strategy", "unsafe-best-match")
UV_TIMEOUT_S = 3600.0
"""Seconds one ``uv pip compile`` may take (an index that never answers, a source package whose
build hangs): past it uv and everything it started are killed and the lock fails in one line."""
UV_PLATFORMS = {"amd64": "x86_64-manylinux_2_28", "arm64": "aarch64-manylinux_2_28"}
"""The ``--python-platform`` a lock is resolved for, by the arch of a bake platform, when the chain
declares no ``glibc``: manylinux_2_28 (Debian buster, RHEL 8), which every supported base has."""
DEFAULT_GLIBC = "2.28"
UV_MANYLINUX = (17, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40)
"""The ``manylinux_2_<N>`` uv names in ``--python-platform`` (``uv pip compile --help``): pip on
glibc 2.<M> takes every manylinux_2_<N> wheel with N <= M, so a lock for glibc 2.<M> is resolved
for the largest of these not above M (glibc 2.36, Debian bookworm: ``x86_64-manylinux_2_36``;
above 2.40, uv's newest, ``manylinux_2_40``)."""


class Line(NamedTuple):
    """One requirement line a stage contributes on one platform.

    :param text: as the stage declares it (what the image's ``.in`` file holds).
    :param host: what the host's pip-compile reads (in-image paths mapped to host paths, a marker
        that only holds on the target platform dropped); ``None`` when the line is skipped.
    :param missing: for a skipped line, the in-image path that has no host path.
    """

    stage: str
    plugin: str
    text: str
    host: Optional[str]
    missing: Optional[str] = None

    def who(self) -> str:
        return f"stage '{self.stage}' (plugin '{self.plugin}')"


@dataclass
class LockSpec:
    """One lock file to make: the stage it is for, the platforms it covers, its lines in chain order."""

    target: str
    platforms: Tuple[str, ...]
    per_arch: bool
    lines: List[Line]
    host_paths: Dict[str, str] = field(default_factory=dict)
    python: Optional[str] = None
    glibc: Optional[str] = None

    @property
    def filename(self) -> str:
        """``<stage>.txt``, or ``<stage>-<arch>.txt`` when the lines differ by arch."""
        return f"{self.target}-{arch_of(self.platforms[0])}.txt" if self.per_arch else f"{self.target}.txt"

    @property
    def context_name(self) -> str:
        """The file name in the ``pip-lock`` context: ``requirements.lock`` or ``requirements-<arch>.lock``."""
        return f"requirements-{arch_of(self.platforms[0])}.lock" if self.per_arch else "requirements.lock"

    @property
    def digest(self) -> str:
        """sha256 of the stages' lines (stage names and in-image text, in order): a lock made from
        other lines is out of date."""
        data = json.dumps([[line.stage, line.text] for line in self.lines], separators=(",", ":"))
        return sha256(data.encode())

    @property
    def skipped(self) -> List[Line]:
        return [line for line in self.lines if line.host is None]

    def describe(self) -> str:
        return f"'{self.target}' ({', '.join(self.platforms)})"

    def for_platform(self, platform: str) -> "LockSpec":
        """This lock split off for one platform (a lock per arch)."""
        return dataclasses.replace(self, platforms=(platform,), per_arch=True)


class Target(NamedTuple):
    """What uv resolves a lock for: Python ``python`` (``"3.10"``) on ``platform`` (a uv
    ``--python-platform`` such as ``x86_64-manylinux_2_28``); or the markers of the interpreter
    ``interpreter`` (uv's ``--python``), whose version ``python`` is (``"3.11.7"``)."""

    python: str
    platform: Optional[str] = None
    interpreter: Optional[str] = None

    def describe(self) -> str:
        return f"Python {self.python} ({self.interpreter})" if self.interpreter else \
            f"Python {self.python} on {self.platform}"

    def uv_args(self) -> List[str]:
        """uv pip compile's options for this target.

        For a Python and platform, uv resolves for them and needs an interpreter only to build
        the sdists whose metadata it reads; bake-plan names its own. Without ``--python``, uv
        asks every ``python3.N`` on ``PATH`` for one of the declared version on every run (a
        pyenv shim that fails is asked again each time: seconds, docs/benchmarks.md, "The lock of
        the real JAX stack") and, finding none, falls back to the first Python on ``PATH``."""
        if self.interpreter:
            return ["--python", self.interpreter]
        builder = ["--python", sys.executable] if sys.executable else []
        return ["--python-version", self.python, "--python-platform", str(self.platform), *builder]


def chain_python(composition: Composition, name: str) -> Optional[str]:
    """The Python of stage ``name``'s image: its own ``python``, else its nearest parent's (a concrete
    variant's one-value ``python`` axis counts too); ``None`` when no stage of the chain says."""
    by_name = {stage.name: stage for stage in composition.chain}
    found = declared_python(by_name[name], by_name)
    return found[0] if found else None


def chain_glibc(composition: Composition, name: str) -> Optional[str]:
    """The glibc of stage ``name``'s image (``"2.36"``): its own ``glibc``, else its nearest
    parent's; ``None`` when no stage of the chain says (the lock then assumes :data:`DEFAULT_GLIBC`)."""
    for stage in reversed(lock_chain(composition, name)):
        if getattr(stage, "glibc", None):
            return stage.glibc
    return None


def exact_python(python: str) -> str:
    """``python`` with its patch: ``"3.11.2"`` as is, ``"3.11"`` as ``"3.11.0"``, which is what uv's
    ``--python-version 3.11`` resolves for (``Requires-Python: >=3.11.1`` is then refused)."""
    return python if python.count(".") >= 2 else python + ".0"


def python_platform(platform: str, glibc: Optional[str] = None) -> str:
    """The uv ``--python-platform`` for a bake platform on an image with glibc ``glibc``
    (``"2.36"``; ``None``: :data:`DEFAULT_GLIBC`): ``linux/amd64`` → ``x86_64-manylinux_2_36``,
    the wheels pip in that image accepts (see :data:`UV_MANYLINUX`).

    :raises UsageError: no manylinux platform is known for its arch, or the glibc is older than 2.17.
    """
    arch = arch_of(platform)
    if arch not in UV_PLATFORMS:
        raise UsageError(f"cannot lock for {platform} without an interpreter: no Python platform is known for "
                         f"{arch} (known: {', '.join(UV_PLATFORMS)}); pass --python with an interpreter of that platform")
    minor = int((glibc or DEFAULT_GLIBC).split(".")[1])
    fits = [n for n in UV_MANYLINUX if n <= minor]
    if not fits:
        raise UsageError(f"cannot lock for glibc {glibc}: the oldest manylinux is manylinux_2_17")
    return UV_PLATFORMS[arch].replace("_2_28", f"_2_{fits[-1]}")


def lock_chain(composition: Composition, name: str) -> List[Stage]:
    """The stage ``name`` and its parents, root first: the meal kits its final stage compiles."""
    by_name = {stage.name: stage for stage in composition.chain}
    out = []
    stage: Optional[Stage] = by_name[name]
    while stage is not None:
        out.append(stage)
        stage = by_name.get(stage.parent) if stage.parent else None
    return out[::-1]


def stage_lines(stage: Stage, platform: str, python: Optional[str] = None,
                environment: Optional[Mapping[str, str]] = None) -> List[Line]:
    """The lines ``stage`` contributes on ``platform`` (see :func:`bake.pip.requirements.for_platform`;
    ``python``: the image's Python, when the lock is resolved for it; ``environment``: the marker
    environment of the interpreter it is resolved for otherwise)."""
    if stage.kind != "mealkit":  # only meal kits write REQUIREMENTS into /opt/pip-tools.d
        return []
    out = []
    for text in stage.requirements:
        effective = reqs.for_platform(text, platform, python, environment)
        if effective is None:
            continue
        host, missing = reqs.to_host(effective, stage.host_paths)
        out.append(Line(stage.name, stage.plugin, text, host, missing))
    return out


def lock_specs(composition: Composition, name: str, python: Optional[str] = None) -> List[LockSpec]:
    """The lock files stage ``name`` needs for the platforms its final target builds for.

    :param python: the interpreter the lock is resolved for (``lock --python``): the stages'
        markers are evaluated with its marker environment (:func:`interpreter_markers`), as uv
        evaluates its dependencies' markers; default: the chain's declared Python, else
        bake-plan's own interpreter.
    :raises UsageError: the stage is a one-target stage (no final pip-compile step to lock);
        ``python`` is not an interpreter.
    """
    by_name = {stage.name: stage for stage in composition.chain}
    stage = by_name[name]
    if stage.kind != "mealkit":
        raise UsageError(f"stage '{name}' (plugin '{stage.plugin}') is a one-target stage: "
                         "it has no final pip-compile step to lock")
    chain = lock_chain(composition, name)
    wanted = tuple(composition.plan["target"][target_name(name)]["platforms"])
    every = tuple(dict.fromkeys(tuple(stage.platforms) + wanted))
    declared, glibc = chain_python(composition, name), chain_glibc(composition, name)
    environment = interpreter_markers(python) if python is not None else None
    per_platform = {p: [line for s in chain for line in stage_lines(s, p, None if environment else declared, environment)]
                    for p in every}
    per_arch = len({tuple(lines) for lines in per_platform.values()}) > 1
    host_paths: Dict[str, str] = {}
    for s in chain:
        host_paths.update(s.host_paths)
    if per_arch:
        return [LockSpec(name, (p,), True, per_platform[p], host_paths, declared, glibc) for p in wanted]
    return [LockSpec(name, wanted, False, per_platform[wanted[0]], host_paths, declared, glibc)]


def interpreter(python: str) -> str:
    """``python`` as a path that works from any directory: a bare name looked up on ``PATH``, a
    relative path made absolute (the compile runs in a temporary directory)."""
    if os.sep not in python:
        return shutil.which(python) or python
    return os.path.abspath(python)


_PYTHON_SAYS = "bake-plan-python "
"""What an interpreter prints before its version when asked (:func:`python_version`): a program
that prints nothing, or something else, is not a Python."""


def _own_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


# The PEP 508 marker environment, computed as packaging.markers.default_environment does (the
# interpreter asked may have no packaging), on one line after _MARKERS_SAY.
_MARKERS_PROBE = """
import json, os, platform, sys
def fmt(info):
    out = '%d.%d.%d' % (info.major, info.minor, info.micro)
    return out if info.releaselevel == 'final' else out + info.releaselevel[0] + str(info.serial)
env = dict(implementation_name=sys.implementation.name, implementation_version=fmt(sys.implementation.version),
           os_name=os.name, platform_machine=platform.machine(), platform_release=platform.release(),
           platform_system=platform.system(), platform_version=platform.version(),
           python_full_version=platform.python_version(), platform_python_implementation=platform.python_implementation(),
           python_version='.'.join(platform.python_version_tuple()[:2]), sys_platform=sys.platform)
print(SAYS + json.dumps(env))
"""
_MARKERS_SAY = "bake-plan-markers "


@functools.lru_cache(maxsize=None)
def python_version(python: str) -> str:
    """The version of the interpreter ``python`` (``"3.11.7"``), asked once per process.

    :raises UsageError: one line naming ``--python``: it cannot be run, or is not a Python
        interpreter (``/bin/true``).
    """
    return _ask_interpreter(python)[0]


def interpreter_markers(python: str) -> Dict[str, str]:
    """The PEP 508 marker environment of the interpreter ``python`` (``python_version``,
    ``python_full_version``, ``platform_machine``…), what uv's ``--python`` evaluates markers
    with; asked with its version, once per process, within 120 s.

    :raises UsageError: as :func:`python_version`.
    """
    return dict(_ask_interpreter(python)[1])


@functools.lru_cache(maxsize=None)
def _ask_interpreter(python: str) -> Tuple[str, Tuple[Tuple[str, str], ...]]:
    given, python = python, interpreter(python)
    if python == sys.executable:  # bake-plan's own Python: nothing to ask (the probe says the same)
        from packaging.markers import default_environment

        return _own_version(), tuple(sorted(default_environment().items()))
    probe = (f"import sys; print({_PYTHON_SAYS!r} + '.'.join(map(str, sys.version_info[:3])))"  # as _own_version
             + _MARKERS_PROBE.replace("SAYS", repr(_MARKERS_SAY)))
    try:
        proc = run_bounded([python, "-c", probe], 120)
    except OSError as err:
        hint = (f" (--python takes an interpreter, not a version: python{given}, or its path)"
                if re.fullmatch(r"\d+(?:\.\d+)*", given) else "")
        raise UsageError(f"--python {given}: cannot run it: {err.strerror or err}{hint}") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"--python {given}: not a Python interpreter (it did not answer within 120 s)") from None
    said = [line[len(_PYTHON_SAYS):] for line in proc.stdout.splitlines() if line.startswith(_PYTHON_SAYS)]
    if proc.returncode != 0 or not said or not re.fullmatch(r"\d+\.\d+\.\d+", said[0]):
        rows = [row.strip() for row in (proc.stderr or proc.stdout).splitlines() if row.strip()]
        why = f"`{python} -c ...` exited {proc.returncode}" + (f": {clipped(rows[-1], 200)}" if rows else " and printed no version")
        raise UsageError(f"--python {given}: not a Python interpreter ({why})")
    markers = [line[len(_MARKERS_SAY):] for line in proc.stdout.splitlines() if line.startswith(_MARKERS_SAY)]
    try:
        env = json.loads(markers[0])
        if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
            raise ValueError("not a mapping of strings")
    except (IndexError, ValueError):
        raise UsageError(f"--python {given}: it printed its version but not its marker environment "
                         "(sys.implementation, platform)") from None
    return said[0], tuple(sorted(env.items()))


def targets(spec: LockSpec, python: Optional[str] = None) -> Dict[str, Target]:
    """What uv resolves ``spec`` for, by bake platform.

    With ``python`` (an interpreter, ``--python``), or for a chain that declares no Python (then
    bake-plan's own interpreter), one target for every platform: that interpreter's markers
    (uv's ``--python``). Otherwise the chain's Python on each platform's manylinux
    (``--python-version``/``--python-platform``), so no interpreter of that version is needed.

    :raises UsageError: ``python`` is another Python than the chain declares, or is not an
        interpreter; a platform uv has no name for.
    """
    if python is not None or spec.python is None:
        version = python_version(python or sys.executable)
        if spec.python and not same_python(version, spec.python):
            raise UsageError(f"--python {python}: it is Python {version}, the image of '{spec.target}' has "
                             f"Python {spec.python} (the stage's python); leave --python out to lock for {spec.python}")
        one = Target(version, interpreter=interpreter(python or sys.executable))
        return {p: one for p in spec.platforms}
    return {p: Target(exact_python(spec.python), python_platform(p, spec.glibc)) for p in spec.platforms}


def same_python(version: str, declared: str) -> bool:
    """``version`` (``"3.11.2"``) is the Python ``declared`` names: ``"3.11"`` any 3.11,
    ``"3.11.2"`` that one."""
    return version.split(".")[:len(declared.split("."))] == declared.split(".")


def foreign_platforms(spec: LockSpec, python: Optional[str] = None) -> List[str]:
    """The platforms of ``spec`` whose lock is resolved with an interpreter's markers (``--python``,
    or bake-plan's own for a chain that declares no Python: :func:`targets`) on another machine
    than theirs (``linux/arm64`` from an x86_64 host): the dependencies' markers and wheel tags in
    that lock are the host's. Empty when the chain's Python is resolved per platform."""
    if python is None and spec.python is not None:
        return []
    machine = os.uname().machine
    return [p for p in spec.platforms if reqs.PLATFORM_MACHINE.get(p, machine) != machine]


def compile_lock(spec: LockSpec, pip_args: Sequence[str] = (), target: Optional[Target] = None) -> str:
    """The body of ``spec``'s lock as uv resolves it for ``target``: uv's output with in-image
    paths restored (no header; :func:`lock_text` adds it).

    :param pip_args: index and find-links options (pip's spelling: ``--index-url``, ``--no-index``…).
    :param target: default: bake-plan's own interpreter.
    :raises LockConflict: the stages' requirements conflict (each named with stage and plugin).
    :raises LockError: uv failed otherwise (e.g. a requirement no index has).

    The host paths are checked before (:func:`check_host_paths`, by :func:`resolve_all`).
    """
    target = target or Target(_own_version(), interpreter=sys.executable)
    host_lines = [line for line in spec.lines if line.host is not None]
    if not host_lines:
        return ""
    return reqs.to_image(_run_compile(spec, host_lines, pip_args, target), spec.host_paths)


def check_host_paths(spec: LockSpec) -> None:
    """:raises UsageError: a line's host path (from the stage's ``host_paths``) does not exist."""
    for line in spec.lines:
        if line.host is not None and line.host != line.text:
            loc = reqs.location(line.host)
            path = reqs.local_path(loc) if loc else None
            if path and not Path(path).exists():
                raise UsageError(f"{line.who()}: host path {path} for {line.text!r} does not exist")


def lock_text(spec: LockSpec, body: str, target: Target) -> str:
    """The whole lock: the ``# bake-plan`` header (with the Python, the uv platform when resolved
    for one, and ``resolver: uv``), the index options the stages wrote, then ``body``."""
    resolved = ([("python-platform", target.platform)] if target.platform else []) + [("resolver", "uv")]
    if not target.interpreter and spec.python and spec.python.count(".") == 1:
        resolved.insert(0, ("python-patch", f"assumed {target.python}: the chain declares python = \"{spec.python}\"; "
                                            f"declare the image's exact Python (python = \"{spec.python}.N\") to lock for it"))
    text = header(spec, target.python) + "".join(f"{HEADER}{key}: {value}\n" for key, value in resolved)
    options = dict.fromkeys(line.text.strip() for line in spec.lines if reqs.is_index_option(line.text))
    return text + "".join(o + "\n" for o in options) + body


def resolve_all(specs: Sequence[LockSpec], pip_args: Sequence[str] = (),
                python: Optional[str] = None) -> List[Tuple[LockSpec, str]]:
    """The locks of ``specs``, in order: ``[(spec, text)]``, a spec split into one lock per
    platform when its platforms resolve differently.

    Every uv resolution (one per spec and distinct :func:`targets` entry) runs at once, up to one
    per CPU: they are independent, and each is mostly waiting on uv. A spec's platforms that give
    the same body share one lock; otherwise each platform's body, already made, gets its own
    header (no second run).

    :raises UsageError, LockConflict, LockError: as :func:`targets` and :func:`compile_lock`; of
        several failures, the first spec's (first platform's) is raised.
    """
    for spec in specs:  # before anything runs: no ${VARIABLE} reaches uv, which would expand it
        for line in spec.lines:
            if line.host is not None:
                reqs.refuse_variables(line.host, f"{line.who()}, requirement line {line.text!r}")
    planned = [(spec, targets(spec, python)) for spec in specs]
    for spec, _ in planned:
        check_host_paths(spec)
    jobs = list(dict.fromkeys((i, t) for i, (_, by_platform) in enumerate(planned) for t in by_platform.values()))
    if len(jobs) == 1:
        bodies = {jobs[0]: compile_lock(specs[jobs[0][0]], pip_args, jobs[0][1])}
    else:
        from concurrent.futures import ThreadPoolExecutor

        uv_binary()  # found before the threads start
        with ThreadPoolExecutor(max_workers=min(len(jobs), os.cpu_count() or 1)) as pool:
            futures = {job: pool.submit(compile_lock, specs[job[0]], pip_args, job[1]) for job in jobs}
        bodies = {job: future.result() for job, future in futures.items()}
    out = []
    for i, (spec, by_platform) in enumerate(planned):
        mine = {p: bodies[(i, t)] for p, t in by_platform.items()}
        if len(set(mine.values())) == 1:
            first = by_platform[spec.platforms[0]]
            platforms = ", ".join(dict.fromkeys(t.platform for t in by_platform.values() if t.platform))
            out.append((spec, lock_text(spec, mine[spec.platforms[0]],
                                        first._replace(platform=platforms or None))))
        else:
            out += [(spec.for_platform(p), lock_text(spec.for_platform(p), mine[p], by_platform[p]))
                    for p in spec.platforms]
    return out


def header(spec: LockSpec, version: Optional[str]) -> str:
    """The lock's first lines, ``# bake-plan <key>: <value>``, read back by :func:`read_header`;
    ``python-declared`` is the chain's declared Python (``"3.11"`` or ``"3.11.2"``), the precision
    at which the image's ``bake-pip-finalize`` compares its Python with the lock's."""
    out = [f"{HEADER}lock: made by `bake-plan lock --target {spec.target}`; "
           f"`bake-plan build --target {spec.target} --locked` installs exactly this.",
           f"{HEADER}target: {spec.target}",
           f"{HEADER}platforms: {', '.join(spec.platforms)}",
           f"{HEADER}inputs: {spec.digest}"]
    if version:
        out.append(f"{HEADER}python: {version}")
    if spec.python:  # the image's bake-pip-finalize compares its Python at this precision
        out.append(f"{HEADER}python-declared: {spec.python}")
    for line in spec.skipped:
        out.append(f"{HEADER}skipped: {line.text} ({line.who()}: in-image path {line.missing} has no host path)")
    return "".join(o + "\n" for o in out)


def read_header(text: str) -> Dict[str, List[str]]:
    """``{key: [values]}`` from a lock's ``# bake-plan <key>: <value>`` lines."""
    out: Dict[str, List[str]] = {}
    for line in text.splitlines():
        if not line.startswith(HEADER):
            continue
        key, sep, value = line[len(HEADER):].partition(": ")
        if sep:
            out.setdefault(key, []).append(value)
    return out


def _in_files(directory: Path, lines: Sequence[Line]) -> List[str]:
    by_stage: Dict[str, List[str]] = {}
    for line in lines:
        by_stage.setdefault(line.stage, []).append(line.host)
    names = []
    for stage, texts in by_stage.items():
        name = f"requirements-{stage}.in"
        (directory / name).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        names.append(name)
    return names


def _absolute_links(pip_args: Sequence[str]) -> List[str]:
    """``pip_args`` with a local ``--find-links``/``-f`` directory made absolute (the compile runs
    in a temporary directory)."""
    out, args = [], list(pip_args)
    for i, arg in enumerate(args):
        if i and args[i - 1] in ("-f", "--find-links") and "://" not in arg and os.path.exists(arg):
            arg = os.path.abspath(arg)
        out.append(arg)
    return out


def _uv_args(pip_args: Sequence[str]) -> List[str]:
    """pip's index options in uv's words (``--trusted-host`` is ``--allow-insecure-host``)."""
    return ["--allow-insecure-host" if arg == "--trusted-host" else arg for arg in pip_args]


@functools.lru_cache(maxsize=None)
def uv_binary() -> str:
    """The uv executable of the ``uv`` package (a dependency of bake-plan), looked up once (the
    look-up reads ``sysconfig``, which is not safe to set up from several threads).

    :raises UsageError: it is not installed.
    """
    if os.name == "posix":
        # find_uv_bin's first place is the scripts directory of bake-plan's Python (<venv>/bin in
        # a virtual environment, the interpreter's own bin otherwise); asking sysconfig for it
        # costs more than a fifth of a `uv pip compile` on warm caches.
        places = [os.path.join(sys.prefix, "bin")] if sys.prefix != sys.base_prefix else []
        places += [os.path.dirname(sys.executable)] if sys.executable else []
        for place in places:
            beside = os.path.join(place, "uv")
            if os.path.isfile(beside) and os.access(beside, os.X_OK):
                return beside
    try:
        from uv import find_uv_bin
        return find_uv_bin()
    except (ImportError, FileNotFoundError) as err:
        raise UsageError(f"uv is not installed for bake-plan's Python ({err}); pip install uv") from None


def _run_compile(spec: LockSpec, lines: Sequence[Line], pip_args: Sequence[str], target: Target,
                 explain: bool = True) -> str:
    pip_args = _absolute_links(pip_args)
    with tempfile.TemporaryDirectory(prefix="bake-plan-lock-") as tmp:
        ins = _in_files(Path(tmp), lines)
        program = uv_binary()
        argv = [program, "pip", "compile", *UV_OPTIONS, *target.uv_args(), *_uv_args(pip_args),
                "--output-file", "requirements.txt", *ins]
        proc = _bounded(argv, tmp, spec)
        if proc.returncode != 0:
            if not explain:
                raise LockError("the compile failed")
            raise _uv_failure(spec, lines, proc.stdout + "\n" + proc.stderr, pip_args, target)
        return (Path(tmp) / "requirements.txt").read_text(encoding="utf-8")


def _bounded(argv: List[str], cwd: str, spec: LockSpec) -> subprocess.CompletedProcess:
    """Run uv (``argv``) in ``cwd`` within :data:`UV_TIMEOUT_S` (:func:`bake.processes.run_bounded`:
    a time-out or an interrupt stops the build backends it started too).

    :raises UsageError: uv cannot be started. :raises LockError: it did not finish in time.
    """
    try:
        return run_bounded(argv, UV_TIMEOUT_S, cwd=cwd)
    except OSError as err:
        raise UsageError(f"cannot run {argv[0]}: {err.strerror or err}") from None
    except subprocess.TimeoutExpired:
        raise LockError(f"uv pip compile did not finish in {UV_TIMEOUT_S:g} s, locking {spec.target!r}: "
                        "an index that does not answer, or a source package whose build hangs") from None


# uv's explanation of a failed resolution ("Because there is no version of lingvo==0.12.7 and
# paxml==1.4.0 depends on lingvo==0.12.7, …").
_UV_DEPENDS = LazyPattern(r"(?:all versions of |all of |only )?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
                          r"(?:(?:==|>=|<=|<|>|!=|~=)(?P<version>[^\s,]+))? depends? on (?P<req>[^\s,]+)")
_UV_MISSING = (LazyPattern(r"there is no version of (?P<req>[^\s,]+)"),
               LazyPattern(r"only [^\s,]+ (?:is|are) available and you require (?P<req>[^\s,]+)"),
               LazyPattern(r"(?P<req>[A-Za-z0-9][A-Za-z0-9._-]*) was not found in the (?:package registry|provided package locations)"))
_NAME_TOKEN = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _askers(lines: Sequence[Line], project: str) -> str:
    """``stage 'pax' (plugin 'p')`` for each stage whose lines ask for ``project``, else "a dependency"."""
    who = _asking(lines, project)
    return "; ".join(dict.fromkeys(line.who() for line in who)) or "a dependency"


def without_pip_configuration(environ: Mapping[str, str]) -> Dict[str, str]:
    """``environ`` with none of pip's own settings: no ``PIP_*`` variable, and ``PIP_CONFIG_FILE``
    set to ``os.devnull``, so pip loads no configuration file (pip's docs, "Configuration"). For a
    pip that must see only the index options it is given, as uv does."""
    out = {key: value for key, value in environ.items() if not key.startswith("PIP_")}
    out["PIP_CONFIG_FILE"] = os.devnull
    return out


def _versions(project: str, pip_args: Sequence[str]) -> str:
    """The versions of ``project`` the index options see (``pip index versions``), or ``""``.

    pip is asked with the index options uv was given and nothing else: uv reads neither pip's
    configuration files nor ``PIP_*`` variables, so pip is kept from them too (``PIP_CONFIG_FILE``
    set to ``os.devnull`` loads no configuration file), or the versions would be another index's."""
    argv = [sys.executable, "-m", "pip", "index", "versions", reqs.project_name(project) or project, *pip_args]
    try:
        proc = run_bounded(argv, 120, env=without_pip_configuration(os.environ))
    except (OSError, subprocess.SubprocessError):
        return ""
    found = re.search(r"Available versions: (.+)", proc.stdout)
    return found.group(1).strip() if found else ("none" if proc.returncode else "")


def _uv_failure(spec: LockSpec, lines: Sequence[Line], output: str, pip_args, target: Target) -> LockError:
    """uv's words, with the stages named: a missing version as a chain (``lingvo==0.12.7 <- paxml
    1.4.0 <- stage 'pax' (plugin 'p')``) with the versions that exist; a conflict with the stages
    that ask for or bring in each package uv names."""
    rows = [row.strip() for row in output.splitlines() if row.strip()]
    said = " ".join(re.sub(r"^(?:cause:|error:|[×╰─▶ ]+)\s*", "", row) for row in rows
                    if not row.startswith(("warning:", "Resolved ")))
    depends = {}
    for m in _UV_DEPENDS.finditer(said):
        depends.setdefault(reqs.canonical_name(reqs.project_name(m.group("req")) or m.group("req")),
                           (m.group("name"), m.group("version")))
    where = f"locking {spec.describe()} for {target.describe()}"
    missing = [m.group("req") for pattern in _UV_MISSING for m in pattern.finditer(said)]
    if missing:
        requirement = missing[0]
        chain, project, seen = [requirement], reqs.project_name(requirement) or requirement, set()
        while not _asking(lines, project) and reqs.canonical_name(project) in depends and project not in seen:
            seen.add(project)
            name, version = depends[reqs.canonical_name(project)]
            if version is None:
                known = _versions(name, pip_args)
                version = known if known and "," not in known and known != "none" else None
            chain.append(f"{name} {version}" if version else name)
            project = name
        asking = _asking(lines, project) if len(chain) == 1 else []
        if asking:  # a stage's own line: as pip-compile's reader said it
            chain = ["; ".join(f"{line.who()} asks for it: {line.text}" for line in asking)]
        else:
            chain.append(_askers(lines, project))
        versions = _versions(requirement, pip_args)
        exist = f"; versions that exist: {versions}" if versions else ""
        return LockError(f"no distribution found for {requirement} ({' <- '.join(chain)}){exist}, {where}",
                         [f"uv: {said}"])
    if "unsatisfiable" in said or "No solution found" in output:
        details, stages, cache = [], [], {}
        for line in _blamed(lines, said):
            details.append(f"{line.who()} asks for {reqs.project_name(line.host)}: {line.text}")
            stages.append(line.stage)
        asked = {reqs.canonical_name(reqs.project_name(line.host) or "") for line in lines if line.host}
        for name, _ in depends.values():
            if reqs.canonical_name(name) in asked:
                continue
            for line in _pulling(spec, lines, name, pip_args, cache, target):
                details.append(f"{line.who()} brings {name} in through its requirements")
                stages.append(line.stage)
        details.append(f"uv: {said}")
        order = [line.stage for line in spec.lines]
        named = sorted(set(stages), key=order.index)
        if len(named) == 1:
            between = f"within stage '{named[0]}'"
        elif named:
            between = "between stages " + ", ".join(f"'{s}'" for s in named[:-1]) + f" and '{named[-1]}'"
        else:
            between = "between the chain's stages"
        return LockConflict(f"conflicting requirements for {spec.describe()} (for {target.describe()}), {between}:",
                            details)
    errors = [row for row in rows if row.startswith(("error:", "cause:"))]
    reason = " ".join(errors) if errors else (rows[-1] if rows else "no output")
    return LockError(f"uv pip compile failed, {where}: {reason}")


_UV_REQUIRED = (LazyPattern(r"you require (?P<list>.+?)(?:, we can conclude|, and |\.\s|[,.]?$)"),
                LazyPattern(r"your requirements and (?P<list>.+?) are incompatible"))


def _constrains(line: Line) -> bool:
    req = reqs.parse(line.host or "")
    return req is not None and bool(str(req.specifier) or req.url)


def _blamed(lines: Sequence[Line], said: str) -> List[Line]:
    """The lines a conflict uv explains (``said``) is between, in chain order.

    uv names the requirements it took from the ``.in`` files: "you require six==1.17.0 and
    six==1.16.0", "your requirements and six[x]>1.16.0 are incompatible". For each such
    requirement: the lines that ask for exactly it (same project and specifiers), else the lines of
    that project that constrain its version (uv may print a narrowed ``six<1.17`` for
    ``six>=1.0,<1.17``), else every line of that project. A line asking for the project with no
    version (``six``) is a bystander when another line of it pins or bounds the version. Without
    such words (another uv), every line whose project uv names, less the bystanders.
    """
    printed = [req for pattern in _UV_REQUIRED for m in pattern.finditer(said)
               for req in (reqs.parse(re.sub(r"\{[^{}]*\}", "", item)) for item in m.group("list").split(" and "))
               if req is not None]  # uv writes a marker inside braces: alpha{python_full_version < '3.10'}<2
    by_project: Dict[str, List[Line]] = {}
    for line in lines:
        project = line.host and reqs.project_name(line.host)
        if project:
            by_project.setdefault(reqs.canonical_name(project), []).append(line)
    chosen: List[Line] = []
    if printed:
        for req in printed:
            own = by_project.get(reqs.canonical_name(req.name), [])
            exact = [line for line in own if reqs.parse(line.host).specifier == req.specifier]
            chosen += exact or [line for line in own if _constrains(line)] or own
    else:
        tokens = {reqs.canonical_name(t) for t in _NAME_TOKEN.findall(said)}
        for project, own in by_project.items():
            if project in tokens:
                chosen += [line for line in own if _constrains(line)] or own
    return [line for line in lines if line in chosen]


def _asking(lines: Sequence[Line], requirement: str) -> List[Line]:
    """The lines that ask for ``requirement`` as pip printed it: same project and specifiers, else same project."""
    exact = [line for line in lines if line.host and reqs.same_requirement(requirement, line.host)]
    if exact:
        return exact
    name = reqs.project_name(requirement)
    return [line for line in lines if line.host and name and reqs.project_name(line.host) == name]


def _pulling(spec: LockSpec, lines: Sequence[Line], project: str, pip_args, cache, target: Target) -> List[Line]:
    """The stages through which ``project`` comes in as a dependency (one line of each): each
    stage's lines are compiled alone, and a stage whose result has ``project`` brings it."""
    wanted = reqs.canonical_name(project)
    found: List[Line] = []
    for stage in dict.fromkeys(line.stage for line in lines):
        if stage not in cache:
            own = [line for line in lines if line.stage == stage]
            try:
                cache[stage] = _run_compile(spec, own, pip_args, target, explain=False)
            except (LockError, UsageError):
                cache[stage] = ""
        names = {reqs.project_name(row) for row in cache[stage].splitlines() if row and not row[0].isspace()}
        if wanted in names:
            found.append(next(line for line in lines if line.stage == stage))
    return found




def _lock_text(path: Path) -> Optional[str]:
    """The text of a regular file at ``path`` (a link is not followed), else ``None``."""
    if kind_of(path) != "file":
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def is_lock_of(path: Path, target: str) -> bool:
    """``path`` is a regular file (not a link) whose ``# bake-plan target:`` header names
    ``target``: a lock (or its ``pip-lock`` copy) bake-plan wrote for that stage."""
    text = _lock_text(path)
    return text is not None and read_header(text).get("target") == [target]


def _check_lock_path(path: Path, target: str, what: str) -> None:
    """:raises OutputError: ``path`` is there and is not a lock bake-plan wrote for ``target``."""
    kind = kind_of(path)
    if kind is not None and not is_lock_of(path, target):
        if kind == "file":
            raise OutputError(f"{path}: not a lock bake-plan wrote for '{target}' (no `# bake-plan target: "
                              f"{target}` header), so it will not replace or delete it; move it away "
                              f"(bake-plan writes {what} there)")
        raise not_ours(path, kind, what)


def write_locks(results: Sequence[Tuple[LockSpec, str]], locks_dir: Path) -> List[Path]:
    """Write each lock atomically into ``locks_dir`` (created if missing), and remove the lock files
    of the same stages in the other form (one lock vs. one per arch) that are now out of date.

    Only a lock bake-plan wrote for the same stage (its header says so) is replaced or removed;
    every path is checked before anything is written.

    :raises OutputError: the directory or a file cannot be written; a lock's name is taken by a
        file bake-plan did not write for that stage, a symbolic link or a directory.
    """
    try:
        locks_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot create the locks directory {locks_dir}: {err.strerror or err}") from None
    for spec, _ in results:
        _check_lock_path(locks_dir / spec.filename, spec.target, f"the lock of '{spec.target}'")
    written = []
    for spec, text in results:
        path = locks_dir / spec.filename
        write_atomic(str(path), text, "the lock")
        written.append(path)
    for spec, _ in results:
        other = [locks_dir / f"{spec.target}.txt"] if spec.per_arch else \
            sorted(locks_dir.glob(f"{spec.target}-*.txt"))
        for path in other:
            if path in written or not is_lock_of(path, spec.target):
                continue  # another stage's lock, or a file bake-plan did not write: left alone
            path.unlink()
    return written


def locked_contexts(composition: Composition, locks_dir: Path) -> Tuple[Tuple[str, str], ...]:
    """For a ``--locked`` plan: check each requested stage's lock and copy it into its ``pip-lock``
    context directory (``<locks>/.pip-lock/<stage>/``).

    :returns: ``(stage name, absolute context directory)`` pairs for :class:`bake.plan.compose.PlanOptions`.
    :raises UsageError: a lock is missing, is another stage's, does not cover a platform of the plan,
        was made for another Python than the stage declares, is out of date (the stages' lines changed since), or skipped in-image lines.
    :raises OutputError: the context directory holds something bake-plan did not put there, or
        a part of it is a symbolic link (:func:`_context_dir`).
    """
    pairs = []
    for name in composition.requested:
        files: Dict[str, str] = {}
        for spec in lock_specs(composition, name):
            files[spec.context_name] = checked_lock(spec, locks_dir)
        directory = _context_dir(locks_dir, name, files)
        for filename, text in files.items():
            write_atomic(str(directory / filename), text, "the pip-lock context")
        pairs.append((name, str(directory)))
    return tuple(pairs)


def checked_lock(spec: LockSpec, locks_dir: Path, who: str = "--locked") -> str:
    """The text of ``spec``'s lock in ``locks_dir``, checked as ``--locked`` checks it (the one
    check: ``build --locked`` and ``bake-plan wheelhouse`` refuse the same locks in the same words,
    ``who`` first).

    :raises UsageError: the lock is missing, is another stage's, does not cover a platform of
        ``spec``, was made for another Python than the stage declares, is out of date (the stages'
        lines changed since), or skipped in-image lines.
    """
    name = spec.target
    path = locks_dir / spec.filename
    again = f"run `bake-plan lock --target {name}`"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        raise UsageError(f"{who}: no lock {path} for {spec.describe()}: {again}") from None
    head = read_header(text)
    if any(r.endswith("(in the image)") for r in head.get("resolver", ())):  # made by lock --in-image
        again = f"run `bake-plan lock --in-image --target {name}`"
    if head.get("target") != [name]:
        raise UsageError(f"{who}: {path} is not a bake-plan lock of '{name}': {again}")
    covered = [p.strip() for p in (head.get("platforms") or [""])[0].split(",") if p.strip()]
    missing = [p for p in spec.platforms if p not in covered]
    if missing:  # the command locks every platform the plan needs, not the configuration's
        import shlex

        again = again[:-1] + "".join(f" --platform {shlex.quote(p)}" for p in spec.platforms) + "`"
        raise UsageError(f"{who}: {path} covers {', '.join(covered) or 'no platform'}, "
                         f"not {', '.join(missing)}: {again}")
    made_for = (head.get("python") or [""])[0]
    if spec.python and not same_python(made_for, spec.python):
        raise UsageError(f"{who}: {path} was made for Python {made_for or '(unknown)'}, the image of "
                         f"'{name}' has Python {spec.python} (the stage's python): {again}")
    if head.get("inputs") != [spec.digest]:
        raise UsageError(f"{who}: {path} is out of date (the requirement lines of the chain of "
                         f"'{name}' changed since it was made): {again}")
    if head.get("skipped"):
        raise UsageError(f"{who}: {path} leaves out {len(head['skipped'])} in-image line(s) with no "
                         f"host path ({head['skipped'][0]}); declare host_paths on the stage")
    return text


def _context_dir(locks_dir: Path, name: str, files: Dict[str, str]) -> Path:
    """``<locks>/.pip-lock/<name>``, made as real directories (no link followed below the locks
    directory), emptied of the locks bake-plan copied there before that are not in ``files``.

    The directory is sent to the build whole, as the ``pip-lock`` context: anything in it that
    bake-plan did not put there (a file without the lock header of ``name``, a link, a
    directory) is refused, not deleted.

    :returns: its absolute path.
    :raises OutputError: a link or another file is in the way, or it cannot be made.
    """
    why = f"the pip-lock context of '{name}'"
    relative = Path(CONTEXT_DIR) / name
    directory = own_directory(locks_dir / relative, locks_dir, why)
    try:
        entries = sorted(os.listdir(directory))
    except OSError as err:
        raise OutputError(f"cannot prepare the pip-lock context {directory}: {err.strerror or err}") from None
    for entry in entries:
        path = directory / entry
        if not is_lock_of(path, name):
            kind = kind_of(path)
            if kind == "file":
                raise OutputError(f"{path}: bake-plan did not put this file in {why}, which is sent to the build "
                                  "whole; remove it (bake-plan keeps only its lock copies there)")
            raise not_ours(path, kind, why)
        if entry not in files:
            try:
                path.unlink()
            except OSError as err:
                raise OutputError(f"cannot prepare the pip-lock context {directory}: {err.strerror or err}") from None
    return locks_dir.absolute().resolve() / relative
