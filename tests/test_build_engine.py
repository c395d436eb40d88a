"""``bake-plan build`` on the real engine and registry: a third-party family root → mid → leaf,
built offline from a wheelhouse made here, pushed, and checked inside the images; a failing stage;
and BuildKit's own checks on every built-in Dockerfile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from conftest import hermetic_pip_env, make_wheel

pytestmark = pytest.mark.engine

DATE = "2026-11-29"
STAND_IN_PYTHON = "stand-in/python:bookworm"
FAMILY_BASE = "python:3.11-slim-bookworm"


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory):
    """Wheels the family installs, made on the host: ``alpha`` 1.0 and 2.0, ``beta`` (needs
    alpha), pip-tools and what it needs; ``gamma`` (a local wheel) goes to its own directory. The
    family's own wheels are written as zips (:func:`conftest.make_wheel`), not built: no build
    backend runs."""
    root = tmp_path_factory.mktemp("wheels")
    house, local = root / "wheelhouse", root / "local-wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(pip + ["download", "--quiet", "--dest", str(house), "pip-tools==7.4.1", "pip>=22.2,<25.3",
                          "setuptools>=61", "wheel"], check=True, timeout=600)
    for name, version, deps, dest in [("alpha", "1.0", (), house), ("alpha", "2.0", (), house),
                                      ("beta", "1.0", ("alpha",), house), ("gamma", "1.0", (), local)]:
        make_wheel(dest, name, version, requires=deps)
    return house, local


@pytest.fixture
def family_env(wheelhouse, family_site):
    house, local = wheelhouse
    env = dict(os.environ, BAKE_PLAN_TESTFAMILY_WHEELHOUSE=str(house), BAKE_PLAN_TESTFAMILY_LOCAL_WHEELS=str(local),
               PYTHONPATH=str(family_site))
    return env


def _build(cli, engine, env, target, tmp_path, *extra):
    namespace = f"{engine.registry}/t{uuid.uuid4().hex[:8]}"
    proc = cli("build", "--target", target, "--push", "--registry", namespace, "--date", DATE,
               "--base-image", f"{FAMILY_BASE}={engine.registry}/{STAND_IN_PYTHON}",
               "--sitrep-dir", str(tmp_path / "sitrep"), *extra, cwd=tmp_path, env=env)
    sitrep = json.loads((tmp_path / "sitrep" / "sitrep.json").read_text()) if (tmp_path / "sitrep" / "sitrep.json").exists() else None
    return proc, namespace, sitrep


def _requirements(lines):
    """Requirement lines without comments, options and pip's own tools, in one comparable form:
    ``name==version``, ``name @ url``, or ``-e /path``."""
    out = set()
    for line in lines:
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#") or (line.startswith("--") and not line.startswith("-e")):
            continue
        if line.startswith("-e "):
            out.add("-e " + line[3:].strip().removeprefix("file://"))
            continue
        name = line.split("==")[0].split(" @ ")[0].strip().lower().replace("_", "-")
        if name in ("pip", "setuptools", "wheel", "distribute"):
            continue
        out.add(line)
    return out


def test_family_build_push_installs_each_package_once(cli, engine, family_env, tmp_path):
    proc, ns, sitrep = _build(cli, engine, family_env, "tf-leaf", tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sitrep["outcome"] == "pass", sitrep["summary"]

    # Every image of the chain and every tag is in the registry.
    expected = {"tf-root": ["latest", f"nightly-{DATE}", "mealkit", f"mealkit-{DATE}"]}
    expected["tf-mid"] = expected["tf-leaf"] = expected["tf-root"]
    for image, tags in expected.items():
        assert sorted(set(tags) - set(engine.tags(f"{ns}/{image}"))) == [], image
    for name, target in sitrep["targets"].items():
        assert target["outcome"] == "pass", name
        assert target["digest"].startswith("sha256:"), name
        assert target["tags"], name
        assert target["duration_s"] > 0 and target["steps_run"] >= 0 and target["steps_cached"] >= 0, name
    # A fresh namespace means a fresh cache: the leaf's own steps ran.
    assert sitrep["targets"]["tf-leaf"]["steps_run"] + sitrep["targets"]["tf-leaf-mealkit"]["steps_run"] > 0

    # The leaf's environment is exactly its compiled lock, with the pin only the leaf adds.
    leaf = f"{ns}/tf-leaf:latest"
    lock = engine.docker("run", "--rm", leaf, "cat", "/opt/pip-tools.d/requirements.txt").stdout.splitlines()
    freeze = engine.docker("run", "--rm", leaf, "pip", "freeze").stdout.splitlines()
    assert _requirements(freeze) == _requirements(lock)
    assert "alpha==1.0" in _requirements(lock)
    assert "-e /opt/delta" in _requirements(lock)
    assert any(line.startswith("gamma @ file:///opt/wheels/gamma-1.0") for line in _requirements(lock))
    ins = engine.docker("run", "--rm", leaf, "ls", "/opt/pip-tools.d").stdout.split()
    assert {"requirements-base.in", "requirements-tf-mid.in", "requirements-tf-leaf.in"} <= set(ins)
    # Without the leaf's pin, mid resolves the newest alpha.
    mid_freeze = engine.docker("run", "--rm", f"{ns}/tf-mid:latest", "pip", "freeze").stdout.splitlines()
    assert "alpha==2.0" in mid_freeze

    # No distribution is installed twice anywhere on the leaf's Python path.
    names = json.loads(engine.docker(
        "run", "--rm", leaf, "python", "-c",
        "import importlib.metadata as m, json; print(json.dumps([d.metadata['Name'].lower() for d in m.distributions()]))",
    ).stdout)
    assert len(names) == len(set(names)), names

    # The leaf's meal kit is built on mid's meal kit: mid's layers are the leaf's first layers.
    def layers(ref):
        engine.docker("pull", "--quiet", ref)
        return json.loads(engine.docker("image", "inspect", "-f", "{{json .RootFS.Layers}}", ref).stdout)

    mid_layers, leaf_layers = layers(f"{ns}/tf-mid:mealkit"), layers(f"{ns}/tf-leaf:mealkit")
    assert leaf_layers[: len(mid_layers)] == mid_layers and len(leaf_layers) > len(mid_layers)

    badge = json.loads((tmp_path / "sitrep" / "badge.json").read_text())
    assert badge == {"schemaVersion": 1, "label": "tf-leaf build", "message": "pass", "color": "brightgreen"}
    assert "tf-leaf-mealkit" in (tmp_path / "sitrep" / "sitrep.md").read_text()


def test_locked_build_installs_exactly_the_lock(cli, engine, wheelhouse, family_env, tmp_path):
    house, _ = wheelhouse
    # The lock, compiled on the host from the stages' lines (tf-mid's wheel and tf-leaf's editable
    # source through their host_paths), against the same wheelhouse the images install from.
    proc = cli("lock", "--target", "tf-leaf", "--no-index", "--find-links", str(house), cwd=tmp_path,
               env=hermetic_pip_env(family_env))
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "tf-leaf.txt").read_text()
    assert "alpha==1.0" in lock.splitlines() and "-e file:///opt/delta" in lock.splitlines()

    proc, ns, sitrep = _build(cli, engine, family_env, "tf-leaf", tmp_path, "--locked")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sitrep["outcome"] == "pass", sitrep["summary"]
    leaf = f"{ns}/tf-leaf:latest"
    freeze = engine.docker("run", "--rm", leaf, "pip", "freeze").stdout.splitlines()
    assert sorted(_requirements(freeze)) == sorted(_requirements(lock.splitlines()))
    assert len(_requirements(freeze)) == 4
    # The final stage synced to the lock as is: it is in the image, and nothing was compiled.
    listing = engine.docker("run", "--rm", leaf, "ls", "/opt/pip-tools.d").stdout.split()
    assert "requirements.txt" not in listing
    assert engine.docker("run", "--rm", leaf, "cat", "/opt/pip-tools.d/requirements.lock").stdout == lock


def test_failing_stage_fails_the_build_and_the_sitrep_names_it(cli, engine, family_env, tmp_path):
    proc, ns, sitrep = _build(cli, engine, family_env, "tf-broken", tmp_path, "--metadata-file", "m/n/meta.json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    # buildx writes no metadata file for a failed bake: the directory made for it is not left behind
    assert not (tmp_path / "m").exists()
    assert sitrep["outcome"] == "fail"
    assert sitrep["targets"]["tf-broken-mealkit"]["outcome"] == "fail"
    assert "tf-broken-mealkit" in sitrep["summary"]
    assert json.loads((tmp_path / "sitrep" / "badge.json").read_text())["message"] == "fail"
    assert "tf-broken-mealkit" in (tmp_path / "sitrep" / "sitrep.md").read_text()
    assert "Traceback" not in proc.stderr


def test_build_without_an_engine_is_one_line(cli, tmp_path):
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-such.sock")
    proc = cli("build", "--target", "jax", cwd=tmp_path, env=env)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"bake-plan: error: cannot reach a Docker engine at unix://{tmp_path}/no-such.sock: "), last
    assert "Cannot connect to the Docker daemon" in last, "the docker CLI's own reason follows"
    assert "Traceback" not in proc.stderr


# Where the docker CLI looks for plugins besides $DOCKER_CONFIG/cli-plugins (docker/cli's
# pluginmanager defaults on Linux).
SYSTEM_PLUGIN_DIRS = ["/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
                      "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins"]


def _without_buildx(cli, tmp_path, *args):
    """Run bake-plan with a docker CLI that finds no buildx: its plugin directories hidden under
    empty ones in a mount namespace of its own (``unshare --mount``, root only), the real CLI."""
    empty = tmp_path / "no-plugins"
    (empty / "config").mkdir(parents=True)
    masks = " ".join(f'[ -d {d} ] && mount --bind {empty} {d};' for d in SYSTEM_PLUGIN_DIRS)
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unshare --mount needs root")
    from conftest import console_script

    env = dict(os.environ, DOCKER_CONFIG=str(empty / "config"))
    return subprocess.run(["unshare", "--mount", "sh", "-c", f'{masks} exec "$@"', "sh", str(console_script()), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ["build", "--target", "jax", "--sitrep-dir", "s/r", "-v"],
    ["build", "--target", "jax", "--builder", "default"],
    ["build", "--target", "jax", "--dry-run"],
    ["publish", "--target", "jax"],
])
def test_a_docker_cli_without_buildx_is_one_line_exit_2(cli, engine, tmp_path, args):
    """The docker CLI answers but has no buildx: one line saying so, exit 2, not a failed build of
    every target in docker's own "Run 'docker --help'" (``bake.run.engine.NO_BUILDX``)."""
    from bake.run.engine import NO_BUILDX

    proc = _without_buildx(cli, tmp_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"bake-plan: error: {NO_BUILDX}"
    assert "Traceback" not in proc.stderr and "docker --help" not in proc.stderr
    assert not (tmp_path / "s").exists()  # no sitrep of a build that never started
    assert "running: docker buildx bake" not in proc.stderr, "found missing before the bake is run"
    assert subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode == 0, "hidden only in there"


BUILTIN_BASES = [
    "nvidia/cuda:12.2.0-devel-ubuntu22.04",
    "us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/development:3.8_cuda_12.1",
]


def test_every_builtin_dockerfile_passes_buildkit_checks(cli, engine, buildx_new, tmp_path):
    stand_in = f"{engine.registry}/{STAND_IN_PYTHON}"
    args = ["--format", "json", "-o", "plan.json"]
    for base in BUILTIN_BASES:
        args += ["--base-image", f"{base}={stand_in}"]
    cli("--target", "upstream-pax", "--target", "upstream-t5x", "--target", "xla-ci", *args, cwd=tmp_path, check=True)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert set(plan["target"]) >= {"base-mealkit", "base", "te", "jax-mealkit", "jax", "upstream-t5x-mealkit",
                                   "upstream-t5x", "upstream-pax-mealkit", "upstream-pax", "xla-ci"}
    # --call=check cannot follow `target:` contexts ("unsupported context source target"), so each
    # target is checked on its own with the stand-in in their place; external bases are already
    # stood in by --base-image through the plan itself.
    for target in plan["target"].values():
        for name, value in target.get("contexts", {}).items():
            if value.startswith("target:"):
                target["contexts"][name] = f"docker-image://{stand_in}"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = subprocess.run(["docker", "buildx", "bake", "-f", "plan.json", "--call=check"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, BUILDX_BAKE_ENTITLEMENTS_FS="0"))
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "warning" not in output.lower().replace("no warnings found", ""), output
    assert output.count("Check complete, no warnings found.") == len(plan["target"]), output
