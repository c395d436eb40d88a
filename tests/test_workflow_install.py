"""The generated workflow installs bake-plan from a requirement that installs: the configuration's
``install``, else how the bake-plan writing it was installed (the direct URL pip recorded, PEP 610,
or its version), shell-quoted in the ``run:`` step; ``--check`` agrees with the file it wrote."""

import json
import shlex
import subprocess

import pytest
import yaml

from bake import version

GIT = {"url": "https://github.com/acme/bake-plan", "vcs_info": {"vcs": "git", "commit_id": "a" * 40,
                                                              "requested_revision": "v0.2"}}


class _Dist:
    def __init__(self, recorded):
        self.recorded = recorded

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.recorded is None else json.dumps(self.recorded)


@pytest.mark.parametrize("recorded, requirement", [
    (GIT, "bake-plan @ git+https://github.com/acme/bake-plan@v0.2"),
    ({**GIT, "vcs_info": {"vcs": "git", "commit_id": "b" * 40}}, f"bake-plan @ git+https://github.com/acme/bake-plan@{'b' * 40}"),
    ({**GIT, "subdirectory": "tool"}, "bake-plan @ git+https://github.com/acme/bake-plan@v0.2#subdirectory=tool"),
    ({"url": "https://files.example/bake_plan-0.2.tar.gz", "archive_info": {}},
     "bake-plan @ https://files.example/bake_plan-0.2.tar.gz"),
    ({"url": "file:///work/bake-plan", "dir_info": {"editable": True}}, f"bake-plan=={version.__version__}"),
    (None, f"bake-plan=={version.__version__}"),  # from an index: no direct_url.json
])
def test_the_default_is_how_this_bake_plan_was_installed(monkeypatch, recorded, requirement):
    from importlib import metadata

    monkeypatch.setattr(metadata, "distribution", lambda name: _Dist(recorded))
    assert version.install_requirement() == requirement


def _workflow(cli, repo, *extra):
    proc = cli("matrix", "--target", "jax", "--format", "github-workflow", "-o", ".github/workflows/nightly.yml",
               *extra, cwd=repo)
    return proc


@pytest.fixture
def repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    return tmp_path


def _install_steps(path):
    doc = yaml.safe_load(path.read_text())
    return [step["run"] for job in doc["jobs"].values() if isinstance(job.get("steps"), list)
            for step in job["steps"] if "install bake-plan" in step.get("name", "")]


def test_the_configured_requirement_is_installed_shell_quoted_and_check_agrees(cli, repo):
    requirement = "bake-plan @ git+https://github.com/acme/bake-plan@v0.2"
    (repo / "bake-plan.toml").write_text(f'install = "{requirement}"\n')
    proc = _workflow(cli, repo)
    assert proc.returncode == 0, proc.stderr
    runs = _install_steps(repo / ".github/workflows/nightly.yml")
    assert runs and set(runs) == {f"pip install {shlex.quote(requirement)} ."}
    assert shlex.split(runs[0]) == ["pip", "install", requirement, "."]
    assert _workflow(cli, repo, "--check").returncode == 0


def test_without_configuration_the_running_bake_plan_is_installed_and_check_agrees(cli, repo):
    proc = _workflow(cli, repo, "--config", "/dev/null")
    assert proc.returncode == 0, proc.stderr
    runs = _install_steps(repo / ".github/workflows/nightly.yml")
    want = version.install_requirement()
    assert set(runs) == {shlex.join(["pip", "install", want, "."])}
    assert _workflow(cli, repo, "--config", "/dev/null", "--check").returncode == 0


@pytest.mark.parametrize("value, said", [
    ("numpy==1", "names 'numpy'; it must install bake-plan"),
    ("bake-plan @", "is not a pip requirement"),
    ("bake-plan==1\\n--index-url http://evil", "one requirement line"),
])
def test_a_bad_install_requirement_names_the_key(cli, repo, value, said):
    (repo / "bake-plan.toml").write_text(f'install = "{value}"\n')
    proc = _workflow(cli, repo)
    assert proc.returncode == 2
    assert proc.stderr.startswith("bake-plan: error: bake-plan.toml: install: ") and said in proc.stderr, proc.stderr
    assert not (repo / ".github").exists()
