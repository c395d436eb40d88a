"""The written CI workflow's steps, run against the test engine: the ``run:`` steps of its jobs
for a two-wave family (``mx-root`` → ``mx-leaf``, amd64 and arm64, arm64 under emulation), job by
job in the order of their ``needs`` (each builds, pushes, runs the image tests into its sitrep and
uploads it), then its publish job, gated on every sitrep; the registry on ``localhost:5555``
stands in for ``ghcr.io``.

What GitHub's actions do between the steps is done here by hand, from what the workflow says:
checkout is a copy of the repository, download-artifact copies the artifacts its ``pattern``
matches under its ``path``, upload-artifact keeps its ``path`` under its ``name``; setup-qemu,
setup-buildx and login have nothing to do on the test engine. ``pip install REQUIREMENT .`` is
skipped (bake-plan and the family are installed already).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from test_ci_workflow import generate

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow (pip install '.[test]')")

pytestmark = pytest.mark.engine


OWNER = "Acme-Labs"  # a GitHub owner with capitals


def expand(value: str, env: dict, outputs: dict) -> str:
    """The ``${{ }}`` the written jobs use outside login: ``env.X``, ``needs.plan.outputs.X``,
    ``github.repository_owner``."""
    def one(match):
        expr = match.group(1).strip()
        if expr.startswith("env."):
            return env[expr[4:]]
        if expr.startswith("needs.plan.outputs."):
            return outputs[expr[len("needs.plan.outputs."):]]
        if expr == "github.repository_owner":
            return OWNER
        raise AssertionError(f"an expression this test does not know: {expr}")
    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def condition(expr: str, env: dict, results: dict = None) -> bool:
    """The ``if:`` forms the written jobs use, in a run nobody cancels; ``results``: job id →
    ``success``/``failure`` of the jobs done."""
    expr = re.sub(r"^\$\{\{(.*)\}\}$", r"\1", expr).strip()
    if expr == "!cancelled()":
        return True
    match = re.fullmatch(r"!cancelled\(\) && needs\.(\w+)\.result == '(\w+)'", expr)
    if match:
        return (results or {}).get(match.group(1)) == match.group(2)
    match = re.fullmatch(r"env\.(\w+) (==|!=) '([^']*)'", expr)
    assert match, f"an if: this test does not know: {expr}"
    name, op, value = match.groups()
    return (env[name] == value) == (op == "==")


def run_job(job: dict, repo: Path, work: Path, artifacts: dict, outputs: dict, base_env: dict) -> dict:
    """Run one job's steps in a fresh checkout ``work``; returns the ``$GITHUB_OUTPUT`` it wrote."""
    shutil.copytree(repo, work)
    github_output = work.parent / f"{work.name}.output"
    github_output.touch()
    env = dict(base_env, GITHUB_OUTPUT=str(github_output))
    env.update({k: expand(str(v), env, outputs) for k, v in job.get("env", {}).items()})
    for step in job["steps"]:
        if "if" in step and not condition(step["if"], env):
            continue
        step_env = dict(env, **{k: expand(str(v), env, outputs) for k, v in step.get("env", {}).items()})
        action = step.get("uses", "").split("@")[0]
        if action in ("docker/login-action", "docker/setup-buildx-action", "docker/setup-qemu-action"):
            continue  # the test engine has buildx and arm64 emulation, its registry no login
        given = {k: expand(str(v), env, outputs) for k, v in step.get("with", {}).items()}
        if action == "actions/download-artifact":
            for name, path in artifacts.items():
                if fnmatch.fnmatchcase(name, given["pattern"]):
                    shutil.copytree(path, work / given["path"] / name)
        elif action == "actions/upload-artifact":
            artifacts[given["name"]] = work / given["path"]
        elif "run" in step and not step["run"].startswith("pip install "):  # bake-plan's requirement, then .
            proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=work, env=step_env, capture_output=True,
                                  text=True, timeout=900)
            assert proc.returncode == 0, f"{job.get('name')}: {step['run']}\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
    return dict(line.split("=", 1) for line in github_output.read_text().splitlines() if "=" in line)


