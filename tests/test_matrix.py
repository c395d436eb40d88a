"""``bake-plan matrix``: one job per published stage and arch, in waves where every job's inputs
were built by an earlier wave; and the cache refs of branch builds."""

from __future__ import annotations

import datetime
import json

from bake.api import make_plan
from bake.plan.compose import PlanOptions


def test_matrix_for_upstream_pax_lists_each_job_once_in_dependency_waves(cli, tmp_path):
    out = cli("matrix", "--target", "upstream-pax", "--format", "github", cwd=tmp_path, check=True).stdout
    assert out.count("\n") == 1  # one line, for $GITHUB_OUTPUT
    jobs = json.loads(out)["include"]
    ids = [j["id"] for j in jobs]
    assert len(ids) == len(set(ids))
    assert set(ids) == {f"{s}/{a}" for s in ("base", "jax", "upstream-pax") for a in ("amd64", "arm64")}
    wave_of = {j["id"]: j["wave"] for j in jobs}
    for job in jobs:
        for need in job["needs"]:
            assert wave_of[need] < job["wave"], (job, need)
    assert [j["wave"] for j in jobs] == sorted(j["wave"] for j in jobs)
    jax = next(j for j in jobs if j["id"] == "jax/arm64")
    assert jax == {"id": "jax/arm64", "stage": "jax", "platform": "linux/arm64", "arch": "arm64", "wave": 1,
                   "needs": ["base/arm64"]}  # te, unpublished, is built inside the jax job


def test_matrix_wave_filter(cli, tmp_path):
    out = cli("matrix", "--target", "upstream-pax", "--wave", "2", "--format", "json", cwd=tmp_path, check=True).stdout
    assert {j["id"] for j in json.loads(out)["include"]} == {"upstream-pax/amd64", "upstream-pax/arm64"}


def test_branch_caches_write_their_own_ref_and_read_the_default_branch():
    plan = make_plan(PlanOptions(targets=("jax",), date=datetime.date(2026, 11, 29), platforms=("linux/arm64",),
                                 cache_branch="feature/x", cache_from_branch="main")).plan
    target = plan["target"]["jax-mealkit"]
    repo = "ghcr.io/nvidia"
    assert target["cache-to"] == [
        f"type=registry,ref={repo}/jax:cache-silo-jax-mealkit-arm64-feature-x,mode=max,ignore-error=true"]
    assert target["cache-from"] == [
        f"type=registry,ref={repo}/jax:cache-silo-jax-mealkit-arm64-feature-x",
        f"type=registry,ref={repo}/jax:cache-silo-jax-mealkit-arm64-main",
        f"type=registry,ref={repo}/base:cache-silo-base-mealkit-arm64-feature-x",
        f"type=registry,ref={repo}/base:cache-silo-base-mealkit-arm64-main",
    ]
