"""What a new user broke, fixed: each finding of the fresh-install review is a test here."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import console_script

from bake.api import make_plan
from bake.plan.compose import PlanOptions
from bake.run.publish import manifests

DATE = datetime.date(2026, 11, 29)
SLEEPER = """
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="sleeper", image="sleeper", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), args={"NONCE": os.environ["NONCE"]},
                  dockerfile_inline="ARG BASE_IMAGE=busybox:1.36\\nFROM ${BASE_IMAGE}\\nARG NONCE\\n"
                                    "RUN echo started && sleep 60\\n")]
"""


def test_base_image_latest_is_also_set_without_the_tag():
    """bake keeps a context name as written, the frontend looks `FROM x:latest` up as `x`."""
    plan = make_plan(PlanOptions(targets=("base",), date=DATE,
                                 base_images=(("nvidia/cuda:latest", "localhost:5555/stand-in/python:bookworm"),))).plan
    contexts = plan["target"]["base-mealkit"]["contexts"]
    assert contexts["nvidia/cuda:latest"] == contexts["nvidia/cuda"] == "docker-image://localhost:5555/stand-in/python:bookworm"


def test_publish_for_one_platform_asks_for_single_suffixes():
    composition = make_plan(PlanOptions(targets=("base",), date=DATE, platforms=("linux/amd64",), per_arch=False))
    wanted = {m.tag: m.sources for m in manifests(composition)}
    assert wanted["ghcr.io/nvidia/base:latest"] == ["ghcr.io/nvidia/base:latest-amd64"]


def test_build_without_a_docker_cli_is_one_line(cli, tmp_path):
    env = dict(os.environ, PATH=str(Path(os.__file__).parent))  # no docker anywhere on PATH
    proc = cli("build", "--target", "jax", cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("bake-plan: error: the docker CLI was not found")


@pytest.mark.parametrize("command", [["stages"], ["--target", "base", "-o", "-"], ["matrix", "--target", "jax"]])
def test_stdout_on_a_full_disk_is_one_line(cli, tmp_path, command):
    bake_plan = str(console_script())
    with open("/dev/full", "w") as full:
        proc = subprocess.run([bake_plan, *command], stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "bake-plan: error: cannot write the output: No space left on device"


def test_a_plugin_that_prints_does_not_corrupt_stdout(cli, make_plugin, tmp_path):
    site = make_plugin("""
print("hello from import")
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    print("hello from the hook")
    return []
