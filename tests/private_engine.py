"""A private registry and a private Docker engine for fault tests: started, stopped and killed by
the test, so faults can be made without touching the shared engine and registry others use.

Both use the binaries ``scripts/test-engine`` installs. The engine runs with its own data, exec
and pid paths and its own socket under a temporary directory, and its own network bridge. Never
``"bridge": "none"``: dockerd then deletes the host's ``docker0``, which the shared engine's
builds need. Everything is stopped by process id; the bridge and mounts it made are removed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ENGINE_DIR = Path(os.environ.get("BAKE_PLAN_ENGINE_DIR", "/var/tmp/bake-plan-engine"))
BIN = ENGINE_DIR / "bin"
TEST_ENGINE = Path(__file__).resolve().parent.parent / "scripts" / "test-engine"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def _stop_pid(pid: int, timeout: float = 20) -> None:
    """TERM, then KILL after ``timeout``, a process that is not our child (our children are
    stopped through their Popen, which also reaps them)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def registry_config(addr: str, root: Path) -> str:
    """The shared registry's configuration (``scripts/test-engine registry-config``) for another
    address and storage root, so a private registry behaves like the shared one."""
    return subprocess.run([str(TEST_ENGINE), "registry-config", addr, str(root)],
                          check=True, capture_output=True, text=True).stdout


