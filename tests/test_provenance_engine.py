"""Provenance and SBOM on the real engine and registry, arm64 under qemu: per-arch builds with
``--provenance --sbom --push``, then ``publish``; the published multi-arch tags carry SLSA
provenance (``mode=max``) and the SPDX SBOM of this module's own generator image for both
platforms. ``--load`` keeps them in the containerd image store and is refused, in one line, where
the engine's classic store cannot hold them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid

import pytest
from conftest import ROOT
from test_errors import one_line_error
from test_refs_and_buildx import _env as buildx_env

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
PLATFORMS = ["linux/amd64", "linux/arm64"]
UNAME = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


@pytest.fixture(scope="module")
def namespace(engine):
    return f"{engine.registry}/prov{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def sbom_generator(engine, namespace):
    """``tests/sbom_generator`` (busybox and a script that follows BuildKit's SBOM generator
    protocol) built for both arches and pushed: BuildKit pulls a generator from a registry."""
    ref = f"{namespace}/sbom-generator:1"
    engine.docker("buildx", "build", "--platform", ",".join(PLATFORMS), "--build-arg",
                  f"BASE_IMAGE={engine.registry}/stand-in/busybox:latest", "-t", ref, "--push",
                  str(ROOT / "tests" / "sbom_generator"))
    return ref


@pytest.fixture
def bake_plan(cli, engine, family_site, namespace, tmp_path):
    """Run bake-plan on the test family's multi-arch pair mx-root → mx-leaf in this module's namespace."""
    busybox = f"busybox:1.36={engine.registry}/stand-in/busybox:latest"

    def run(command, *args, docker_host=None, which="new"):
        env = buildx_env(family_site, tmp_path, which)  # which: the docker CLI's buildx, 0.29 or 0.13
        if docker_host:
            env["DOCKER_HOST"] = docker_host
        extra = ["--base-image", busybox] if command == "build" else []
        return cli(command, "--target", "mx-leaf", "--registry", namespace, "--date", DATE, *extra, *args,
                   cwd=tmp_path, env=env)

    return run


def _inspect(engine, ref: str, field: str) -> dict:
    out = engine.docker("buildx", "imagetools", "inspect", ref, "--format", "{{json .%s}}" % field).stdout
    return json.loads(out)


def test_per_arch_builds_with_provenance_and_sbom_keep_both_through_publish(engine, bake_plan, namespace,
                                                                             sbom_generator, tmp_path):
    """amd64 built by buildx 0.13, arm64 by 0.29; published by each in turn."""
    for platform, which in zip(PLATFORMS, ("old", "new")):
        sitrep = tmp_path / f"sitrep-{platform[6:]}"
        proc = bake_plan("build", "--platform", platform, "--push", "--provenance", "--sbom",
                         "--sbom-generator", sbom_generator, "--sitrep-dir", str(sitrep), which=which)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads((sitrep / "sitrep.json").read_text())
        assert report["outcome"] == "pass"
        assert all(t["digest"] for t in report["targets"].values())
        if which == "new":  # the sitrep still reads base images from buildx's (now mode=max) provenance
            assert [b["image"] for b in report["targets"]["mx-root-mealkit"]["base_images"]] == \
                [f"{engine.registry}/stand-in/busybox:latest"]
        assert "generating sbom using " + sbom_generator in proc.stderr
    for which in ("old", "new"):
        proc = bake_plan("publish", which=which)
        assert proc.returncode == 0, proc.stderr
        _assert_attested(engine, namespace)


def _assert_attested(engine, namespace):
    """Every published multi-arch tag of the pair carries provenance (mode=max) and the test
    generator's SBOM for both platforms, each made from that platform's own image."""
    for image, tag in (("mx-root", "mealkit"), ("mx-root", "latest"), ("mx-leaf", f"mealkit-{DATE}"),
                       ("mx-leaf", "latest"), ("mx-leaf", f"nightly-{DATE}")):
        ref = f"{namespace}/{image}:{tag}"
        provenance = _inspect(engine, ref, "Provenance")
        assert sorted(provenance) == PLATFORMS, ref
        for platform, attestation in provenance.items():
            slsa = attestation["SLSA"]
            assert "buildConfig" in slsa, (ref, platform)  # mode=max: the build's steps; mode=min has none
            assert slsa["invocation"]["parameters"]["frontend"] == "dockerfile.v0"
        sbom = _inspect(engine, ref, "SBOM")
        assert sorted(sbom) == PLATFORMS, ref
        for platform, document in sbom.items():
            spdx = document["SPDX"]
            assert spdx["spdxVersion"] == "SPDX-2.3"
            assert "Tool: bake-plan-test-sbom-generator" in spdx["creationInfo"]["creators"]
    # The generator scanned each platform's own image: the arch file's checksum differs.
    leaf = _inspect(engine, f"{namespace}/mx-leaf:latest", "SBOM")
    for platform in PLATFORMS:
        files = {f["fileName"]: f["checksums"][0]["checksumValue"] for f in leaf[platform]["SPDX"]["files"]}
        assert set(files) == {"./opt/root-arch", "./opt/leaf-input", "./opt/leaf-arch", "./opt/leaf-final"}
        assert files["./opt/leaf-arch"] == hashlib.sha1(f"{UNAME[platform]}\n".encode()).hexdigest(), platform
    invocation = _inspect(engine, f"{namespace}/mx-leaf:latest", "Provenance")["linux/arm64"]["SLSA"]["invocation"]
    assert invocation["parameters"]["args"]["build-arg:LEAF_INPUT"] == "1"  # mode=max records build args


def _attestation_manifests(engine, ref: str) -> list:
    """The attestation manifests of an image in the engine's store (``docker save``: an OCI layout
    whose index points at the image's own index)."""
    import io
    import tarfile

    saved = subprocess.run(["docker", "save", ref], capture_output=True, timeout=300, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(saved)) as tar:
        def blob(digest):
            return json.load(tar.extractfile(f"blobs/sha256/{digest.split(':', 1)[1]}"))
        top = json.load(tar.extractfile("index.json"))["manifests"][0]
        image_index = blob(top["digest"])
    return [m for m in image_index["manifests"]
            if m.get("annotations", {}).get("vnd.docker.reference.type") == "attestation-manifest"]


