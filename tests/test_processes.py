"""Short external programs run through one runner (``bake.processes.run_bounded``): at the time
bound or an interrupt the whole process group goes, not only the program bake-plan started."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bake.processes import run_bounded

ROOT = Path(__file__).resolve().parent.parent

# A program that starts a child which outlives it unless killed, holding the output pipe open, and
# says the child's pid first.
PARENT_AND_CHILD = ("import subprocess, sys, time\n"
                    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                    "print(child.pid, flush=True)\n"
                    "time.sleep(300)\n")


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs, 5 s after it was killed (a kill is delivered asynchronously)."""
    for _ in range(100):
        if not _running(pid):
            return False
        time.sleep(0.05)
    return True


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _pid_from(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the program never said its child's pid")


def test_a_finished_program_gives_its_output_and_status():
    proc = run_bounded([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                       30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "out\n", "err\n")


def test_at_the_bound_the_program_and_the_child_it_started_are_killed(tmp_path):
    said = tmp_path / "pid"
    program = PARENT_AND_CHILD.replace("print(child.pid, flush=True)", f"open({str(said)!r}, 'w').write(str(child.pid))")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded([sys.executable, "-c", program], 2)
    assert time.monotonic() - started < 20, "the child's open pipe was waited for"
    child = _pid_from(said)
    assert not _alive(child), "the program's child outlived the bound"


def test_an_interrupt_kills_the_group_and_is_raised(tmp_path):
    said = tmp_path / "pid"
    program = PARENT_AND_CHILD.replace("print(child.pid, flush=True)", f"open({str(said)!r}, 'w').write(str(child.pid))")

    def interrupt() -> None:
        _pid_from(said)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        run_bounded([sys.executable, "-c", program], 120)
    assert not _alive(_pid_from(said))


def test_a_missing_program_is_an_os_error():
    with pytest.raises(FileNotFoundError):
        run_bounded(["/nonexistent/program"], 5)


def test_no_module_runs_a_program_but_through_the_runner_or_the_engines_streams():
    """``subprocess.run`` appears in ``bake/processes.py`` alone; ``Popen`` also in
    ``bake/run/engine.py``, whose long-running streams (the bake, a test's ``docker run``, the
    engine probe) are cancelled in its own way."""
    found = []
    for path in sorted((ROOT / "bake").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        if "subprocess.run(" in text and rel != "bake/processes.py":
            found.append(f"{rel}: subprocess.run")
        if "Popen(" in text and rel not in ("bake/processes.py", "bake/run/engine.py"):
            found.append(f"{rel}: Popen")
    assert not found, found
