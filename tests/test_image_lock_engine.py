"""The wheel-builder pattern (docs/plugins.md, "A wheel built in the image") locked and built
``--locked`` on the test engine, offline, from the python stand-in.

The family: ``wb-root`` (the built-in base Dockerfile on ``python:3.11-slim-bookworm``) →
``wb-tool`` (``kind="single"``, unpublished: builds ``wbtool-0.1.0-py3-none-any.whl``, which
needs ``wbdep>=1``) → ``wb-kit`` (a meal kit that copies the wheel in through ``uses`` and writes
``wbtool @ file:///opt/wb-tool/dist/wbtool-0.1.0-py3-none-any.whl`` at build time) → ``wb-child``
(asks for ``wbtool`` by name; its final stage installs the chain). The wheelhouse, from the host:
pip and pip-tools for the image (``bake-plan wheelhouse``, cached like the JAX family's), plus
``wbdep`` 1.2 and an "index release" ``wbtool`` 0.0.1.

- A host lock pins ``wbtool==0.0.1`` (it never sees the build-time line): ``build --locked``
  refuses it with one line naming the ``.in`` file and line and the lock's pin.
- ``lock --in-image`` compiles in the meal kit: the lock has the in-image wheel by its path and
  its dependency ``wbdep``; ``build --locked`` installs exactly that (``pip freeze``).
- For amd64 and arm64 (arm64 under qemu; the python stand-ins are indexes of both): the root's
  ``python3 -m venv`` and pip run on each arch, one build of both arches pushes one multi-arch
  tag, and each arch's image runs on its own machine with the same lock. This is the one test
  that makes venvs under emulation (minutes under qemu): the other engine tests' arm64 builds
  run no pip. Only ``wb-child``'s final image is built for arm64: the family's
  ``bake_plan_adjust_target`` builds the ancestors' final images, which nothing here runs, for
  amd64 alone (each is a pip-compile and a pip-sync, minutes under qemu).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import console_script, hermetic_pip_env, make_wheel
from test_jaxfamily_engine import CACHE, DATE, PIP_TOOLS_NAMES

from bake.pip.wheelhouse import TOOLS

pytestmark = pytest.mark.engine

STAND_IN = "stand-in/python:bookworm"
BASE = "python:3.11-slim-bookworm"
WHEEL = "/opt/wb-tool/dist/wbtool-0.1.0-py3-none-any.whl"

MAKE_WHEEL = '''\
"""make-wheel.py DIR NAME VERSION [REQUIREMENT...]: a pure-Python wheel, as PEP 427 asks."""
import base64, hashlib, os, sys, zipfile

out, name, version, requires = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
info = f"{name}-{version}.dist-info"
files = {
    f"{name}/__init__.py": f"VERSION = {version!r}\\n",
    f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n"
    + "".join(f"Requires-Dist: {r}\\n" for r in requires),
    f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: make-wheel\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
for path, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{path},sha256={digest},{len(text.encode())}")
files[f"{info}/RECORD"] = "\\n".join(record + [f"{info}/RECORD,,"]) + "\\n"
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(os.path.join(out, f"{name}-{version}-py3-none-any.whl"), "w") as zf:
    for path, text in files.items():
        zf.writestr(zipfile.ZipInfo(path, (1980, 1, 1, 0, 0, 0)), text)
'''

WB_TOOL = """\
# wb-tool: builds the wbtool wheel into /opt/wb-tool/dist; the wb-kit meal kit copies it out.
FROM base AS wheel
COPY make-wheel.py /opt/wb-tool/make-wheel.py
RUN python3 /opt/wb-tool/make-wheel.py /opt/wb-tool/dist wbtool 0.1.0 "wbdep>=1"
"""

WB_KIT = """\
# wb-kit: copies the wbtool wheel in and writes its line at build time (its name is known only now).
FROM scratch AS wheelhouse
FROM scratch AS pip-lock

FROM base AS mealkit
COPY --from=wb-tool /opt/wb-tool/dist/ /opt/wb-tool/dist/
RUN bake-write-requirements --wheels wb-kit /opt/wb-tool/dist
ARG REQUIREMENTS=""
RUN bake-write-requirements wb-kit "${REQUIREMENTS}"

