"""``bake-plan lock`` for a Python the host does not have: on this Python 3.11 host, a
stage on the Debian bullseye stand-in (Python 3.9, ``scripts/test-engine stand-ins``) that
declares ``python = "3.9"`` is locked by uv for 3.9, and that lock has the same pins as the
image's own pip-compile on its Python 3.9.

Real packages, from the index through pip's own configuration (``bake-plan wheelhouse``, cached
under ``$BAKE_PLAN_TEST_CACHE`` like the JAX family's): ``numpy`` (its last release for 3.9 is
2.0.x) and ``typing_extensions; python_version < "3.10"``, both resolved differently for 3.11,
which the test checks against pip's own resolution on this 3.11 host, so it means something.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import uuid

import pytest
from conftest import hermetic_pip_env
from test_jaxfamily_engine import CACHE, DATE, PIP_TOOLS_NAMES, _bake_plan, _pins

from bake.pip.wheelhouse import TOOLS

pytestmark = pytest.mark.engine

STAND_IN = "stand-in/python:bullseye"
BASE = "python:3.9-slim-bullseye"
REQUIREMENTS = ("numpy", 'typing_extensions; python_version < "3.10"')
# pip freeze leaves out pip, setuptools and wheel; Debian's venv also carries setuptools' own
# "pkg-resources==0.0.0", which pip-sync leaves alone like them (pip-tools' PACKAGES_TO_IGNORE)
# and pip 22.2+ lists. None of them is in a lock.
NOT_LOCKED = PIP_TOOLS_NAMES | {"pkg-resources"}

PLUGIN = f'''
from bake import Stage, hookimpl
from bake.resources import stage_dir, stages_dir


@hookimpl
def bake_plan_stages():
    return [Stage(name="py39", image="py39", context=stage_dir("base"), base_image={BASE!r}, python="3.9",
                  requirements={REQUIREMENTS!r}, args={{"APT_PACKAGES": "python3 python3-venv"}},
                  contexts={{"scripts": str(stages_dir() / "scripts")}}, registry="localhost:5555/py39",
                  platforms=("linux/amd64",))]
'''


def _name(project: str) -> str:
    import re
    return re.sub(r"[-_.]+", "-", project).lower()


def _stamp() -> str:
    return hashlib.sha256((PLUGIN + repr(TOOLS)).encode()).hexdigest()


def _pins_for_host_python(tmp_path) -> dict:
    """What pip resolves for the same lines on this host's Python (3.11), from the index through
    pip's own configuration (metadata only: ``--dry-run --report``); cached with the wheelhouse."""
    cached = CACHE / "py39-wheelhouse" / ".host-python-pins.json"
    if cached.is_file():
        data = json.loads(cached.read_text())
        if data.get("stamp") == _stamp() and data.get("python") == sys.version_info[:2]:
            return data["pins"]
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--dry-run",
                    "--ignore-installed", "--only-binary=:all:", "--target", str(tmp_path / "none"),
                    "--report", str(report), *REQUIREMENTS], check=True, timeout=300)
    pins = {_name(item["metadata"]["name"]): item["metadata"]["version"]
            for item in json.loads(report.read_text())["install"]}
    cached.write_text(json.dumps({"stamp": _stamp(), "python": list(sys.version_info[:2]), "pins": pins}))
    return pins


def test_lock_for_python_39_on_a_311_host_pins_what_the_image_compiles(engine, cli, make_plugin, tmp_path):
    assert sys.version_info[:2] != (3, 9), "the point is a Python the host does not have"
    site = make_plugin(PLUGIN, name="py39family")
    env = dict(os.environ, PYTHONPATH=str(site))

    house = CACHE / "py39-wheelhouse"
    stamp = house / ".bake-plan-tests-stamp"
    if not (stamp.is_file() and stamp.read_text() == _stamp()):
        cli("wheelhouse", "--target", "py39", "-o", str(house), "--config", os.devnull, env=env, check=True)
        stamp.write_text(_stamp())
    wheels = {w.name for w in house.glob("*.whl")}
    assert any(w.startswith("numpy-2.0.") and "-cp39-" in w for w in wheels), sorted(wheels)
    assert any(w.startswith("tomli-") for w in wheels), "pip-tools on 3.9 needs tomli (a marker pip skips on 3.11)"

    # L: uv, for Python 3.9 on x86_64-manylinux_2_28, from the wheelhouse only.
    locks = tmp_path / "locks"
    cli("lock", "--target", "py39", "--locks-dir", str(locks), "--config", os.devnull, "--no-index",
        "--find-links", str(house), env=hermetic_pip_env(env), check=True)
    lock_text = (locks / "py39.txt").read_text()
    assert "# bake-plan python: 3.9" in lock_text and "resolver: uv" in lock_text, lock_text
    lock = {k: v for k, v in _pins(lock_text.splitlines()).items() if k not in PIP_TOOLS_NAMES}
    assert lock["numpy"].startswith("2.0."), lock
    assert "typing-extensions" in lock, lock

    # The same lines resolved for this host's Python (3.11) pin something else.
    host = _pins_for_host_python(tmp_path)
    print(json.dumps({"lock_3_9": lock, "pip_3_11": host}))
    assert "typing-extensions" not in host and host["numpy"] != lock["numpy"], host
    assert {k: v for k, v in host.items() if k in lock} != lock

    # Unlocked: the image pip-compiles its own lock on its Python 3.9, from the same wheelhouse.
    namespace = f"{engine.registry}/py39{uuid.uuid4().hex[:8]}"
    image = f"{namespace}/py39:latest-amd64"
    common = ("--target", "py39", "--wheelhouse", str(house), "--platform", "linux/amd64", "--registry", namespace,
              "--date", DATE, "--load", "--base-image", f"{BASE}={engine.registry}/{STAND_IN}",
              "--config", os.devnull)
    proc = _bake_plan("build", *common, "--sitrep-dir", str(tmp_path / "sitrep-unlocked"), "-o", "unlocked.hcl",
                      cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    version = engine.docker("run", "--rm", image, "python", "-c",
                            "import sys; print('%d.%d' % sys.version_info[:2])").stdout.strip()
    assert version == "3.9"
    own = _pins(engine.docker("run", "--rm", image, "pip", "freeze").stdout.splitlines())
    assert {k: v for k, v in own.items() if k not in NOT_LOCKED} == lock

    # --locked with L: the image holds exactly L.
    proc = _bake_plan("build", *common, "--locked", "--locks-dir", str(locks), "--sitrep-dir",
                      str(tmp_path / "sitrep-locked"), "-o", "locked.hcl", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The wheelhouse is an oci-layout:// named context, not a base image (BuildKit names it
    # docker.io/library/wheelhouse, with the layout's digest).
    layout = re.search(r"oci-layout://[^@\"]+@(sha256:[0-9a-f]{64})", (tmp_path / "locked.hcl").read_text())
    assert layout, "the plan does not give the wheelhouse as an OCI layout"
    bases = json.loads((tmp_path / "sitrep-locked" / "sitrep.json").read_text())["targets"]["py39"]["base_images"]
    assert bases and not [b for b in bases if "wheelhouse" in b["image"] or b["digest"] == layout.group(1)], bases
    frozen = _pins(engine.docker("run", "--rm", image, "pip", "freeze").stdout.splitlines())
    assert {k: v for k, v in frozen.items() if k not in NOT_LOCKED} == lock
