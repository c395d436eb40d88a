"""The README stays short (at most 200 lines), and its five-minute tour runs as written against
the test engine: each ``#> TEXT`` after a command is what the run prints, in that order."""

import os
import re
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest
from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 200


def tour() -> str:
    section = README.split("\n## A five-minute tour\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)
    assert len(blocks) == 1, "the tour is one sh block"
    return blocks[0]


def expected(script: str) -> list:
    """The ``#> TEXT`` of each line, in order."""
    return [line.split("#> ", 1)[1].strip() for line in script.splitlines() if "#> " in line]


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= MAX_LINES


def test_the_tour_says_what_each_step_prints():
    script = tour()
    steps = [line.split()[1] for line in script.splitlines() if line.startswith("bake-plan ")]
    assert steps == ["stages", "plan", "lint", "lock", "wheelhouse", "build", "test", "publish"]
    assert all("#> " in line for line in script.splitlines() if line.startswith("bake-plan "))
    assert "--base-image python:3.11-slim-bookworm=localhost:5555/stand-in/python:bookworm" in script


@pytest.mark.engine
def test_the_readme_tour_runs_as_written(engine, tmp_path):
    """In a fresh virtual environment that sees this bake-plan (the running interpreter's
    site-packages, added by a ``.pth`` line, and a ``bake-plan`` script of its own), so pip in it
    finds bake-plan installed as a user's venv has it: the tour's block, word for word, from the
    checkout's root, ``mktemp -d`` under this test's directory. Not the base interpreter's
    site-packages: on a fresh machine bake-plan is installed in the suite's venv alone."""
    if engine.registry != "localhost:5555":
        pytest.skip("the tour names the test engine's registry, localhost:5555")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site_dir = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site_dir) / "the-suites-site.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in ours))  # its .pth files too (editable)
    (env_dir / "bin" / "bake-plan").write_text(f"#!{python}\nimport sys\nfrom bake.cli import main\nsys.exit(main())\n")
    (env_dir / "bin" / "bake-plan").chmod(0o755)
    (env_dir / "bin" / "pip").write_text(f"#!/bin/sh\nexec {python} -m pip \"$@\"\n")
    (env_dir / "bin" / "pip").chmod(0o755)
    work = tmp_path / "tmp"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "BAKE_PLAN_", "PYTEST", "PIP_TARGET"))}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}", VIRTUAL_ENV=str(env_dir), TMPDIR=str(work))
    script = tour()
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1800)
    out = proc.stdout  # stderr too, in the order the commands ran
    assert proc.returncode == 0, out[-5000:]
    at = 0
    for text in expected(script):
        for piece in text.split(" … "):  # "a … b": a, then b later on (the cells of a table's row)
            found = out.find(piece, at)
            assert found >= 0, f"the tour says it prints {text!r}; it did not (after what came before):\n{out[-3000:]}"
            at = found + len(piece)
    made = [p for p in work.iterdir() if p.is_dir()]
    assert len(made) == 1 and (made[0] / "sitrep.json").is_file()
