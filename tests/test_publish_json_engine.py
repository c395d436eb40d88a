"""``bake-plan publish --format json`` on the real engine and registry (arm64 under qemu): what it
would create (``--dry-run``), what it created, and what is missing, with the registry's digests."""

from __future__ import annotations

import json

import pytest
from test_publish_engine import TAGS, mx  # noqa: F401  (the fixture: per-arch builds in a fresh namespace)

pytestmark = pytest.mark.engine


def _digest(engine, ref: str) -> str:
    return json.loads(engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}", ref).stdout)["digest"]


def test_publish_as_json_missing_then_dry_run_then_published(engine, mx):  # noqa: F811
    proc, _ = mx("build", "--platform", "linux/amd64", sitrep="sitrep-amd64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, _ = mx("publish", "--format", "json")
    assert proc.returncode == 1 and "no tag was created" in proc.stderr
    report = json.loads(proc.stdout)  # stdout holds the JSON document alone
    assert report["dry_run"] is False and report["tags"] == []
    assert sorted(report["missing"]) == sorted(f"{mx.namespace}/{image}:{tag}-arm64"
                                               for image in ("mx-root", "mx-leaf") for tag in TAGS)

    proc, _ = mx("build", "--platform", "linux/arm64", sitrep="sitrep-arm64")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc, _ = mx("publish", "--dry-run", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    dry = json.loads(proc.stdout)
    assert dry["dry_run"] is True and dry["missing"] == []
    wanted = {f"{mx.namespace}/{image}:{tag}" for image in ("mx-root", "mx-leaf") for tag in TAGS}
    assert {t["tag"] for t in dry["tags"]} == wanted
    for entry in dry["tags"]:
        assert entry["digest"] is None  # nothing was created
        assert [s["arch"] for s in entry["sources"]] == ["amd64", "arm64"]
        for source in entry["sources"]:
            assert source["ref"] == f"{entry['tag']}-{source['arch']}"
            assert source["digest"] == _digest(engine, source["ref"])
    assert "would publish" in proc.stderr and "would publish" not in proc.stdout
    assert not set(TAGS) & set(engine.tags(f"{mx.namespace}/mx-leaf")), "a dry run creates nothing"

    proc, _ = mx("publish", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert done["dry_run"] is False and done["missing"] == []
    assert {t["tag"] for t in done["tags"]} == wanted
    assert [s["digest"] for t in done["tags"] for s in t["sources"]] == \
        [s["digest"] for t in dry["tags"] for s in t["sources"]]
    for entry in done["tags"]:
        assert entry["digest"].startswith("sha256:") and entry["digest"] == _digest(engine, entry["tag"])
    assert proc.stderr.count("published ") == len(wanted)
