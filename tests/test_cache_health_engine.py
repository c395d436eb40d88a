"""Cache health and the records ``publish`` writes, on the real engine and registry: a family built
with its registry cache, published (which records each image), then built again on an emptied
engine: every step from the cache and no warning; then with its cache refs pointed where nothing
is, inputs unchanged: the sitrep, the summary and the console warn that the cache is not working,
naming the targets. ``diff --from DATE`` in a new process reads the records ``publish`` wrote."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from test_publish_engine import _wipe

pytestmark = pytest.mark.engine

FAMILY = '''
import os
from bake import Stage, hookimpl

ROOT = os.environ["CACHE_FAMILY_DIR"]
REGISTRY = os.environ["CACHE_FAMILY_REGISTRY"]


@hookimpl
def bake_plan_stages():
    def stage(name, **kw):
        return Stage(name=name, image=name, registry=REGISTRY, kind="single", context=os.path.join(ROOT, name),
                     platforms=("linux/amd64",), **kw)
    return [stage("ch-root"), stage("ch-leaf", parent="ch-root")]
'''
TARGETS = ("ch-root", "ch-leaf")


def test_cache_health_and_the_records_publish_writes(cli, engine, make_plugin, private_engine, tmp_path):
    namespace = f"{engine.registry}/ch{uuid.uuid4().hex[:8]}"
    token = uuid.uuid4().hex  # new to every cache, so the first build runs its steps
    for name, dockerfile in (("ch-root", f"FROM localhost:5555/stand-in/busybox:latest\nRUN echo {token} > /root.txt\n"),
                             ("ch-leaf", "FROM base\nRUN cat /root.txt > /leaf.txt\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(dockerfile)
    site = make_plugin(FAMILY)
    env = dict(os.environ, CACHE_FAMILY_DIR=str(tmp_path), CACHE_FAMILY_REGISTRY=namespace, PYTHONPATH=str(site))
    on_private = dict(env, DOCKER_HOST=private_engine.host)

    def build(date, reports, *extra):
        proc = cli("build", "--target", "ch-leaf", "--platform", "linux/amd64", "--date", date, "--push",
                   "--sitrep-dir", reports, "-o", f"{reports}.hcl", *extra, cwd=tmp_path, env=on_private)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc, json.loads((tmp_path / reports / "sitrep.json").read_text())

    _, first = build("2026-11-28", "r1")
    for name in TARGETS:
        entry = first["targets"][name]
        assert entry["steps_run"] > 0 and entry["cache_written"] is True, (name, entry)
    assert first["targets"]["ch-root"]["cache_read"] is False  # no cache there yet
    assert first["warnings"] == []

    # publish records the images it published; diff in a new process reads those records
    published = cli("publish", "--target", "ch-leaf", "--date", "2026-11-28", "--sitrep", "r1",
                    cwd=tmp_path, env=env)
    assert published.returncode == 0, published.stderr
    for name in TARGETS:
        assert f"recorded {namespace}/{name}:record-{name}-2026-11-28-amd64" in published.stdout
        assert f"record-{name}-latest-amd64" in engine.tags(f"{namespace}/{name}")
    diff = cli("diff", "--target", "ch-leaf", "--platform", "linux/amd64", "--date", "2026-11-29",
               "--from", "2026-11-28", "--format", "json", cwd=tmp_path, env=env)
    assert diff.returncode == 0, diff.stderr
    assert {t["target"]: t["status"] for t in json.loads(diff.stdout)["targets"]} == \
        {"ch-root": "unchanged", "ch-leaf": "unchanged"}

    # an emptied engine, the registry kept: every step from the registry cache, no warning
    _wipe(private_engine.host)
    proc, again = build("2026-11-29", "r2")
    for name in TARGETS:
        entry = again["targets"][name]
        assert (entry["steps_run"], entry["cache_read"], entry["cache_warning"]) == (0, True, None), (name, entry)
        assert entry["steps_cached"] > 0
    assert again["warnings"] == [] and "warning" not in proc.stderr

    # the cache refs pointed where nothing is, inputs unchanged: the steps run, and that is a warning
    _wipe(private_engine.host)
    proc, cold = build("2026-11-30", "r3", "--cache-branch", "gone", "--cache-from-branch", "gone")
    assert cold["outcome"] == "pass"
    assert [t["input_digest"] for t in cold["targets"].values()] == [t["input_digest"] for t in first["targets"].values()]
    for name in TARGETS:
        entry = cold["targets"][name]
        assert entry["cache_read"] is False and entry["steps_run"] > 0, (name, entry)
        line = (f"cache not working for {name}: input unchanged since nightly-2026-11-28 "
                f"({entry['input_digest'][:19]}…) but {entry['steps_run']} step")
        assert entry["cache_warning"].startswith(line), entry["cache_warning"]
        assert f"bake-plan: warning: {line}" in proc.stderr
    assert len(cold["warnings"]) == 2
    summary = (tmp_path / "r3" / "sitrep.md").read_text()
    assert "> ⚠️ **warning**: cache not working for ch-root" in summary
    assert "> ⚠️ **warning**: cache not working for ch-leaf" in summary


def test_publish_no_record_pushes_no_record(cli, engine, tmp_path):
    """``--no-record``: the tags are published, no record is pushed."""
    from test_nightly_record_engine import push_image

    namespace = f"{engine.registry}/nr{uuid.uuid4().hex[:8]}"
    common = ("--target", "jax", "--platform", "linux/amd64", "--registry", namespace, "--date", "2026-11-29")
    cli("plan", *common, "--format", "json", "-o", "plan.json", cwd=tmp_path, check=True)
    plan = json.loads((tmp_path / "plan.json").read_text())
    digests = {}
    for name in plan["group"]["default"]["targets"]:
        for tag in plan["target"][name].get("tags") or []:
            repository, _, label = tag.rpartition(":")
            digests[name] = push_image(engine.registry, repository.split("/", 1)[1], label)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "sitrep.json").write_text(json.dumps({"targets": {
        name: {"outcome": "pass", "digest": d, "platforms": ["linux/amd64"]} for name, d in digests.items()}}))
    proc = cli("publish", *common, "--sitrep", "reports", "--no-record", cwd=tmp_path)
    assert "recorded" not in proc.stdout
    assert f"published {namespace}/jax:nightly-2026-11-29" in proc.stdout, proc.stdout + proc.stderr
    assert not [t for t in engine.tags(f"{namespace}/jax") if t.startswith("record-")]
    # the same publish without the flag records what it published
    proc = cli("publish", *common, "--sitrep", "reports", cwd=tmp_path)
    assert f"recorded {namespace}/jax:record-jax-2026-11-29-amd64" in proc.stdout, proc.stdout + proc.stderr
