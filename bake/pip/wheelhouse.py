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

Downloads use ``pip download --only-binary=:all: --platform … --python-version …
--implementation cp``, with the manylinux tags of the platform (:func:`platform_tags`), and
pip's own configuration (index, proxy, certificates) plus the flags given. A pinned line that
has no wheel for the platform is fetched as an sdist and built into a wheel on the host (right
for pure-Python packages; a compiled one gets the host's tags and is only useful on a matching
host). Files land in a temporary directory first; a wheel already in the wheelhouse with the same
name and bytes is left untouched (same mtime), so BuildKit's transfer of the ``wheelhouse``
context stays incremental (``docs/benchmarks.md``).
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from bake.errors import LockError, OutputError, UsageError
from bake.owned import Record, file_sha256, kind_of, own_directory
from bake.pip.lock import LockSpec
from bake.plan.names import arch_of
from bake.plan.text import counted

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
                  python: str = sys.executable) -> List[str]:
    """``pip download`` for binary wheels of ``platform`` (:func:`platform_tags`) and
    ``python_version`` (``3.11``), into ``dest``; requirements are appended by the caller."""
    tags = [arg for tag in platform_tags(platform) for arg in ("--platform", tag)]
    return [python, "-m", "pip", "--disable-pip-version-check", "download", "--quiet", "--dest", str(dest),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version,
            *tags, *pip_args]


Runner = Callable[..., subprocess.CompletedProcess]


def _run(argv: List[str], runner: Runner, what: str) -> subprocess.CompletedProcess:
    try:
        return runner(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=3600)
    except OSError as err:
        raise UsageError(f"{what}: cannot run {argv[0]}: {err.strerror or err}") from None


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["(no output)"])[-1]


def requirement_lines(spec: LockSpec, locks_dir: Optional[Path]) -> Tuple[List[str], bool, Optional[Path]]:
    """The lines to download for ``spec``: ``(lines, pinned, lock path)``; from the lock file in
    ``locks_dir`` when there is one (``pinned``: every line an exact pin), else the stages' host
    lines (in-image paths mapped; lines with no host path and editables left out)."""
    if locks_dir is not None:
        path = locks_dir / spec.filename
        if path.is_file():
            lines = []
            for raw in path.read_text(encoding="utf-8").splitlines():
                line = raw.split(" #", 1)[0].strip()
                if line and not line.startswith(("#", "-")):
                    lines.append(line)
            return lines, True, path
    lines = [line.host for line in spec.lines
             if line.host is not None and not line.host.lstrip().startswith(("-e", "--editable"))]
    return lines, False, None


DEFAULT_PYTHON_VERSION = "3.11"
"""The Python wheels are fetched for when neither ``--python-version`` nor the stage says."""


def fill(specs: Sequence[LockSpec], out: Path, python_version: Optional[str], locks_dir: Optional[Path] = None,
         pip_args: Sequence[str] = (), python: str = sys.executable, runner: Runner = subprocess.run,
         report: Callable[[str], None] = lambda msg: None) -> Dict[str, int]:
    """Download every wheel ``specs`` need into ``out`` (created), for ``python_version`` (default:
    the Python each chain's stage declares, else :data:`DEFAULT_PYTHON_VERSION`) and each spec's
    platforms, plus :data:`TOOLS`.

    :returns: ``{"added": n, "kept": n, "built": n}``: wheels new in ``out``, already there with
        the same bytes (left untouched), and built on the host from an sdist.
    :raises LockError: pip could not find or download something (pip's last error line, the
        platform and the Python version).
    :raises OutputError: ``out`` cannot be made or written, or a wheel would replace a file of
        that name bake-plan did not put there (its record, :class:`bake.owned.Record`), which is
        left as it is.
    """
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot make the wheelhouse {out}: {err.strerror or err}") from None
    counts = {"added": 0, "kept": 0, "built": 0}
    with tempfile.TemporaryDirectory(prefix=".bake-wheelhouse-", dir=out.parent) as tmp:
        staging = Path(tmp) / "wheels"
        staging.mkdir()
        for spec in specs:
            lines, pinned, lock = requirement_lines(spec, locks_dir)
            version = python_version or spec.python or DEFAULT_PYTHON_VERSION
            for platform in spec.platforms:
                where = f"{spec.describe()} for Python {version} on {platform}"
                report(f"downloading {counted(len(lines), 'pinned requirement' if pinned else 'requirement')} of {where}"
                       + (f" (from {lock})" if lock else ""))
                base = download_argv(version, platform, staging, pip_args, python)
                _download(base, lines, pinned, staging, Path(tmp), where, runner, python, pip_args, counts)
                _download(base, list(TOOLS), False, staging, Path(tmp), f"pip and pip-tools for {where}",
                          runner, python, pip_args, counts)
                if not pinned:
                    _marker_closure(base, [*lines, *TOOLS], version, platform, staging, Path(tmp), where,
                                    runner, python, pip_args, counts)
        record = Record(out)
        moves = []
        for wheel in sorted(staging.iterdir()):  # every name checked before any wheel is moved
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
    return counts


