"""The declared-Python check without an engine: the plan passes the chain's declared Python to
every target of the chain, ``bake-check-python`` compares it at the declared precision, the base
Dockerfile runs it right after the step that installs Python, and the sitrep takes a helper
script's own line as the failed target's error (the engine side: test_python_check_engine.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from bake import Stage, hookimpl
from bake.plan import dockerfile
from bake.plan.compose import PYTHON_ARG, PYTHON_STAGE_ARG
from bake.resources import stage_dir, stages_dir
from bake.run.sitrep import step_reason
from bake.testing import plan_for

SCRIPT = stages_dir() / "scripts" / "check-python.sh"


class _Family:
    def __init__(self, python=None, leaf_python=None):
        self.python, self.leaf_python = python, leaf_python

    @hookimpl
    def bake_plan_stages(self):
        common = dict(registry="localhost:5000/pc", platforms=("linux/amd64",))
        return [Stage(name="pc-root", image="pc-root", context=stage_dir("base"), base_image="python:3.10-slim",
                      python=self.python, **common),
                Stage(name="pc-leaf", image="pc-leaf", parent="pc-root", context=stage_dir("base"),
                      python=self.leaf_python, **common)]


def _declared(plan: dict) -> dict:
    return {name: (t["args"].get(PYTHON_ARG), t["args"].get(PYTHON_STAGE_ARG)) for name, t in plan["target"].items()}


def test_every_target_of_a_chain_gets_the_python_it_declares_and_who_declares_it():
    plan = plan_for(_Family(python="3.10"), targets=["pc-leaf"], builtins=False)
    assert _declared(plan) == {name: ("3.10", "pc-root")
                               for name in ("pc-root-mealkit", "pc-root", "pc-leaf-mealkit", "pc-leaf")}
    # A child's own declaration is its own (its meal kit checks it against what it builds on).
    plan = plan_for(_Family(python="3.10", leaf_python="3.10.14"), targets=["pc-leaf"], builtins=False)
    assert _declared(plan)["pc-leaf-mealkit"] == ("3.10.14", "pc-leaf")
    assert _declared(plan)["pc-root-mealkit"] == ("3.10", "pc-root")


def test_a_chain_that_declares_no_python_gets_no_check_args():
    plan = plan_for(_Family(), targets=["pc-leaf"], builtins=False)
    assert set(_declared(plan).values()) == {(None, None)}


def _check(tmp_path, declared, says=None, stage="pc-root"):
    """Run the script with a ``python3`` on PATH that reports version ``says`` (none: no python3)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "python3"
    if says is not None:
        fake.write_text(f"#!/bin/sh\necho {says}\n")
        fake.chmod(0o755)
    elif fake.exists():
        fake.unlink()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin" if says is not None else str(bin_dir),
           "BAKE_PYTHON_DECLARED": declared, "BAKE_PYTHON_STAGE": stage}
    sh = "/bin/sh"
    return subprocess.run([sh, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("declared, says, passes", [
    ("3.10", "3.10.14", True), ("3.10", "3.1.0", False), ("3.10", "3.11.2", False),
    ("3.10.14", "3.10.14", True), ("3.10.14", "3.10.13", False), ("", "3.11.2", True)])
def test_the_script_compares_at_the_declared_precision(tmp_path, declared, says, passes):
    proc = _check(tmp_path, declared, says)
    assert (proc.returncode == 0) is passes, proc.stderr
    if passes:
        assert proc.stderr == ""
    else:
        [line] = proc.stderr.splitlines()
        assert line.startswith(f"bake-check-python: stage 'pc-root' declares python = \"{declared}\", but this "
                               f"image's python3 is {says}: build on a base image of Python {declared} "), line


def test_the_script_says_so_in_one_line_when_there_is_no_python3_or_no_version(tmp_path):
    [line] = _check(tmp_path, "3.10").stderr.splitlines()
    assert "declares python = \"3.10\", but this image has no python3 on PATH" in line, line
    [line] = _check(tmp_path, "3.x", "3.11.2").stderr.splitlines()
    assert line == "bake-check-python: stage 'pc-root' declares python = \"3.x\", which is not a version such as " \
                   "3.10 or 3.10.14", line


def test_the_base_dockerfile_checks_right_after_installing_python_and_before_using_it():
    steps = dockerfile.instructions((stage_dir("base") / "Dockerfile").read_text())
    runs = [i for i, step in enumerate(steps) if step.upper().startswith("RUN ")]
    check = next(i for i in runs if "bake-check-python" in steps[i])
    assert "apt-get install" in steps[max(i for i in runs if i < check)]  # the step that installs Python
    assert all("python3" not in steps[i] for i in runs if i < check and "apt-get" not in steps[i])
    first_python = min(i for i in runs if "python3" in steps[i] and i != check and "apt-get" not in steps[i])
    assert check < first_python and "python3 -m venv" in steps[first_python]
    assert f"ARG {PYTHON_ARG}" in steps[:check] and f"ARG {PYTHON_STAGE_ARG}" in steps[:check]


def test_a_helper_script_line_is_the_failed_target_error():
    step = {"error": 'process "/bin/sh -c x" did not complete successfully: exit code: 1',
            "output": ["noise", "bake-check-python: stage 's' declares python = \"3.10\", but …"]}
    assert step_reason([step]) == step["output"][1]
    assert step_reason([dict(step, output=["pip says no"])]) == step["error"]
    # A helper's progress line before another tool's reason is not the reason.
    assert step_reason([dict(step, output=["bake-pip-finalize: compiling a.in", "ERROR: no match"])]) == step["error"]
    assert step_reason([dict(step, output=[])]) == step["error"]
    assert step_reason([]) is None


def test_the_script_is_posix_sh_and_starts_python_once_without_site():
    """A few milliseconds on any base image: no bash, one python3 start with -I -S."""
    text = SCRIPT.read_text()
    assert text.startswith("#!/bin/sh\n") and text.count('"$python" -I -S -c') == 1, text
    assert os.access(SCRIPT, os.X_OK)
