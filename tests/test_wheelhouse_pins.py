"""``bake-plan wheelhouse`` with a lock: one ``pip download`` for every pin, the pins with no wheel
built from their sdists in one ``pip wheel`` run by the pip of bake-plan's environment, what was
downloaded kept when a pin fails, ``host_paths`` lines mapped or left out with a note, an
out-of-date lock refused as ``--locked`` refuses it, no ``${VARIABLE}`` handed to pip or uv; and
the wheelhouse's files read back as untrusted input (records, layouts, links)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from conftest import hermetic_pip_env, make_wheel

from bake.processes import run_bounded
from bake.errors import LockError, OutputError, UsageError
from bake.pip.lock import LockSpec, Line, header
from bake.pip.wheelhouse import default_tools_cache, fill, oci_layout, pip_reason

BACKEND = '''
import base64, hashlib, os, zipfile

NAME, VERSION = {name!r}, {version!r}


def _metadata():
    return "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (NAME, VERSION)


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, "%s-%s.dist-info" % (NAME, VERSION))
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(_metadata())
    return os.path.basename(info)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    {fail}
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = {{NAME + "/__init__.py": "", info + "/METADATA": _metadata(),
             info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    rows = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    files[info + "/RECORD"] = "\\n".join(rows + [info + "/RECORD,,"]) + "\\n"
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return name
'''


def make_sdist(directory: Path, name: str, version: str, fail: str = "") -> Path:
    """An sdist with an in-tree PEP 517 backend that needs nothing from an index (so an isolated
    build runs offline); ``fail``: a message its ``build_wheel`` raises, as a broken build would."""
    import io

    directory.mkdir(parents=True, exist_ok=True)
    root = f"{name}-{version}"
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": BACKEND.format(name=name, version=version,
                                     fail=f"raise RuntimeError({fail!r})" if fail else "pass"),
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    path = directory / f"{root}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def index(tmp_path):
    """A find-links directory: wheels of alpha and of pip and pip-tools (stand-ins), and sdists
    only of gamma (builds) and broken (its build fails, saying why)."""
    src = tmp_path / "index"
    for name, version in [("alpha", "1.0"), ("beta", "1.0"), ("pip", "25.2"), ("pip_tools", "7.4.1")]:
        make_wheel(src, name, version)
    make_sdist(src, "gamma", "1.0")
    make_sdist(src, "broken", "1.0", fail="this package needs a compiler: gcc: not found")
    return src


@pytest.fixture
def hermetic(monkeypatch, tmp_path):
    """The process environment without the machine's pip configuration (fill runs pip in it), and
    a cache of the test's own (pip-tools' wheels are kept there)."""
    env = hermetic_pip_env()
    for key in list(os.environ):
        if key not in env:
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def _spec(lines, host_paths=None, name="t"):
    return LockSpec(name, ("linux/amd64",), False, [Line(name, "p", text, text) for text in lines],
                    host_paths or {}, None)


def _lock(locks: Path, spec: LockSpec, body: str) -> None:
    locks.mkdir(parents=True, exist_ok=True)
    (locks / spec.filename).write_text(header(spec, "3.11") + body)


class Recording:
    """The real runner (:func:`bake.processes.run_bounded`), each command line kept."""

    def __init__(self):
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        return run_bounded(argv, **kwargs)

    def pip(self, command):
        return [argv for argv in self.calls if command in argv[3:6]]


def test_pins_are_one_download_and_sdists_one_build(tmp_path, index, hermetic):
    spec = _spec(["alpha", "gamma"])
    _lock(tmp_path / "locks", spec, "alpha==1.0\n    # via -r requirements-t.in\ngamma==1.0\n")
    run = Recording()
    counts = fill([spec], tmp_path / "wh", "3.11", locks_dir=tmp_path / "locks",
                  pip_args=["--no-index", "--find-links", str(index)], runner=run)
    names = {p.name for p in (tmp_path / "wh").glob("*.whl")}
    assert {"alpha-1.0-py3-none-any.whl", "gamma-1.0-py3-none-any.whl", "pip-25.2-py3-none-any.whl"} <= names
    assert counts["built"] == 1
    downloads = run.pip("download")
    pinned = [argv for argv in downloads if "--no-deps" in argv]
    assert len(pinned) == 1 and "--prefer-binary" in pinned[0]  # every pin in one call, no per-pin retry
    assert len(downloads) == 2  # the pins, and pip and pip-tools
    builds = run.pip("wheel")
    assert len(builds) == 1 and builds[0][0] == sys.executable and "--use-pep517" in builds[0]


def test_a_failing_sdist_names_its_pin_and_pips_reason_and_keeps_the_rest(tmp_path, index, hermetic):
    spec = _spec(["alpha", "gamma", "broken"])
    _lock(tmp_path / "locks", spec, "alpha==1.0\nbroken==1.0\ngamma==1.0\n")
    with pytest.raises(LockError) as caught:
        fill([spec], tmp_path / "wh", "3.11", locks_dir=tmp_path / "locks",
             pip_args=["--no-index", "--find-links", str(index)])
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot build a wheel of 'broken==1.0'" in message and "for Python 3.11 on linux/amd64" in message
    assert "gcc: not found" in message  # pip's reason, not only "Failed to build"
    assert f"{sys.executable} -m pip" in message
    assert "kept in" in message
    names = {p.name for p in (tmp_path / "wh").glob("*.whl")}  # what was downloaded and built stays
    assert {"alpha-1.0-py3-none-any.whl", "gamma-1.0-py3-none-any.whl", "pip-25.2-py3-none-any.whl"} <= names


def test_an_old_build_pip_is_refused_naming_its_version(tmp_path, monkeypatch):
    """The pip that builds sdists says 23.0.1 (Debian's venv): refused before any build, the
    downloaded wheels kept."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    locks = tmp_path / "locks"
    spec = _spec(["alpha", "gamma"])
    _lock(locks, spec, "alpha==1.0\ngamma==1.0\n")

    def runner(argv, **kwargs):
        if argv[-1] == "--version":
            return subprocess.CompletedProcess(argv, 0, "pip 23.0.1 from /usr/lib/python3/dist-packages/pip\n", "")
        assert "wheel" not in argv[3:6], "an old pip must not build"
        dest = Path(argv[argv.index("--dest") + 1])
        if "--no-deps" in argv:
            make_wheel(dest, "alpha", "1.0")
            (dest / "gamma-1.0.tar.gz").write_bytes(b"sdist")
        return subprocess.CompletedProcess(argv, 0, "", "")

    with pytest.raises(LockError) as caught:
        fill([spec], tmp_path / "wh", "3.11", locks_dir=locks, runner=runner)
    assert "'gamma==1.0'" in str(caught.value) and "is 23.0.1, older than 23.1" in str(caught.value)
    assert (tmp_path / "wh" / "alpha-1.0-py3-none-any.whl").is_file()


def test_pips_reason_is_its_last_meaningful_lines_bounded():
    stderr = textwrap.dedent("""\
        Processing ./promise-2.3.tar.gz
          error: subprocess-exited-with-error

          × Building wheel for promise (pyproject.toml) did not run successfully.
          │ exit code: 1
          ╰─> [3 lines of output]
              running bdist_wheel
              error: invalid command 'bdist_wheel'
              [end of output]

          note: This error originates from a subprocess, and is likely not a problem with pip.
          ERROR: Failed building wheel for promise
        Failed to build promise
        ERROR: Failed to build one or more wheels
    """)
    reason = pip_reason(stderr)
    assert "invalid command 'bdist_wheel'" in reason and "Failed to build" not in reason
    assert "\n" not in reason
    assert len(pip_reason("x" * 5000)) <= 600 and pip_reason("") == "(no output)"


def test_host_paths_lines_are_mapped_or_left_out_with_a_note(tmp_path, index, hermetic):
    """A lock line naming an in-image path: a wheel under a declared host path is copied in; a
    directory built in the image, and a path with no host path, are left out, each with a note."""
    dist = tmp_path / "host-dist"
    wheel = make_wheel(dist, "wheelie", "1.0")
    (tmp_path / "host-src" / "nc-te").mkdir(parents=True)
    host_paths = {"/opt/dist": str(dist), "/opt/src": str(tmp_path / "host-src")}
    spec = _spec(["alpha"], host_paths)
    _lock(tmp_path / "locks", spec, "alpha==1.0\nnc-te @ file:///opt/src/nc-te\n"
                                    f"wheelie @ file:///opt/dist/{wheel.name}\nother @ file:///opt/elsewhere/x\n")
    notes = []
    fill([spec], tmp_path / "wh", "3.11", locks_dir=tmp_path / "locks",
         pip_args=["--no-index", "--find-links", str(index)], report=notes.append)
    assert (tmp_path / "wh" / wheel.name).is_file() and (tmp_path / "wh" / "alpha-1.0-py3-none-any.whl").is_file()
    left = [n for n in notes if n.startswith("note: left out")]
    assert len(left) == 2, notes
    assert any("'nc-te @ file:///opt/src/nc-te'" in n and "built in the image" in n for n in left)
    assert any("/opt/elsewhere/x has no host path" in n for n in left)


STALE_PLUGIN = """
    import os
    from bake import Stage, hookimpl
    from bake.resources import stage_dir

    @hookimpl
    def bake_plan_stages():
        return [Stage(registry="ghcr.io/nvidia", name="st-root", context=stage_dir("base"), base_image="busybox:1.36",
                      platforms=("linux/amd64",), requirements=tuple(os.environ.get("ST_LINES", "alpha").split("|")))]
"""


def test_a_stale_lock_is_refused_as_locked_refuses_it(cli, make_plugin, tmp_path, index):
    site = make_plugin(STALE_PLUGIN)
    env = hermetic_pip_env()
    pip = ["--no-index", "--find-links", str(index)]
    made = cli("lock", "--config", "/dev/null", "--target", "st-root", "--locks-dir", "locks", *pip,
               cwd=tmp_path, env=env, pythonpath=[site])
    assert made.returncode == 0, made.stderr
    stale = dict(env, ST_LINES="alpha|beta")  # a new requirement since the lock
    house = cli("wheelhouse", "--config", "/dev/null", "--target", "st-root", "--locks-dir", "locks", "-o", "wh",
                *pip, cwd=tmp_path, env=stale, pythonpath=[site])
    locked = cli("--config", "/dev/null", "--target", "st-root", "--locked", "--locks-dir", "locks", "-o", "p.hcl",
                 cwd=tmp_path, env=stale, pythonpath=[site])
    assert house.returncode == locked.returncode == 2, house.stderr
    ours = [line for line in house.stderr.splitlines() if "error" in line]
    assert len(ours) == 1 and "is out of date" in ours[0]
    same = locked.stderr.strip().split("--locked: ", 1)[1]
    assert ours[0].endswith(same)  # the same check, the same words
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize("where", ["stage", "lock"])
def test_a_variable_reference_never_reaches_pip(tmp_path, where, monkeypatch):
    monkeypatch.setenv("CI_TOKEN", "s3cr3t-value")
    line = "pkg @ git+http://h/${CI_TOKEN}/x.git@" + "a" * 40
    ran = []
    spec = _spec([line] if where == "stage" else ["pkg"])
    if where == "lock":
        _lock(tmp_path / "locks", spec, "alpha==1.0\n" + line + "\n")
    with pytest.raises(UsageError) as caught:
        fill([spec], tmp_path / "wh", "3.11", locks_dir=tmp_path / "locks", runner=lambda *a, **k: ran.append(a))
    message = str(caught.value)
    assert ran == [] and "s3cr3t" not in message and "'${CI_TOKEN}'" in message
    assert ("stage 't' (plugin 'p')" if where == "stage" else "line 7 of the lock") in message
    assert not (tmp_path / "wh").exists()


def test_lock_refuses_a_variable_reference_before_uv(cli, make_plugin, tmp_path):
    site = make_plugin(STALE_PLUGIN)
    env = dict(hermetic_pip_env(), ST_LINES="alpha|pkg @ https://h.example/${CI_TOKEN}/pkg.whl", CI_TOKEN="s3cr3t")
    proc = cli("lock", "--config", "/dev/null", "--target", "st-root", "--locks-dir", "locks", "--no-index",
               cwd=tmp_path, env=env, pythonpath=[site])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("bake-plan: error:")]
    assert proc.returncode == 2 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "locks").exists()
    assert "stage 'st-root'" in proc.stderr and "${CI_TOKEN}" in proc.stderr and "s3cr3t" not in proc.stderr