""", name="chatty")
    plan = cli("--target", "jax", "--format", "json", "-o", "-", pythonpath=[site], cwd=tmp_path, check=True)
    assert json.loads(plan.stdout)["target"]["jax"]
    assert "hello from the hook" in plan.stderr
    matrix = cli("matrix", "--target", "jax", pythonpath=[site], cwd=tmp_path, check=True)
    assert json.loads(matrix.stdout)["include"]


@pytest.mark.parametrize("raised", ["SystemExit(5)", "GeneratorExit('odd')"])
def test_a_plugin_raising_a_base_exception_is_one_line(cli, make_plugin, tmp_path, raised):
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    raise {raised}
""", name="exits")
    proc = cli("--target", "jax", pythonpath=[site], cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith(f"bake-plan: error: plugin 'exits' raised {raised.split('(')[0]}")


def test_argparse_errors_have_one_prefix(cli, tmp_path):
    proc = cli("--target", "jax", "--no-such-flag", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "bake-plan: error: unrecognized arguments: --no-such-flag"


def test_missing_sources_manifest_names_the_option(cli, tmp_path):
    proc = cli("--target", "base", "--sources", str(tmp_path / "nope.toml"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"bake-plan: error: --sources {tmp_path / 'nope.toml'}: no such file (the sources manifest)"


@pytest.mark.engine
@pytest.mark.parametrize("signals", [[signal.SIGTERM], [signal.SIGTERM, signal.SIGTERM], [signal.SIGHUP]],
                         ids=["one-sigterm", "two-sigterms", "sighup"])
def test_sigterm_cancels_the_build_and_writes_the_sitrep(engine, make_plugin, tmp_path, signals):
    """A second SIGTERM while buildx cancels kills it (and what runs under it), and the sitrep is
    still written; a hang-up (the terminal closed) cancels like SIGTERM."""
    site = make_plugin(SLEEPER, name="sleeper")
    bake_plan = str(console_script())
    env = dict(os.environ, PYTHONPATH=str(site), NONCE=uuid.uuid4().hex)
    proc = subprocess.Popen([bake_plan, "build", "--target", "sleeper", "--registry", f"{engine.registry}/sig",
                             "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest",
                             "--sitrep-dir", "sitrep"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    seen = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # wait until the long step runs
        seen.append(line)
        if "echo started" in line and "RUN" in line or time.monotonic() > deadline:
            break
    time.sleep(1)
    for number in signals:
        proc.send_signal(number)
        time.sleep(0.03)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, "".join(seen) + rest
    sitrep = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
    assert sitrep["interrupted"] is True and sitrep["outcome"] == "interrupted"  # not "fail"
    badge = json.loads((tmp_path / "sitrep" / "badge.json").read_text())
    assert badge["message"] == "interrupted"
    assert sitrep["targets"]["sleeper"]["outcome"] == "not built"
    assert sitrep["targets"]["sleeper"]["duration_s"] is None  # its cancelled step is no build time
    # buildx was cancelled with bake-plan, not left running as an orphan.
    leftover = subprocess.run(["pgrep", "-f", f"bake.*{tmp_path}"], capture_output=True, text=True).stdout.split()
    assert not [pid for pid in leftover if pid != str(os.getpid())]


@pytest.fixture
def silent_engine(tmp_path):
    """``DOCKER_HOST`` of a socket that accepts connections and never answers."""
    import socket
    import threading

    path = f"/tmp/bake-plan-silent-{uuid.uuid4().hex[:8]}.sock"  # short: a socket path has ~100 bytes
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    held = []

    def accept():
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"unix://{path}"
    server.close()
    for conn in held:
        conn.close()
    os.unlink(path)


def _docker_info_for(host: str) -> list:
    """Pids of ``docker info`` processes whose ``DOCKER_HOST`` is ``host``."""
    found = []
    for pid in subprocess.run(["pgrep", "-f", "docker info"], capture_output=True, text=True).stdout.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"DOCKER_HOST={host}".encode() in environ:
            found.append(pid)
    return found


@pytest.mark.parametrize("wrapped", [False, True], ids=["docker", "docker-wrapper-script"])
def test_dry_run_asks_no_engine_and_bad_input_leaves_no_probe_behind(cli, silent_engine, tmp_path, wrapped):
    """``build --dry-run`` prints the command without asking the engine (a silent one would hang
    it), and a build refused for bad input stops the ``docker info`` it started before planning,
    also when ``docker`` is a wrapper script that runs the real one."""
    env = dict(os.environ, DOCKER_HOST=silent_engine)
    if wrapped:
        import shutil

        bin_dir = tmp_path.parent / f"{tmp_path.name}-bin"
        bin_dir.mkdir()
        (bin_dir / "docker").write_text(f"#!/bin/sh\n{shutil.which('docker')} \"$@\"\n")
        (bin_dir / "docker").chmod(0o755)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    start = time.monotonic()
    proc = cli("build", "--target", "base", "--dry-run", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "docker buildx bake" in proc.stdout, proc.stderr
    assert time.monotonic() - start < 30
    proc = cli("build", "--target", "nosuchtarget", cwd=tmp_path, env=env)
    assert proc.returncode == 2 and "nosuchtarget" in proc.stderr, proc.stderr
    time.sleep(0.5)
    assert _docker_info_for(silent_engine) == []


def test_interrupts_wait_until_the_reports_are_written():
    """A SIGTERM or SIGINT while the reports are written is held to the end of the block, then
    interrupts: the three files are never left half written."""
    from bake.cli import _terminate_like_ctrl_c
    from bake.run.build import _interrupts_held

    _terminate_like_ctrl_c()
    done = []
    with pytest.raises(KeyboardInterrupt):
        with _interrupts_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            done.append("written")
    assert done == ["written"]
    with pytest.raises(KeyboardInterrupt):  # the handlers are back: a signal interrupts at once
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_lock_takes_the_configuration(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('targets = ["base"]\nplatforms = ["linux/amd64"]\n')
    proc = cli("lock", "--config", "bake-plan.toml", "--no-index", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "locks" / "base.txt").is_file()


def test_one_base_image_replaced_twice_is_an_error(cli, tmp_path):
    proc = cli("--target", "base", "--base-image", "a:1=b:1", "--base-image", "a:1=c:1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("bake-plan: error: --base-image: 'a:1=b:1' and 'a:1=c:1' replace one image "
                                   "(docker.io/library/a:1) differently: give one replacement")
    assert list(tmp_path.iterdir()) == []