def test_load_into_the_containerd_image_store_keeps_the_attestations(engine, bake_plan, namespace, tmp_path):
    proc = bake_plan("build", "--platform", "linux/amd64", "--load", "--provenance", "--sitrep-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded = [f"{namespace}/{image}:{tag}-amd64" for image in ("mx-root", "mx-leaf") for tag in ("latest", "mealkit")]
    try:
        for ref in loaded:
            assert len(_attestation_manifests(engine, ref)) == 1, ref
    finally:
        engine.docker("image", "rm", *loaded, check=False)


@pytest.fixture(scope="module")
def classic_engine(engine):
    """A private dockerd with the classic image store (overlay2), which holds no attestations."""
    from conftest import _need_private_engine
    from private_engine import PrivateEngine

    _need_private_engine()
    eng = PrivateEngine(containerd_store=False)
    try:
        eng.start()
        yield eng
    finally:
        eng.remove()


@pytest.mark.parametrize("load", [False, True])
def test_attestations_the_classic_image_store_cannot_hold_are_refused_before_building(bake_plan, classic_engine,
                                                                                     tmp_path, load):
    args = ["--platform", "linux/amd64", "--provenance", "--sitrep-dir", str(tmp_path / "sitrep")]
    proc = bake_plan("build", *args, *(["--load"] if load else []), docker_host=classic_engine.host)
    how = "--load puts" if load else "the docker driver of builder 'default' puts"
    assert one_line_error(proc) == (
        f"--provenance/--sbom: this engine's image store (overlay2) cannot hold attestations, and {how} "
        "the images there; turn on the containerd image store, or --push through a docker-container builder "
        "(--builder)")
    assert not (tmp_path / "sitrep" / "sitrep.json").exists()
    env = dict(os.environ, DOCKER_HOST=classic_engine.host)
    images = subprocess.run(["docker", "image", "ls", "-q"], env=env, capture_output=True, text=True, timeout=60)
    assert images.stdout.strip() == ""  # nothing was built
