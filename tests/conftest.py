"""Shared fixtures: the real buildx binaries, the installed CLI, and throw-away plugins.

Tests that need buildx skip when it is missing, except under ``CI=true``, where a missing
binary fails the run (``.ci/run`` installs both with ``scripts/test-engine install-buildx``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bake.plan.render import escape_interpolation

ROOT = Path(__file__).resolve().parent.parent
OLD_BUILDX_DEFAULT = "/var/tmp/bake-plan-engine/buildx-0.13/docker-buildx"
CI = os.environ.get("CI") == "true"


# --- only bake-plan's own plugins ---------------------------------------------------------------
# Tests that plan with "the installed plugins" mean bake-plan's built-ins: a plugin someone
# pip-installed into the test environment must not add stages, answer policies or fail the run.
# Tests that want a plugin add it themselves (make_plugin, PYTHONPATH; bake.testing).


def stray_plugins() -> list:
    """Entry-point names of the installed ``bake_plan`` plugins that are not bake-plan's own."""
    from bake.plan.plugins import entry_point_names

    return sorted(set(entry_point_names()) - set(entry_point_names(builtin_only=True)))


def pytest_configure(config):
    """The CLI run in subprocesses blocks the stray plugins through the block list it reads
    (``$BAKE_PLAN_PLUGINS_DISABLE``, :mod:`bake.settings.merge`); set before collection, so a
    test module's copy of the environment has it too. The shell's ``BAKE_PLAN_<SETTING>``
    variables (``BAKE_PLAN_REGISTRY``…) would change every plan the tests make: removed; a test
    that wants one sets it."""
    from bake.settings.merge import ENV_PLUGINS_DISABLE, ENVIRONMENT

    for variable in ENVIRONMENT.values():
        os.environ.pop(variable, None)

    strays = stray_plugins()
    if strays:
        listed = [n for n in os.environ.get(ENV_PLUGINS_DISABLE, "").split(",") if n.strip()]
        os.environ[ENV_PLUGINS_DISABLE] = ",".join(dict.fromkeys([*listed, *strays]))


@pytest.fixture(scope="session")
def builtin_entry_point_names() -> frozenset:
    from bake.plan.plugins import entry_point_names

    return frozenset(entry_point_names(builtin_only=True))


@pytest.fixture(autouse=True)
def programs_start_again():
    """A test that stops bake-plan in this process (a SIGINT or SIGTERM reaching the CLI's
    handler, which ``bake.cli.main`` installs here) leaves ``bake.processes`` stopping; the next
    test, or a session fixture's teardown, is a new command and may run programs again."""
    yield
    processes = sys.modules.get("bake.processes")
    if processes is not None:
        processes.resume()


@pytest.fixture(autouse=True)
def only_builtin_plugins(monkeypatch, builtin_entry_point_names):
    """In this process, plugin managers built from entry points (``make_plan(options)``,
    ``get_plugin_manager()``) find only bake-plan's own."""
    from bake.plan import plugins

    installed = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda: [ep for ep in installed() if ep.name in builtin_entry_point_names])


def _missing(what: str):
    if CI:
        pytest.fail(f"{what} is required under CI=true (run scripts/test-engine install-buildx)")
    pytest.skip(f"{what} not available")


class Buildx:
    """One real buildx binary: ``bake --print`` a plan and get back buildx's resolved JSON."""

    def __init__(self, argv, version):
        self.argv = list(argv)
        self.version = version  # (major, minor)

    def __repr__(self):
        return f"buildx {self.version[0]}.{self.version[1]}"

    def print_plan(self, plan_file: Path, targets=(), cwd: Path = None, env=None, extra_files=()) -> dict:
        """``docker buildx bake -f PLAN [-f EXTRA…] --print TARGETS`` from ``cwd``, normalised by
        :func:`normalise`."""
        files = [arg for f in [plan_file, *extra_files] for arg in ("-f", str(f))]
        proc = subprocess.run(
            self.argv + ["bake", *files, "--print", *targets],
            cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
        )
        if proc.returncode != 0:
            raise AssertionError(f"{self} bake --print failed ({proc.returncode}):\n{proc.stderr}")
        return normalise(json.loads(proc.stdout), self.version)


