"""One image however its reference is spelled; older buildx
told before building what it cannot build; parent reports that do not fit the plan; registry
hosts, ports, dates and secret paths buildx would read otherwise.

Engine tests build for real (``scripts/test-engine up``; Docker Hub is unreachable there, so a
``FROM busybox`` that builds shows the replacement was used), on the current buildx and on 0.13.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bake.api import make_plan
from bake.plan.compose import PlanOptions
from bake.plan.names import context_name, normalise_reference
from bake.plan.secrets import SecretSpec
from bake.run.engine import BuildxTooOld, buildx_needed, require_buildx
from conftest import OLD_BUILDX_DEFAULT
from test_errors import assert_one_line_error

DATE = datetime.date(2026, 11, 29)
STAND_IN = "stand-in/busybox:latest"
DIGEST = "sha256:" + "1" * 64


# --- kind 7: one image, many spellings --------------------------------------------------------

@pytest.mark.parametrize("spelling, image, key", [
    ("busybox", "docker.io/library/busybox:latest", "busybox"),
    ("busybox:latest", "docker.io/library/busybox:latest", "busybox"),
    ("library/busybox:latest", "docker.io/library/busybox:latest", "busybox"),
    ("docker.io/busybox", "docker.io/library/busybox:latest", "busybox"),
    ("docker.io/library/busybox:latest", "docker.io/library/busybox:latest", "busybox"),
    ("index.docker.io/library/busybox:latest", "docker.io/library/busybox:latest", "busybox"),
    ("X:1.0".lower(), "docker.io/library/x:1.0", "x:1.0"),
    ("docker.io/library/x:1.0", "docker.io/library/x:1.0", "x:1.0"),
    ("ns/x:1.0", "docker.io/ns/x:1.0", "ns/x:1.0"),
    ("docker.io/ns/x:1.0", "docker.io/ns/x:1.0", "ns/x:1.0"),
    ("localhost:5555/x/y", "localhost:5555/x/y:latest", "localhost:5555/x/y"),
    ("ghcr.io/library/x:2", "ghcr.io/library/x:2", "ghcr.io/library/x:2"),
    ("busybox@" + DIGEST, "docker.io/library/busybox@" + DIGEST, "busybox@" + DIGEST),
])
def test_every_spelling_of_an_image_normalises_to_one_name_and_one_context_key(spelling, image, key):
    """distribution/reference's rules: docker.io by default, library/ for one component on
    Docker Hub, index.docker.io is docker.io, :latest by default; BuildKit's key is the familiar
    name less :latest."""
    assert normalise_reference(spelling) == image
    assert context_name(spelling) == key


@pytest.mark.parametrize("flag, key", [
    ("docker.io/library/x:1.0", "x:1.0"),
    ("library/x:1.0", "x:1.0"),
    ("docker.io/ns/x:1.0", "ns/x:1.0"),
    ("index.docker.io/library/busybox:latest", "busybox"),
])
def test_a_base_image_flag_is_set_under_the_key_the_frontend_looks_up(flag, key):
    """`--base-image docker.io/library/X:1.0=…` reaches `FROM X:1.0`: BuildKit looks every
    spelling up by one key, and the plan sets that key (and the name as written)."""
    plan = make_plan(PlanOptions(targets=("base",), date=DATE, base_images=((flag, "mirror.example/x:1"),))).plan
    for target in plan["target"].values():
        assert target["contexts"][key] == target["contexts"][flag] == "docker-image://mirror.example/x:1"


def test_the_stages_own_spelling_of_its_base_image_is_set_too():
    """`bake-plan graph` draws the replacement for a stage whose base_image is spelled otherwise."""
    plan = make_plan(PlanOptions(targets=("base",), date=DATE, base_images=(
        ("docker.io/nvidia/cuda:12.2.0-devel-ubuntu22.04", "mirror.example/cuda:12.2"),))).plan
    contexts = plan["target"]["base-mealkit"]["contexts"]
    assert contexts["nvidia/cuda:12.2.0-devel-ubuntu22.04"] == "docker-image://mirror.example/cuda:12.2"


def test_one_image_replaced_twice_under_two_spellings_is_refused(cli, tmp_path):
    proc = cli("--target", "base", "--base-image", "busybox:latest=a.example/one:1",
               "--base-image", "busybox=a.example/two:1", cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == (
        "bake-plan: error: --base-image: 'busybox:latest=a.example/one:1' and 'busybox=a.example/two:1' replace one "
        "image (docker.io/library/busybox:latest) differently: give one replacement")


def test_one_image_replaced_twice_in_the_config_file_is_refused(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text(
        'base-images = { "docker.io/library/busybox:1" = "a.example/one:1", "busybox:1" = "a.example/two:1" }\n')
    proc = cli("--target", "base", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "bake-plan: error: bake-plan.toml: base-images: 'docker.io/library/busybox:1=a.example/one:1' and "
        "'busybox:1=a.example/two:1' replace one image (docker.io/library/busybox:1) differently: give one replacement")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bake-plan.toml"]


def test_the_same_replacement_under_two_spellings_is_kept_once(cli, tmp_path):
    proc = cli("--target", "base", "--base-image", "busybox:latest=a.example/one:1",
               "--base-image", "docker.io/library/busybox=a.example/one:1", "--format", "json", "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    contexts = json.loads(proc.stdout)["target"]["base"]["contexts"]
    assert {k: v for k, v in contexts.items() if "busybox" in k} == {
        "busybox:latest": "docker-image://a.example/one:1", "busybox": "docker-image://a.example/one:1"}


def _env(site, tmp_path, which):
    """The environment for the installed CLI with the plugin ``site``; ``old``: buildx 0.13 as the
    docker CLI's buildx plugin (``$DOCKER_CONFIG/cli-plugins`` comes first)."""
    env = dict(os.environ, PYTHONPATH=str(site))
    if which == "old":
        path = os.environ.get("BAKE_PLAN_BUILDX_OLD", OLD_BUILDX_DEFAULT)
        if not os.access(path, os.X_OK):
            if os.environ.get("CI") == "true":
                pytest.fail(f"buildx 0.13 at {path} is required under CI=true")
            pytest.skip(f"buildx 0.13 at {path} not available")
        plugins = tmp_path / f"docker-config-{uuid.uuid4().hex[:6]}" / "cli-plugins"
        plugins.mkdir(parents=True)
        (plugins / "docker-buildx").symlink_to(path)
        env["DOCKER_CONFIG"] = str(plugins.parent)
    return env