class PrivateRegistry:
    """``docker-registry serve`` on ``127.0.0.1:<free port>`` with its own storage; images are
    named ``localhost:<port>/…`` (plain HTTP to the engine and buildx, like ``localhost:5555``)."""

    def __init__(self, root: Path):
        self.root = root
        self.port = free_port()
        self.name = f"localhost:{self.port}"
        self.config = root / "registry.yml"
        self.config.write_text(registry_config(f"127.0.0.1:{self.port}", root / "storage"))
        self.process = None

    def up(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/", timeout=2).close()
            return True
        except OSError:
            return False

    def start(self) -> None:
        """Start (again, on the same port and storage)."""
        log = open(self.root / "registry.log", "ab")
        self.process = subprocess.Popen([str(BIN / "docker-registry"), "serve", str(self.config)],
                                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        _wait(self.up, 30, f"the private registry on port {self.port}")

    def stop(self) -> None:
        """Stop it: pushes and manifest requests are refused (connection refused) until :meth:`start`."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=30)
            self.process = None

    def tags(self, repository: str) -> list:
        """Tags of ``<name>/<repository>`` (``[]`` when it has none)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/{repository}/tags/list", timeout=30) as resp:
                return json.load(resp).get("tags") or []
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return []
            raise

    def manifest(self, repository: str, tag: str):
        """``(media type, digest, manifest)`` of a tag, or ``None``."""
        accept = ", ".join(["application/vnd.oci.image.index.v1+json",
                            "application/vnd.docker.distribution.manifest.list.v2+json",
                            "application/vnd.oci.image.manifest.v1+json",
                            "application/vnd.docker.distribution.manifest.v2+json"])
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v2/{repository}/manifests/{tag}",
                                         headers={"Accept": accept})
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                body = json.load(resp)
                return resp.headers.get("Content-Type"), resp.headers.get("Docker-Content-Digest"), body
        except urllib.error.HTTPError as err:
            if err.code == 404:
                return None
            raise


def _bridge_index(name: str):
    try:
        return int(Path(f"/sys/class/net/{name}/ifindex").read_text())
    except OSError:
        return None


class PrivateEngine:
    """A dockerd of its own (containerd image store, or the classic one with
    ``containerd_store=False``; no iptables) on its own bridge, reachable at :attr:`host` (a
    ``DOCKER_HOST`` value)."""

    def __init__(self, containerd_store: bool = True):
        self.dir = Path(tempfile.mkdtemp(prefix="bph-", dir="/tmp"))  # short: a socket path has a limit
        self.socket = self.dir / "d.sock"
        self.host = f"unix://{self.socket}"
        self.bridge = f"bph{os.getpid() % 100000}"
        self.docker0 = _bridge_index("docker0")
        self.process = None
        used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
        third = next(n for n in range(os.getpid() % 200 + 20, 255) if f" 10.251.{n}." not in used)
        subprocess.run(["ip", "link", "add", "name", self.bridge, "type", "bridge"], check=True)
        subprocess.run(["ip", "addr", "add", f"10.251.{third}.1/24", "dev", self.bridge], check=True)
        subprocess.run(["ip", "link", "set", self.bridge, "up"], check=True)
        (self.dir / "daemon.json").write_text(json.dumps({
            "features": {"containerd-snapshotter": containerd_store}, "iptables": False, "ip6tables": False,
            "bridge": self.bridge}))

    def up(self) -> bool:
        env = dict(os.environ, DOCKER_HOST=self.host)
        return subprocess.run(["docker", "info"], env=env, capture_output=True, timeout=30).returncode == 0

    def start(self) -> None:
        """Start dockerd (again, on the same data)."""
        log = open(self.dir / "dockerd.log", "ab")
        env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
        self.process = subprocess.Popen(
            ["dockerd", "--config-file", str(self.dir / "daemon.json"), "--host", self.host,
             "--data-root", str(self.dir / "data"), "--exec-root", str(self.dir / "exec"),
             "--pidfile", str(self.dir / "dockerd.pid")],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True)
        log.close()
        _wait(self.up, 60, "the private dockerd")

    def _ours(self, pid: int) -> bool:
        """Whether ``pid`` is a process this engine started (its command line or its root directory
        is under :attr:`dir`): a pid file may name a process long gone and its pid reused."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            return str(self.dir) in cmdline or os.readlink(f"/proc/{pid}/root").startswith(str(self.dir) + "/")
        except OSError:
            return False

    def _containerd_pid(self):
        try:
            pid = int((self.dir / "exec" / "containerd" / "containerd.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if self._ours(pid) else None

    def _build_processes(self) -> list:
        """Processes of builds it ran: their root directory is under this engine's directory."""
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if os.readlink(entry / "root").startswith(str(self.dir) + "/"):
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids

    def kill(self) -> None:
        """The engine goes away at once: SIGKILL to dockerd, its containerd and its build steps."""
        pids = [self.process.pid if self.process else None, self._containerd_pid()] + self._build_processes()
        for pid in pids:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if self.process is not None:
            self.process.wait(timeout=30)
            self.process = None

    def stop(self) -> None:
        started = time.monotonic()
        if self.process is not None:  # our child: wait() reaps it (kill(pid, 0) succeeds on a zombie)
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
            self.process = None
        for pid in [self._containerd_pid()] + self._build_processes():
            if pid:
                _stop_pid(pid, timeout=5)
        if time.monotonic() - started > 5 and os.environ.get("BAKE_PLAN_KEEP_ENGINE_LOG"):
            shutil.copy(self.dir / "dockerd.log", os.environ["BAKE_PLAN_KEEP_ENGINE_LOG"])

    def remove(self) -> None:
        """Stop it and remove everything it made: mounts, its bridge, its directory. Checks the
        host's ``docker0`` is still there (the shared engine needs it) and restores it if not."""
        self.stop()
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
        for mount in sorted((m for m in mounts if m == str(self.dir) or m.startswith(str(self.dir) + "/")),
                            reverse=True):
            if subprocess.run(["umount", mount], capture_output=True).returncode:
                subprocess.run(["umount", "-l", mount], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.docker0 is not None and _bridge_index("docker0") != self.docker0:
            _restore_docker0()
            raise AssertionError("docker0 changed while the private engine ran; it was restored")


def _restore_docker0() -> None:
    """Recreate the shared engine's default bridge from its own network settings."""
    out = subprocess.run(["docker", "network", "inspect", "bridge", "--format", "{{json .IPAM.Config}}"],
                         capture_output=True, text=True, timeout=30).stdout
    config = json.loads(out or "[]") or [{"Subnet": "172.17.0.0/16", "Gateway": "172.17.0.1"}]
    prefix = config[0]["Subnet"].split("/")[1]
    if _bridge_index("docker0") is None:
        subprocess.run(["ip", "link", "add", "name", "docker0", "type", "bridge"], check=False)
        subprocess.run(["ip", "addr", "add", f"{config[0]['Gateway']}/{prefix}", "dev", "docker0"], check=False)
    subprocess.run(["ip", "link", "set", "docker0", "up"], check=False)


def can_run_private_engine() -> str:
    """Why a private engine cannot run here, or ``""``."""
    if os.geteuid() != 0:
        return "a private dockerd needs root"
    for tool in ("ip", "umount"):
        if shutil.which(tool) is None:
            return f"no {tool} command"
    for binary in ("dockerd", "containerd", "docker-registry"):
        if not (BIN / binary).is_file():
            return f"no {BIN / binary} (scripts/test-engine install)"
    return ""
