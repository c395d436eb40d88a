"""A build secret on the real engine and registry: a third-party stage mounts two secrets
(``RUN --mount=type=secret``, one from an environment variable, one from a file), records their
hashes, and neither secret is anywhere else: not in the plan file, bake-plan's output, the sitrep
files, the image's history and config, its layers (``docker save``), its filesystem
(``docker export``), or the blobs the registry holds for the image and its cache."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import secrets
import tarfile
import urllib.request
import uuid

import pytest

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
DOCKERFILE = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE}
# A fresh NONCE per run: secrets are not part of a step's cache key, so without it a step cached
# by an earlier run (with another secret) would be reused.
ARG NONCE
RUN --mount=type=secret,id=mytoken,required=true \\
    mkdir -p /opt && sha256sum /run/secrets/mytoken | cut -d' ' -f1 > /opt/mytoken.sha256
RUN --mount=type=secret,id=deploykey,required=true \\
    sha256sum /run/secrets/deploykey | cut -d' ' -f1 > /opt/deploykey.sha256 && ls /run/secrets > /opt/mounted
"""
MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json",
])


def _holds(data: bytes, needles, depth: int = 0) -> bool:
    """Whether ``data``, or anything gzip- or tar-packed in it, contains one of ``needles``."""
    if any(n in data for n in needles):
        return True
    if depth > 3:
        return False
    if data[:2] == b"\x1f\x8b":
        try:
            return _holds(gzip.decompress(data), needles, depth + 1)
        except (OSError, EOFError):
            return False
    if len(data) > 262 and data[257:262] == b"ustar":
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                if member.isfile() and _holds(tar.extractfile(member).read(), needles, depth + 1):
                    return True
    return False


def _registry_blobs(repository: str, reference: str):
    """Every manifest and blob the registry holds under ``repository:reference`` (indexes followed)."""
    host, _, name = repository.partition("/")

    def get(path, accept=None):
        request = urllib.request.Request(f"http://{host}/v2/{name}/{path}", headers={"Accept": accept} if accept else {})
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.read()

    pending, seen = [reference], set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        raw = get(f"manifests/{ref}", MANIFEST_TYPES)
        yield raw
        manifest = json.loads(raw)
        pending += [m["digest"] for m in manifest.get("manifests", [])]
        for blob in [manifest.get("config")] + manifest.get("layers", []):
            if blob and blob["digest"] not in seen:
                seen.add(blob["digest"])
                yield get(f"blobs/{blob['digest']}")


def test_secret_reaches_the_build_and_nowhere_else(cli, engine, make_plugin, tmp_path):
    token = "ghp_" + secrets.token_hex(18)
    key_body = secrets.token_urlsafe(48)
    key_text = f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key_body}\n-----END OPENSSH PRIVATE KEY-----\n"
    (tmp_path / "deploy.key").write_text(key_text)
    needles = [token.encode(), key_body.encode()]

    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="sekrit", image="sekrit", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline={DOCKERFILE!r},
                  args={{"NONCE": {uuid.uuid4().hex!r}}})]