def _buildx_version(argv) -> tuple:
    out = subprocess.run(argv + ["version"], capture_output=True, text=True, timeout=60).stdout
    # "github.com/docker/buildx 0.29.1+ds1 ..." or "... v0.13.1 ..."
    word = out.split()[1].lstrip("v")
    major, minor = word.split(".")[:2]
    return int(major), int(minor)


@pytest.fixture(scope="session")
def buildx_new():
    if shutil.which("docker") is None:
        _missing("the docker CLI")
    argv = ["docker", "buildx"]
    if subprocess.run(argv + ["version"], capture_output=True).returncode != 0:
        _missing("docker buildx")
    return Buildx(argv, _buildx_version(argv))


@pytest.fixture(scope="session")
def buildx_old():
    path = os.environ.get("BAKE_PLAN_BUILDX_OLD", OLD_BUILDX_DEFAULT)
    if not os.access(path, os.X_OK):
        _missing(f"buildx 0.13 at {path}")
    return Buildx([path], _buildx_version([path]))


@pytest.fixture(scope="session", params=["new", "old"])
def buildx(request):
    """Each real buildx in turn: Debian sid's 0.29 and trixie's 0.13."""
    return request.getfixturevalue(f"buildx_{request.param}")


# buildx 0.23 (docker/buildx#3097) re-escapes these when printing, so its --print output can be
# read back as a bake file; tags and the rest come back unescaped.
_REESCAPED = ("args", "labels", "dockerfile-inline")


def _unescape(value: str) -> str:
    return value.replace("$${", "${").replace("%%{", "%{")


# Lists of "k=v,k=v" entries that buildx 0.19+ prints as objects.
_ENTRY_LISTS = ("cache-from", "cache-to", "secret", "output", "attest")


def _cache_entry(entry):
    if isinstance(entry, dict):
        return dict(sorted(entry.items()))
    return dict(sorted(part.split("=", 1) for part in entry.split(",")))


def normalise(printed: dict, version: tuple) -> dict:
    """Bring buildx's printed JSON to the plan's own form: literal strings, cache entries as dicts."""
    for target in printed.get("target", {}).values():
        if version >= (0, 23):
            for key in _REESCAPED:
                if isinstance(target.get(key), str):
                    target[key] = _unescape(target[key])
                elif isinstance(target.get(key), dict):
                    target[key] = {k: _unescape(v) if isinstance(v, str) else v for k, v in target[key].items()}
        for key in _ENTRY_LISTS:
            if key in target:
                target[key] = [_cache_entry(e) for e in target[key]]
    return printed


def expected_target(target: dict) -> dict:
    """A plan target in the form :func:`normalise` gives buildx's output."""
    out = dict(target)
    for key in _ENTRY_LISTS:
        if key in out:
            out[key] = [_cache_entry(e) for e in out[key]]
    return out


def console_script() -> Path:
    """The installed ``bake-plan`` console script: beside this interpreter, else on ``PATH``."""
    exe = Path(sys.executable).parent / "bake-plan"
    if not exe.exists():
        found = shutil.which("bake-plan")
        if found is None:
            pytest.fail("bake-plan is not installed: pip install . first")
        exe = Path(found)
    return exe


