"""The sources manifest: which commit of each source the images build, and moving it ("bump").

JAX-Toolbox keeps one manifest of the sources its images fetch: per source a git ``url``, the
``tracking_ref`` it follows, the ``commit`` last taken from it, and a ``mode`` (``git-clone``:
cloned and installed editable; ``pip-vcs``: a ``pkg @ git+url@commit`` line). Plans pass
``URLREF_<NAME> = <url>#<commit>``, so a build never depends on where a branch was when it ran;
a nightly ``bake-plan bump`` moves each commit to the head of its tracking ref.

The manifest is TOML, one table per source, read with tomllib (tomli before Python 3.11)::

    [transformer-engine]              # URLREF_TRANSFORMER_ENGINE
    url = "https://github.com/NVIDIA/TransformerEngine.git"
    tracking_ref = "main"
    commit = "…40 hex…"
    mode = "git-clone"
    mirror_url = "https://…"              # optional: builds fetch from here
    patches = ["pull/12/head", "file://patches/te/fix.patch"]   # optional, in order

A commit of all zeros is a placeholder ``bump`` may fill; a plan that uses it is refused. Plugins
take a :class:`bake.Source` (:func:`source`), its requirement line (:func:`requirement`), the
``patches`` named context (:func:`patch_contexts`) and the host checkout ``bake-plan lock`` makes
for a ``-e file:///opt/<src>`` line (:func:`checkout_dir`, filled by :func:`prepare_checkouts`).

Which file: :func:`use_manifest` (the CLI's ``--sources``), else ``$BAKE_PLAN_SOURCES``, else the
shipped ``stages/sources.toml``. Bump rewrites only the ``commit = "…"`` lines it moves, so
comments, order and layout stay as they were.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from bake.documents import DocumentError, parse_toml, read_text
from bake.errors import SourcesError
from bake.output import write_atomic
from bake.patterns import LazyPattern
from bake.plan.secrets import redact
from bake.plan.stage import SOURCE_MODES, Source
from bake.plan.text import control_fault, expansion_fault, git_fault
from bake.resources import stages_dir

MANIFEST_ENV = "BAKE_PLAN_SOURCES"
"""Environment variable naming the sources manifest to use instead of the shipped one."""

KEYS = ("url", "tracking_ref", "commit", "mode")
OPTIONAL_KEYS = ("mirror_url", "patches")
PLACEHOLDER = "0" * 40
"""A commit of all zeros: a placeholder that ``bump`` may fill, never one a plan may build."""
PATCH_DIR = "/opt/bake-patches"
"""Where a stage's Dockerfile mounts the ``patches`` named context for ``bake-fetch-source``."""
_COMMIT = LazyPattern(r"[0-9a-f]{40}\Z")
_PATCH_REF = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9._/-]*\Z")
_TABLE_NAME = LazyPattern(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_override: Optional[Path] = None


class ManifestSource(NamedTuple):
    """One table of the manifest.

    :param key: the table name (``transformer-engine``).
    :param url: git URL (``https://…``, ``git@…``, ``file://…``).
    :param tracking_ref: the branch or tag ``bump`` follows (``main``, ``refs/heads/main``, ``v1.2``).
    :param commit: the 40-hex commit plans pass.
    :param mode: ``git-clone`` or ``pip-vcs``.
    :param mirror_url: where builds fetch from instead of ``url`` (``bump`` still follows ``url``).
    :param patches: applied in order on the commit (``git-clone`` only): git refs fetched from the
        source (``pull/12/head``) or ``file://<path>`` patch files relative to the manifest.
    :param base_dir: the manifest's directory, which ``file://`` patches are relative to.
    :param problem: for an entry the manifest checks refuse, the one line saying why (its other
        fields are then empty); only a plan that uses the source fails with it (:func:`check_sources`).
    """

    key: str
    url: str
    tracking_ref: str
    commit: str
    mode: str
    mirror_url: Optional[str] = None
    patches: Tuple[str, ...] = ()
    base_dir: Optional[str] = None
    problem: Optional[str] = None

    @property
    def fetch_url(self) -> str:
        """The URL builds fetch from: ``mirror_url`` when set, else ``url``."""
        return self.mirror_url or self.url

    @property
    def name(self) -> str:
        """The ``URLREF_<name>`` suffix: the key upper-cased, ``-`` → ``_`` (``TRANSFORMER_ENGINE``)."""
        return self.key.upper().replace("-", "_")


def use_manifest(path: Optional[Union[str, Path]]) -> None:
    """Make ``path`` the manifest every later :func:`load_manifest` / :func:`source` reads
    (``None``: back to ``$BAKE_PLAN_SOURCES`` or the shipped one). The CLI's ``--sources``."""
    global _override
    _override = Path(path) if path is not None else None


def manifest_path() -> Path:
    """The manifest in use: :func:`use_manifest`'s, else ``$BAKE_PLAN_SOURCES``, else ``stages/sources.toml``."""
    if _override is not None:
        return _override
    env = os.environ.get(MANIFEST_ENV)
    return Path(env) if env else stages_dir() / "sources.toml"


def _check_patches(value, mode: str, here: str, base_dir: Optional[str]) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise SourcesError(f"{here}: patches must be a list of strings (git refs or file://<path>)")
    if value and mode != "git-clone":
        raise SourcesError(f"{here}: patches need mode 'git-clone' (pip installs a {mode} source as it is)")
    for patch in value:
        if patch.startswith("file://"):
            rel = patch[len("file://"):]
            parts = rel.split("/")
            if not rel or rel.startswith("/") or ".." in parts or not _PATCH_REF.match(rel):
                raise SourcesError(f"{here}: patch {patch!r}: a patch file is file://<path relative to the "
                                   "manifest> (letters, digits, '.', '_', '-', '/'; no '..')")
            if base_dir is not None and not (Path(base_dir) / rel).is_file():
                raise SourcesError(f"{here}: patch {patch!r}: no such file {Path(base_dir) / rel}")
        elif not _PATCH_REF.match(patch) or git_fault(patch):
            raise SourcesError(f"{here}: patch {patch!r} is neither a git ref (e.g. 'pull/12/head') nor file://<path>")
    if len(set(value)) != len(value):
        raise SourcesError(f"{here}: patches name {next(p for p in value if value.count(p) > 1)!r} twice")
    return tuple(value)


def parse_manifest(text: str, where: str, base_dir: Optional[str] = None,
                   strict: bool = True) -> Dict[str, ManifestSource]:
    """Parse and check manifest text.

    :param where: the file name, for messages.
    :param base_dir: the manifest's directory: ``file://`` patches must exist under it (``None``:
        not checked).
    :param strict: raise on the first entry the checks refuse; with ``False``, such an entry is
        returned with its ``problem`` set, so only what uses it fails (a plan, :func:`check_sources`).
    :returns: table name → :class:`ManifestSource`, in file order.
    :raises SourcesError: invalid TOML (always: the file as a whole cannot be read); with
        ``strict``, a value that is not a table, a missing or unknown key, a commit that is not
        40 lower-case hex digits, an unknown mode; one line naming file and table.
    """
    try:
        data = parse_toml(text)
    except DocumentError as err:  # not TOML, nested too deeply
        raise SourcesError(f"{where}: {err}") from None
    out: Dict[str, ManifestSource] = {}
    names: Dict[str, str] = {}
    for key, table in data.items():
        try:
            entry = _check_entry(key, table, where, base_dir)
            if entry.name in names:
                raise SourcesError(f"{where}: [{key}]: both [{names[entry.name]}] and [{key}] become URLREF_{entry.name}")
        except SourcesError as err:
            if strict:
                raise
            out[key] = ManifestSource(key=key, url="", tracking_ref="", commit="", mode="", problem=str(err))
            continue
        names[entry.name] = key
        out[key] = entry
    return out


def _check_entry(key: str, table, where: str, base_dir: Optional[str]) -> ManifestSource:
    """One table of the manifest, checked. :raises SourcesError: one line naming file and table."""
    here = f"{where}: [{key}]"
    if not isinstance(table, dict):
        raise SourcesError(f"{where}: '{key}' must be a table ([{key}] with url, tracking_ref, commit, mode)")
    if not _TABLE_NAME.match(key):
        raise SourcesError(f"{here}: a source name is letters, digits, '-' and '_', starting with a letter")
    missing = [k for k in KEYS if k not in table]
    if missing:
        raise SourcesError(f"{here}: missing {', '.join(missing)}")
    unknown = sorted(set(table) - set(KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        raise SourcesError(f"{here}: unknown key {unknown[0]!r} (known: {', '.join(KEYS + OPTIONAL_KEYS)})")
    for k in ("url", "mirror_url"):  # before anything shows the value: it may hold a token
        if k in table and isinstance(table[k], str) and _userinfo(table[k]):
            raise SourcesError(f"{here}: {k} carries {_userinfo(table[k])} before '@'; plans pass it as a "
                               "build arg (URLREF_*), which ends up in the image's metadata, so leave "
                               "credentials to git (a credential helper or an SSH key)")
    for k in KEYS + ("mirror_url",):
        if k not in table:
            continue
        value = table[k]
        if not isinstance(value, str) or not value:
            raise SourcesError(f"{here}: {k} {value!r} must be a non-empty string")
        fault = control_fault(value, allow="")
        if fault:
            raise SourcesError(f"{here}: {k} {value!r} holds {fault}; it must be one line of text")
        if "#" in value or any(c.isspace() for c in value):
            raise SourcesError(f"{here}: {k} {value!r} must be a non-empty string without '#' or spaces")
    for k in ("url", "mirror_url", "tracking_ref"):  # handed to git: by git's rules (bake.plan.text)
        fault = git_fault(table[k], "ref" if k == "tracking_ref" else "url") if k in table else None
        if fault:
            raise SourcesError(f"{here}: {k} {table[k]!r} {fault}")
    if table["mode"] == "pip-vcs":  # the URL reaches uv and pip, which expand ${VAR}
        for k in ("url", "mirror_url"):
            fault = expansion_fault(table[k]) if k in table else None
            if fault:
                raise SourcesError(f"{here}: {k} {fault}; a pip-vcs URL must be literal (leave credentials "
                                   "to git: a credential helper or an SSH key)")
    if not _COMMIT.match(table["commit"]):
        raise SourcesError(f"{here}: commit {table['commit']!r} is not a 40-hex commit (run `bake-plan bump {key}`)")
    if table["mode"] not in SOURCE_MODES:
        raise SourcesError(f"{here}: mode {table['mode']!r} is not one of {', '.join(SOURCE_MODES)}")
    patches = _check_patches(table.get("patches", []), table["mode"], here, base_dir)
    return ManifestSource(key=key, url=table["url"], tracking_ref=table["tracking_ref"],
                          commit=table["commit"], mode=table["mode"], mirror_url=table.get("mirror_url"),
                          patches=patches, base_dir=base_dir)


_SSH_SCHEMES = ("ssh", "git+ssh", "ssh+git")


def _userinfo(url: str) -> Optional[str]:
    """What a manifest URL carries before ``@`` that a plan must not: ``"credentials (a password,
    or a token as its user name)"`` (:func:`bake.plan.secrets.redact`'s rule), or any user name
    other than an SSH login (``ssh://git@host/x.git``); ``None`` for none. scp-like
    ``git@host:path`` has no scheme and is a login."""
    if redact(url) != url:
        return "credentials (a password, or a token as its user name)"
    scheme, sep, rest = url.partition("://")
    if sep and "@" in re.split(r"[/?#]", rest, 1)[0] and scheme.lower() not in _SSH_SCHEMES:
        return "a user name"
    return None


_cache: Dict[Tuple[str, int, int, int, int], Dict[str, ManifestSource]] = {}


def _read(file: Path) -> str:
    """The manifest's text. :raises SourcesError: it cannot be read, or is not UTF-8 (TOML is)."""
    try:
        return read_text(file)
    except DocumentError as err:
        raise SourcesError(f"the sources manifest {file}: {err}") from None
    except OSError as err:
        raise SourcesError(f"cannot read the sources manifest {file}: {err.strerror or err}") from None


def check_manifest(path: Optional[Union[str, Path]] = None) -> None:
    """Read the manifest in use as a whole (its entries are checked where they are used).

    :raises SourcesError: it cannot be read, is not UTF-8 or not valid TOML: every plan fails,
        naming the file (not the first plugin that happened to read it).
    """
    load_manifest(path)


def load_manifest(path: Optional[Union[str, Path]] = None) -> Dict[str, ManifestSource]:
    """Read the manifest (default :func:`manifest_path`); cached while the file is unchanged. An
    entry the checks refuse comes back with its ``problem`` (``parse_manifest(strict=False)``).

    :raises SourcesError: the file cannot be read, is not UTF-8 or not valid TOML.
    """
    file = Path(path) if path is not None else manifest_path()
    try:
        stat = file.stat()
        # Not file.resolve(), which walks every directory of the path: each source() of a plugin
        # comes here (32 times for upstream-pax); the device and inode tell a relinked file apart.
        key = (os.path.abspath(file), stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if key not in _cache:
            _cache[key] = parse_manifest(_read(file), str(file), str(file.resolve().parent), strict=False)
    except OSError as err:
        raise SourcesError(f"cannot read the sources manifest {file}: {err.strerror or err}") from None
    return _cache[key]


def lookup(manifest: Dict[str, ManifestSource], name: str, where: str) -> ManifestSource:
    """The entry for ``name``, matched on its key or its ``URLREF_`` name (``transformer-engine``,
    ``TRANSFORMER_ENGINE`` and ``transformer_engine`` are the same source).

    :raises SourcesError: no such source, with the known ones.
    """
    wanted = name.upper().replace("-", "_")
    for entry in manifest.values():
        if entry.name == wanted:
            return entry
    raise SourcesError(f"{where} has no source {name!r} (it has: {', '.join(manifest) or 'none'})")


def source(name: str, path: Optional[str] = None, clone: bool = False) -> Source:
    """A :class:`bake.Source` for a plugin, from the manifest in use: ``ref`` is the manifest's
    commit, so plans pass ``URLREF_<NAME> = <url>#<commit>`` (``mirror_url`` when set), and the
    source's ``mode`` and ``patches`` (``MODE_<NAME>``, ``PATCHES_<NAME>``).

    An entry that cannot be built (refused by the manifest checks, a placeholder commit, or
    ``clone`` and a mode other than ``git-clone``) does not fail here, where every plan collects
    every plugin's stages: a stand-in comes back, and only a plan whose stages use it fails, naming
    the file, the source and the stage (:func:`check_sources`).

    :param name: the manifest table (``jax``, ``transformer-engine``).
    :param path: where the source lands in the image (default ``/opt/<name>``).
    :param clone: the stage needs a checkout (it builds from it): a ``pip-vcs`` mode is refused.
    :raises SourcesError: the manifest cannot be read or is not valid TOML, or has no such source.
    """
    found, problem = _usable(name, clone)
    if problem:
        return _stand_in(found, path, problem)
    return _source(found, path)


def entry(name: str) -> ManifestSource:
    """The manifest entry for ``name`` (a key or ``URLREF_`` name) in the manifest in use.

    :raises SourcesError: the manifest is unreadable or malformed, has no such source, the entry
        is refused, or its commit is the all-zeros placeholder (one line naming the file and the source).
    """
    found, problem = _usable(name)
    if problem:
        raise SourcesError(problem)
    return found


def _usable(name: str, clone: bool = False) -> Tuple[ManifestSource, Optional[str]]:
    """The entry for ``name`` and, when a plan cannot build it, why (one line naming file and table).

    :raises SourcesError: the manifest cannot be read, or has no such source.
    """
    file = manifest_path()
    found = lookup(load_manifest(file), name, str(file))
    if found.problem:
        return found, found.problem
    if found.commit == PLACEHOLDER:
        return found, (f"{file}: [{found.key}]: commit is a placeholder (all zeros), not a commit that exists: "
                       f"run `bake-plan bump {found.key}` or write the commit")
    if clone and found.mode != "git-clone":
        return found, (f"{file}: [{found.key}]: mode {found.mode!r}: this stage builds from a checkout, so the "
                       "source must be 'git-clone'")
    return found, None


_STAND_IN = "bake-plan-refused-source:"
_REFUSED: Dict[str, str] = {}
"""Stand-in URL → why the entry was refused, for :func:`check_sources`."""


def _stand_in(found: ManifestSource, path: Optional[str], problem: str) -> Source:
    import hashlib

    url = _STAND_IN + hashlib.sha256(problem.encode()).hexdigest()[:16]
    _REFUSED[url] = problem
    return Source(found.name, url, PLACEHOLDER, path=path, mode="git-clone")


def check_sources(stages) -> None:
    """Refuse a plan whose ``stages`` (its chain) use a source :func:`source` could not build.

    :raises SourcesError: one line: the manifest, the source's table, what is wrong, and the stage
        that uses it.
    """
    for stage in stages:
        for src in stage.sources:
            problem = _REFUSED.get(src.url)
            if problem:
                raise SourcesError(f"{problem} (stage '{stage.name}' builds with source {src.name})")


def _source(found: ManifestSource, path: Optional[str]) -> Source:
    return Source(found.name, found.fetch_url, found.commit, path=path, mode=found.mode, patches=found.patches)


def requirement(name: str, path: Optional[str] = None, package: Optional[str] = None) -> str:
    """The pip requirement line of a source, by its mode, as ``bake-fetch-source`` writes it in the
    image: ``-e file://<path>`` (``git-clone``) or ``<package> @ git+<url>@<commit>`` (``pip-vcs``;
    ``package`` defaults to the repository name). For an entry a plan cannot build, the line of
    its stand-in (:func:`source`).

    :raises SourcesError: the manifest cannot be read, or has no such source.
    """
    found, problem = _usable(name)
    src = _stand_in(found, path, problem) if problem else _source(found, path)
    if src.mode == "git-clone":
        return f"-e file://{src.src_path}"
    pkg = package or src.url.rstrip("/").rsplit("/", 1)[-1]
    pkg = pkg[:-4] if pkg.endswith(".git") else pkg
    url = src.url if src.url.startswith("git+") else "git+" + src.url
    return f"{pkg} @ {url}@{src.ref}"


def patch_contexts(*names: str) -> Dict[str, str]:
    """The named contexts a stage needs for its sources' patch files: ``{"patches": <the manifest's
    directory>}`` when any of the named sources has a ``file://`` patch, else ``{}``. The
    Dockerfile mounts it at :data:`PATCH_DIR` for ``bake-fetch-source``. Entries a plan cannot
    build are left out (:func:`source`)."""
    for found, problem in (_usable(name) for name in names):
        if not problem and any(p.startswith("file://") for p in found.patches) and found.base_dir:
            return {"patches": found.base_dir}
    return {}


def checkout_dir(name: str) -> str:
    """Where ``bake-plan lock`` checks a ``git-clone`` source out on the host (the commit, patches
    applied): ``$BAKE_PLAN_CHECKOUTS`` or ``$XDG_CACHE_HOME/bake-plan/sources`` (default
    ``~/.cache``), then ``<key>-<commit>[-<hash of the patches>]``. Plugins name it in ``host_paths``."""
    found = entry(name)
    root = os.environ.get(CHECKOUTS_ENV) or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bake-plan" / "sources")
    leaf = f"{found.key}-{found.commit}"
    if found.patches:
        import hashlib
        leaf += "-" + hashlib.sha256("\n".join(found.patches).encode()).hexdigest()[:12]
    return str(Path(root).absolute() / leaf)


def host_paths(*pairs: Tuple[str, str]) -> Dict[str, str]:
    """``Stage.host_paths`` for the ``git-clone`` sources among ``(name, in-image path)`` pairs:
    each path → its :func:`checkout_dir`, which ``bake-plan lock`` fills before compiling."""
    usable = {name: _usable(name) for name, _ in pairs}  # an entry a plan cannot build: no checkout
    return {path: checkout_dir(name) for name, path in pairs
            if not usable[name][1] and usable[name][0].mode == "git-clone"}


CHECKOUTS_ENV = "BAKE_PLAN_CHECKOUTS"
"""Environment variable naming the directory ``bake-plan lock`` checks git-clone sources out in."""


def fetch_script() -> Path:
    """The shipped ``bake-fetch-source`` script (``stages/scripts/fetch-source.sh``)."""
    return stages_dir() / "scripts" / "fetch-source.sh"


def checkout(src: Source, dest: str, patch_dir: Optional[str] = None, timeout: float = 1800) -> None:
    """Check ``src`` out at ``dest`` on the host with the image's own ``bake-fetch-source`` (clone
    at the commit, patches applied in order), into a temporary sibling renamed into place, so a
    failed fetch leaves nothing. An existing ``dest`` is kept as it is.

    :raises SourcesError: git or the script fails (its last line).
    """
    import shutil
    import tempfile

    target = Path(dest)
    if target.is_dir():
        return
    _check_git_args(src.name, (src.url, "url"), (src.ref, "ref"), *((p, "ref") for p in src.patches
                                                                   if not p.startswith("file://")))
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        cmd = ["bash", str(fetch_script()), "--urlref", src.urlref, "--dest", str(work / "src"),
               "--stage", "host", "--mode", "git-clone"]
        if src.patches:
            cmd += ["--patches", " ".join(src.patches)]
        env = dict(os.environ, GIT_TERMINAL_PROMPT="0", BAKE_PIP_TOOLS_D=str(work / "pip-tools.d"))
        if patch_dir:
            env["BAKE_PATCH_DIR"] = patch_dir
        import subprocess  # only lock and bump run git: a plan does not import it

        from bake.processes import run_bounded

        try:
            proc = run_bounded(cmd, timeout, env=env)
        except subprocess.TimeoutExpired:
            raise SourcesError(f"fetching {src.urlref} timed out after {timeout:.0f} s") from None
        if proc.returncode != 0:
            lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
            raise SourcesError(f"cannot check out {src.urlref}: {lines[-1] if lines else f'exit {proc.returncode}'}")
        try:
            (work / "src").rename(target)
        except OSError:
            # Another run sharing the checkouts cache (a parallel lock) put the same commit there
            # first: its checkout is as good as ours. Anything else is a real failure.
            if not target.is_dir():
                raise SourcesError(f"cannot put the checkout of {src.urlref} at {target}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prepare_checkouts(stages) -> List[str]:
    """Check out, on the host, every ``git-clone`` source of ``stages`` whose in-image path a
    stage maps to a host path in ``host_paths`` that does not exist yet (``bake-plan lock`` runs
    this before compiling, so ``-e file:///opt/<src>`` lines resolve). ``file://`` patches are
    read from the manifest's directory.

    :returns: the host directories it made.
    :raises SourcesError: a checkout fails (nothing half-made is left).
    """
    made = []
    for stage in stages:
        for src in stage.sources:
            host = stage.host_paths.get(src.src_path)
            if src.mode != "git-clone" or not host or Path(host).exists():
                continue
            try:
                checkout(src, host, patch_dir=str(manifest_path().resolve().parent))
            except SourcesError as err:
                raise SourcesError(f"stage '{stage.name}': source {src.name}: the lock needs a host checkout "
                                   f"of its -e file://{src.src_path} line: {err}") from None
            made.append(host)
    return made


# ---- bump -----------------------------------------------------------------------------------

def _check_git_args(what: str, *values: Tuple[str, str]) -> None:
    """Every ``(value, kind)`` git is about to be handed, by git's rules (:func:`bake.plan.text.git_fault`).

    :raises SourcesError: one line naming ``what`` (a source) and the value.
    """
    for value, kind in values:
        fault = git_fault(value, kind)
        if fault:
            raise SourcesError(f"{what}: {kind} {value!r} {fault}")


LsRemote = Callable[[str, str], List[Tuple[str, str]]]


def ls_remote(url: str, ref: str, timeout: float = 120) -> List[Tuple[str, str]]:
    """``git ls-remote <url> <ref> <ref>^{}`` as ``[(commit, refname)]``; never prompts for credentials.

    :raises SourcesError: git is missing, times out, or cannot reach the repository (git's last line).
    """
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="true", SSH_ASKPASS="true")
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    import subprocess

    from bake.processes import run_bounded

    _check_git_args(url, (url, "url"), (ref, "ref"))
    try:
        # The peeled pattern too: a pattern "v1" does not match the "refs/tags/v1^{}" line.
        proc = run_bounded(["git", "ls-remote", "--", url, ref, ref + "^{}"], timeout, env=env)
    except FileNotFoundError:
        raise SourcesError("git is not installed (bump runs `git ls-remote`)") from None
    except subprocess.TimeoutExpired:
        raise SourcesError(f"git ls-remote {url} timed out after {timeout:.0f} s") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        reason = next((line for line in lines if line.startswith("fatal:")), lines[-1] if lines else f"exit {proc.returncode}")
        raise SourcesError(f"cannot reach {url}: {reason}")
    out = []
    for line in proc.stdout.splitlines():
        commit, _, refname = line.partition("\t")
        if commit and refname:
            out.append((commit.strip(), refname.strip()))
    return out


def pick_ref(refs: Sequence[Tuple[str, str]], ref: str) -> Optional[str]:
    """The commit ``ref`` names among ``git ls-remote``'s answer: a full ``refs/…`` name exactly;
    ``HEAD``; else the branch ``refs/heads/<ref>``, then the tag ``refs/tags/<ref>`` (an annotated
    tag's commit, ``^{}``, before the tag object). ``None`` when none matches."""
    table = dict((name, commit) for commit, name in refs)
    if ref.startswith("refs/"):
        candidates = [ref + "^{}", ref]
    elif ref == "HEAD":
        candidates = ["HEAD"]
    else:
        candidates = [f"refs/heads/{ref}", f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}"]
    for name in candidates:
        if name in table:
            return table[name]
    return None


class Bump(NamedTuple):
    """What bump did to one source: ``old`` and ``new`` commits (equal when it did not move)."""

    key: str
    tracking_ref: str
    old: str
    new: str

    @property
    def moved(self) -> bool:
        return self.old != self.new


_TABLE_HEADER = LazyPattern(r"""\s*\[\s*(?P<name>[A-Za-z0-9_-]+|"[^"]*"|'[^']*')\s*\]\s*(?:#.*)?$""")
_COMMIT_LINE = LazyPattern(r"""(?P<head>\s*commit\s*=\s*)(?P<q>["'])(?P<value>[^"'\n]*)(?P=q)(?P<tail>\s*(?:#.*)?)$""")


def rewrite_commits(text: str, commits: Dict[str, str], where: str) -> str:
    """Replace the ``commit = "…"`` value of each table in ``commits`` (table name → new commit)
    and nothing else: comments, order, quoting and spacing stay.

    :raises SourcesError: a table keeps its commit elsewhere than on a ``commit = "…"`` line of its
        own ``[table]`` section (an inline table, a dotted key), so it cannot be edited in place.
    """
    lines = re.findall(r"[^\n]*\n|[^\n]+$", text)
    table: Optional[str] = None
    done = set()
    for i, line in enumerate(lines):
        body = line.rstrip("\r\n")
        header = _TABLE_HEADER.match(body)
        if header:
            table = header.group("name").strip("\"'")
            continue
        if table in commits and table not in done:
            match = _COMMIT_LINE.match(body)
            if match:
                ending = line[len(body):]
                lines[i] = (f"{match.group('head')}{match.group('q')}{commits[table]}{match.group('q')}"
                            f"{match.group('tail')}{ending}")
                done.add(table)
    missing = [name for name in commits if name not in done]
    if missing:
        raise SourcesError(f"{where}: cannot rewrite the commit of [{missing[0]}] in place: "
                           f"keep it as a `commit = \"…\"` line in the [{missing[0]}] table")
    new_text = "".join(lines)
    # The edit must change exactly those commits: parse both and compare.
    try:
        before, after = parse_toml(text), parse_toml(new_text)
    except DocumentError as err:
        raise SourcesError(f"{where}: {err}") from None
    for name, commit in commits.items():
        before[name]["commit"] = commit
    if before != after:
        raise SourcesError(f"{where}: rewriting the commits would change more than the commits; file left as it was")
    return new_text


def bump(names: Sequence[str] = (), path: Optional[Union[str, Path]] = None,
         resolve: LsRemote = ls_remote) -> List[Bump]:
    """Move the commit of each named source (default: all) to the head of its tracking ref, and
    rewrite the manifest in one atomic write (nothing is written when any source fails, or when
    no commit moved).

    :param names: table names (or ``URLREF_`` names) to bump.
    :param resolve: ``(url, ref) → [(commit, refname)]``; default :func:`ls_remote`.
    :returns: one :class:`Bump` per source, in manifest order.
    :raises SourcesError: the manifest is malformed, a name is unknown, a ref is not found, a URL
        cannot be reached, or the commit lines cannot be edited in place.
    """
    file = Path(path) if path is not None else manifest_path()
    where = str(file)
    text = _read(file)
    manifest = parse_manifest(text, where, str(file.resolve().parent), strict=False)
    selected = [lookup(manifest, name, where) for name in names] if names else list(manifest.values())
    selected = [manifest[key] for key in manifest if any(s.key == key for s in selected)]
    for chosen in selected:  # an entry bump does not touch may be fixed later
        if chosen.problem:
            raise SourcesError(chosen.problem)
    results = []
    for entry in selected:
        try:
            refs = resolve(entry.url, entry.tracking_ref)
        except SourcesError as err:
            raise SourcesError(f"{where}: [{entry.key}]: {err}") from None
        commit = pick_ref(refs, entry.tracking_ref)
        if commit is None:
            raise SourcesError(f"{where}: [{entry.key}]: tracking_ref {entry.tracking_ref!r} not found at {entry.url}")
        if not _COMMIT.match(commit):
            raise SourcesError(f"{where}: [{entry.key}]: {entry.url} answered {commit!r} for "
                               f"{entry.tracking_ref!r}, not a 40-hex commit (SHA-256 repositories are not supported)")
        results.append(Bump(entry.key, entry.tracking_ref, entry.commit, commit))
    moved = {b.key: b.new for b in results if b.moved}
    if moved:
        write_atomic(str(file), rewrite_commits(text, moved, where), "the sources manifest")
    return results
