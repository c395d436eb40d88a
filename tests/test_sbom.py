"""The nightly record as a CycloneDX SBOM (bake/plan/sbom.py): made from the record alone (the
lock's pins and hashes, the source commits and their repositories, the base images by digest),
valid against the CycloneDX 1.6 JSON schema the library ships (offline), the same for the same
record; and on the engine, made again from a record read back from the registry."""

from __future__ import annotations

import datetime
import json
import uuid

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from bake.plan import records
from bake.plan.sbom import forge_repository, sbom_json

DATE = datetime.date(2026, 11, 29)
H1, H2 = "ab" * 32, "cd" * 32
LOCK = (f"numpy==1.26.4 \\\n    --hash=sha256:{H1.upper()} \\\n    --hash=sha256:{H2}\n"
        "scipy==1.12.0\n    # via x\nfoo @ https://example.org/foo-1.0-py3-none-any.whl\n")


def a_record(**changes) -> dict:
    rec = {"schema": records.SCHEMA, "target": "jax", "arch": "amd64", "platform": "linux/amd64",
           "date": DATE.isoformat(), "repository": "localhost:5555/nvidia/jax",
           "tags": [f"localhost:5555/nvidia/jax:nightly-{DATE}-amd64"], "input_digest": "sha256:" + "1" * 64,
           "image_digest": "sha256:" + "2" * 64, "pins": records.pins_of(LOCK), "hashes": records.pin_hashes_of(LOCK),
           "sources": {"JAX": {"url": "https://github.com/google/jax.git", "ref": "a" * 40, "patches": ["pr-1.patch"]},
                       "XLA": {"url": "https://example.org/openxla/xla.git", "ref": "b" * 40, "patches": []}},
           "base_images": [{"image": "docker.io/library/python:3.11", "platform": "linux/amd64",
                            "digest": "sha256:" + "3" * 64},
                           {"image": "nvcr.io/nvidia/cuda:12.1.0-devel", "platform": "linux/amd64",
                            "digest": "sha256:" + "4" * 64}],
           "tests": None, "size_bytes": None, "outcome": "pass", "built_in": f"nightly-{DATE}"}
    rec.update(changes)
    return rec


def valid(text: str):
    """None when ``text`` validates against the official CycloneDX 1.6 JSON schema, else the error."""
    return JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)


def by_ref(doc: dict) -> dict:
    return {c["bom-ref"]: c for c in doc["components"]}


def test_the_lock_s_hashes_are_read_with_its_pins():
    assert records.pin_hashes_of(LOCK) == {"numpy": [f"sha256:{H1}", f"sha256:{H2}"]}
    assert records.pins_of(LOCK) == {"numpy": "1.26.4", "scipy": "1.12.0",
                                     "foo": "https://example.org/foo-1.0-py3-none-any.whl"}


def test_the_sbom_validates_and_names_pins_hashes_commits_and_base_images():
    text = sbom_json(a_record())
    assert valid(text) is None
    doc = json.loads(text)
    assert doc["bomFormat"] == "CycloneDX" and doc["specVersion"] == "1.6"
    assert doc["metadata"]["timestamp"].startswith("2026-11-29T00:00:00")
    image = doc["metadata"]["component"]
    assert image["type"] == "container" and image["version"] == "sha256:" + "2" * 64
    assert image["purl"].startswith("pkg:oci/jax@sha256:" + "2" * 64)
    assert {"name": "bake-plan:input-digest", "value": "sha256:" + "1" * 64} in image["properties"]
    parts = by_ref(doc)
    numpy = parts["pypi:numpy"]
    assert numpy["purl"] == "pkg:pypi/numpy@1.26.4"
    assert numpy["hashes"] == [{"alg": "SHA-256", "content": H1}, {"alg": "SHA-256", "content": H2}]
    assert "hashes" not in parts["pypi:scipy"]
    assert parts["pypi:foo"]["externalReferences"] == [
        {"type": "distribution", "url": "https://example.org/foo-1.0-py3-none-any.whl"}]
    jax = parts["source:JAX"]
    assert jax["purl"] == "pkg:github/google/jax@" + "a" * 40 and jax["version"] == "a" * 40
    assert jax["externalReferences"] == [{"type": "vcs", "url": "https://github.com/google/jax.git"}]
    assert {"name": "bake-plan:patch", "value": "pr-1.patch"} in jax["properties"]
    xla = parts["source:XLA"]
    assert "purl" not in xla and xla["externalReferences"][0]["url"] == "https://example.org/openxla/xla.git"
    bases = [c for c in doc["components"] if c["type"] == "container"]
    assert {c["purl"] for c in bases} == {
        "pkg:docker/library/python@sha256:" + "3" * 64 + "?arch=amd64",
        "pkg:oci/cuda@sha256:" + "4" * 64 + "?arch=amd64&repository_url=nvcr.io/nvidia/cuda&tag=12.1.0-devel"}
    root = next(d for d in doc["dependencies"] if d["ref"] == image["bom-ref"])
    assert set(root["dependsOn"]) == set(parts)


def test_the_same_record_gives_the_same_document_and_another_another_serial():
    assert sbom_json(a_record()) == sbom_json(a_record())
    other = json.loads(sbom_json(a_record(image_digest="sha256:" + "9" * 64)))
    assert other["serialNumber"] != json.loads(sbom_json(a_record()))["serialNumber"]


def test_a_record_without_lock_sources_or_bases_still_validates():
    text = sbom_json(a_record(pins=None, hashes=None, sources={}, base_images=[], image_digest=None, tags=[]))
    assert valid(text) is None
    assert "components" not in json.loads(text) or json.loads(text)["components"] == []