FROM mealkit AS final
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_NO_INDEX
ARG PIP_TRUSTED_HOST
ARG BAKE_PIP_LOCKED
RUN --mount=type=bind,from=wheelhouse,target=/opt/wheelhouse \\
    --mount=type=bind,from=pip-lock,target=/opt/pip-lock \\
    bake-pip-finalize
"""

WB_CHILD = WB_KIT.split("FROM base AS mealkit")[0] + """\
FROM base AS mealkit
ARG REQUIREMENTS=""
RUN bake-write-requirements wb-child "${REQUIREMENTS}"

FROM mealkit AS final""" + WB_KIT.split("FROM mealkit AS final")[1]

PLUGIN = '''
from pathlib import Path

from bake import Stage, hookimpl
from bake.resources import stage_dir, stages_dir

HERE = Path({here!r})


@hookimpl
def bake_plan_stages():
    common = dict(registry="localhost:5555/wheelfamily", platforms={platforms!r})
    return [
        Stage(name="wb-root", image="wb-root", context=stage_dir("base"), base_image={base!r}, python="3.11",
              args={{"APT_PACKAGES": "python3 python3-venv"}}, contexts={{"scripts": str(stages_dir() / "scripts")}},
              **common),
        Stage(name="wb-tool", kind="single", target="wheel", context=HERE / "wb-tool", parent="wb-root", **common),
        Stage(name="wb-kit", image="wb-kit", context=HERE / "wb-kit", parent="wb-root", uses={{"wb-tool": "wb-tool"}},
              **common),
        Stage(name="wb-child", image="wb-child", context=HERE / "wb-child", parent="wb-kit",
              requirements=("wbtool",), **common),
    ]


@hookimpl
def bake_plan_adjust_target(stage, flavor, target):
    # Only wb-child's final image is run on every arch: the ancestors' final images (a pip-compile
    # and a pip-sync each, minutes under qemu) are built for amd64 alone. Their meal kits, which
    # wb-child builds on, keep every arch.
    if flavor == "final" and stage.name != "wb-child" and len(target["platforms"]) > 1:
        target["platforms"] = ["linux/amd64"]
'''


BUILD_TIMEOUT_S = 2400
"""A build's bound: arm64 runs under qemu, and the root meal kit sets up two venvs there."""


def _bake_plan(*args, cwd, env) -> subprocess.CompletedProcess:
    """The installed console script, with room for a real build under qemu."""
    return subprocess.run([str(console_script()), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S)


def _platforms(engine) -> tuple:
    """linux/amd64, and linux/arm64 when the python stand-in has it."""
    inspect = engine.docker("buildx", "imagetools", "inspect", f"{engine.registry}/{STAND_IN}")
    return ("linux/amd64", "linux/arm64") if "linux/arm64" in inspect.stdout else ("linux/amd64",)


PLATFORMS = ("linux/amd64", "linux/arm64")
MACHINE = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


def _index_platforms(engine, ref: str) -> list:
    """The ``os/arch`` of the images in the index ``ref`` (attestation manifests left out)."""
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", ref).stdout)
    assert raw["mediaType"] in ("application/vnd.oci.image.index.v1+json",
                                "application/vnd.docker.distribution.manifest.list.v2+json"), (ref, raw["mediaType"])
    return sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]
                  if m.get("platform", {}).get("os") != "unknown")


@pytest.mark.parametrize("suite", ["bookworm", "bullseye"])
def test_python_stand_ins_hold_amd64_and_arm64(engine, suite):
    assert _index_platforms(engine, f"{engine.registry}/stand-in/python:{suite}") == list(PLATFORMS)


def _family(tmp_path: Path, platforms) -> str:
    here = tmp_path / "family"
    for name, text in (("wb-tool", WB_TOOL), ("wb-kit", WB_KIT), ("wb-child", WB_CHILD)):
        (here / name).mkdir(parents=True)
        (here / name / "Dockerfile").write_text(text)
    (here / "wb-tool" / "make-wheel.py").write_text(MAKE_WHEEL)
    return PLUGIN.format(here=str(here), platforms=tuple(platforms), base=BASE)


