"""The host lock against the image's own pip-compile, on the Debian bookworm stand-in
(``localhost:5555/stand-in/python:bookworm``: Python 3.11.2, glibc 2.36; ``scripts/test-engine
stand-ins``): a stage that declares ``python = "3.11.2"`` and ``glibc = "2.36"`` is locked on the
host with uv, and pip-tools in a container of that image compiles the same ``.in`` file against
the same find-links directory and indexes (mounted at the same paths, no network); both pin the
same releases. Each family splits on one rule the host must follow to agree:

- ``zeta`` 2.0 needs Python >= 3.11.1 (the exact Python, not "3.11" read as 3.11.0);
- ``mu`` 2.0 ships only a ``manylinux_2_36`` wheel (the image's glibc, not manylinux_2_28);
- ``kappa`` 2.0 is on ``--index-url``, 1.0 on ``--extra-index-url`` (pip's best match, not uv's
  first index).

pip-tools comes from a wheelhouse kept under ``$BAKE_PLAN_TEST_CACHE`` (fetched once with pip
through pip's own configuration when it is not there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import hermetic_pip_env, make_wheel
from test_jaxfamily_engine import CACHE
from test_lock_image_rules import _pins, _simple_index, _tagged_wheel

from bake.pip.wheelhouse import TOOLS

pytestmark = pytest.mark.engine

STAND_IN = "stand-in/python:bookworm"

PLUGIN = """
from bake import Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    return [Stage(registry="localhost:5555/rules", name="rules", image="rules", context=stage_dir("jax"),
                  base_image="python:3.11-slim-bookworm", python="3.11.2", glibc="2.36",
                  platforms=("linux/amd64",), requirements=("zeta", "mu", "kappa"))]
"""


def _tools() -> str:
    """A directory of pip-tools' wheels (``bake.pip.wheelhouse.TOOLS`` and their dependencies) for
    Python 3.11 on Linux."""
    house = CACHE / "lock-rules-tools"
    if any(house.glob("pip_tools-*.whl")):
        return str(house)
    house.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--quiet",
                    "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_36_x86_64",
                    "--dest", str(house), *TOOLS], check=True, timeout=600)
    return str(house)


def test_the_host_lock_pins_what_pip_compile_in_the_image_pins(engine, cli, make_plugin, tmp_path):
    house = tmp_path / "house"
    for name, version, python in [("zeta", "1.0", None), ("zeta", "2.0", ">=3.11.1"), ("mu", "1.0", None)]:
        make_wheel(house, name, version, requires_python=python)
    _tagged_wheel(house, "mu", "2.0", "py3-none-manylinux_2_36_x86_64")
    shutil.rmtree(house / ".plain")
    first = _simple_index(tmp_path / "index-a", [("kappa", "2.0")])
    extra = _simple_index(tmp_path / "index-b", [("kappa", "1.0")])
    where = ("--index-url", first, "--extra-index-url", extra, "--find-links", str(house))

    site = make_plugin(PLUGIN, name="rules-family")
    proc = cli("lock", "--target", "rules", "--config", os.devnull, *where, cwd=tmp_path,
               env=hermetic_pip_env(), pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "rules.txt").read_text()
    assert "# bake-plan python: 3.11.2" in lock.splitlines()
    assert "# bake-plan python-platform: x86_64-manylinux_2_36" in lock.splitlines()

    # The image's compile: pip-tools in its own venv on the image's python3, as bake-pip-finalize
    # runs it, on the same .in file, indexes and find-links, with no network.
    work = tmp_path / "in"
    work.mkdir()
    (work / "requirements-rules.in").write_text("zeta\nmu\nkappa\n")
    tools = _tools()
    script = (
        'python3 -c "import platform, os; print(\'python\', platform.python_version()); '
        'print(\'glibc\', os.confstr(\'CS_GNU_LIBC_VERSION\'))" && '
        f"python3 -m venv /tmp/tools && /tmp/tools/bin/pip install --quiet --no-index --find-links {tools} "
        + " ".join(f"'{t}'" for t in TOOLS)
        + f" && cd {work} && /tmp/tools/bin/pip-compile --quiet --no-header --strip-extras --allow-unsafe "
        "--no-emit-index-url --no-emit-find-links --output-file - " + " ".join(where) + " requirements-rules.in")
    mounts = [arg for path in (str(tmp_path), tools) for arg in ("-v", f"{path}:{path}")]
    ran = engine.docker("run", "--rm", "--network", "none", "--platform", "linux/amd64", *mounts,
                        "--env", "PIP_CONFIG_FILE=/dev/null", f"{engine.registry}/{STAND_IN}", "sh", "-c", script,
                        timeout=600)
    assert "python 3.11.2" in ran.stdout and "glibc 2.36" in ran.stdout, ran.stdout  # the premise
    image = _pins(ran.stdout)
    print({"host": _pins(lock), "image": image})
    assert image == {"kappa": "2.0", "mu": "2.0", "zeta": "2.0"}, ran.stdout + ran.stderr
    assert _pins(lock) == image, lock
