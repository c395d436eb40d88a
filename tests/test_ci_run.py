""".ci/run stops the engine at exit only when it started it: on a shared runner an engine that was
already up keeps running. Run on a copy of ``.ci/run`` whose ``scripts/test-engine``, ``python3``,
``pip`` and ``pytest`` only record how they were called."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

FAKE_ENGINE = """#!/bin/sh
echo "test-engine $*" >>"$CALLS"
if [ "$1" = status ]; then exit "$ENGINE_STATUS"; fi
exit 0
"""
FAKE_PYTHON = """#!/bin/sh
# python3 -m venv DIR: a venv whose pip and pytest record their arguments
[ "$1 $2" = "-m venv" ] || exit 3
mkdir -p "$3/bin"
printf '#!/bin/sh\\necho "pip $*" >>"$CALLS"\\n' >"$3/bin/pip"
printf '#!/bin/sh\\necho "pytest $*" >>"$CALLS"\\nexit "$PYTEST_STATUS"\\n' >"$3/bin/pytest"
chmod +x "$3/bin/pip" "$3/bin/pytest"
"""


def _run_ci(tmp_path: Path, engine_status: int, pytest_status: int = 0) -> tuple:
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    (repo / "scripts").mkdir()
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    for path, text in [(repo / "scripts" / "test-engine", FAKE_ENGINE), (tmp_path / "bin" / "python3", FAKE_PYTHON)]:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    calls = tmp_path / "calls"
    env = dict(os.environ, CALLS=str(calls), ENGINE_STATUS=str(engine_status), PYTEST_STATUS=str(pytest_status),
               BAKE_PLAN_CI_VENV=str(tmp_path / "venv"), PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    return proc, calls.read_text().splitlines()


@pytest.mark.parametrize("pytest_status", [0, 1])
def test_an_engine_it_started_is_stopped_at_exit(tmp_path, pytest_status):
    proc, calls = _run_ci(tmp_path, engine_status=1, pytest_status=pytest_status)
    assert proc.returncode == pytest_status, proc.stderr
    # The README's test command, then the stop.
    assert calls[calls.index("test-engine status"):] == [
        "test-engine status", "pip install --quiet .[test]", "test-engine up", "pytest ", "test-engine stop"]


def test_an_engine_already_running_is_left_running(tmp_path):
    proc, calls = _run_ci(tmp_path, engine_status=0)
    assert proc.returncode == 0, proc.stderr
    assert calls[calls.index("test-engine status"):] == [
        "test-engine status", "pip install --quiet .[test]", "test-engine up", "pytest "]
    assert "left running" in proc.stderr