def test_the_workflow_steps_build_each_job_on_its_parents_and_publish(cli, engine, family_site, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    # The stand-in for busybox:1.36 (no Docker Hub here), as a user's configuration would say it.
    (repo / "bake-plan.toml").write_text(
        f'base-images = {{ "busybox:1.36" = "{engine.registry}/stand-in/busybox:latest" }}\n', encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(family_site), BAKE_PLAN_TESTFAMILY_LEAF_INPUT=uuid.uuid4().hex)
    workflow = yaml.safe_load(generate(cli, repo, "--target", "mx-leaf", env=env))
    jobs = workflow["jobs"]

    outputs = run_job(jobs["plan"], repo, tmp_path / "plan", {}, {}, env)
    assert outputs["registry"] == "ghcr.io/acme-labs"
    namespace = f"{engine.registry}/ci{uuid.uuid4().hex[:8]}"
    outputs["registry"] = namespace  # the test registry stands in for ghcr.io

    artifacts: dict = {}
    done: set = {"plan"}
    builds = [name for name in jobs if name.startswith("build-")]
    for name in builds:  # the file lists them in wave order: each one's needs are done
        assert set(jobs[name]["needs"]) <= done, name
        run_job(jobs[name], repo, tmp_path / name, artifacts, outputs, env)
        done.add(name)
    assert sorted(artifacts) == ["sitrep-mx-leaf-amd64", "sitrep-mx-leaf-arm64",
                                 "sitrep-mx-root-amd64", "sitrep-mx-root-arm64"]

    for arch in ("amd64", "arm64"):
        root = json.loads((artifacts[f"sitrep-mx-root-{arch}"] / "sitrep.json").read_text())
        leaf = json.loads((artifacts[f"sitrep-mx-leaf-{arch}"] / "sitrep.json").read_text())
        assert root["outcome"] == leaf["outcome"] == "pass"
        # each job built its own stage only: the leaf's job took the root's meal kit from the registry
        assert set(root["targets"]) == {"mx-root-mealkit", "mx-root"}
        assert set(leaf["targets"]) == {"mx-leaf-mealkit", "mx-leaf"}
        for image in ("mx-root", "mx-leaf"):
            assert {f"latest-{arch}", f"mealkit-{outputs['date']}-{arch}"} <= set(engine.tags(f"{namespace}/{image}"))
        # the leaf's job built on the root's meal kit pinned by the digest the root's job reported
        digest = root["targets"]["mx-root-mealkit"]["digest"]
        plan = (tmp_path / f"build-mx-leaf-{arch}" / "docker-bake.hcl").read_text(encoding="utf-8")
        assert f"docker-image://{namespace}/mx-root:mealkit-{arch}@{digest}" in plan

        # the job ran the stage's image tests on the image it pushed, into the sitrep it uploaded
        for sitrep in (root, leaf):
            assert isinstance(sitrep.get("tests"), dict) and sitrep["tests"]["results"] == [], sitrep.get("tests")
            assert (artifacts[f"sitrep-mx-root-{arch}"] / "tests-badge.json").is_file()

    publish = jobs["publish"]
    assert condition(publish["if"], {}, {"plan": "success"})
    assert not condition(publish["if"], {}, {"plan": "failure"})
    assert publish["steps"][-1]["run"].endswith(" --sitrep sitreps --all-or-nothing")
    run_job(publish, repo, tmp_path / "publish", artifacts, outputs, env)
    # every job's sitrep, one directory per artifact, as download-artifact leaves them
    assert sorted(p.parent.name for p in (tmp_path / "publish" / "sitreps").glob("*/sitrep.json")) == sorted(artifacts)
    for image in ("mx-root", "mx-leaf"):
        for tag in ("latest", f"nightly-{outputs['date']}", "mealkit", f"mealkit-{outputs['date']}"):
            raw = json.loads(engine.docker("buildx", "imagetools", "inspect", "--raw",
                                           f"{namespace}/{image}:{tag}").stdout)
            platforms = sorted(f"{m['platform']['os']}/{m['platform']['architecture']}" for m in raw["manifests"]
                               if m.get("platform", {}).get("os") != "unknown")
            assert platforms == ["linux/amd64", "linux/arm64"], (image, tag)
            if tag.startswith(("nightly-", "mealkit-")):  # the gate decided: every sitrep passed
                assert raw["annotations"]["org.bake-plan.gate"] == "pass", (image, tag)