@pytest.fixture(scope="session")
def cli():
    """Run the installed ``bake-plan`` console script as a user would."""
    exe = console_script()

    def run(*args, cwd=None, env=None, check=False, pythonpath=None):
        full_env = dict(os.environ if env is None else env)
        if pythonpath:
            full_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
        proc = subprocess.run([str(exe), *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"bake-plan {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def make_plugin(tmp_path_factory):
    """Write a plugin module and its distribution metadata (what ``pip install`` leaves behind: a
    ``.dist-info`` with ``entry_points.txt``) into a directory for ``PYTHONPATH``."""
    counter = {"n": 0}

    def make(source: str, name: str = None) -> Path:
        counter["n"] += 1
        ep_name = name or f"test-plugin-{counter['n']}"
        module = f"bake_plan_test_plugin_{counter['n']}"
        site = tmp_path_factory.mktemp("plugin-site")
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        dist = site / f"{module}-0.0.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.0\n")
        (dist / "entry_points.txt").write_text(f"[bake_plan]\n{ep_name} = {module}\n")
        return site

    return make


__all__ = ["ROOT", "escape_interpolation", "expected_target", "normalise"]


ENGINE_SOCKET = "/var/tmp/bake-plan-engine/docker.sock"


class Engine:
    """A running Docker engine and registry (``scripts/test-engine up``)."""

    def __init__(self, registry: str):
        self.registry = registry

    def docker(self, *args, check=True, timeout=300) -> subprocess.CompletedProcess:
        proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)} failed:\n{proc.stderr}")
        return proc

    def tags(self, repository: str) -> list:
        """Tags of ``host:port/path`` in the registry, through its HTTP API (``/v2/<name>/tags/list``)."""
        import urllib.error
        import urllib.request

        host, _, name = repository.partition("/")
        try:
            with urllib.request.urlopen(f"http://{host}/v2/{name}/tags/list", timeout=30) as resp:
                return json.load(resp).get("tags") or []
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return []
            raise


@pytest.fixture(scope="session")
def engine():
    """The engine at ``DOCKER_HOST`` (default: the socket ``scripts/test-engine`` starts) and the
    registry at ``BAKE_PLAN_TEST_REGISTRY`` (default ``localhost:5555``). Skips when either is down,
    except under ``CI=true``."""
    import urllib.request

    if "DOCKER_HOST" not in os.environ and os.path.exists(ENGINE_SOCKET):
        os.environ["DOCKER_HOST"] = f"unix://{ENGINE_SOCKET}"
    if shutil.which("docker") is None or subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode:
        _missing("a Docker engine (scripts/test-engine up)")
    registry = os.environ.get("BAKE_PLAN_TEST_REGISTRY", "localhost:5555")
    try:
        urllib.request.urlopen(f"http://{registry}/v2/", timeout=10).close()
    except OSError:
        _missing(f"a registry at {registry} (scripts/test-engine up)")
    return Engine(registry)


def make_wheel(directory: Path, name: str, version: str, requires=(), requires_python=None) -> Path:
    """Write a pure-Python wheel ``<name>-<version>-py3-none-any.whl`` into ``directory``, as a zip
    with the files the wheel spec (PEP 427) asks for: no build step, so a wheelhouse is instant."""
    import base64
    import hashlib
    import zipfile

    directory.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f'VERSION = "{version}"\n',
        f"{info}/METADATA": "Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
        + (f"Requires-Python: {requires_python}\n" if requires_python else "")
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bake-plan-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return wheel


def hermetic_pip_env(env=None) -> dict:
    """``env`` (default the process environment) without the machine's pip settings: no PIP_*
    variables, no pip configuration files. The tests pass --no-index/--find-links themselves."""
    from bake.pip.lock import without_pip_configuration

    return without_pip_configuration(os.environ if env is None else env)


def _need_private_engine():
    from private_engine import can_run_private_engine

    why = can_run_private_engine()
    if why:
        _missing(f"a private engine ({why})")


@pytest.fixture
def private_registry(engine, tmp_path_factory):
    """A registry of the test's own on a free port (``tests/private_engine.py``), started; the
    test may stop and start it. The shared registry is never touched."""
    from private_engine import PrivateRegistry

    _need_private_engine()
    reg = PrivateRegistry(tmp_path_factory.mktemp("registry"))
    reg.start()
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def private_engine(engine):
    """A dockerd of the module's own (``tests/private_engine.py``): tests may kill it, wipe its
    cache, and start it again without disturbing the shared engine others' tests use."""
    from private_engine import PrivateEngine

    _need_private_engine()
    eng = PrivateEngine()
    try:
        eng.start()
        yield eng
    finally:
        eng.remove()


