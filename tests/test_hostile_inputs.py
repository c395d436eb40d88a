"""Hostile text and shared state at the edges where bake-plan hands work to another program.

Each kind is closed in one place and tested here with the case that was found and one nobody
listed: text handed to git (a leading ``-`` is an option, ``ext::`` runs a command), text handed
to uv and pip (``${VAR}`` is expanded from the environment), the checkouts cache shared by
parallel ``lock`` runs.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from bake.errors import SourcesError
from bake.pip.sources import checkout, ls_remote, parse_manifest
from bake.plan.stage import Source
from bake.plan.text import expansion_fault, git_fault
from bake.resources import stages_dir

GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@localhost", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
ZERO = "0" * 40


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV, timeout=60).stdout.strip()


def one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("bake-plan: error: ") and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture
def repo(tmp_path):
    """A real repository with one commit on main, and that commit."""
    path = tmp_path / "upstream"
    path.mkdir()
    git(path, "init", "--quiet", "--initial-branch=main")
    (path / "file.txt").write_text("one\n")
    git(path, "add", "file.txt")
    git(path, "commit", "--quiet", "-m", "one")
    return path, git(path, "rev-parse", "HEAD")


# ---- text handed to git ---------------------------------------------------------------------

@pytest.mark.parametrize("value, kind, fault", [
    ("--upload-pack=touch${IFS}X;false", "ref", "starts with '-'"),
    ("-c", "ref", "starts with '-'"),
    ("--upload-pack=/tmp/evil", "url", "starts with '-'"),
    ("ext::sh -c touch% X", "url", "ext:: transport"),
    ("FD::3", "url", "fd:: transport"),
    ("main..evil", "ref", "'..'"),
    ("main@{1}", "ref", "'@{'"),
    ("refs/heads/x.lock", "ref", "'.lock'"),
    ("ma\tin", "ref", "a tab"),
])
def test_git_fault_refuses_what_git_would_read_otherwise(value, kind, fault):
    assert fault in (git_fault(value, kind) or "")


@pytest.mark.parametrize("value, kind", [
    ("main", "ref"), ("refs/heads/release", "ref"), ("v1.2", "ref"), ("pull/12/head", "ref"), ("HEAD", "ref"),
    ("a" * 40, "ref"), ("https://github.com/google/jax.git", "url"), ("git@github.com:google/jax.git", "url"),
    ("file:///tmp/x", "url"), ("ssh://git@host/x.git", "url"),
])
def test_git_fault_passes_branches_tags_commits_and_urls(value, kind):
    assert git_fault(value, kind) is None


def test_an_override_ref_git_would_run_is_refused_before_git_runs(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('[stages.jax.sources.JAX]\nref = "--upload-pack=touch${IFS}X;false"\n')
    env = dict(os.environ, BAKE_PLAN_CHECKOUTS=str(tmp_path / "checkouts"))
    proc = cli("lock", "--target", "jax", cwd=tmp_path, env=env)
    one_line_error(proc, "bake-plan.toml:stages.jax", "source 'JAX'", "ref '--upload-pack", "starts with '-'")
    assert not (tmp_path / "X").exists() and not (tmp_path / "checkouts").exists()
    assert not (tmp_path / "locks").exists()


def test_an_override_url_with_a_transport_that_runs_a_command_is_refused(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('[stages.jax.sources.JAX]\nurl = "ext::sh"\n')
    one_line_error(cli("plan", "--target", "jax", "-o", "plan.hcl", cwd=tmp_path),
                   "bake-plan.toml:stages.jax", "source 'JAX'", "url 'ext::sh'", "ext:: transport")
    assert not (tmp_path / "plan.hcl").exists()


PATCH_AS_OPTION = """
from bake import Source, Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    return [Stage(name="patched", image="patched", parent="base", context=stage_dir("jax"),
                  sources=(Source("TOOL", "https://example.com/tool.git", "a" * 40,
                                  patches=("--upload-pack=/tmp/evil.sh",)),))]
