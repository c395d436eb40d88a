"""External programs run to their end within a time bound, leaving nothing behind.

Every short external program bake-plan runs and waits for (uv, pip, git, hadolint, a probed
Python, ``docker`` for a quick answer) goes through :func:`run_bounded`. It is
:func:`subprocess.run` with one difference that matters for programs that start others (pip's
build backends, ``git-remote-https``, the docker CLI's buildx plugin): the program runs in a
process group of its own, and at the time bound, or when bake-plan is interrupted, the whole
group is killed, not only the program bake-plan started. A child left running would hold the
checkout, the wheelhouse or the network after bake-plan said it stopped.

The long-running processes bake-plan streams (``buildx bake``, a test's ``docker run``) are
:mod:`bake.run.engine`'s: they are cancelled with SIGINT first, so BuildKit cancels its builds.

May import only the standard library (``docs/architecture.md``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Mapping, Optional, Sequence, Union

REAP_TIMEOUT_S = 5.0
"""How long, in seconds, the output of a killed group is still read: a process that left the group
(its own ``setsid``) and keeps the pipes open is not waited for longer."""


def run_bounded(argv: Sequence[str], timeout: float, *, cwd: Optional[Union[str, os.PathLike]] = None,
                env: Optional[Mapping[str, str]] = None, text: bool = True,
                capture_output: bool = True, stdin: Optional[int] = subprocess.DEVNULL,
                ) -> subprocess.CompletedProcess:
    """Run ``argv`` to its end, within ``timeout`` seconds, in a process group of its own.

    The keywords are :func:`subprocess.run`'s (``capture_output`` and ``text`` on by default, stdin
    from ``/dev/null``, so no program waits on a prompt), and so are the results: a
    :class:`subprocess.CompletedProcess` whatever the exit status.

    :param timeout: seconds; at the bound the whole process group gets SIGKILL.
    :raises subprocess.TimeoutExpired: the bound passed (the group is killed and reaped first).
    :raises OSError: the program cannot be started (``FileNotFoundError`` when it is not there).
    :raises KeyboardInterrupt: re-raised after the group is killed and reaped.
    """
    pipe = subprocess.PIPE if capture_output else None
    proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env), stdin=stdin,
                            stdout=pipe, stderr=pipe, text=text, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:  # the bound, or an interrupt: the program and all it started go
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to ``proc``'s process group, then reap it (its pipes read for at most
    :data:`REAP_TIMEOUT_S`)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=REAP_TIMEOUT_S)
    except subprocess.TimeoutExpired:  # an escaped grandchild holds the pipes: stop reading them
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
