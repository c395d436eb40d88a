"""``publish --sitrep`` on the real engine and registry: floating tags gated by the nightly's build
and test sitreps, ``--all-or-nothing``, ``promote`` of a dated night, and registry calls retried.

The family ``ga-root`` → ``ga-mid`` → ``ga-leaf``, and ``ga-other`` on ``ga-root``: busybox with a
label per night (no ``RUN`` step, so the arm64 build needs no emulation), built per arch with
``bake-plan build --push`` and tested per arch with ``bake-plan test`` (arm64 under QEMU). Night 1
passes everywhere and is published; on night 2 a test of ``ga-mid`` fails on arm64 only.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest import console_script
from registry_proxy import answer, registry_proxy

pytestmark = pytest.mark.engine

NIGHT1, NIGHT2 = "2026-11-28", "2026-11-29"
IMAGES = ("ga-root", "ga-mid", "ga-leaf", "ga-other")

FAMILY = '''
import os
from pathlib import Path
from bake import ImageTest, Stage, hookimpl

HERE = Path(__file__).resolve().parent
NS = os.environ["GA_REGISTRY"]


@hookimpl
def bake_plan_stages():
    night = {"NIGHT": os.environ.get("GA_NIGHT", "0")}
    mid = [ImageTest("test -f /etc/ga-mid", name="labelled")]
    if os.environ.get("GA_FAIL_ARM64"):
        mid.append(ImageTest(["sh", "-c", "test $(uname -m) != aarch64"], name="not on arm64"))
    return [
        Stage(name="ga-root", image="ga-root", context=HERE / "root", base_image="busybox:1.36", registry=NS,
              args=night, tests=("true",)),
        Stage(name="ga-mid", image="ga-mid", parent="ga-root", context=HERE / "child", registry=NS,
              args={**night, "WHO": "ga-mid"}, tests=tuple(mid)),
        Stage(name="ga-leaf", image="ga-leaf", parent="ga-mid", context=HERE / "child", registry=NS,
              args={**night, "WHO": "ga-leaf"}),
        Stage(name="ga-other", image="ga-other", parent="ga-root", context=HERE / "child", registry=NS,
              args={**night, "WHO": "ga-other"}),
    ]
'''

ROOT_DOCKERFILE = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE} AS mealkit
ARG NIGHT=0
LABEL ga.night=${NIGHT}

FROM mealkit AS final
"""

CHILD_DOCKERFILE = """\
FROM base AS mealkit
ARG NIGHT=0
ARG WHO=child
LABEL ga.night=${NIGHT} ga.who=${WHO}
COPY marker /etc/${WHO}

FROM mealkit AS final
"""


def _site(root: Path) -> Path:
    site = root / "site"
    (site / "ga_family-0.0.dist-info").mkdir(parents=True)
    (site / "ga_family-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ga-family\nVersion: 0.0\n")
    (site / "ga_family-0.0.dist-info" / "entry_points.txt").write_text("[bake_plan]\nga-family = ga_family\n")
    (site / "ga_family.py").write_text(textwrap.dedent(FAMILY))
    (site / "root").mkdir()
    (site / "root" / "Dockerfile").write_text(ROOT_DOCKERFILE)
    (site / "child").mkdir()
    (site / "child" / "Dockerfile").write_text(CHILD_DOCKERFILE)
    (site / "child" / "marker").write_text("ga\n")
    return site