"""


def test_a_plugin_patch_git_would_read_as_an_option_is_refused(cli, make_plugin, tmp_path):
    site = make_plugin(PATCH_AS_OPTION, name="patch-option")
    one_line_error(cli("--target", "patched", cwd=tmp_path, pythonpath=[site]),
                   "plugin 'patch-option', stage 'patched'", "source 'TOOL'", "patches")


def test_the_manifest_refuses_a_url_transport_that_runs_a_command():
    text = f'[one]\nurl = "ext::/tmp/evil.sh"\ntracking_ref = "main"\ncommit = "{ZERO}"\nmode = "git-clone"\n'
    with pytest.raises(SourcesError, match=r"m.toml: \[one\]: url 'ext::/tmp/evil.sh' uses git's ext:: transport"):
        parse_manifest(text, "m.toml")


def test_git_is_never_run_on_an_option_even_by_a_library_caller(tmp_path, repo):
    path, commit = repo
    with pytest.raises(SourcesError, match="starts with '-'"):
        checkout(Source("ONE", path.as_uri(), f"--upload-pack=touch {tmp_path / 'X'}"), str(tmp_path / "dest"))
    with pytest.raises(SourcesError, match="starts with '-'"):
        ls_remote(path.as_uri(), f"--upload-pack=touch {tmp_path / 'X'}")
    assert not (tmp_path / "X").exists() and not (tmp_path / "dest").exists()


def test_the_image_fetch_script_refuses_a_ref_git_would_read_as_an_option(tmp_path, repo):
    path, _ = repo
    proc = subprocess.run(["bash", str(stages_dir() / "scripts" / "fetch-source.sh"), "--urlref",
                           f"{path.as_uri()}#--upload-pack=touch${{IFS}}{tmp_path / 'X'};false",
                           "--dest", str(tmp_path / "dest"), "--stage", "s"],
                          capture_output=True, text=True, timeout=60, env=GIT_ENV)
    assert proc.returncode == 1 and "starts with '-'" in proc.stderr, proc.stderr
    assert not (tmp_path / "X").exists() and not (tmp_path / "dest").exists()


# ---- text handed to uv and pip ----------------------------------------------------------------

def _manifest_with_fiddle_url(tmp_path, url, key="url"):
    text = (stages_dir() / "sources.toml").read_text()
    shipped = parse_manifest(text, "m")["fiddle"].url
    assert f'url = "{shipped}"' in text
    head, _, rest = text.partition("[fiddle]")
    if key == "url":
        rest = rest.replace(f'url = "{shipped}"', f'url = "{url}"', 1)
    else:
        rest = f'\n{key} = "{url}"' + rest
    path = tmp_path / "sources.toml"
    path.write_text(head + "[fiddle]" + rest)
    return path


@pytest.mark.parametrize("key, url, shown", [
    ("url", "http://h/${CI_TOKEN}/fiddle.git", "'${CI_TOKEN}'"),
    ("mirror_url", "https://mirror/$CI_TOKEN/fiddle.git", "'$CI_TOKEN'"),
])
def test_a_pip_vcs_manifest_url_uv_would_expand_is_refused(cli, tmp_path, key, url, shown):
    path = _manifest_with_fiddle_url(tmp_path, url, key)
    env = dict(os.environ, CI_TOKEN="s3cr3t-token", BAKE_PLAN_CHECKOUTS=str(tmp_path / "checkouts"))
    for args in (("lock", "--target", "upstream-pax"), ("plan", "--target", "upstream-pax", "-o", "plan.hcl")):
        proc = cli(*args, "--sources", str(path), cwd=tmp_path, env=env)
        one_line_error(proc, str(path), "[fiddle]", f"{key} holds {shown}", "uv and pip")
        assert "s3cr3t-token" not in proc.stderr + proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sources.toml"]


PIP_VCS_EXPANDED = """
from bake import Source, Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    return [Stage(name="vcs", image="vcs", parent="base", context=stage_dir("jax"),
                  sources=(Source("TOOL", "https://example.com/${CI_TOKEN}/tool.git", "a" * 40, mode="pip-vcs"),))]