def _wheelhouse(cli, env, platforms) -> Path:
    """pip and pip-tools for the image (``bake-plan wheelhouse --target wb-root``: the root asks for
    nothing else), cached; plus the family's own ``wbdep`` 1.2 and ``wbtool`` 0.0.1."""
    house = CACHE / "wheelfamily-wheelhouse"
    stamp = house / ".bake-plan-tests-stamp"
    want = hashlib.sha256((repr(TOOLS) + repr(platforms)).encode()).hexdigest()
    if not (stamp.is_file() and stamp.read_text() == want):
        cli("wheelhouse", "--target", "wb-root", "-o", str(house), "--config", os.devnull, env=env, check=True)
        stamp.write_text(want)
    for name, version, requires in (("wbdep", "1.2", ()), ("wbtool", "0.0.1", ())):
        if not (house / f"{name}-{version}-py3-none-any.whl").is_file():
            make_wheel(house, name, version, requires)
    return house


def _installed(lines) -> dict:
    """``{name: "==1.2" or "@ file:///…"}`` of a lock's or ``pip freeze``'s requirement lines."""
    out = {}
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        found = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==\s*\S+|@\s*\S+)$", line)
        if found:
            out[re.sub(r"[-_.]+", "-", found.group(1).lower())] = found.group(2).replace(" ", "")
    return out