class Nights:
    """The family built and tested for two nights in one registry namespace."""

    def __init__(self, engine, root: Path):
        self.engine, self.root = engine, root
        self.namespace = f"{engine.registry}/ga{uuid.uuid4().hex[:8]}"
        self.site = _site(root)

    def run(self, command, *args, night="1", fail_arm64=False, registry=None, timeout=900):
        env = dict(os.environ, PYTHONPATH=str(self.site), GA_REGISTRY=registry or self.namespace, GA_NIGHT=night)
        env.pop("GA_FAIL_ARM64", None)
        if fail_arm64:
            env["GA_FAIL_ARM64"] = "1"
        return subprocess.run([str(console_script()), command, "--config", os.devnull, *args], cwd=self.root,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def night(self, number: str, date: str, fail_arm64: bool = False) -> Path:
        """Build and test every image on both arches for ``date``; the sitreps' directory."""
        reports = self.root / f"night{number}"
        targets = [w for image in IMAGES for w in ("--target", image)]
        for arch in ("amd64", "arm64"):
            where = ["--sitrep-dir", str(reports / arch)]
            proc = self.run("build", *targets, "--platform", f"linux/{arch}", "--date", date, "--push",
                            "--base-image", f"busybox:1.36={self.engine.registry}/stand-in/busybox:latest",
                            *where, night=number, fail_arm64=fail_arm64)
            assert proc.returncode == 0, proc.stderr[-3000:]
            proc = self.run("test", *targets, "--platform", f"linux/{arch}", "--date", date, *where,
                            night=number, fail_arm64=fail_arm64)
            assert proc.returncode == (1 if fail_arm64 and arch == "arm64" else 0), proc.stderr[-3000:]
        return reports

    def publish(self, date: str, *args, night="1"):
        targets = [w for image in IMAGES for w in ("--target", image)]
        return self.run("publish", *targets, "--date", date, *args, night=night)

    def digest(self, image: str, tag: str):
        proc = self.engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}",
                                  f"{self.namespace}/{image}:{tag}", check=False)
        return json.loads(proc.stdout)["digest"] if proc.returncode == 0 else None

    def floating(self) -> dict:
        return {(image, tag): self.digest(image, tag) for image in IMAGES for tag in ("latest", "mealkit")}


@pytest.fixture(scope="module")
def nights(engine, tmp_path_factory):
    """Night 1 built, tested and published (every floating tag on it); night 2 built and tested,
    a test of ga-mid failing on arm64 only, not published yet."""
    n = Nights(engine, tmp_path_factory.mktemp("gate"))
    n.reports1 = n.night("1", NIGHT1)
    proc = n.publish(NIGHT1, "--sitrep", str(n.reports1))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n.first = n.floating()
    assert all(n.first.values()), n.first
    n.reports2 = n.night("2", NIGHT2, fail_arm64=True)
    return n