@pytest.mark.engine
@pytest.mark.parametrize("which", ["new", "old"])
def test_a_base_image_given_in_one_spelling_replaces_every_spelling_in_a_real_build(cli, engine, make_plugin,
                                                                                    tmp_path, which):
    """Three FROM spellings of busybox and one of ns/x, replaced by flags in other spellings:
    Docker Hub is unreachable from the engine, so the build passes only if all four resolve to
    the stand-in."""
    site = make_plugin("""
import os
from bake import Stage, hookimpl
DOCKERFILE = '''FROM busybox:latest AS one
FROM docker.io/library/busybox AS two
FROM ns/x:1.0 AS three
FROM index.docker.io/library/busybox:latest
RUN --mount=from=one,target=/one --mount=from=two,target=/two --mount=from=three,target=/three \\\\
    test -e /one/bin/sh && test -e /two/bin/sh && test -e /three/bin/sh && echo spelled > /ok
'''
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="spellings", image="spellings", kind="single", context=os.path.dirname(__file__),
                  platforms=("linux/amd64",), dockerfile_inline=DOCKERFILE)]
""")
    stand_in = f"{engine.registry}/{STAND_IN}"
    proc = cli("build", "--target", "spellings", "--registry", f"{engine.registry}/refs{uuid.uuid4().hex[:8]}",
               "--date", DATE.isoformat(), "--platform", "linux/amd64", "--sitrep-dir", str(tmp_path / "sitrep"),
               "--base-image", f"docker.io/library/busybox:latest={stand_in}",
               "--base-image", f"docker.io/ns/x:1.0={stand_in}", cwd=tmp_path, env=_env(site, tmp_path, which))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())
    assert report["outcome"] == "pass" and report["targets"]["spellings"]["outcome"] == "pass"


# --- kind 9: older buildx ---------------------------------------------------------------------

def _plan(targets: dict) -> dict:
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}