# What is read back from the wheelhouse's directory is untrusted.


def _layout_with(tmp_path, written):
    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    oci_layout(str(wh))
    record = wh / ".bake-plan-oci" / ".bake-plan-written.json"
    data = json.loads(record.read_text())
    data["written"].update(written)
    record.write_text(json.dumps(data))
    make_wheel(wh, "beta", "1.0")  # the layout is made again: old blobs are cleaned up
    return wh, record


def test_a_record_naming_a_file_outside_is_refused_and_the_file_kept(cli, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    from bake.owned import file_sha256

    wh, _ = _layout_with(tmp_path, {"blobs/sha256/../../../../victim.txt": file_sha256(victim)})
    proc = cli("--target", "base", "--wheelhouse", str(wh), "-o", str(tmp_path / "plan.hcl"), cwd=tmp_path)
    assert victim.read_text() == "keep me\n"
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "'blobs/sha256/../../../../victim.txt'" in proc.stderr and "remove the record" in proc.stderr


def test_a_record_naming_an_absolute_path_is_refused(tmp_path):
    victim = tmp_path / "abs-victim.txt"
    victim.write_text("keep\n")
    wh, _ = _layout_with(tmp_path, {str(victim): None})
    with pytest.raises(OutputError):
        oci_layout(str(wh))
    assert victim.read_text() == "keep\n"


def test_a_link_in_blobs_pointing_outside_is_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    oci_layout(str(wh))
    blobs = wh / ".bake-plan-oci" / "blobs" / "sha256"
    link = blobs / ("0" * 64)
    link.symlink_to(outside)
    record = wh / ".bake-plan-oci" / ".bake-plan-written.json"
    data = json.loads(record.read_text())
    data["written"]["blobs/sha256/" + "0" * 64] = None  # "any file of that name is bake-plan's"
    record.write_text(json.dumps(data))
    make_wheel(wh, "beta", "1.0")
    oci_layout(str(wh))
    assert outside.read_text() == "keep\n" and link.is_symlink()


def test_a_record_that_is_not_json_deletes_nothing(tmp_path):
    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    first = oci_layout(str(wh))
    (wh / ".bake-plan-oci" / ".bake-plan-written.json").write_text("{not json")
    make_wheel(wh, "beta", "1.0")
    with pytest.raises(OutputError):  # nothing is known to be bake-plan's: its old blobs are in the way
        oci_layout(str(wh))
    blob = wh / ".bake-plan-oci" / "blobs" / "sha256" / first.split(":")[-1]
    assert blob.is_file()


def test_a_state_naming_a_digest_that_is_none_is_not_put_in_the_plan(tmp_path):
    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    good = oci_layout(str(wh))
    state = wh / ".bake-plan-oci" / "state.json"
    data = json.loads(state.read_text())
    data["digest"] = "sha256:../../../etc/passwd"
    state.write_text(json.dumps(data))
    from bake.owned import Record, file_sha256

    Record(wh / ".bake-plan-oci").adopt("state.json", file_sha256(state), "test")
    assert oci_layout(str(wh)) == good


def _fill_layouts(wh: str, tag: str, rounds: int) -> str:
    try:
        for i in range(rounds):
            make_wheel(Path(wh), f"w{tag}{i}", "1.0")
            oci_layout(wh)
    except OutputError as err:
        return str(err)
    return ""


def test_two_plans_on_one_wheelhouse_do_not_refuse_each_others_layout(tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    wh = tmp_path / "wh"
    make_wheel(wh, "alpha", "1.0")
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(_fill_layouts, [str(wh)] * 2, ["a", "b"], [15, 15]))
    assert results == ["", ""]
    assert oci_layout(str(wh)).startswith(f"oci-layout://{wh}/.bake-plan-oci@sha256:")


def test_pip_and_pip_tools_come_from_the_cache_the_second_time(tmp_path, index, hermetic, monkeypatch):
    """The pins are asked of pip every run; the tools' wheels, once fetched, are taken from
    bake-plan's cache, checked against their recorded sha256 (a changed one: fetched again)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = _spec(["alpha"])
    _lock(tmp_path / "locks", spec, "alpha==1.0\n")
    pip = ["--no-index", "--find-links", str(index)]
    runs = []
    for i in range(3):
        run = Recording()
        fill([spec], tmp_path / f"wh{i}", "3.11", locks_dir=tmp_path / "locks", pip_args=pip, runner=run,
             tools_cache=default_tools_cache())
        runs.append(len(run.pip("download")))
        assert (tmp_path / f"wh{i}" / "pip_tools-7.4.1-py3-none-any.whl").is_file()
        if i == 1:
            cached = next((tmp_path / "cache" / "bake-plan" / "wheelhouse-tools").glob("*/pip-25.2-py3-none-any.whl"))
            cached.write_bytes(b"changed")
    assert runs == [2, 1, 2]
    run = Recording()  # without a cache (a library caller's default), pip is asked every time
    fill([spec], tmp_path / "wh-none", "3.11", locks_dir=tmp_path / "locks", pip_args=pip, runner=run)
    assert len(run.pip("download")) == 2


def test_a_failed_download_keeps_what_the_other_downloads_brought(tmp_path, index, hermetic):
    """Two platforms: the arm64 pins fail (a pin with neither wheel nor sdist), the amd64 ones
    and the tools come: the error names the platform and pip's reason, their wheels stay."""
    spec = LockSpec("t", ("linux/amd64", "linux/arm64"), False, [Line("t", "p", "alpha", "alpha")], {}, None)
    locks = tmp_path / "locks"
    _lock(locks, spec, "alpha==1.0\n")
    argv_of = []

    def runner(argv, **kwargs):
        argv_of.append(argv)
        if "--no-deps" in argv and "manylinux2014_aarch64" in argv:
            return subprocess.CompletedProcess(argv, 1, "", "ERROR: No matching distribution found for alpha==1.0\n")
        return run_bounded(argv, **kwargs)

    with pytest.raises(LockError) as caught:
        fill([spec], tmp_path / "wh", "3.11", locks_dir=locks, pip_args=["--no-index", "--find-links", str(index)],
             runner=runner)
    message = str(caught.value)
    assert "pip download failed for 't' (linux/amd64, linux/arm64) for Python 3.11 on linux/arm64" in message
    assert "No matching distribution found for alpha==1.0" in message and "kept in" in message
    assert (tmp_path / "wh" / "alpha-1.0-py3-none-any.whl").is_file()
    assert (tmp_path / "wh" / "pip_tools-7.4.1-py3-none-any.whl").is_file()