def test_all_or_nothing_with_one_image_held_moves_no_floating_tag(nights):
    proc = nights.publish(NIGHT2, "--sitrep", str(nights.reports2), "--all-or-nothing", night="2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "--all-or-nothing: 4 images held back, so no floating tag moves" in proc.stdout
    assert nights.floating() == nights.first  # not one floating tag moved
    for image in IMAGES:  # the dated tags are published all the same
        assert nights.digest(image, f"nightly-{NIGHT2}") not in (None, nights.first[(image, "latest")])


def test_a_test_failing_on_arm64_holds_that_image_and_its_descendants(nights):
    proc = nights.publish(NIGHT2, "--sitrep", str(nights.reports2), night="2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "held back ga-mid: test 'not on arm64' of ga-mid failed on arm64" in out
    assert "held back ga-leaf: ancestor ga-mid: test 'not on arm64' of ga-mid failed on arm64" in out
    assert "held back ga-root" not in out and "held back ga-other" not in out
    assert "2 images" not in proc.stderr and "4 images held back: their floating tags did not move" in proc.stderr
    now = nights.floating()
    for image in ("ga-mid", "ga-leaf"):  # held: latest and mealkit stay on night 1
        for tag in ("latest", "mealkit"):
            assert now[(image, tag)] == nights.first[(image, tag)], (image, tag)
    for image in ("ga-root", "ga-other"):  # passed: moved onto night 2's dated index
        assert now[(image, "latest")] == nights.digest(image, f"nightly-{NIGHT2}") != nights.first[(image, "latest")]
        assert now[(image, "mealkit")] == nights.digest(image, f"mealkit-{NIGHT2}")
    for image in IMAGES:  # every dated tag of night 2 is published, multi-arch
        raw = json.loads(nights.engine.docker("buildx", "imagetools", "inspect", "--raw",
                                              f"{nights.namespace}/{image}:nightly-{NIGHT2}").stdout)
        assert sorted(m["platform"]["architecture"] for m in raw["manifests"]
                      if m["platform"]["os"] != "unknown") == ["amd64", "arm64"]  # not the attestations
        assert raw["annotations"]["org.bake-plan.gate"] == ("held" if image in ("ga-mid", "ga-leaf") else "pass")


def test_promote_of_a_date_that_failed_is_refused_and_of_one_that_passed_moves(nights):
    targets = ["--target", "ga-leaf"]
    before = nights.floating()
    proc = nights.run("promote", *targets, "--date", NIGHT2, night="2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"ga-mid: {nights.namespace}/ga-mid:nightly-{NIGHT2} did not pass the gate" in proc.stderr
    assert nights.floating() == before
    proc = nights.run("promote", *targets, "--date", NIGHT2, "--force", "--dry-run", night="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"would move {nights.namespace}/ga-mid:latest -> {nights.namespace}/ga-mid:nightly-{NIGHT2} (sha256:" \
        in proc.stdout
    assert nights.floating() == before  # a dry run moves nothing
    proc = nights.run("promote", *targets, "--date", NIGHT1, night="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    now = nights.floating()
    for image in ("ga-root", "ga-mid", "ga-leaf"):
        assert now[(image, "latest")] == nights.digest(image, f"nightly-{NIGHT1}")
    assert now[("ga-other", "latest")] == before[("ga-other", "latest")]  # not in ga-leaf's chain


def test_a_tag_a_later_build_moved_is_not_published_on_the_sitrep_of_the_earlier_one(nights):
    """The sitrep gates the image its build pushed and tested, not whatever the per-arch tag holds
    by publishing time: ga-root rebuilt for amd64 after night 2's tests holds ga-root back."""
    before = nights.floating()
    dated = nights.digest("ga-root", f"nightly-{NIGHT2}")
    proc = nights.run("build", "--target", "ga-root", "--platform", "linux/amd64", "--date", NIGHT2, "--push",
                      "--base-image", f"busybox:1.36={nights.engine.registry}/stand-in/busybox:latest",
                      "--sitrep-dir", str(nights.root / "rebuilt"), night="3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = nights.publish(NIGHT2, "--sitrep", str(nights.reports2), "--no-record", night="2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"held back ga-root: {nights.namespace}/ga-root:latest-amd64 now holds sha256:" in proc.stdout
    assert "which its sitrep built and tested (a later build moved the tag)" in proc.stdout
    assert "held back ga-other" not in proc.stdout  # its own tags hold what night 2 tested
    now = nights.floating()
    assert now[("ga-root", "latest")] == before[("ga-root", "latest")]
    assert nights.digest("ga-root", f"nightly-{NIGHT2}") == dated  # the dated index is not made again either


# --- retries ----------------------------------------------------------------------------------

@pytest.fixture
def busy_registry(engine):
    """``localhost:<port>``: the test registry behind a proxy that answers the first two pushes of a
    manifest with ``429 Too Many Requests``, then forwards every request. buildx itself tries a
    refused manifest PUT again a few times within a fraction of a second, so a "push" here is a
    burst of PUTs less than 0.5 s apart: the first two bursts are refused whole (each
    ``imagetools create`` fails), and bake-plan's own retry comes at least a second later."""
    state = {"bursts": 0, "last": None, "puts": 0}

    def too_many(handler, body):
        if handler.command != "PUT" or "/manifests/" not in handler.path:
            return False
        state["puts"] += 1
        now = time.monotonic()
        in_burst = state["last"] is not None and now - state["last"] < 0.5
        if not (in_burst or state["bursts"] < 2):
            return False
        state["bursts"] += 0 if in_burst else 1
        state["last"] = now
        answer(handler, 429, b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}', {"Retry-After": "1"})
        return True

    with registry_proxy(engine.registry, too_many) as name:
        yield name, state


def test_a_registry_answering_429_twice_is_retried_and_the_tags_are_published(engine, busy_registry, tmp_path):
    proxy, state = busy_registry
    namespace = f"ga{uuid.uuid4().hex[:8]}"
    source = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw",
                                      f"{engine.registry}/stand-in/busybox:latest").stdout)
    for manifest in source["manifests"]:  # the per-arch images, straight into the registry (not via the proxy)
        arch = manifest["platform"]["architecture"]
        for tag in ("latest", f"nightly-{NIGHT2}", f"nightly-{NIGHT1}"):
            engine.docker("buildx", "imagetools", "create", "--tag", f"{engine.registry}/{namespace}/one:{tag}-{arch}",
                          f"{engine.registry}/stand-in/busybox@{manifest['digest']}")
    site = tmp_path / "site"
    (site / "ga_one-0.0.dist-info").mkdir(parents=True)
    (site / "ga_one-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ga-one\nVersion: 0.0\n")
    (site / "ga_one-0.0.dist-info" / "entry_points.txt").write_text("[bake_plan]\nga-one = ga_one\n")
    (site / "ga_one.py").write_text(textwrap.dedent(f'''
        from bake import Stage, hookimpl
        @hookimpl
        def bake_plan_stages():
            return [Stage(name="one", image="one", kind="single", context={str(site)!r}, base_image="busybox:1.36",
                          registry="{proxy}/{namespace}", platforms=("linux/amd64", "linux/arm64"))]
        '''))
    (site / "Dockerfile").write_text("FROM busybox:1.36\n")
    # publish_gated, then the plain publish of old (another night: a tag already on its index is not pushed again)
    for night, flags in ((NIGHT2, ["--all-or-nothing"]), (NIGHT1, [])):
        state.update(bursts=0, last=None)
        proc = subprocess.run([str(console_script()), "publish", "--config", os.devnull, "--target", "one", "--date",
                               night, *flags, "--format", "json"], cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(site)), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["retries"] == 2, (flags, state, proc.stderr)
        assert proc.stderr.count("bake-plan: retrying imagetools create") == 2
        assert "toomanyrequests" in proc.stderr and "2 registry calls retried" in proc.stderr
        assert state["bursts"] == 2
    for tag in ("latest", f"nightly-{NIGHT2}"):
        raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw",
                                       f"{engine.registry}/{namespace}/one:{tag}").stdout)
        assert sorted(m["platform"]["architecture"] for m in raw["manifests"]) == ["amd64", "arm64"]


# --- a move failing part-way ------------------------------------------------------------------

@pytest.fixture
def refusing_registry(engine):
    """``localhost:<port>``: the test registry behind a proxy that refuses (``403 Forbidden``,
    never retried) every manifest PUT whose path ends in one of ``.refused`` (a set the test fills)."""
    refused: set = set()

    def refuse(handler, body):
        if handler.command == "PUT" and any(handler.path.endswith(end) for end in refused):
            answer(handler, 403, b'{"errors":[{"code":"DENIED","message":"not this one"}]}')
            return True
        return False

    with registry_proxy(engine.registry, refuse) as name:
        yield name, refused


def _per_arch(engine, namespace: str, image: str, tags, source: str) -> None:
    """``image:TAG-amd64``/``-arm64`` for each tag, from the per-arch images of ``source``."""
    raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw", source).stdout)
    repository = source.rsplit(":", 1)[0]
    for manifest in raw["manifests"]:
        arch = manifest["platform"]["architecture"]
        if manifest["platform"]["os"] != "linux" or arch not in ("amd64", "arm64"):
            continue
        for tag in tags:
            engine.docker("buildx", "imagetools", "create", "--tag",
                          f"{engine.registry}/{namespace}/{image}:{tag}-{arch}", f"{repository}@{manifest['digest']}")


def test_a_move_failing_part_way_puts_the_tags_already_moved_back(engine, refusing_registry, tmp_path):
    proxy, refused = refusing_registry
    namespace = f"ga{uuid.uuid4().hex[:8]}"
    site = tmp_path / "site"
    (site / "ga_two-0.0.dist-info").mkdir(parents=True)
    (site / "ga_two-0.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: ga-two\nVersion: 0.0\n")
    (site / "ga_two-0.0.dist-info" / "entry_points.txt").write_text("[bake_plan]\nga-two = ga_two\n")
    (site / "ga_two.py").write_text(textwrap.dedent(f'''
        import os
        from bake import Stage, hookimpl
        @hookimpl
        def bake_plan_stages():
            return [Stage(name=n, image=n, kind="single", context={str(site)!r}, base_image="busybox:1.36",
                          registry=os.environ["GA_REGISTRY"], platforms=("linux/amd64", "linux/arm64"))
                    for n in ("one", "two")]
        '''))
    (site / "Dockerfile").write_text("FROM busybox:1.36\n")

    def publish(date, registry):
        return subprocess.run([str(console_script()), "publish", "--config", os.devnull, "--target", "one", "--target",
                               "two", "--date", date, "--all-or-nothing"], cwd=tmp_path, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONPATH=str(site), GA_REGISTRY=registry), timeout=600)

    def digest(image, tag):
        return json.loads(engine.docker("buildx", "imagetools", "inspect", "--format", "{{json .Manifest}}",
                                        f"{engine.registry}/{namespace}/{image}:{tag}").stdout)["digest"]

    for image in ("one", "two"):  # night 1 on busybox, night 2 on another image: other digests
        _per_arch(engine, namespace, image, ["latest", f"nightly-{NIGHT1}"],
                  f"{engine.registry}/stand-in/busybox:latest")
    proc = publish(NIGHT1, f"{engine.registry}/{namespace}")
    assert proc.returncode == 0, proc.stderr
    before = {image: digest(image, "latest") for image in ("one", "two")}
    for image in ("one", "two"):
        _per_arch(engine, namespace, image, ["latest", f"nightly-{NIGHT2}"],
                  f"{engine.registry}/stand-in/python:bookworm")

    refused.add(f"/{namespace}/two/manifests/latest")  # one:latest moves first, then two:latest is refused
    proc = publish(NIGHT2, f"{proxy}/{namespace}")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"bake-plan: error: moving {proxy}/{namespace}/two:latest failed: " in proc.stderr
    assert "403" in proc.stderr or "denied" in proc.stderr.lower()
    assert "retrying" not in proc.stderr  # a refusal is not retried
    assert f"bake-plan: rolled back: put back {proxy}/{namespace}/one:latest on {before['one']}" in proc.stderr
    assert f"published {proxy}/{namespace}/one:latest" in proc.stdout  # it had moved
    assert {image: digest(image, "latest") for image in ("one", "two")} == before
    assert digest("one", f"nightly-{NIGHT2}") != before["one"]  # the dated tags stay published


# --- arches that do not agree -------------------------------------------------------------------

def _one_stage_family(tmp_path: Path, dist: str, stage_code: str) -> Path:
    """A plugin distribution ``dist`` on a site directory whose ``bake_plan_stages`` returns
    ``stage_code`` (one ``Stage(...)`` expression, ``SITE`` naming the site directory)."""
    site = tmp_path / "site"
    module = dist.replace("-", "_")
    (site / f"{module}-0.0.dist-info").mkdir(parents=True)
    (site / f"{module}-0.0.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0\n")
    (site / f"{module}-0.0.dist-info" / "entry_points.txt").write_text(f"[bake_plan]\n{dist} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(f'''
        from bake import Stage, hookimpl
        SITE = {str(site)!r}
        @hookimpl
        def bake_plan_stages():
            return [{stage_code}]
        '''))
    return site


def _one_stage_cli(tmp_path: Path, site: Path, target: str):
    """``run(command, *args, env=None)``: bake-plan on ``target`` of the family at ``site``, dated NIGHT2."""
    def run(*args, env=None):
        return subprocess.run([str(console_script()), *args[:1], "--config", os.devnull, "--target", target,
                               "--date", NIGHT2, *args[1:]], cwd=tmp_path,
                              env=dict(os.environ, PYTHONPATH=str(site), **(env or {})),
                              capture_output=True, text=True, timeout=900)
    return run


def _build_and_test_per_arch(run, reports: Path, base_image: str) -> None:
    """Build (``--push``) and test the family on amd64, then arm64, each into ``reports/<arch>``."""
    for arch in ("amd64", "arm64"):
        where = ["--platform", f"linux/{arch}", "--sitrep-dir", str(reports / arch)]
        proc = run("build", *where, "--push", "--base-image", base_image)
        assert proc.returncode == 0, proc.stderr[-3000:]
        proc = run("test", *where)
        assert proc.returncode == 0, proc.stderr[-3000:]


PY_DOCKERFILE = """\
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
ARG TARGETARCH
RUN if [ "$TARGETARCH" = arm64 ]; then \\
      d=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \\
      mkdir -p "$d/only_arm-1.0.dist-info" && \\
      printf 'Metadata-Version: 2.1\\nName: Only_Arm\\nVersion: 1.0\\n' > "$d/only_arm-1.0.dist-info/METADATA"; \\
    fi
"""


def test_arches_with_different_distributions_hold_the_image_naming_the_distribution(engine, tmp_path):
    namespace = f"{engine.registry}/ga{uuid.uuid4().hex[:8]}"
    site = _one_stage_family(tmp_path, "ga-py", f'''Stage(name="py", image="py", kind="single", context=SITE + "/py",
                          base_image="python:3.11-slim-bookworm", registry={namespace!r}, tests=("python3 -V",),
                          platforms=("linux/amd64", "linux/arm64"))''')
    (site / "py").mkdir()
    (site / "py" / "Dockerfile").write_text(PY_DOCKERFILE)
    run = _one_stage_cli(tmp_path, site, "py")
    _build_and_test_per_arch(run, tmp_path / "reports",
                             f"python:3.11-slim-bookworm={engine.registry}/stand-in/python:bookworm")
    installed = {arch: json.loads((tmp_path / "reports" / arch / "sitrep.json").read_text())["tests"]["installed"]
                 for arch in ("amd64", "arm64")}
    assert [(e["target"], e["platform"]) for e in installed["arm64"]] == [("py", "linux/arm64")]
    assert installed["arm64"][0]["distributions"]["only-arm"] == "1.0"  # the name as pip normalises it
    assert "only-arm" not in installed["amd64"][0]["distributions"]
    assert installed["amd64"][0]["distributions"].keys() - {"only-arm"} == \
        installed["arm64"][0]["distributions"].keys() - {"only-arm"}

    proc = run("publish", "--sitrep", str(tmp_path / "reports"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "held back py: py: arches differ: only-arm: absent on amd64, 1.0 on arm64" in proc.stdout
    tags = engine.tags(f"{namespace}/py")
    assert f"nightly-{NIGHT2}" in tags and "latest" not in tags  # dated published, floating held


# --- arches of very different size ---------------------------------------------------------------

SIZED_DOCKERFILE = """\
ARG BASE_IMAGE=busybox:1.36
FROM ${BASE_IMAGE}
ARG TARGETARCH
COPY payload-${TARGETARCH} /opt/payload
"""


def test_an_arch_far_larger_than_the_other_holds_the_image_naming_both_sizes(engine, tmp_path):
    namespace = f"{engine.registry}/gs{uuid.uuid4().hex[:8]}"
    site = _one_stage_family(tmp_path, "ga-sized", f'''Stage(name="gs-big", image="gs-big", kind="single",
                          context=SITE + "/ctx", base_image="busybox:1.36", registry={namespace!r}, tests=("true",),
                          platforms=("linux/amd64", "linux/arm64"))''')
    (site / "ctx").mkdir()
    (site / "ctx" / "Dockerfile").write_text(SIZED_DOCKERFILE)  # no RUN: the arm64 build needs no emulation
    (site / "ctx" / "payload-amd64").write_bytes(b"small\n")
    (site / "ctx" / "payload-arm64").write_bytes(os.urandom(20_000_000))  # incompressible: as large pushed as stored
    run = _one_stage_cli(tmp_path, site, "gs-big")
    reports = tmp_path / "reports"
    _build_and_test_per_arch(run, reports, f"busybox:1.36={engine.registry}/stand-in/busybox:latest")
    sizes = {}
    for arch in ("amd64", "arm64"):
        recorded = json.loads((reports / arch / "sitrep.json").read_text())["tests"]["sizes"]
        assert [(e["target"], e["platform"]) for e in recorded] == [("gs-big", f"linux/{arch}")]
        sizes[arch] = recorded[0]["size_bytes"]
    assert sizes["arm64"] - sizes["amd64"] >= 19_000_000 and sizes["amd64"] > 0, sizes

    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    proc = run("publish", "--sitrep", str(reports), env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    why = (f"image size differs between arches: {sizes['arm64']:,} bytes on arm64, {sizes['amd64']:,} bytes on "
           f"amd64 ({sizes['arm64'] / sizes['amd64']:.2f} times, more than 2)")
    assert f"held back gs-big: gs-big: {why}" in proc.stdout
    tags = engine.tags(f"{namespace}/gs-big")
    assert f"nightly-{NIGHT2}" in tags and "latest" not in tags  # dated published, floating held
    text = summary.read_text()
    assert text.startswith("earlier step\n")  # appended to, never replaced
    row = next(line for line in text.splitlines() if line.startswith("| `gs-big` |"))
    assert row.startswith(f"| `gs-big` | `gs-big:nightly-{NIGHT2}` | held `gs-big:latest` | gs-big: {why} | amd64 ")

    proc = run("publish", "--sitrep", str(reports), "--arch-size-ratio", "1000", "--format", "json")  # within it
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "held back" not in proc.stderr
    image = json.loads(proc.stdout)["gate"]["images"]["gs-big"]
    assert image["floating"] and image["arches"]["size_bytes"] == sizes
    assert "latest" in engine.tags(f"{namespace}/gs-big")