def test_what_buildx_a_plan_needs():
    three, two = ["linux/amd64", "linux/arm64", "linux/riscv64"], ["linux/amd64", "linux/arm64"]
    assert buildx_needed(_plan({"a": {"platforms": three}, "b": {"platforms": three, "contexts": {"base": "target:a"}}})) is None
    assert buildx_needed(_plan({"a": {"platforms": three}, "b": {"platforms": ["linux/amd64"],
                                                                "contexts": {"base": "target:a"}}})) is None
    fewer = buildx_needed(_plan({"a": {"platforms": three}, "b": {"platforms": two, "contexts": {"base": "target:a"}}}))
    assert fewer == ((0, 20), "target 'b' (linux/amd64, linux/arm64) builds on target 'a' (linux/amd64, linux/arm64, "
                              "linux/riscv64), which buildx before 0.20 refuses for differing platforms "
                              "(docker/buildx#2877); or build one platform per job with --platform")
    twice = buildx_needed(_plan({"a": {"platforms": two}, "b": {"platforms": two, "contexts": {
        "base": "target:a", "also": "target:a", "image": "docker-image://x"}}}))
    assert twice == ((0, 15), "target 'b' has 2 contexts on target 'a' (base, also), which buildx before 0.15 does "
                              "not resolve (docker/buildx#2444)")
    plan = _plan({"a": {"platforms": three}, "b": {"platforms": two, "contexts": {"base": "target:a", "x": "target:a"}}})
    assert buildx_needed(plan)[0] == (0, 20)  # the newest of what is needed
    with pytest.raises(BuildxTooOld, match=r"^buildx 0\.19\.3 cannot build this plan, buildx 0\.20 or newer can: "):
        require_buildx(plan, (0, 19, 3))
    require_buildx(plan, (0, 20, 0))
    require_buildx(plan, None)  # a version that cannot be told: buildx speaks for itself


OLDER_BUILDX_FAMILY = """
import os
from bake import Stage, hookimpl
HERE = os.path.dirname(__file__)
# COPY only: any platform builds without emulation.
@hookimpl
def bake_plan_stages():
    return [
        Stage(registry="ghcr.io/nvidia", name="ob-root", image="ob-root", kind="single", context=HERE,
              platforms=("linux/amd64", "linux/arm64", "linux/riscv64"),
              dockerfile_inline="FROM scratch\\nCOPY {module}.py /root.py\\n"),
        Stage(registry="ghcr.io/nvidia", name="ob-fewer", image="ob-fewer", kind="single", context=HERE, parent="ob-root",
              platforms=("linux/amd64", "linux/arm64"),
              dockerfile_inline="FROM base\\nCOPY {module}.py /fewer.py\\n"),
        Stage(registry="ghcr.io/nvidia", name="ob-twice", image="ob-twice", kind="single", context=HERE, parent="ob-root",
              uses={{"also": "ob-root"}}, platforms=("linux/amd64", "linux/arm64", "linux/riscv64"),
              dockerfile_inline="FROM base\\nCOPY --from=also /root.py /also.py\\n"),
    ]
"""

OLD_SAYS = {
    "ob-fewer": "bake-plan: error: buildx 0.13.1 cannot build this plan, buildx 0.20 or newer can: target 'ob-fewer' "
                "(linux/amd64, linux/arm64) builds on target 'ob-root' (linux/amd64, linux/arm64, linux/riscv64), "
                "which buildx before 0.20 refuses for differing platforms (docker/buildx#2877); or build one "
                "platform per job with --platform",
    "ob-twice": "bake-plan: error: buildx 0.13.1 cannot build this plan, buildx 0.15 or newer can: target 'ob-twice' "
                "has 2 contexts on target 'ob-root' (base, also), which buildx before 0.15 does not resolve "
                "(docker/buildx#2444)",
}
BUILDX_SAYS = {
    "ob-fewer": r"target ob-root can't be used by ob-fewer because it is defined for different platforms",
    # buildx 0.13 resolves one of the two, whichever its map gives first (docker/buildx#2444)
    "ob-twice": r"unsupported context source target for (base|also)",
}


@pytest.fixture
def older_family(make_plugin, tmp_path):
    site = make_plugin("")
    module = next(p.stem for p in site.glob("bake_plan_test_plugin_*.py"))
    (site / f"{module}.py").write_text(OLDER_BUILDX_FAMILY.format(module=module))
    return site