@pytest.fixture(scope="session")
def family_site(tmp_path_factory):
    """The test family's plugin distribution, installed with pip into a directory for PYTHONPATH."""
    site = tmp_path_factory.mktemp("family-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                    str(ROOT / "tests" / "packages" / "bake-plan-testfamily")], check=True, timeout=300)
    return site


# --- the JAX reference family, built once a session -------------------------------------------

JAX_FAMILY = ROOT / "tests" / "packages" / "bake-plan-jaxfamily"
TEST_CACHE = Path(os.environ.get("BAKE_PLAN_TEST_CACHE", Path.home() / ".cache" / "bake-plan-tests"))
"""Kept between runs: the wheelhouses the engine tests download, each with a stamp of what for."""
JAX_DATE = "2026-11-29"
JAX_BASE = "python:3.11-slim-bookworm"
JAX_BUILD_TIMEOUT_S = 900
"""The family's first build on an engine that never built it: minutes (pip-sync of jax and jaxlib)."""


def jax_wheelhouse_stamp() -> str:
    """What the cached JAX wheelhouse was filled for: the family's plugin module and the tools
    (``bench/build.py`` reads and writes the same stamp)."""
    import hashlib

    from bake.pip.wheelhouse import TOOLS

    data = (JAX_FAMILY / "bake_plan_jaxfamily" / "__init__.py").read_bytes() + repr(TOOLS).encode()
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="session")
def jax_site(tmp_path_factory):
    """The JAX family's plugin distribution, installed with pip into a directory for PYTHONPATH."""
    site = tmp_path_factory.mktemp("jaxfamily-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                    str(JAX_FAMILY)], check=True, timeout=300)
    return site


@pytest.fixture(scope="session")
def jax_wheelhouse(cli, jax_site):
    """The family's wheelhouse, from the package index through pip's own configuration, once
    (kept in :data:`TEST_CACHE` while its stamp holds)."""
    house = TEST_CACHE / "jaxfamily-wheelhouse"
    stamp = house / ".bake-plan-tests-stamp"
    if not (stamp.is_file() and stamp.read_text() == jax_wheelhouse_stamp()):
        env = dict(os.environ, PYTHONPATH=str(jax_site))
        cli("wheelhouse", "--target", "jx-child", "-o", str(house), "--config", os.devnull,
            env=env, check=True)
        stamp.write_text(jax_wheelhouse_stamp())
    return house


@pytest.fixture(scope="session")
def jax_family_built(engine, cli, jax_site, jax_wheelhouse, tmp_path_factory):
    """The JAX family locked from its wheelhouse (``bake-plan lock --target jx-child``) and built
    ``--locked``, offline, for linux/amd64 with ``--load``, once a session.
    ``test_jaxfamily_engine.py`` checks that build; the build benchmark (``test_bench_build.py``)
    asks for it first, so its own builds of the same plan find BuildKit's cache warm whichever
    file runs first, far inside the benchmark's time bound.

    :returns: a namespace: ``work`` (the directory the build ran in: ``docker-bake.hcl``, ``locks/``,
        ``sitrep/``), ``env`` (with the family on ``PYTHONPATH``), ``lock_text``, ``namespace``
        (``<registry>/jx<hex>``), ``image`` (the loaded ``jx-child:latest-amd64``) and
        ``build_seconds``.
    """
    import time
    import uuid
    from types import SimpleNamespace

    work = tmp_path_factory.mktemp("jaxfamily")
    env = dict(os.environ, PYTHONPATH=str(jax_site))
    locks = work / "locks"
    cli("lock", "--target", "jx-child", "--locks-dir", str(locks), "--config", os.devnull,
        "--no-index", "--find-links", str(jax_wheelhouse), env=hermetic_pip_env(env), check=True)
    namespace = f"{engine.registry}/jx{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    proc = subprocess.run(
        [str(console_script()), "build", "--target", "jx-child", "--locked", "--locks-dir", str(locks),
         "--wheelhouse", str(jax_wheelhouse), "--platform", "linux/amd64", "--registry", namespace, "--date", JAX_DATE,
         "--load", "--base-image", f"{JAX_BASE}={engine.registry}/stand-in/python:bookworm", "--config", os.devnull,
         "--sitrep-dir", str(work / "sitrep")],
        cwd=work, env=env, capture_output=True, text=True, timeout=JAX_BUILD_TIMEOUT_S)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    return SimpleNamespace(work=work, env=env, lock_text=(locks / "jx-child.txt").read_text(), namespace=namespace,
                           image=f"{namespace}/jx-child:latest-amd64", build_seconds=seconds)
