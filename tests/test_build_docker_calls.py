"""Which docker calls a build makes around its bake, without an engine: ``build --dry-run`` runs
no docker at all, the engine probe is one short ``docker version`` once buildx's version is
remembered (``docker info`` starts every CLI plugin), and the bake itself goes through
python-on-whales with buildx's stderr read as one stream, stdin from ``/dev/null``, the
provenance variable dropped, and an interrupt passed on to buildx."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import console_script

DATE = "2026-11-29"


def _fake_docker(bin_dir: Path, body: str) -> Path:
    """A ``docker`` on ``bin_dir`` that appends its arguments to ``bin_dir/calls`` then runs ``body``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(f'#!/bin/sh\necho "$*" >> {bin_dir / "calls"}\n{body}\n')
    docker.chmod(0o755)
    return docker


def _hermetic(tmp_path: Path, bin_dir: Path) -> dict:
    """An environment whose PATH is ``bin_dir`` and ``/bin``, with a docker configuration and a
    cache directory of its own (a ``docker-buildx`` plugin file in it)."""
    config = tmp_path / "docker-config"
    (config / "cli-plugins").mkdir(parents=True)
    plugin = config / "cli-plugins" / "docker-buildx"
    plugin.write_text("#!/bin/sh\nexit 1\n")
    plugin.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}{os.pathsep}/bin{os.pathsep}/usr/bin", DOCKER_CONFIG=str(config),
                XDG_CACHE_HOME=str(tmp_path / "cache"))


