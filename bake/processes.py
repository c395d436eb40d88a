"""External programs run to their end within a time bound, leaving nothing behind.

Every short external program bake-plan runs and waits for (uv, pip, git, hadolint, a probed
Python, ``docker`` for a quick answer) goes through :func:`run_bounded`. It is
:func:`subprocess.run` with the differences that matter for programs bake-plan does not control:

- the program runs in a process group of its own, and at the time bound the whole group is
  killed, not only the program bake-plan started: what it started (pip's build backends,
  ``git-remote-https``, the docker CLI's buildx plugin) would otherwise hold the checkout, the
  wheelhouse or the network after bake-plan said it stopped;
- when bake-plan is interrupted (the CLI calls :func:`stop_all` from its SIGINT, SIGTERM and
  SIGHUP handler), every group still running is killed at once, also those started by worker
  threads (``lock`` and ``wheelhouse`` per platform, ``lint`` per Dockerfile), and no new program
  starts;
- its output is read as bytes and decoded as UTF-8 with undecodable bytes replaced, and at most
  :data:`OUTPUT_BYTES` of each stream are kept (the rest is read and dropped, so the program is
  never blocked on a full pipe).

A program that leaves its group (its own ``setsid``) is not followed: its pipes are read for at
most :data:`REAP_TIMEOUT_S` more, then bake-plan goes on without it.

The long-running processes bake-plan streams (``buildx bake``, a test's ``docker run``) are
:mod:`bake.run.engine`'s: they are cancelled with SIGINT first, so BuildKit cancels its builds.

May import only the standard library (``docs/architecture.md``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import IO, List, Mapping, Optional, Sequence, Set, Union

REAP_TIMEOUT_S = 5.0
"""How long, in seconds, the output of a killed group is still read: a process that left the group
(its own ``setsid``) and keeps the pipes open is not waited for longer."""

OUTPUT_BYTES = 64 * 1024 * 1024
"""How many bytes of each of a program's streams (stdout, stderr) are kept: 64 MiB, the bound of
every file bake-plan reads back. The rest is read and dropped."""

CHUNK_BYTES = 1 << 16
"""How many bytes one read of a pipe takes."""

_live: Set[subprocess.Popen] = set()
"""The programs :func:`run_bounded` is waiting for, in any thread (a set's add, discard and copy
are each one step under the interpreter's lock, so the signal handler needs no lock of its own)."""

_stopping = [False]
"""``[True]`` once :func:`stop_all` ran: bake-plan is stopping, and no new program starts (a list
item, not a :class:`threading.Event`, whose ``set`` takes a lock a second signal could wait on)."""


def run_bounded(argv: Sequence[str], timeout: float, *, cwd: Optional[Union[str, os.PathLike]] = None,
                env: Optional[Mapping[str, str]] = None, text: bool = True,
                capture_output: bool = True, stdin: Optional[int] = subprocess.DEVNULL,
                cleanup: bool = False) -> subprocess.CompletedProcess:
    """Run ``argv`` to its end, within ``timeout`` seconds, in a process group of its own.

    The keywords are :func:`subprocess.run`'s (``capture_output`` and ``text`` on by default, stdin
    from ``/dev/null``, so no program waits on a prompt), and so are the results: a
    :class:`subprocess.CompletedProcess` whatever the exit status, its ``stdout`` and ``stderr``
    each at most :data:`OUTPUT_BYTES` (text: UTF-8, undecodable bytes replaced by U+FFFD).

    :param timeout: seconds; at the bound the whole process group gets SIGKILL.
    :param cleanup: a call that cleans up after an interrupt (removing a test's container): it
        runs while bake-plan stops, and :func:`stop_all` does not kill it.
    :raises subprocess.TimeoutExpired: the bound passed (the group is killed and reaped first).
    :raises OSError: the program cannot be started (``FileNotFoundError`` when it is not there).
    :raises KeyboardInterrupt: bake-plan is stopping (:func:`stop_all`): raised before the program
        starts, or after it is killed and reaped.
    """
    if _stopping[0] and not cleanup:
        raise KeyboardInterrupt
    pipe = subprocess.PIPE if capture_output else None
    proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env), stdin=stdin,
                            stdout=pipe, stderr=pipe, start_new_session=True)
    if not cleanup:
        _live.add(proc)
    deadline = time.monotonic() + timeout
    outputs = [_Reader(stream) for stream in (proc.stdout, proc.stderr)]
    try:
        # The pipes first: they close when the program ends (or, later, what it left running in its
        # group), and a thread's join wakes at once, where Popen.wait with a time-out polls in
        # sleeps that grow to 50 ms (on average 20 ms lost after a uv run of a tenth of a second).
        for reader in outputs:
            reader.join(max(0.0, deadline - time.monotonic()))
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        if any(reader.alive() for reader in outputs):  # still open at the bound: the rest of the group goes
            _kill(proc)
            for reader in outputs:
                reader.join(REAP_TIMEOUT_S)
    except BaseException:  # the bound, or an interrupt: the program and all it started go
        _kill(proc)
        for reader in outputs:
            reader.join(REAP_TIMEOUT_S)
        proc.wait()
        raise
    finally:
        _live.discard(proc)
    if _stopping[0] and not cleanup:  # killed by stop_all from another thread: not a result
        raise KeyboardInterrupt
    out, err = (reader.result(text) for reader in outputs)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def stop_all() -> None:
    """Kill the process group of every program :func:`run_bounded` is waiting for, in any thread,
    and let no new one start: what the CLI's interrupt handler calls before it raises
    :class:`KeyboardInterrupt`. Safe to call from a signal handler (no lock is taken)."""
    _stopping[0] = True
    for proc in list(_live):
        _kill(proc)


def resume() -> None:
    """Let programs start again after :func:`stop_all`: what a new command run in the same process
    does first (the CLI's ``main``, called again by a library user or a test)."""
    _stopping[0] = False


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL to ``proc``'s process group (gone already: nothing to do)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Reader:
    """One pipe read to its end in a thread of its own, the first :data:`OUTPUT_BYTES` kept."""

    def __init__(self, stream: Optional[IO[bytes]]) -> None:
        self._stream = stream
        self._chunks: List[bytes] = []
        self._thread: Optional[threading.Thread] = None
        if stream is not None:
            self._thread = threading.Thread(target=self._read, daemon=True)
            self._thread.start()

    def _read(self) -> None:
        kept = 0
        try:
            while True:
                chunk = self._stream.read1(CHUNK_BYTES)
                if not chunk:
                    break
                if kept < OUTPUT_BYTES:
                    chunk = chunk[:OUTPUT_BYTES - kept]
                    self._chunks.append(chunk)
                    kept += len(chunk)
        except (OSError, ValueError):  # the pipe closed under the read
            pass

    def join(self, timeout: Optional[float]) -> None:
        """Wait for the end of the pipe (``timeout`` seconds at most; ``None``: until it ends),
        then close it."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self._stream is not None and (self._thread is None or not self._thread.is_alive()):
            self._stream.close()

    def alive(self) -> bool:
        """Whether the pipe is still being read (its writers have not all closed it)."""
        return self._thread is not None and self._thread.is_alive()

    def result(self, text: bool) -> Union[str, bytes, None]:
        """What was kept: ``None`` when the stream was not captured."""
        if self._stream is None:
            return None
        data = b"".join(self._chunks)
        return data.decode("utf-8", errors="replace") if text else data
