"""The fresh-runner benchmark's byte-counting proxy (``bench/fresh_runner.py``), on loopback in
front of a small HTTP/1.1 server: every byte is forwarded unchanged and counted both ways, given to
the request it belongs to on a kept-alive connection. The benchmark itself needs the test engine
and minutes (a build of the JAX family, an emptied engine): it is run by hand, its figures are in
docs/benchmarks.md."""

from __future__ import annotations

import http.client
import http.server
import socketserver
import sys
import threading

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
fresh_runner = pytest.importorskip("fresh_runner")

BLOB = bytes(range(256)) * 4096  # 1 MiB, every byte value


@pytest.fixture
def upstream():
    """A registry-shaped HTTP/1.1 server: ``GET /v2/r/blobs/x`` answers :data:`BLOB`, a ``PUT``
    answers 201 after reading its body."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(BLOB)))
            self.end_headers()
            self.wfile.write(BLOB)

        def do_PUT(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(201)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_proxy_forwards_and_counts_each_request_of_a_kept_alive_connection(upstream):
    with fresh_runner.CountingProxy(upstream) as proxy:
        assert proxy.name == f"localhost:{proxy.port}"
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        conn.request("GET", "/v2/r/blobs/sha256:aa")
        assert conn.getresponse().read() == BLOB
        conn.request("PUT", "/v2/r/manifests/t", body=b"m" * 5000)
        answer = conn.getresponse()
        answer.read()
        assert answer.status == 201
        conn.close()
        requests = proxy.take()
        assert proxy.take() == []
    counted = [(r.method, r.path) for r in requests if r.up or r.down]
    assert counted == [("GET", "/v2/r/blobs/sha256:aa"), ("PUT", "/v2/r/manifests/t")]
    get, put = [r for r in requests if r.up or r.down]
    assert len(BLOB) < get.down < len(BLOB) + 1000  # the blob and its headers
    assert 5000 < put.up < 5000 + 1000 and put.down < 1000
    assert get.up < 1000