"""


def test_a_plugin_pip_vcs_url_uv_would_expand_is_refused(cli, make_plugin, tmp_path):
    site = make_plugin(PIP_VCS_EXPANDED, name="vcs-expanded")
    one_line_error(cli("--target", "vcs", cwd=tmp_path, pythonpath=[site]),
                   "plugin 'vcs-expanded', stage 'vcs'", "source 'TOOL'", "'${CI_TOKEN}'")


@pytest.mark.parametrize("value", ["https://h/${X}", "https://h/$HOME/x", "https://h/${unterminated"])
def test_expansion_fault_finds_every_reference_form(value):
    assert "uv and pip" in (expansion_fault(value) or "")


@pytest.mark.parametrize("value", ["https://h/x.git", "https://h/a$/x", "https://h/$1/x", "pkg==1.0"])
def test_expansion_fault_passes_literal_text(value):
    assert expansion_fault(value) is None


# ---- the checkouts cache shared by parallel runs -----------------------------------------------

def test_parallel_checkouts_of_one_commit_into_a_shared_cache_all_succeed(tmp_path, repo):
    path, commit = repo
    dest = tmp_path / "checkouts" / f"one-{commit}"
    src = Source("ONE", path.as_uri(), commit)
    start = threading.Barrier(4)
    errors = []

    def run():
        start.wait()
        try:
            checkout(src, str(dest))
        except Exception as err:  # noqa: BLE001 - any failure of a run is the test's failure
            errors.append(err)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert git(dest, "rev-parse", "HEAD") == commit
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]  # no temporary sibling left behind


def test_a_checkout_that_loses_the_race_keeps_the_winners_and_leaves_nothing(tmp_path, repo, monkeypatch):
    """The loser's rename finds the winner's directory: deterministic, without timing."""
    path, commit = repo
    dest = tmp_path / "checkouts" / f"one-{commit}"
    real_rename = Path.rename

    def winner_first(self, target):
        if Path(target) == dest and not dest.exists():
            dest.mkdir(parents=True)
            (dest / "winner").write_text("")
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", winner_first)
    checkout(Source("ONE", path.as_uri(), commit), str(dest))
    assert (dest / "winner").exists()
    assert [p.name for p in dest.parent.iterdir()] == [dest.name]



# ---- YAML and shell in the written workflow --------------------------------------------------

def _workflow_run_steps(text):
    """Each ``run:`` of the plan and publish jobs, as YAML reads them."""
    import yaml

    jobs = yaml.safe_load(text)["jobs"]
    return [step["run"] for job in ("plan", "publish") for step in jobs[job]["steps"] if "run" in step]


@pytest.mark.parametrize("output", ["wf/a: b.yml", "wf/n #2.yml"])
def test_a_workflow_path_yaml_or_the_shell_would_misread_comes_back_exactly(cli, tmp_path, output):
    import shlex

    proc = cli("matrix", "--target", "jax", "--format", "github-workflow", "-o", output, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    check = [run for run in _workflow_run_steps((tmp_path / output).read_text(encoding="utf-8")) if "--check" in run]
    assert len(check) == 1
    assert shlex.split(check[0]) == ["bake-plan", "matrix", "--target", "jax", "--format", "github-workflow",
                                     "-o", output, "--check"]
    # The written file is fresh by its own check step.
    assert cli(*shlex.split(check[0])[1:], cwd=tmp_path).returncode == 0


def test_a_workflow_value_github_would_evaluate_is_refused(cli, tmp_path):
    proc = cli("matrix", "--target", "jax", "--format", "github-workflow", "-o", "wf/${{ secrets.X }}.yml",
               cwd=tmp_path)
    one_line_error(proc, "--format github-workflow", "'${{'", "expression")
    assert list(tmp_path.iterdir()) == []


_AWKWARD = "abz/ .:#'\"\\$`!&;|*?[]{}-,@%\t\n\r\x85\u2028\u202e\ufeff\x1b\x00é😀"




try:
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    st = None


@pytest.mark.skipif(st is None, reason="hypothesis is in the test extra")
def test_every_path_and_selection_word_reads_back_from_the_workflow_yaml_and_shell():
    import shlex

    import yaml
    from hypothesis import given, settings

    from bake.errors import UsageError
    from bake.plan.workflow import render_workflow

    entries = [{"stage": "base", "platform": "linux/amd64", "arch": "amd64", "id": "base/amd64", "needs": []}]
    word = st.text(alphabet=_AWKWARD, min_size=1, max_size=12)

    @settings(max_examples=100, deadline=None)
    @given(output=word, target=word, name=word)
    def check(output, target, name):
        regenerate = ["bake-plan", "matrix", "--target", target, "--format", "github-workflow", "-o", output]
        try:
            text = render_workflow(entries, regenerate, ["--target", target], name=name)
        except UsageError as err:
            assert "${{" in " ".join([*regenerate, name]) and "${{" in str(err)
            return
        document = yaml.safe_load(text)
        assert document["name"] == name
        runs = _workflow_run_steps(text)
        assert shlex.split(runs[1]) == [*regenerate, "--check"]  # after "pip install ."
        assert shlex.split(runs[-1]) == ["bake-plan", "publish", "--target", target, "--registry", "$REGISTRY",
                                         "--date", "$DATE", "--sitrep", "sitreps", "--all-or-nothing"]
        comment = text.splitlines()[2]
        assert comment.startswith("#   bake-plan matrix")  # the command's comment stayed one line

    check()


# ---- one write gate for every file a command writes -------------------------------------------

HAND_WRITTEN = 'target "mine" {\n  context = "."\n}\n'


@pytest.mark.parametrize("command", [
    ("matrix", "--target", "jax", "--format", "json"),
    ("matrix", "--target", "jax", "--format", "github"),
    ("graph", "--target", "jax"),
    ("graph", "--target", "jax", "--format", "dot"),
    ("plan", "--target", "jax"),
])
def test_no_command_replaces_a_hand_written_bake_file(cli, tmp_path, command):
    (tmp_path / "docker-bake.hcl").write_text(HAND_WRITTEN)
    proc = cli(*command, "-o", "docker-bake.hcl", cwd=tmp_path)
    one_line_error(proc, "docker-bake.hcl: bake-plan did not write this file", "--force")
    assert (tmp_path / "docker-bake.hcl").read_text() == HAND_WRITTEN
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"]
    forced = cli(*command, "-o", "docker-bake.hcl", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "docker-bake.hcl").read_text() != HAND_WRITTEN


@pytest.mark.parametrize("command, name", [
    (("matrix", "--target", "jax", "--format", "json"), "matrix.json"),
    (("graph", "--target", "jax", "--format", "dot"), "stages.dot"),
])
def test_an_output_without_a_header_is_replaced_while_unchanged_and_kept_once_edited(cli, tmp_path, command, name):
    assert cli(*command, "-o", name, cwd=tmp_path).returncode == 0
    first = (tmp_path / name).read_text()
    again = cli(*command, "-o", name, cwd=tmp_path)  # its own file, known by the directory's record
    assert again.returncode == 0, again.stderr
    assert (tmp_path / name).read_text() == first
    (tmp_path / name).write_text(first + "\n# my note\n")
    one_line_error(cli(*command, "-o", name, cwd=tmp_path), f"{name}: bake-plan did not write this file")
    assert (tmp_path / name).read_text().endswith("# my note\n")


def test_a_graph_does_not_replace_a_lock(cli, tmp_path):
    locks = tmp_path / "locks"
    locks.mkdir()
    (locks / "jax.txt").write_text("# bake-plan lock of 'jax'\nalpha==1.0\n")
    one_line_error(cli("graph", "--target", "jax", "-o", "locks/jax.txt", cwd=tmp_path), "locks/jax.txt")
    assert (locks / "jax.txt").read_text().endswith("alpha==1.0\n")


# ---- plugins are never lost silently -----------------------------------------------------------

ONE_STAGE = """
from bake import Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    return [Stage(name="{name}", image="{name}", parent="base", context=stage_dir("jax"))]
"""


def test_two_distributions_giving_one_entry_point_name_are_both_named(cli, make_plugin, tmp_path):
    first = make_plugin(ONE_STAGE.format(name="first"), name="shared-name")
    second = make_plugin(ONE_STAGE.format(name="second"), name="shared-name")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    for target in ("first", "second"):
        proc = cli("plan", "--target", target, "-o", "-", cwd=tmp_path, env=env, pythonpath=[first, second])
        one_line_error(proc, "entry point 'shared-name'", "'bake_plan_test_plugin_", "uninstall one")
        line = proc.stderr
        assert line.count("'bake_plan_test_plugin_") == 2, line


def test_a_distribution_reusing_a_builtin_entry_point_name_is_named_not_dropped(cli, make_plugin, tmp_path):
    site = make_plugin(ONE_STAGE.format(name="mine"), name="jax")  # the name of a built-in plugin
    proc = cli("plan", "--target", "mine", "-o", "-", cwd=tmp_path, pythonpath=[site],
               env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    one_line_error(proc, "entry point 'jax'", "(bake_plan_test_plugin_")
    assert "unknown target" not in proc.stderr


def test_a_wrapper_around_the_stages_hook_is_honoured_and_can_change_the_result():
    from bake import Stage, hookimpl
    from bake.plan.plugins import Hooks, get_plugin_manager
    from bake.resources import stage_dir

    class Adds:
        @hookimpl(wrapper=True)
        def bake_plan_stages(self):
            answers = yield
            extra = [Stage(name="wrapped", image="wrapped", parent="base", context=stage_dir("jax"))]
            # and it drops every stage of the plugin named upstream-t5x
            return [a for a in answers if not any(getattr(s, "name", "") == "upstream-t5x" for s in a)] + [extra]

    stages = Hooks(get_plugin_manager(plugins=[Adds()])).collect_stages()
    assert "wrapped" in stages and stages["wrapped"].plugin == "Adds"
    assert "upstream-t5x" not in stages and "upstream-pax" in stages


def test_an_old_style_hookwrapper_around_a_policy_hook_changes_the_answer():
    import datetime

    from bake import hookimpl
    from bake.api import make_plan
    from bake.plan.compose import PlanOptions
    from bake.plan.plugins import get_plugin_manager

    class Suffix:
        @hookimpl(hookwrapper=True)
        def bake_plan_tags(self, stage, flavor, date):
            outcome = yield
            outcome.force_result([f"{tag}-wrapped" for tag in outcome.get_result()])

    plan = make_plan(PlanOptions(targets=("jax",), date=datetime.date(2026, 11, 29), platforms=("linux/amd64",)),
                     get_plugin_manager(plugins=[Suffix()])).plan["target"]
    assert plan["jax"]["tags"] == ["ghcr.io/nvidia/jax:latest-wrapped-amd64",
                                   "ghcr.io/nvidia/jax:nightly-2026-11-29-wrapped-amd64"]


def test_a_wrapper_plugin_through_the_command_line_does_not_break_every_command(cli, make_plugin, tmp_path):
    site = make_plugin("""
        from bake import Stage, hookimpl
        from bake.resources import stage_dir

        @hookimpl(wrapper=True)
        def bake_plan_stages():
            answers = yield
            return answers + [[Stage(name="from-wrapper", image="w", parent="base", context=stage_dir("jax"),
                                     registry="ghcr.io/example")]]
    """, name="wrapping")
    proc = cli("plan", "--target", "from-wrapper", "-o", "-", "--format", "json", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    assert "from-wrapper" in json_targets(proc.stdout)


def json_targets(text):
    import json

    return json.loads(text)["target"]


# ---- privileges are granted by the user only -----------------------------------------------------

ASKS = """
from bake import hookimpl

