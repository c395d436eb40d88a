"""Faults on loopback for the registry and engine tests: a proxy in front of the test registry
(:func:`registry_proxy`), and a server that accepts and never answers (:func:`silent_server`).

Every request is forwarded to the registry as it came, unless the test's ``intercept`` answers it
first: ``intercept(handler, body) -> bool`` sees the request (``handler.command``,
``handler.path``) and returns ``True`` when it has answered (with :func:`answer`) or means never to
answer. The proxy speaks HTTP/1.1 unless told otherwise, as the registry does.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import socketserver
import threading
from typing import Callable, Iterator, Optional


def answer(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes,
           headers: Optional[dict] = None) -> None:
    """Answer the request with ``status`` and a JSON ``body`` (the registry's error shape)."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextlib.contextmanager
def registry_proxy(upstream: str, intercept: Callable = lambda handler, body: False,
                   http11: bool = True) -> Iterator[str]:
    """Serve the proxy on a free port while the block runs; yields its name, ``localhost:<port>``
    (a plain-HTTP registry name to the engine and buildx, as the test registry's is)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1" if http11 else "HTTP/1.0"

        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if intercept(self, body):
                return
            conn = http.client.HTTPConnection(upstream, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for key, value in resp.getheaders():
                if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                    self.send_header(key, value)
            self.send_header("Content-Length", resp.getheader("Content-Length", "0") if self.command == "HEAD"
                             else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            conn.close()

        do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = forward

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    thread.start()
    try:
        yield f"localhost:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@contextlib.contextmanager
def silent_server(unix_path: Optional[str] = None) -> Iterator[str]:
    """A socket that accepts every connection and never answers, while the block runs: on loopback
    (yields ``localhost:<port>``, a registry that hangs) or at ``unix_path`` (yields the path, an
    engine that hangs). Connections are held open until the block ends."""
    import socket

    server = socket.socket(socket.AF_UNIX) if unix_path else socket.socket()
    server.bind(unix_path or ("127.0.0.1", 0))
    server.listen(16)
    held, stop = [], threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])  # keep it open, answer nothing
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield unix_path or f"localhost:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