@pytest.mark.engine
@pytest.mark.parametrize("target", ["ob-fewer", "ob-twice"])
def test_older_buildx_is_told_before_building_what_it_cannot_build(cli, engine, older_family, tmp_path, target):
    """buildx 0.13 fails on these plans with its own words (shown first, on the plan bake-plan
    writes); `bake-plan build` says instead, before building, which buildx is needed (exit 2); the
    current buildx builds them; and one platform per job builds on 0.13 too."""
    common = ["--target", target, "--registry", f"{engine.registry}/ob{uuid.uuid4().hex[:8]}", "--date",
              DATE.isoformat()]
    old = _env(older_family, tmp_path, "old")
    cli("plan", *common, "--format", "json", "-o", "plan.json", cwd=tmp_path, env=old, check=True)
    raw = subprocess.run([os.environ.get("BAKE_PLAN_BUILDX_OLD", OLD_BUILDX_DEFAULT), "bake", "-f", "plan.json",
                          "--print" if target == "ob-fewer" else "default"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert raw.returncode != 0 and re.search(BUILDX_SAYS[target], raw.stderr), raw.stderr[-2000:]

    proc = cli("build", *common, "--sitrep-dir", "old", cwd=tmp_path, env=old)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip() == OLD_SAYS[target]
    assert not (tmp_path / "old" / "sitrep.json").exists()

    proc = cli("build", *common, "--sitrep-dir", "new", cwd=tmp_path, env=_env(older_family, tmp_path, "new"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "new" / "sitrep.json").read_text())["outcome"] == "pass"

    if target == "ob-fewer":
        proc = cli("build", *common, "--platform", "linux/arm64", "--sitrep-dir", "arm64", cwd=tmp_path, env=old)
        assert proc.returncode == 0, proc.stderr[-3000:]


def test_older_buildx_plans_print_on_both_buildx_once_narrowed(older_family, cli, buildx, tmp_path):
    """The per-arch plan of a child on fewer platforms is what buildx 0.13 reads."""
    env = _env(older_family, tmp_path, "new")
    cli("plan", "--target", "ob-fewer", "--platform", "linux/amd64", "--date", DATE.isoformat(), "--format", "json",
        "-o", "plan.json", cwd=tmp_path, env=env, check=True)
    printed = buildx.print_plan(tmp_path / "plan.json", cwd=tmp_path)
    assert {n: t["platforms"] for n, t in printed["target"].items()} == {
        "ob-root": ["linux/amd64"], "ob-fewer": ["linux/amd64"]}


# --- leftovers: parent reports ----------------------------------------------------------------

def _report(tmp_path, targets: dict, name="sitrep.json"):
    path = tmp_path.parent / f"{tmp_path.name}-{name}"
    path.write_text(json.dumps({"outcome": "pass", "targets": targets}))
    return path


PER_JOB = ["--target", "jax", "--from-registry", "--registry", "localhost:5555/ns", "--format", "json", "-o", "-"]


def test_a_multi_arch_per_job_plan_refuses_a_one_arch_parent(cli, tmp_path):
    """Without --platform the plan is multi-arch: an amd64-only parent digest would be pinned for
    arm64 too."""
    report = _report(tmp_path, {"base-mealkit": {"digest": DIGEST, "platforms": ["linux/amd64"], "outcome": "pass",
                                                 "tags": ["localhost:5555/ns/base:mealkit-amd64"]}})
    proc = cli(*PER_JOB, "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == (
        f"bake-plan: error: --parent-report: {report}: target 'base-mealkit' was built for linux/amd64, not "
        "linux/arm64 (target 'te' builds on it for linux/amd64, linux/arm64: pass the report of a job that "
        "built those platforms, or give --platform)")
    proc = cli(*PER_JOB, "--platform", "linux/amd64", "--parent-report", str(report), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["target"]["jax-mealkit"]["contexts"]["base"] == \
        f"docker-image://localhost:5555/ns/base:mealkit-amd64@{DIGEST}"


def test_a_parent_report_of_another_registry_or_namespace_is_refused(cli, tmp_path):
    report = _report(tmp_path, {"base-mealkit": {"digest": DIGEST, "platforms": ["linux/amd64", "linux/arm64"],
                                                 "outcome": "pass", "tags": ["localhost:5555/other/base:mealkit"]}})
    proc = cli(*PER_JOB, "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == (
        f"bake-plan: error: --parent-report: {report}: target 'base-mealkit' was pushed to localhost:5555/other/base, "
        "not localhost:5555/ns/base (a report of another registry or namespace? give this job the same --registry)")


def test_a_buildx_metadata_file_of_another_registry_is_refused(cli, tmp_path):
    report = tmp_path.parent / f"{tmp_path.name}-metadata.json"
    report.write_text(json.dumps({"base-mealkit": {"containerimage.digest": DIGEST,
                                                   "image.name": "ghcr.io/nvidia/base:mealkit,ghcr.io/nvidia/base:x"}}))
    proc = cli(*PER_JOB, "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, "was pushed to ghcr.io/nvidia/base, not localhost:5555/ns/base", cwd=tmp_path)


def test_a_parent_report_whose_parent_failed_is_refused(cli, tmp_path):
    report = _report(tmp_path, {"base-mealkit": {"digest": None, "platforms": ["linux/amd64"], "outcome": "fail",
                                                 "tags": ["localhost:5555/ns/base:mealkit-amd64"]}})
    proc = cli(*PER_JOB, "--platform", "linux/amd64", "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == (
        f"bake-plan: error: --parent-report: {report}: target 'base-mealkit' did not pass in that job (outcome "
        "'fail'), so it pushed no image to build on: rerun that job first")


def test_a_parent_report_without_from_registry_is_refused(cli, tmp_path):
    report = _report(tmp_path, {"base-mealkit": {"digest": DIGEST}})
    proc = cli("--target", "jax", "--parent-report", str(report), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == ("bake-plan: error: --parent-report is only read in per-job mode: add "
                                   "--from-registry (or drop --parent-report)")


# --- leftovers: registries, dates, secret paths -----------------------------------------------

@pytest.mark.parametrize("option, value, says", [
    ("--registry", "UPPER/x", "--registry: registry 'UPPER/x' has upper-case letters: write host and namespace in "
                              "lower case"),
    ("--registry", "Ghcr.io/nvidia", "--registry: registry 'Ghcr.io/nvidia' has upper-case letters: write host and "
                                     "namespace in lower case"),
    ("--registry", "localhost:65536/x", "--registry: registry 'localhost:65536/x': port 65536 is not 1 to 65535"),
    ("--registry", "localhost:0", "--registry: registry 'localhost:0': port 0 is not 1 to 65535"),
    ("--base-image", "busybox=localhost:99999/x:1", "--base-image: busybox=localhost:99999/x:1: "
                                                    "'localhost:99999/x:1': port 99999 is not 1 to 65535"),
], ids=["upper-host", "upper-domain", "port-65536", "port-0", "base-image-port"])
def test_registry_hosts_in_upper_case_or_with_impossible_ports_are_refused(cli, tmp_path, option, value, says):
    proc = cli("--target", "jax", option, value, cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == f"bake-plan: error: {says}"


@pytest.mark.parametrize("day", ["0001-01-01", "1969-12-31"])
def test_a_date_before_1970_is_refused(cli, tmp_path, day):
    proc = cli("--target", "jax", "--date", day, cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.strip() == (f"bake-plan: error: --date: '{day}' is before 1970-01-01: its SOURCE_DATE_EPOCH "
                                   "would be negative, which builds do not take")


def test_the_first_day_of_1970_is_source_date_epoch_zero(cli, tmp_path):
    proc = cli("--target", "base", "--date", "1970-01-01", "--format", "json", "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["target"]["base"]["args"]["SOURCE_DATE_EPOCH"] == "0"


def test_a_secret_entry_is_written_by_buildx_csv_rules():
    assert SecretSpec(id="x", src="/a/plain").to_bake() == "id=x,src=/a/plain"
    assert SecretSpec(id="x", src='/a/with"quote').to_bake() == 'id=x,"src=/a/with""quote"'
    assert SecretSpec(id="x", env="VAR").to_bake() == "id=x,env=VAR"


@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_a_secret_path_with_a_quote_reads_back_in_buildx(cli, buildx_new, tmp_path, fmt):
    """buildx 0.19+ parses the entry when printing (0.13 prints it as written; its build parses
    it: the engine test below)."""
    src = tmp_path / 'with"quote'
    src.mkdir()
    (src / "file").write_text("not a real secret\n")
    out = tmp_path / f"plan.{fmt}"
    cli("--target", "base", "--secret", f"id=x,src={src}/file", "--format", fmt, "-o", str(out), cwd=tmp_path,
        check=True)
    printed = buildx_new.print_plan(out, ["base-mealkit"], cwd=tmp_path)
    assert printed["target"]["base-mealkit"]["secret"] == [{"id": "x", "src": f"{src}/file"}]


@pytest.mark.engine
@pytest.mark.parametrize("which", ["new", "old"])
def test_a_secret_from_a_path_with_a_quote_is_mounted_in_a_real_build(cli, engine, make_plugin, tmp_path, which):
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="quoted-secret", image="quoted-secret", kind="single", context=os.path.dirname(__file__),
                  platforms=("linux/amd64",), base_image="{engine.registry}/{STAND_IN}",
                  dockerfile_inline="ARG BASE_IMAGE\\nFROM ${{BASE_IMAGE}}\\nARG NONCE\\n"
                                    "RUN --mount=type=secret,id=x,required=true test \\"$(cat /run/secrets/x)\\" = q-value"
                                    " && echo $NONCE > /nonce\\n",
                  args={{"NONCE": "{uuid.uuid4().hex}"}})]
""")
    src = tmp_path / 'dir"with"quotes'
    src.mkdir()
    (src / "file").write_text("q-value")
    proc = cli("build", "--target", "quoted-secret", "--registry", f"{engine.registry}/qs{uuid.uuid4().hex[:8]}",
               "--date", DATE.isoformat(), "--secret", f"id=x,src={src}/file", "--sitrep-dir", "sitrep",
               cwd=tmp_path, env=_env(site, tmp_path, which))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "sitrep" / "sitrep.json").read_text())["outcome"] == "pass"


def test_a_pushed_parent_is_not_hidden_by_another_report_that_failed_it(cli, tmp_path):
    """CI passes every report of earlier waves (docs/ci.md); the one that pushed the parent counts."""
    entry = {"platforms": ["linux/amd64"], "tags": ["localhost:5555/ns/base:mealkit-amd64"]}
    pushed = _report(tmp_path, {"base-mealkit": dict(entry, digest=DIGEST, outcome="pass")}, "pushed.json")
    failed = _report(tmp_path, {"base-mealkit": dict(entry, digest=None, outcome="fail")}, "failed.json")
    for order in ((pushed, failed), (failed, pushed)):
        args = [a for r in order for a in ("--parent-report", str(r))]
        proc = cli(*PER_JOB, "--platform", "linux/amd64", *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["target"]["jax-mealkit"]["contexts"]["base"].endswith("@" + DIGEST)


@pytest.mark.parametrize("original", ["base", "docker.io/library/base:latest", "mealkit:latest"])
def test_a_base_image_that_is_a_stage_context_is_refused(cli, tmp_path, original):
    """The frontend looks `docker.io/library/base:latest` up as `base`: the parent's context."""
    proc = cli("--target", "jax", "--base-image", f"{original}=a.example/x:1", cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    key = context_name(original)
    stage = "base" if key == "mealkit" else "te"  # the first target of the chain to set it
    assert proc.stderr.strip() == (
        f"bake-plan: error: base image '{original}=a.example/x:1': Dockerfiles look '{original}' up as the named "
        f"context '{key}', which stage '{stage}' (plugin '{stage}') already sets; it would be replaced")


_COMPONENT = st.builds("".join, st.lists(st.sampled_from("ab09"), min_size=1, max_size=4)).flatmap(
    lambda head: st.sampled_from([head, head + ".x", head + "_1", head + "-y"]))


@st.composite
def _references(draw):
    domain = draw(st.sampled_from(["", "docker.io/", "index.docker.io/", "localhost:5555/", "ghcr.io/"]))
    path = "/".join(draw(st.lists(_COMPONENT, min_size=1, max_size=3)))
    tag = draw(st.one_of(st.none(), st.just("latest"), st.sampled_from(["1.0", "V2_rc-1", "_x"])))
    digest = draw(st.one_of(st.none(), st.just(DIGEST)))
    return domain + path + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


@settings(max_examples=200, deadline=None, database=None)
@given(_references())
def test_normalised_names_and_context_keys_are_one_per_image(ref):
    """Every spelling of an image normalises to one name and one context key, and the key is itself a
    spelling of that image."""
    image = normalise_reference(ref)
    assert normalise_reference(image) == image
    assert context_name(image) == context_name(ref)
    key = context_name(ref)
    if "/" not in key or not any(c in key.split("/", 1)[0] for c in ".:"):
        # (distribution's familiar name of docker.io/a.b/c is a.b/c, which reads as host a.b: BuildKit's too)
        assert normalise_reference(key) == image
    if image.startswith("docker.io/library/") and image.count("/") == 2:
        short = image[len("docker.io/library/"):]
        for spelling in (short, "library/" + short, "index.docker.io/library/" + short):
            assert normalise_reference(spelling) == image
