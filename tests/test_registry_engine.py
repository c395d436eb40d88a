"""The test registry keeps a blob known while the blob is uploaded again.

A meal kit and its final push the same layers to one repository in the same bake. With the Debian
registry (distribution 2.8) configured without ``cache.blobdescriptor``, every blob check reads the
repository's link file from disk while a second upload of that blob rewrites the file in place, so
a check could read it empty. A CI run failed that way: ``failed to push …/mx-leaf:latest-amd64:
provided digest did not match uploaded content, blob unknown to registry``. ``scripts/test-engine
registry-config`` (the shared registry's configuration, and the private one's) now carries the
stock registry:2 cache. This test makes the race on purpose: two threads upload one blob again and
again while two others ask for it; without the cache about 4 % of the checks fail within seconds.
"""

from __future__ import annotations

import hashlib
import http.client
import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest

SECONDS = 3.0


def _upload(host: str, port: int, repository: str, blob: bytes, digest: str) -> int:
    """Upload ``blob`` once (POST a session, PUT the bytes with ``?digest=``), as a pusher does."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("POST", f"/v2/{repository}/blobs/uploads/")
        started = conn.getresponse()
        started.read()
        location = urlsplit(started.getheader("Location"))
        query = f"{location.query}&digest={digest}" if location.query else f"digest={digest}"
        conn.request("PUT", f"{location.path}?{query}", body=blob,
                     headers={"Content-Type": "application/octet-stream"})
        done = conn.getresponse()
        done.read()
        return done.status
    finally:
        conn.close()


def _race(address: str) -> tuple[int, dict]:
    """Upload one blob again and again from two threads while two more check it (``HEAD``) for
    :data:`SECONDS`; return how many checks ran and the statuses of those that did not say 200."""
    host, _, port = address.partition(":")
    repository = f"race{uuid.uuid4().hex[:8]}/blob"
    blob = uuid.uuid4().bytes * 64
    digest = "sha256:" + hashlib.sha256(blob).hexdigest()
    assert _upload(host, int(port), repository, blob, digest) == 201
    deadline = time.monotonic() + SECONDS
    checks, failed, lock = [0], {}, threading.Lock()

    def upload_again():
        while time.monotonic() < deadline:
            _upload(host, int(port), repository, blob, digest)

    def check():
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while time.monotonic() < deadline:
            conn.request("HEAD", f"/v2/{repository}/blobs/{digest}")
            response = conn.getresponse()
            response.read()
            with lock:
                checks[0] += 1
                if response.status != 200:
                    failed[response.status] = failed.get(response.status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=upload_again) for _ in range(2)]
    threads += [threading.Thread(target=check) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return checks[0], failed


@pytest.mark.parametrize("which", ["shared", "private"])
def test_a_blob_uploaded_again_stays_known_to_every_check(which, request):
    engine = request.getfixturevalue("engine")
    address = engine.registry if which == "shared" else request.getfixturevalue("private_registry").name
    checks, failed = _race(address.replace("localhost", "127.0.0.1"))
    assert checks >= 20, f"only {checks} checks ran in {SECONDS} s"
    assert not failed, f"{sum(failed.values())} of {checks} checks failed while the blob was uploaded again: {failed}"
