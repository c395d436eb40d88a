"""The host lock pins what the image's own compile takes, kind by kind: each family below has two
releases that split on one difference between a naive host resolution and pip in the image.

- exact Python: ``zeta`` 2.0 needs Python >= X.Y.1 (X.Y: bake-plan's own Python, whose pip stands
  for the image's); an image on X.Y.Z takes it, a lock for "X.Y" (read as X.Y.0) cannot.
- platform tags: ``mu`` 2.0 ships only a ``manylinux_2_36`` wheel; pip on glibc 2.36 (Debian
  bookworm) takes it, a lock for manylinux_2_28 cannot.
- index rule: ``kappa`` 2.0 is on the index ``-i`` names, 1.0 on the ``--extra-index-url``; pip
  takes the best version of both, uv's default the first index's.
- ``--python INTERPRETER``: a stage's marker is evaluated for that interpreter, not bake-plan's.
- conflict blame: a stage that asks for ``six`` with no version is no party to a conflict
  between ``six==1.17.0`` and ``six==1.16.0``.

The release "the image would take" is asked of pip itself (``pip install --dry-run --report``:
bake-plan's own interpreter for the Python, as pip ignores ``--python-version`` for a wheel's
Requires-Python; ``--platform`` for the wheel tags; pip-compile for the index rule), offline,
from wheels and simple indexes this module writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import hermetic_pip_env, make_wheel

OWN = ".".join(map(str, sys.version_info[:3]))
MINOR = ".".join(map(str, sys.version_info[:2]))

PLUGIN = """
import os
from bake import Stage, hookimpl
from bake.resources import stage_dir


@hookimpl
def bake_plan_stages():
    ctx = stage_dir("jax")

    def stage(name, parent=None, lines=(), platforms=("linux/amd64",), **kw):
        where = dict(parent=parent) if parent else dict(base_image="python:3.11-slim-bookworm")
        return Stage(registry="ghcr.io/nvidia", name=name, image=name, context=ctx, requirements=tuple(lines),
                     platforms=platforms, **where, **kw)

    return [
        stage("ir-exact", lines=["zeta"], python="{own}"),
        stage("ir-minor", lines=["zeta"], python="{minor}"),
        stage("ir-glibc", lines=["mu"], python="{own}", glibc="2.36"),
        stage("ir-glibc-child", "ir-glibc", ["zeta"]),                 # inherits python and glibc
        stage("ir-noglibc", lines=["mu"], python="{own}"),
        stage("ir-index", lines=["kappa"], python="{own}"),
        stage("ir-interp", lines=['alpha<2; python_full_version == "{other}"']),
        stage("t-a", lines=["six"]),
        stage("t-b", "t-a", ["six==1.17.0"]),
        stage("t-c", "t-b", ["six==1.16.0"]),
    ] + ([stage("ir-bad", lines=["six"], glibc=os.environ["IR_GLIBC"])] if os.environ.get("IR_GLIBC") else [])
"""


def _tagged_wheel(directory: Path, name: str, version: str, tag: str) -> Path:
    """``make_wheel``'s wheel, for the platform ``tag`` (``py3-none-manylinux_2_36_x86_64``)."""
    plain = make_wheel(directory / ".plain", name, version)
    wheel = directory / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(wheel, "w") as out:
        for item in source.infolist():
            out.writestr(item, source.read(item).replace(b"Tag: py3-none-any", f"Tag: {tag}".encode()))
    return wheel


