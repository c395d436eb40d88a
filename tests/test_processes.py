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

from bake import processes
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


def test_the_result_comes_when_the_program_ends_not_at_a_poll(monkeypatch):
    """run_bounded waits on the program's pipes, which wake it when they close, not in
    Popen.wait's polling sleeps (1, 2, 4 … 50 ms: up to 50 ms after a short program ended)."""
    sleeps = []
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda seconds: sleeps.append(seconds) or real_sleep(seconds))
    assert run_bounded([sys.executable, "-c", "import time; time.sleep(0.3); print('done')"], 60).stdout == "done\n"
    assert sum(sleeps) < 0.01, sleeps  # Popen.wait(timeout=60) alone sleeps some 0.3 s in steps


def test_at_the_bound_the_program_and_the_child_it_started_are_killed(tmp_path):
    said = tmp_path / "pid"
    program = PARENT_AND_CHILD.replace("print(child.pid, flush=True)", f"open({str(said)!r}, 'w').write(str(child.pid))")
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded([sys.executable, "-c", program], 2)
    assert time.monotonic() - started < 20, "the child's open pipe was waited for"
    child = _pid_from(said)
    assert not _alive(child), "the program's child outlived the bound"


@pytest.fixture(autouse=True)
def _default_interrupt():
    """The interpreter's own SIGINT handler while each test runs (a test that ran ``bake.cli.main``
    in this process left the CLI's), and programs allowed to start again after it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
    processes.resume()


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


def test_output_that_is_not_utf8_is_replaced_not_raised():
    proc = run_bounded([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'caf\\xe9'); "
                                              "sys.stderr.buffer.write(b'\\xff denied')"], 30)
    assert (proc.stdout, proc.stderr) == ("caf\ufffd", "\ufffd denied")
    raw = run_bounded([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff')"], 30, text=False)
    assert raw.stdout == b"\xff"


def test_each_stream_keeps_its_first_bytes_up_to_the_bound_and_the_program_is_not_blocked(monkeypatch):
    monkeypatch.setattr(processes, "OUTPUT_BYTES", 1000)
    # 10 MB on each stream: far more than a pipe holds, so a reader that stopped reading would block it
    proc = run_bounded([sys.executable, "-c", "import sys\nfor _ in range(1000):\n"
                                              "    sys.stdout.write('o' * 10000); sys.stderr.write('e' * 10000)\n"], 60)
    assert proc.returncode == 0
    assert (proc.stdout, proc.stderr) == ("o" * 1000, "e" * 1000)


def test_a_child_left_holding_the_pipes_after_the_program_ends_is_killed_at_the_bound(tmp_path):
    said = tmp_path / "pid"
    program = ("import subprocess, sys\n"
               "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
               f"open({str(said)!r}, 'w').write(str(child.pid))\n"
               "print('done')\n")  # the program ends; its child keeps stdout open
    started = time.monotonic()
    proc = run_bounded([sys.executable, "-c", program], 3)
    assert time.monotonic() - started < 15
    assert proc.returncode == 0 and proc.stdout == "done\n"
    assert not _alive(_pid_from(said))


# Two worker threads wait on programs that each started a child; the CLI's signal handler is
# installed; the test sends SIGINT once both children are up.
INTERRUPTED_POOL = """
import subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor
from bake.cli import _terminate_like_ctrl_c
from bake.processes import run_bounded

_terminate_like_ctrl_c()
PROGRAM = (
    "import subprocess, sys, time\\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\\n"
    "print(child.pid, flush=True)\\n"
    "open(sys.argv[1], 'a').write(str(child.pid) + '\\\\n')\\n"
    "time.sleep(300)\\n")
try:
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in pool.map(lambda i: run_bounded([sys.executable, '-c', PROGRAM, sys.argv[1]], 120), range(3)):
            pass
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(130)
"""


def test_an_interrupt_kills_the_programs_of_every_thread_and_starts_no_more(tmp_path):
    """The CLI's SIGINT handler (``bake.processes.stop_all``): two threads' programs and their
    children go at once, the third job never starts, and the process ends with the interrupt, not
    at the programs' 120 s bound."""
    said = tmp_path / "pids"
    script = tmp_path / "pool.py"
    script.write_text(INTERRUPTED_POOL)
    proc = subprocess.Popen([sys.executable, str(script), str(said)], stdout=subprocess.PIPE, text=True)
    for _ in range(400):
        if said.exists() and len(said.read_text().split()) >= 2:
            break
        time.sleep(0.05)
    children = [int(pid) for pid in said.read_text().split()]
    assert len(children) == 2
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert time.monotonic() - started < 20, "the interrupt waited for the programs' bound"
    assert proc.returncode == 130 and out.strip().endswith("interrupted")
    assert not any(_alive(pid) for pid in children)
    time.sleep(0.5)
    assert len(said.read_text().split()) == 2, "a program started after the interrupt"


def test_after_stop_all_no_program_starts_until_a_command_resumes():
    processes.stop_all()
    with pytest.raises(KeyboardInterrupt):
        run_bounded([sys.executable, "-c", "pass"], 30)
    processes.resume()
    assert run_bounded([sys.executable, "-c", "print(1)"], 30).stdout == "1\n"