""", name="sekrit")
    namespace = f"{engine.registry}/sec{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, BAKE_PLAN_TEST_TOKEN=token)
    proc = cli("build", "--target", "sekrit", "--push", "--registry", namespace, "--date", DATE,
               "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest",
               "--secret", "id=mytoken,env=BAKE_PLAN_TEST_TOKEN", "--secret", "id=deploykey,src=deploy.key",
               "--sitrep-dir", "sitrep", cwd=tmp_path, env=env, pythonpath=[site])
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = f"{namespace}/sekrit:latest"
    engine.docker("pull", "--quiet", ref)
    try:
        # Available during the build: the image holds the hash of each secret, not the secret.
        def cat(path):
            return engine.docker("run", "--rm", "--network", "none", ref, "cat", path).stdout

        assert cat("/opt/mytoken.sha256").strip() == hashlib.sha256(token.encode()).hexdigest()
        assert cat("/opt/deploykey.sha256").strip() == hashlib.sha256(key_text.encode()).hexdigest()
        assert cat("/opt/mounted").split() == ["deploykey"]  # a step sees only the secrets it mounts

        # Absent everywhere else.
        plan = (tmp_path / "docker-bake.hcl").read_bytes()
        assert b'"id=mytoken,env=BAKE_PLAN_TEST_TOKEN"' in plan
        places = {"the plan file": plan, "bake-plan's output": (proc.stdout + proc.stderr).encode()}
        for report in sorted((tmp_path / "sitrep").iterdir()):
            places[f"sitrep file {report.name}"] = report.read_bytes()
        places["docker history"] = engine.docker("history", "--no-trunc", "--format", "{{json .}}", ref).stdout.encode()
        places["docker image inspect"] = engine.docker("image", "inspect", ref).stdout.encode()
        saved = tmp_path / "saved.tar"
        engine.docker("save", "-o", str(saved), ref)
        places["docker save (every layer)"] = saved.read_bytes()
        container = engine.docker("create", ref, "true").stdout.strip()
        try:
            exported = tmp_path / "exported.tar"
            engine.docker("export", "-o", str(exported), container)
            places["the image's filesystem (docker export)"] = exported.read_bytes()
        finally:
            engine.docker("rm", container)
        for reference in ("latest", "cache-silo-sekrit-latest"):
            for i, blob in enumerate(_registry_blobs(f"{namespace}/sekrit", reference)):
                places[f"registry blob {i} of {reference}"] = blob
        assert len(places) > 10
        # The search itself finds a secret packed as a layer is (a gzipped tar of files).
        packed = io.BytesIO()
        with tarfile.open(fileobj=packed, mode="w") as tar:
            info = tarfile.TarInfo("run/secrets/mytoken")
            info.size = len(needles[0])
            tar.addfile(info, io.BytesIO(needles[0]))
        assert _holds(gzip.compress(packed.getvalue()), needles)
        leaks = [where for where, data in places.items() if _holds(data, needles)]
        assert not leaks, f"a secret leaked into: {', '.join(leaks)}"
    finally:
        engine.docker("image", "rm", "-f", ref, check=False)


def test_a_step_that_prints_a_secret_and_fails_shows_it_nowhere(cli, engine, make_plugin, tmp_path):
    # A plain random value: no credential pattern would catch it, only the --secret's own value.
    value = secrets.token_hex(20)
    dockerfile = ("FROM busybox:1.36\n"
                  "RUN --mount=type=secret,id=plain sh -c 'echo \"oops: $(cat /run/secrets/plain)\"; "
                  "echo \"ERROR: $(cat /run/secrets/plain)\" >&2; exit 7'\n")
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="leaky", image="leaky", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline={dockerfile!r},
                  args={{"NONCE": {uuid.uuid4().hex!r}}})]
""", name="leaky")
    env = dict(os.environ, BAKE_PLAN_PLAIN=value)
    proc = cli("build", "--target", "leaky", "--registry", f"{engine.registry}/lk{uuid.uuid4().hex[:8]}",
               "--date", DATE, "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest",
               "--secret", "id=plain,env=BAKE_PLAN_PLAIN", "--sitrep-dir", "sitrep", cwd=tmp_path, env=env,
               pythonpath=[site])
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "oops: <redacted>" in proc.stderr  # the step's output is shown, its secret is not
    places = {"bake-plan's output": proc.stdout + proc.stderr}
    for report in sorted((tmp_path / "sitrep").iterdir()):
        places[f"sitrep file {report.name}"] = report.read_text()
    for where, text in places.items():
        assert value not in text, f"the secret's value is in {where}"
    sitrep = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
    assert sitrep["outcome"] == "fail" and "exit code: 7" in sitrep["error"]