def _download(base: List[str], lines: List[str], pinned: bool, staging: Path, tmp: Path, where: str,
              runner: Runner, python: str, pip_args: Sequence[str], counts: Dict[str, int]) -> None:
    """One ``pip download`` of ``lines``; pinned lines without a wheel are built from their sdist."""
    if not lines:
        return
    req = tmp / "requirements.txt"
    req.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = base + (["--no-deps"] if pinned else []) + ["-r", str(req)]
    proc = _run(argv, runner, "pip download")
    if proc.returncode == 0:
        return
    if not pinned:
        raise LockError(f"pip download failed for {where}: {_last_error(proc.stderr)}")
    # One pin at a time, so the ones with a wheel come as wheels and the rest are built.
    for line in lines:
        req.write_text(line + "\n", encoding="utf-8")
        if _run(argv, runner, "pip download").returncode == 0:
            continue
        sdists = tmp / "sdists"
        shutil.rmtree(sdists, ignore_errors=True)
        fetch = [python, "-m", "pip", "--disable-pip-version-check", "download", "--quiet", "--no-deps",
                 "--no-binary=:all:", "--dest", str(sdists), *pip_args, line]
        got = _run(fetch, runner, "pip download")
        if got.returncode != 0:
            raise LockError(f"pip download failed for {line!r} of {where}: {_last_error(got.stderr)}")
        build = [python, "-m", "pip", "--disable-pip-version-check", "wheel", "--quiet", "--no-deps",
                 "--wheel-dir", str(staging), *pip_args, *[str(p) for p in sorted(sdists.iterdir())]]
        built = _run(build, runner, "pip wheel")
        if built.returncode != 0:
            raise LockError(f"cannot build a wheel of {line!r} ({where}): {_last_error(built.stderr)}")
        counts["built"] += 1


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
    (:class:`bake.owned.Record`) are replaced or removed.

    :raises OutputError: the layout cannot be written (a read-only wheelhouse), a part of it is a
        symbolic link, or a file bake-plan did not write is in the way.
    """
    root = Path(wheelhouse)
    layout = root / LAYOUT_DIR
    wheels = sorted(p for p in root.iterdir() if p.name.endswith(".whl") and p.is_file())
    listing = [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in wheels]
    own_directory(layout / "blobs" / "sha256", root, "the wheelhouse's image layout")
    record = Record(layout)
    try:
        old = json.loads(_read_own(layout / "state.json"))
        digest = old["digest"]
        if old["files"] == listing and kind_of(layout / "blobs" / "sha256" / digest.split(":", 1)[1]) == "file":
            return f"oci-layout://{layout}@{digest}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
        pass
    try:
        digest = _write_layout(layout, wheels, record)
        record.write("state.json", json.dumps({"files": listing, "digest": digest}) + "\n", "the layout's state")
    except OSError as err:
        raise OutputError(f"cannot write the wheelhouse's image layout {layout}: {err.strerror or err}") from None
    return f"oci-layout://{layout}@{digest}"


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