def _dry_run(tmp_path: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([str(console_script()), "build", "--target", "base", "--config", os.devnull, "--date", DATE,
                           "--load", "--dry-run"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_dry_run_prints_the_command_with_no_docker_on_path(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty))  # the console script names its interpreter by path
    proc = _dry_run(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("docker buildx bake --file docker-bake.hcl --allow=fs.read="), proc.stdout
    assert proc.stdout.rstrip().endswith("--metadata-file bake-metadata.json --load default")


def test_dry_run_runs_no_docker_when_there_is_one(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, "exit 1")
    proc = _dry_run(tmp_path, _hermetic(tmp_path, bin_dir))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("docker buildx bake --file docker-bake.hcl --allow=fs.read="), proc.stdout
    assert not (bin_dir / "calls").exists(), (bin_dir / "calls").read_text()


def test_dry_run_without_a_buildx_plugin_is_one_line(tmp_path, monkeypatch, capsys):
    """Run in this process, so the system's plugin directories (where the test engine puts buildx)
    can be emptied: the docker CLI on PATH but no buildx anywhere it looks."""
    from bake.cli import main
    from bake.run import engine

    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, "exit 1")
    env = _hermetic(tmp_path, bin_dir)
    (Path(env["DOCKER_CONFIG"]) / "cli-plugins" / "docker-buildx").unlink()
    for key in ("PATH", "DOCKER_CONFIG", "XDG_CACHE_HOME"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.setattr(engine, "SYSTEM_PLUGIN_DIRS", ())
    monkeypatch.chdir(tmp_path)
    status = main(["build", "--target", "base", "--config", os.devnull, "--date", DATE, "--load", "--dry-run"])
    err = capsys.readouterr().err
    assert status == 2 and err.strip().splitlines()[-1] == f"bake-plan: error: {engine.NO_BUILDX}", err
    assert not (bin_dir / "calls").exists()

INFO = {"ID": "x", "Driver": "overlay2", "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]],
        "ClientInfo": {"Plugins": [{"Name": "buildx", "Version": "v0.29.1"}]}}
FAKE_ENGINE = f"""case "$1" in
  info) echo '{json.dumps(INFO)}' ;;
  version) echo '{{"Version": "28.5.2", "ApiVersion": "1.51"}}' ;;
  *) exit 1 ;;
esac"""


def test_the_probe_runs_docker_info_once_then_docker_version(tmp_path, monkeypatch):
    from bake.run import engine

    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, FAKE_ENGINE)
    for key, value in _hermetic(tmp_path, bin_dir).items():
        monkeypatch.setenv(key, value)
    first = engine.EngineProbe()
    assert first.argv == engine.EngineProbe.ARGV
    facts = first.facts()
    assert facts.buildx == (0, 29, 1) and facts.store == engine.CONTAINERD_STORE and facts.whole
    assert engine.known_buildx() == (0, 29, 1) == engine.installed_buildx()

    second = engine.EngineProbe()
    assert second.argv == engine.EngineProbe.LIGHT_ARGV
    facts = second.facts()
    assert facts.buildx == (0, 29, 1) and not facts.whole and facts.store is None
    assert (bin_dir / "calls").read_text().splitlines() == [
        "info --format {{json .}}", "version --format {{json .Server}}"]
    whole = engine.EngineProbe(whole=True)  # the image store is asked so (the probe starts at once)
    assert whole.argv == engine.EngineProbe.ARGV and whole.facts().whole
    assert (bin_dir / "calls").read_text().splitlines()[2:] == ["info --format {{json .}}"]

    # a new buildx file (an upgrade) is asked again; a remembered one never outlives it
    plugin = Path(os.environ["DOCKER_CONFIG"]) / "cli-plugins" / "docker-buildx"
    plugin.write_text("#!/bin/sh\nexit 2\n")
    os.utime(plugin, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert engine.known_buildx() is None
    assert engine.EngineProbe().argv == engine.EngineProbe.ARGV


def test_the_probe_says_when_the_engine_does_not_answer(tmp_path, monkeypatch):
    from bake.run import engine

    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, 'echo "Cannot connect to the Docker daemon at unix:///nowhere.sock." >&2; exit 1')
    for key, value in _hermetic(tmp_path, bin_dir).items():
        monkeypatch.setenv(key, value)
    engine.remember_buildx(engine.buildx_plugin(), (0, 29, 1))
    probe = engine.EngineProbe()
    assert probe.argv == engine.EngineProbe.LIGHT_ARGV
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere.sock")
    with pytest.raises(engine.EngineError, match=r"^cannot reach a Docker engine at unix:///nowhere.sock: Cannot "
                                                 r"connect to the Docker daemon at unix:///nowhere.sock.$"):
        probe.answered()


BAKE = """
import json, sys
from pathlib import Path
from bake.run.engine import bake
run = bake(["buildx", "bake", "--file", "plan.json", "default"], Path("meta.json"), console=lambda line: None)
print(json.dumps({"returncode": run.returncode, "error": run.error, "interrupted": run.interrupted,
                  "python_on_whales": "python_on_whales.utils" in sys.modules}))
"""
# rawjson progress on stderr: a vertex that starts and fails, as buildx writes it, then its error line
BUILDX_OUTPUT = textwrap.dedent("""\
    env > "$(dirname "$0")/env"
    if read -r line; then echo "stdin gave a line" > "$(dirname "$0")/stdin"; fi
    echo '{"vertexes":[{"digest":"sha256:1","name":"[t 1/1] RUN false","started":"2026-11-29T00:00:00Z"}]}' >&2
    i=0; while [ $i -lt 2000 ]; do echo '{"logs":[]}' >&2; i=$((i+1)); done
    echo 'ERROR: target t: failed to solve: process "false" did not complete successfully' >&2
    exit 1""")


def test_the_bake_runs_through_python_on_whales_reading_stderr(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, BUILDX_OUTPUT)
    env = dict(_hermetic(tmp_path, bin_dir), BUILDX_METADATA_PROVENANCE="disabled", KEPT_VARIABLE="kept")
    proc = subprocess.run([sys.executable, "-c", BAKE], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, input="a line buildx must not read\n")
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run == {"returncode": 1, "interrupted": False, "python_on_whales": True,
                   "error": 'ERROR: target t: failed to solve: process "false" did not complete successfully'}, run
    assert (bin_dir / "calls").read_text() == "buildx bake --file plan.json default\n"
    seen = (bin_dir / "env").read_text().splitlines()
    assert "KEPT_VARIABLE=kept" in seen and not any(v.startswith("BUILDX_METADATA_PROVENANCE=") for v in seen)
    assert not (bin_dir / "stdin").exists()


def test_an_interrupted_bake_passes_sigint_to_buildx(tmp_path):
    bin_dir = tmp_path / "bin"
    _fake_docker(bin_dir, textwrap.dedent(f"""\
        trap 'echo cancelled > {bin_dir / "cancelled"}; exit 130' INT
        echo '{{"vertexes":[]}}' >&2
        i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"""))
    proc = subprocess.Popen([sys.executable, "-c", BAKE], cwd=tmp_path, env=_hermetic(tmp_path, bin_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (bin_dir / "calls").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the trap is set
    proc.send_signal(signal.SIGINT)  # to bake-plan's process alone: it passes the signal on
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["interrupted"] is True and json.loads(out)["returncode"] == 130
    assert (bin_dir / "cancelled").read_text() == "cancelled\n"
    assert "buildx is cancelling its builds" in err