def test_the_validator_refuses_a_broken_document():
    doc = json.loads(sbom_json(a_record()))
    doc["components"][0]["type"] = "not-a-type"
    assert valid(json.dumps(doc)) is not None


@pytest.mark.parametrize("url, expected", [
    ("https://github.com/google/jax.git", ("github", "google", "jax")),
    ("git@github.com:NVIDIA/TransformerEngine.git", ("github", "NVIDIA", "TransformerEngine")),
    ("https://bitbucket.org/a/b", ("bitbucket", "a", "b")),
    ("https://gitlab.com/a/b.git", None), ("https://github.com/a", None), ("https://github.com/a/b/c", None),
])
def test_a_known_forge_has_a_purl_of_its_own(url, expected):
    assert forge_repository(url) == expected


@pytest.mark.engine
def test_the_sbom_made_from_a_record_read_back_from_the_registry_validates(engine, tmp_path):
    from bake.run import record
    from test_nightly_record_engine import a_plan, push_image

    repository = f"{engine.registry}/sbom{uuid.uuid4().hex[:8]}/img"
    digest = push_image(engine.registry, repository.split("/", 1)[1], f"nightly-{DATE}-amd64")
    (tmp_path / "requirements.lock").write_text(LOCK)
    plan = a_plan(repository, tmp_path)
    sitrep = {"targets": {"img": {"outcome": "pass", "digest": digest, "tags": plan["target"]["img"]["tags"],
                                  "base_images": [{"image": "docker.io/library/python:3.11",
                                                   "platform": "linux/amd64", "digest": "sha256:" + "b" * 64}]}}}
    assert record.write_records(plan, sitrep, DATE)[0][1] is None
    back = record.read_records(plan, DATE)
    assert back == records.make_records(plan, sitrep, DATE)
    text = sbom_json(back[0])
    assert valid(text) is None
    assert text == sbom_json(records.make_records(plan, sitrep, DATE)[0])  # nothing lost on the way
    parts = by_ref(json.loads(text))
    assert parts["pypi:numpy"]["hashes"][0]["content"] == H1
    assert parts["source:JAX"]["purl"] == "pkg:github/google/jax@" + "a" * 40
    assert json.loads(text)["metadata"]["component"]["version"] == digest


@pytest.mark.engine
def test_record_writes_an_sbom_beside_each_record_it_pushes(engine, cli, tmp_path):
    from test_nightly_record_engine import push_image

    namespace = f"{engine.registry}/sbom{uuid.uuid4().hex[:8]}"
    common = ("--target", "jax", "--platform", "linux/amd64", "--registry", namespace, "--date", DATE.isoformat())
    digest = push_image(engine.registry, namespace.split("/", 1)[1] + "/jax", f"nightly-{DATE}-amd64")
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sitrep.json").write_text(json.dumps({"targets": {
        "jax": {"outcome": "pass", "digest": digest, "platforms": ["linux/amd64"]},
        "jax-mealkit": {"outcome": "fail", "digest": None, "platforms": ["linux/amd64"]}}}))
    out = cli("record", *common, "--sitrep", "reports", "--sbom", "sboms", cwd=tmp_path, check=True)
    written = tmp_path / "sboms" / f"jax-{DATE}-amd64.cdx.json"
    assert f"wrote sboms/jax-{DATE}-amd64.cdx.json" in out.stdout
    assert sorted(p.name for p in (tmp_path / "sboms").iterdir()) == [written.name]  # none for the failed one
    text = written.read_text()
    assert valid(text) is None
    doc = json.loads(text)
    assert doc["metadata"]["component"]["version"] == digest
    assert any(c.get("purl", "").startswith("pkg:github/") for c in doc["components"])  # the sources fetched


@pytest.mark.parametrize("argv", [("--sbom", "-o", "plan.hcl"), ("build", "--sbom", "--dry-run"),
                                  ("build", "--no-sbom", "--dry-run")])
def test_build_and_plan_keep_their_sbom_switch_beside_records_sbom_directory(cli, tmp_path, argv):
    """``build --sbom`` (the attestation switch) and ``record --sbom DIR`` are two options of one
    name: each command reads its own."""
    proc = cli(*argv[:1], "--target", "base", *argv[1:], cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    if argv[0] == "--sbom":
        assert "type=sbom" in (tmp_path / "plan.hcl").read_text()


@pytest.mark.parametrize("digest", ["sha256:" + "c" * 64, 5, "notadigest"])
def test_record_sbom_writes_nothing_through_a_link_and_makes_none_for_a_bad_digest(cli, tmp_path, digest):
    """A planted link where an SBOM goes is refused before any record is pushed (nothing written
    through it); a sitrep digest that is no digest gives neither a record nor an SBOM."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "sboms").mkdir()
    (tmp_path / "sboms" / f"jax-{DATE}-amd64.cdx.json").symlink_to(victim)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sitrep.json").write_text(json.dumps({"targets": {
        "jax": {"outcome": "pass", "digest": digest, "platforms": ["linux/amd64"]}}}))
    proc = cli("record", "--target", "jax", "--platform", "linux/amd64", "--registry", "localhost:5555/nowhere",
               "--date", DATE.isoformat(), "--sitrep", "reports", "--sbom", "sboms", "--dry-run", cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert victim.read_text() == "keep me\n"
    if isinstance(digest, str) and digest.startswith("sha256:"):
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "a symbolic link or not a regular file: bake-plan writes no SBOM through it" in proc.stderr
        assert "would" not in proc.stdout  # refused before any record
    else:
        assert "wrote" not in proc.stdout, proc.stdout