def test_a_wheel_built_in_the_image_is_locked_in_the_image_and_installed_locked(engine, cli, make_plugin,
                                                                               tmp_path):
    platforms = _platforms(engine)
    print(f"platforms: {', '.join(platforms)}")
    site = make_plugin(_family(tmp_path, platforms), name="wheelfamily")
    env = dict(os.environ, PYTHONPATH=str(site))
    house = _wheelhouse(cli, env, platforms)
    namespace = f"{engine.registry}/wb{uuid.uuid4().hex[:8]}"
    build = ("build", "--target", "wb-child", "--wheelhouse", str(house), "--platform", "linux/amd64",
             "--registry", namespace, "--date", DATE, "--load", "--base-image", f"{BASE}={engine.registry}/{STAND_IN}",
             "--config", os.devnull, "--progress", "plain")

    # Locked in the image (below): started now, in a directory of its own, as the meal kits of
    # every arch take minutes (arm64 under qemu); the refused amd64 build runs meanwhile.
    locks = tmp_path / "locks"
    lock_args = ("lock", "--in-image", "--target", "wb-child", "--locks-dir", str(locks), "--wheelhouse", str(house),
                 "--base-image", f"{BASE}={engine.registry}/{STAND_IN}", "--config", os.devnull)
    (tmp_path / "in-image").mkdir()
    with open(tmp_path / "in-image" / "stderr", "w+") as lock_err:
        locking = subprocess.Popen([str(console_script()), *lock_args], cwd=tmp_path / "in-image", env=env,
                                   stdout=subprocess.DEVNULL, stderr=lock_err, text=True)
        try:
            # The host lock never sees the line wb-kit writes at build time: it pins the index's
            # wbtool, which a --locked build refuses, naming the .in file and line and the lock's pin.
            host_locks = tmp_path / "host-locks"
            cli("lock", "--target", "wb-child", "--locks-dir", str(host_locks), "--config", os.devnull, "--no-index",
                "--find-links", str(house), env=hermetic_pip_env(env), check=True)
            assert "wbtool==0.0.1" in (host_locks / "wb-child.txt").read_text()
            proc = _bake_plan(*build, "--locked", "--locks-dir", str(host_locks), "--sitrep-dir",
                              str(tmp_path / "refused"), "-o", "refused.hcl", cwd=tmp_path, env=env)
            assert proc.returncode == 1, proc.stderr[-3000:]
            refusal = (f"/opt/pip-tools.d/requirements-wb-kit.in:1: wbtool @ file://{WHEEL}: the lock pins "
                       "wbtool==0.0.1 from the index, not this URL")
            assert refusal in proc.stderr, proc.stderr[-3000:]
            assert "bake-plan lock --in-image --target wb-child" in proc.stderr, proc.stderr[-3000:]

            # Locked in the image: the wheel by its in-image path, its dependency resolved with the rest.
            returncode = locking.wait(timeout=BUILD_TIMEOUT_S)
        finally:
            if locking.poll() is None:
                locking.kill()
                locking.wait(timeout=60)
        lock_err.seek(0)
        assert returncode == 0, lock_err.read()[-3000:]
    written = sorted(p.name for p in locks.glob("wb-child*.txt"))
    assert written == ["wb-child.txt"], written  # pure-Python wheels: one lock for every arch
    lock_text = (locks / "wb-child.txt").read_text()
    assert "# bake-plan resolver: pip-compile (in the image)" in lock_text, lock_text
    assert re.search(r"^# bake-plan python: 3\.11\.\d+$", lock_text, re.M), lock_text
    assert f"# bake-plan platforms: {', '.join(platforms)}" in lock_text, lock_text
    lock = _installed(lock_text.splitlines())
    assert lock["wbtool"] == f"@file://{WHEEL}" and lock["wbdep"] == "==1.2", lock

    proc = _bake_plan(*build, "--locked", "--locks-dir", str(locks), "--sitrep-dir", str(tmp_path / "locked"),
                      "-o", "locked.hcl", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    image = f"{namespace}/wb-child:latest-amd64"
    said = engine.docker("run", "--rm", "--network", "none", image, "python", "-c",
                         "import wbtool, importlib.metadata as m; print(wbtool.VERSION, m.version('wbtool'))")
    assert said.stdout.split() == ["0.1.0", "0.1.0"], said.stdout
    frozen = _installed(engine.docker("run", "--rm", image, "pip", "freeze").stdout.splitlines())
    assert frozen == {k: v for k, v in lock.items() if k not in PIP_TOOLS_NAMES}, (frozen, lock)

    # Every arch in one build (amd64 from the cache, arm64's venvs and pip under qemu), pushed: one
    # multi-arch tag, and each arch's image runs on its own machine holding the same lock.
    if platforms[1:]:
        both = ("build", "--target", "wb-child", "--wheelhouse", str(house), "--registry", namespace, "--date", DATE,
                "--push", "--base-image", f"{BASE}={engine.registry}/{STAND_IN}", "--config", os.devnull,
                "--progress", "plain")
        proc = _bake_plan(*both, "--locked", "--locks-dir", str(locks), "--sitrep-dir", str(tmp_path / "locked-all"),
                          "-o", "locked-all.hcl", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        pushed = f"{namespace}/wb-child:latest"
        assert _index_platforms(engine, pushed) == sorted(platforms)
        for platform in platforms:
            out = engine.docker("run", "--rm", "--network", "none", "--platform", platform, pushed, "sh", "-c",
                                "uname -m; pip freeze", timeout=900).stdout.splitlines()
            assert out[0] == MACHINE[platform], (platform, out)
            frozen = _installed(out[1:])
            assert frozen == {k: v for k, v in lock.items() if k not in PIP_TOOLS_NAMES}, (platform, frozen, lock)



def test_a_compile_that_fails_in_the_image_is_one_line_and_writes_no_lock(engine, cli, make_plugin, tmp_path):
    """wb-child asks for ``wbdep<1``, the in-image wheel needs ``wbdep>=1``: the image's pip-compile
    fails, ``lock --in-image`` exits 1 naming the stage, and no lock is written."""
    site = make_plugin(_family(tmp_path, ("linux/amd64",)).replace('requirements=("wbtool",)',
                                                                   'requirements=("wbtool", "wbdep<1")'),
                       name="wheelfamily")
    env = dict(os.environ, PYTHONPATH=str(site))
    house = _wheelhouse(cli, env, ("linux/amd64",))
    locks = tmp_path / "locks"
    proc = _bake_plan("lock", "--in-image", "--target", "wb-child", "--locks-dir", str(locks), "--wheelhouse",
                      str(house), "--base-image", f"{BASE}={engine.registry}/{STAND_IN}", "--config", os.devnull,
                      "--quiet", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith("bake-plan: error: lock --in-image: the compile in the image of 'wb-child' failed: "), \
        proc.stderr
    assert "wbdep" in proc.stderr, proc.stderr  # pip-compile's own reason, from the step's output
    assert "Traceback" not in proc.stderr and not list(locks.glob("*.txt"))