@hookimpl
def bake_plan_adjust_target(stage, name, flavor, target):
    if name == "{target}":
        target["entitlements"] = ["{privilege}"]
"""


def test_a_plugin_asking_for_the_host_network_is_refused_before_buildx(cli, make_plugin, tmp_path):
    site = make_plugin(ASKS.format(target="base-mealkit", privilege="network.host"), name="nethost")
    for args in (("build", "--dry-run"), ("build",), ("plan",)):
        proc = cli(*args, "--target", "jax", cwd=tmp_path, pythonpath=[site])
        one_line_error(proc, "plugin 'nethost', stage 'base', target 'base-mealkit'", "'network.host'",
                       "--allow network.host")
        assert proc.stdout == ""
        assert sorted(p.name for p in tmp_path.iterdir()) == [], args  # no plan, no reports


def test_a_granted_privilege_is_in_the_header_and_the_printed_command(cli, make_plugin, tmp_path):
    site = make_plugin(ASKS.format(target="base-mealkit", privilege="network.host"), name="nethost")
    proc = cli("build", "--dry-run", "--target", "jax", "--allow", "network.host", cwd=tmp_path, pythonpath=[site])
    if proc.returncode != 0 and "buildx" in proc.stderr:
        pytest.skip(f"no buildx to print the command for: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert " --allow=network.host " in proc.stdout and "security.insecure" not in proc.stdout
    header = (tmp_path / "docker-bake.hcl").read_text().split("\n\n", 1)[0]
    assert "--allow=network.host" in header and "security.insecure" not in header


def test_a_privilege_granted_in_the_configuration_and_one_that_is_not(cli, make_plugin, tmp_path):
    """The configuration key grants as the flag does; a privilege granted is not another one."""
    site = make_plugin(ASKS.format(target="jax", privilege="security.insecure"), name="insecure")
    (tmp_path / "bake-plan.toml").write_text('allow = ["network.host"]\n')
    one_line_error(cli("plan", "--target", "jax", cwd=tmp_path, pythonpath=[site]),
                   "plugin 'insecure', stage 'jax', target 'jax'", "'security.insecure'")
    (tmp_path / "bake-plan.toml").write_text('allow = ["network.host", "security.insecure"]\n')
    proc = cli("plan", "--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    assert "--allow=security.insecure" in (tmp_path / "docker-bake.hcl").read_text()


def test_an_unknown_privilege_is_a_usage_error(cli, tmp_path):
    one_line_error(cli("plan", "--target", "jax", "--allow", "network.hots", cwd=tmp_path),
                   "--allow: 'network.hots' is not a privilege", "did you mean 'network.host'")
    (tmp_path / "bake-plan.toml").write_text('allow = ["device"]\n')
    one_line_error(cli("plan", "--target", "jax", cwd=tmp_path), "bake-plan.toml", "'device'")
