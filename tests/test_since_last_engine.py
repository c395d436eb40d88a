"""The sitrep of a nightly carries its diff against the previous nightly, on the real engine and
registry: a tiny family (scratch images that copy their lock in) built, pushed and recorded on one
night; one pin moved in the lock of the root and of its child; the next night's ``build --push``
names exactly that pin's change for those two targets and nothing for the unrelated one, in
``sitrep.json`` (``since_last``) and in ``sitrep.md`` ("Changed since nightly-DATE"); a fourth
target whose newest record was replaced by a hostile one gets one line saying why, and the build
passes."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from test_report_bounds import _render

from bake.run import record
from bake.run.engine import create_manifest

pytestmark = pytest.mark.engine

FAMILY = '''
import os
from bake import Stage, hookimpl

ROOT = os.environ["SINCE_FAMILY_DIR"]
REGISTRY = os.environ["SINCE_FAMILY_REGISTRY"]


@hookimpl
def bake_plan_stages():
    def stage(name, **kw):
        return Stage(name=name, image=name, registry=REGISTRY, kind="single", context=os.path.join(ROOT, name),
                     contexts={"pip-lock": os.path.join(ROOT, "locks", name)}, platforms=("linux/amd64",), **kw)
    return [stage("sl-root"), stage("sl-leaf", parent="sl-root"), stage("sl-other"), stage("sl-odd")]
'''
LOCKS = {"sl-root": "numpy==1.26.4\n", "sl-leaf": "numpy==1.26.4\nsix==1.16.0\n", "sl-other": "six==1.16.0\n",
         "sl-odd": "six==1.16.0\n"}


def test_the_next_nightly_names_the_pin_that_moved_for_its_targets_only(cli, engine, make_plugin, tmp_path):
    namespace = f"{engine.registry}/sl{uuid.uuid4().hex[:8]}"
    for name, base in (("sl-root", "scratch"), ("sl-leaf", "base"), ("sl-other", "scratch"), ("sl-odd", "scratch")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Dockerfile").write_text(f"FROM {base}\nCOPY --from=pip-lock requirements.lock /{name}.lock\n")
        (tmp_path / "locks" / name).mkdir(parents=True)
        (tmp_path / "locks" / name / "requirements.lock").write_text(LOCKS[name])
    site = make_plugin(FAMILY)
    env = dict(os.environ, SINCE_FAMILY_DIR=str(tmp_path), SINCE_FAMILY_REGISTRY=namespace, PYTHONPATH=str(site))
    env.pop("GITHUB_STEP_SUMMARY", None)

    def nightly(date, reports):
        common = ("--target", "sl-leaf", "--target", "sl-other", "--target", "sl-odd", "--platform", "linux/amd64",
                  "--date", date)
        proc = cli("build", *common, "--push", "--sitrep-dir", reports, "-o", f"{reports}.hcl", cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return common, json.loads((tmp_path / reports / "sitrep.json").read_text())

    common, first = nightly("2026-11-28", "r1")
    for name in LOCKS:  # the first night has nothing to compare with
        (entry,) = first["targets"][name]["since_last"]
        assert (entry["status"], entry["from"], entry["reason"]) == (
            "new", None, "no earlier nightly record of this target and arch"), entry
    cli("record", *common, "--sitrep", "r1", cwd=tmp_path, env=env, check=True)
    # the registry is untrusted: sl-odd's newest record replaced by one naming a pin no distribution has
    odd = f"{namespace}/sl-odd"
    hostile = {**record.read_record(f"{odd}:record-sl-odd-latest-amd64"), "pins": {"x|y</td><script>": "1"}}
    create_manifest(f"{odd}:record-sl-odd-latest-amd64", [f"{odd}@{hostile['image_digest']}"],
                    annotations=[f"{record.ANNOTATION}={json.dumps(hostile)}"])

    for name in ("sl-root", "sl-leaf"):
        lock = tmp_path / "locks" / name / "requirements.lock"
        lock.write_text(lock.read_text().replace("numpy==1.26.4", "numpy==2.0.0"))
    _, second = nightly("2026-11-29", "r2")
    numpy = {"added": [], "removed": [], "upgraded": [{"name": "numpy", "from": "1.26.4", "to": "2.0.0"}],
             "downgraded": [], "changed": []}
    for name in ("sl-root", "sl-leaf"):
        (entry,) = second["targets"][name]["since_last"]
        assert (entry["from"], entry["status"], entry["python"]) == ("nightly-2026-11-28", "changed", numpy), entry
        assert (entry["sources"], entry["base_images"], entry["reason"]) == ([], [], None)
    (other,) = second["targets"]["sl-other"]["since_last"]
    assert other["status"] == "unchanged" and not any(other["python"].values()) and other["sources"] == []
    (odd_entry,) = second["targets"]["sl-odd"]["since_last"]
    assert (odd_entry["status"], odd_entry["python"]) == ("unknown", None), odd_entry
    assert "an unreadable record: pins name 'x|y</td><script>' is not a distribution name" in odd_entry["reason"]
    assert second["outcome"] == "pass" and second["targets"]["sl-odd"]["outcome"] == "pass"
    summary = (tmp_path / "r2" / "sitrep.md").read_text()
    section = summary[summary.index("### Changed since nightly-2026-11-28"):]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[0] for row in rows] == ["| `sl-root`", "| `sl-leaf`", "| `sl-odd`"], rows
    assert all("`↑ numpy 1.26.4 → 2.0.0`" in row for row in rows[:2])
    assert "an unreadable record" in rows[2] and "<script" not in _render(summary)  # a code span's text