def _simple_index(root: Path, wheels) -> str:
    """A PEP 503 simple index of ``wheels`` under ``root``; its ``file://`` URL."""
    projects = {}
    for name, version in wheels:
        projects.setdefault(name, []).append(make_wheel(root / name, name, version))
    for name, files in projects.items():
        links = "".join(f'<a href="{w.name}">{w.name}</a>\n' for w in files)
        (root / name / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    (root / "index.html").write_text("<html><body>\n" + "".join(f'<a href="{n}/">{n}</a>\n' for n in projects)
                                     + "</body></html>\n")
    return root.as_uri()


def _other_python() -> str:
    """An interpreter on this host whose full version is not bake-plan's own."""
    import glob
    import shutil

    own = ".".join(map(str, sys.version_info[:3]))
    candidates = [shutil.which(f"python3.{n}") for n in range(6, 15)] + ["/usr/bin/python3"]
    candidates += sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python"))
    for path in filter(None, candidates):
        proc = subprocess.run([path, "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 and proc.stdout.strip() != own:
            return path
    pytest.fail("no Python interpreter of another version than bake-plan's own on this host")


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    root = tmp_path_factory.mktemp("image-rules")
    house = root / "house"
    for name, version, python in [("zeta", "1.0", None), ("zeta", "2.0", f">={MINOR}.1"), ("mu", "1.0", None),
                                  ("alpha", "1.0", None), ("alpha", "2.0", None),
                                  ("six", "1.16.0", None), ("six", "1.17.0", None)]:
        make_wheel(house, name, version, requires_python=python)
    for arch in ("x86_64", "aarch64"):
        _tagged_wheel(house, "mu", "2.0", f"py3-none-manylinux_2_36_{arch}")
    first = _simple_index(root / "index-a", [("kappa", "2.0")])
    extra = _simple_index(root / "index-b", [("kappa", "1.0")])
    other = _other_python()
    version = subprocess.run([other, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    return {"house": house, "first": first, "extra": extra, "other": other, "other_version": version}


@pytest.fixture
def run(cli, make_plugin, family):
    site = make_plugin(PLUGIN.replace("{other}", family["other_version"]).replace("{own}", OWN).replace("{minor}", MINOR),
                       name="image-rules")

    def go(*args, find_links=True, extra_env=None, **kw):
        if find_links:
            args = args + ("--no-index", "--find-links", str(family["house"]))
        return cli(*args, env={**hermetic_pip_env(), **(extra_env or {})}, pythonpath=[site], **kw)

    return go


def _pins(text: str) -> dict:
    return dict(row.split("==", 1) for row in text.splitlines() if "==" in row and not row[0].isspace()
                and not row.startswith("#"))


def _pip_takes(house: Path, requirement: str, platform: str, tmp_path: Path) -> dict:
    """What pip installs for ``requirement`` on bake-plan's own Python and wheel platform
    ``platform`` (metadata only, from ``house``): the image's pip, asked on the host."""
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--dry-run",
                    "--ignore-installed", "--only-binary=:all:", "--platform", platform,
                    "--target", str(tmp_path / "none"), "--no-index", "--find-links", str(house),
                    "--report", str(report), requirement],
                   check=True, timeout=300, env=hermetic_pip_env(), capture_output=True)
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}


def test_the_exact_python_a_stage_declares_is_what_the_lock_resolves_for(run, family, tmp_path):
    assert sys.version_info[2] >= 1, "the family splits between X.Y.0 and X.Y.1"
    image = _pip_takes(family["house"], "zeta", "manylinux_2_36_x86_64", tmp_path)
    assert image == {"zeta": "2.0"}
    proc = run("lock", "--target", "ir-exact", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-exact.txt").read_text()
    assert _pins(lock) == image, lock
    head = lock.splitlines()
    assert f"# bake-plan python: {OWN}" in head and not any(r.startswith("# bake-plan python-patch:") for r in head)


def test_a_python_without_its_patch_is_resolved_as_its_first_patch_and_the_header_says_so(run, family, tmp_path):
    proc = run("lock", "--target", "ir-minor", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-minor.txt").read_text()
    assert _pins(lock) == {"zeta": "1.0"}, lock  # X.Y.0 is below zeta 2.0's Requires-Python
    head = lock.splitlines()
    assert f"# bake-plan python: {MINOR}.0" in head, head
    assert (f'# bake-plan python-patch: assumed {MINOR}.0: the chain declares python = "{MINOR}"; declare the image\'s '
            f'exact Python (python = "{MINOR}.N") to lock for it') in head, head


def test_the_lock_takes_the_manylinux_wheels_pip_takes_on_the_images_glibc(run, family, tmp_path):
    image = _pip_takes(family["house"], "mu", "manylinux_2_36_x86_64", tmp_path)
    assert image == {"mu": "2.0"}
    proc = run("lock", "--target", "ir-glibc", "--platform", "linux/amd64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-glibc.txt").read_text()
    assert _pins(lock) == image and "# bake-plan python-platform: x86_64-manylinux_2_36" in lock.splitlines(), lock

    # A child inherits the chain's glibc (and Python).
    proc = run("lock", "--target", "ir-glibc-child", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    child = (tmp_path / "locks" / "ir-glibc-child.txt").read_text()
    assert _pins(child) == {"mu": "2.0", "zeta": "2.0"}, child

    # Without a declared glibc the lock assumes 2.28: pip on such an image takes mu 1.0.
    proc = run("lock", "--target", "ir-noglibc", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-noglibc.txt").read_text()
    assert _pins(lock) == _pip_takes(family["house"], "mu", "manylinux_2_28_x86_64", tmp_path) \
        == {"mu": "1.0"}, lock
    assert "# bake-plan python-platform: x86_64-manylinux_2_28" in lock.splitlines()


def test_the_lock_takes_the_best_version_of_every_index_as_pip_compile_does(run, family, tmp_path):
    indexes = ("--index-url", family["first"], "--extra-index-url", family["extra"])
    (tmp_path / "requirements-ir-index.in").write_text("kappa\n")
    ref = subprocess.run([sys.executable, "-m", "piptools", "compile", "--quiet", "--no-header", "--strip-extras",
                          "--allow-unsafe", "--no-emit-index-url", "--output-file", "-", *indexes,
                          "requirements-ir-index.in"],
                         cwd=tmp_path, env=hermetic_pip_env(), check=True, capture_output=True, text=True, timeout=300)
    assert _pins(ref.stdout) == {"kappa": "2.0"}, ref.stdout
    proc = run("lock", "--target", "ir-index", *indexes, find_links=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-index.txt").read_text()
    assert _pins(lock) == _pins(ref.stdout), lock


def test_lock_python_evaluates_the_stages_markers_for_that_interpreter(run, family, tmp_path):
    # The line holds only on the other interpreter's exact version: for bake-plan's own it is dropped.
    proc = run("lock", "--target", "ir-interp", "--python", family["other"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "ir-interp.txt").read_text()
    assert f"# bake-plan python: {family['other_version']}" in lock.splitlines(), lock
    assert _pins(lock) == {"alpha": "1.0"}, lock
    proc = run("lock", "--target", "ir-interp", "--locks-dir", "own", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert _pins((tmp_path / "own" / "ir-interp.txt").read_text()) == {}


def test_a_conflict_names_only_the_stages_whose_lines_conflict(run, tmp_path):
    proc = run("lock", "--target", "t-c", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr[proc.stderr.index("bake-plan: error:"):]  # the error, not the notes before it
    assert "between stages 't-b' and 't-c':" in err, err
    assert "stage 't-b' (plugin 'image-rules') asks for six: six==1.17.0" in err, err
    assert "stage 't-c' (plugin 'image-rules') asks for six: six==1.16.0" in err, err
    assert "stage 't-a'" not in err, err


@pytest.mark.parametrize("glibc", ["2.5", "2.16", "bookworm", "2.36.1"])
def test_a_glibc_that_is_no_manylinux_version_is_refused_in_one_line(run, tmp_path, glibc):
    proc = run("lock", "--target", "ir-bad", cwd=tmp_path, extra_env={"IR_GLIBC": glibc})
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"bake-plan: error: plugin 'image-rules', stage 'ir-bad', field 'glibc': '{glibc}' is not a glibc version "
        "such as '2.36' (2.17 or later: the oldest manylinux, manylinux2014)"), proc.stderr
    assert not (tmp_path / "locks").exists()


def test_an_interpreter_that_does_not_say_its_markers_is_one_line(run, tmp_path):
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho 'bake-plan-python 3.9.1'\n")
    fake.chmod(0o755)
    proc = run("lock", "--target", "ir-interp", "--python", str(fake), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"bake-plan: error: --python {fake}: it printed its version but not its marker environment "
        "(sys.implementation, platform)"), proc.stderr
    assert not (tmp_path / "locks").exists()
