"""A sitrep's ``base_images`` are images a build started from: a named context that is a local
directory (the wheelhouse) or a ``target:`` of the plan is no base image, though BuildKit's
progress names it as one (``docker.io/library/wheelhouse``)."""

from __future__ import annotations

from bake.run.build import base_images_seen
from bake.run.sitrep import base_images, make_sitrep


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


def test_an_oci_layout_context_is_no_base_image():
    """The wheelhouse as ``oci-layout://…@sha256:…``: BuildKit's progress names it
    ``docker.io/library/wheelhouse`` with the layout's digest, its provenance ``pkg:oci/wheelhouse``;
    neither is a base image, nor is a git or HTTP context; a ``docker-image://`` one is."""
    layout = "sha256:" + "5a" * 32
    busybox = "sha256:" + "f5" * 32
    plan = {"group": {"default": {"targets": ["leaf"]}},
            "target": {"leaf": {"platforms": ["linux/amd64"], "tags": ["localhost:5555/x/leaf:latest"], "contexts": {
                "wheelhouse": f"oci-layout:///w/wheels/.bake-plan-oci@{layout}",
                "src": "https://example.invalid/src.git", "tool": "docker-image://busybox:1.36"}}}}
    seen = {"leaf": [("docker.io/library/wheelhouse", None, layout),
                     ("docker.io/library/renamed-store", None, layout),  # the layout under another name
                     ("docker.io/library/src", None, None),
                     ("docker.io/library/busybox:1.36", None, busybox)]}
    provenance = {"materials": [
        {"uri": f"pkg:oci/wheelhouse?digest={layout}&platform=linux%2Famd64", "digest": {"sha256": layout[7:]}},
        {"uri": "pkg:docker/busybox@1.36?platform=linux%2Famd64", "digest": {"sha256": busybox[7:]}}]}
    report = make_sitrep(plan, "leaf build", 0, [], {"leaf": {"containerimage.digest": "sha256:" + "c" * 64,
                                                             "buildx.build.provenance": provenance}}, {},
                         images=base_images_seen(plan, seen))
    listed = report["targets"]["leaf"]["base_images"]
    assert listed == [{"image": "busybox:1.36", "platform": "linux/amd64", "digest": busybox}]
    assert base_images_seen(plan, seen) == {"leaf": [("docker.io/library/busybox:1.36", None, busybox)]}
