"""A sitrep's ``base_images`` are images a build started from: a named context that is a local
directory (the wheelhouse) or a ``target:`` of the plan is no base image, though BuildKit's
progress names it as one (``docker.io/library/wheelhouse``)."""

from __future__ import annotations

from bake.run.build import base_images_seen
from bake.run.sitrep import base_images


def test_local_and_target_named_contexts_are_not_base_images(tmp_path):
    plan = {"target": {"leaf": {"platforms": ["linux/amd64"], "contexts": {
        "wheelhouse": str(tmp_path), "base": "target:root", "tool": "docker-image://busybox:1.36"}}}}
    seen = {"leaf": [("docker.io/library/wheelhouse", None, None), ("docker.io/library/base:latest", None, None),
                     ("docker.io/library/busybox:1.36", "linux/amd64", "sha256:" + "b" * 64),
                     ("tool", None, None)],
            "other": [("docker.io/library/wheelhouse", None, None)]}  # a target without that context keeps it
    kept = base_images_seen(plan, seen)
    assert kept == {"leaf": [("docker.io/library/busybox:1.36", "linux/amd64", "sha256:" + "b" * 64),
                             ("tool", None, None)],
                    "other": [("docker.io/library/wheelhouse", None, None)]}
    listed = base_images({}, (), kept["leaf"], ["linux/amd64"])
    assert [e["image"] for e in listed] == ["docker.io/library/busybox:1.36", "tool"]
    assert base_images_seen(plan, None) == {}
