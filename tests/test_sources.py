"""The sources manifest and ``bake-plan bump`` with real git repositories made here, served as
``file://`` URLs: bump moves commits and keeps the file's comments and order; unknown refs,
unreachable URLs and unknown names are one-line errors that leave the file as it was; plans
pass ``url#commit`` from the manifest."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from bake.errors import SourcesError
from bake.pip.sources import parse_manifest, rewrite_commits
from bake.resources import stages_dir

ZERO = "0" * 40
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@localhost", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@localhost", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV, timeout=60).stdout.strip()


class Repo:
    """A real repository: ``commit()`` adds a commit on the checked-out branch and returns its hash."""

    def __init__(self, path):
        self.path = path
        path.mkdir()
        git(path, "init", "--quiet", "--initial-branch=main")
        self.n = 0

    @property
    def url(self) -> str:
        return self.path.as_uri()

    def commit(self) -> str:
        self.n += 1
        (self.path / "file.txt").write_text(f"{self.n}\n")
        git(self.path, "add", "file.txt")
        git(self.path, "commit", "--quiet", "-m", f"change {self.n}")
        return git(self.path, "rev-parse", "HEAD")


@pytest.fixture
def repos(tmp_path):
    one, two = Repo(tmp_path / "one"), Repo(tmp_path / "two")
    one.commit()
    two.commit()
    return one, two


MANIFEST = """\
# Our sources. Keep this comment.

# the first one
[one]
url = "{one}"
tracking_ref = "main"   # follows main
commit = "{zero}"  # bump fills this
mode = "git-clone"

[two]
mode = "pip-vcs"
commit = '{zero}'
url = "{two}"
# tracking a release branch
tracking_ref = "refs/heads/release"
"""


def _manifest(tmp_path, repos, **kw):
    one, two = repos
    path = tmp_path / "sources.toml"
    path.write_text(MANIFEST.format(one=kw.get("one", one.url), two=kw.get("two", two.url), zero=ZERO))
    return path


def _without_commits(text):
    return re.sub(r"[0-9a-f]{40}", "<commit>", text)


def test_bump_moves_every_commit_and_keeps_comments_and_order(cli, repos, tmp_path):
    one, two = repos
    git(two.path, "checkout", "--quiet", "-b", "release")
    release_head = two.commit()
    git(two.path, "checkout", "--quiet", "main")
    two.commit()  # main moves on; the manifest tracks release
    head = one.commit()
    path = _manifest(tmp_path, repos)
    before = path.read_text()

    proc = cli("bump", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    after = path.read_text()
    assert _without_commits(after) == _without_commits(before)  # only the commit values changed
    assert f'commit = "{head}"  # bump fills this' in after
    assert f"commit = '{release_head}'" in after
    assert f"one: {ZERO[:12]} -> {head[:12]} (main)" in proc.stdout
    assert "2 of 2 sources moved" in proc.stdout

    # A second bump with nothing new leaves the file alone.
    mtime = path.stat().st_mtime_ns
    proc = cli("bump", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0 and "0 of 2 sources moved" in proc.stdout
    assert path.stat().st_mtime_ns == mtime


def test_bump_named_sources_only(cli, repos, tmp_path):
    one, _ = repos
    path = _manifest(tmp_path, repos)
    proc = cli("bump", "ONE", "--sources", str(path), cwd=tmp_path)  # URLREF_ name works too
    assert proc.returncode == 0, proc.stderr
    manifest = parse_manifest(path.read_text(), "m")
    assert manifest["one"].commit == git(one.path, "rev-parse", "HEAD")
    assert manifest["two"].commit == ZERO


def test_bump_follows_an_annotated_tag_to_its_commit(cli, repos, tmp_path):
    one, _ = repos
    tagged = one.commit()
    git(one.path, "tag", "-a", "v1.0", "-m", "release 1.0")
    one.commit()
    path = _manifest(tmp_path, repos)
    path.write_text(path.read_text().replace('tracking_ref = "main"', 'tracking_ref = "v1.0"'))
    proc = cli("bump", "one", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert parse_manifest(path.read_text(), "m")["one"].commit == tagged


def _one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("bake-plan: error: ") and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_bump_unknown_ref_is_an_error_and_leaves_the_file(cli, repos, tmp_path):
    path = _manifest(tmp_path, repos)  # two tracks refs/heads/release, which does not exist yet
    before = path.read_text()
    proc = cli("bump", "--sources", str(path), cwd=tmp_path)
    _one_line_error(proc, str(path), "[two]", "tracking_ref 'refs/heads/release' not found", repos[1].url)
    assert path.read_text() == before  # one's commit would have moved: nothing is written


def test_bump_unreachable_url_is_an_error(cli, repos, tmp_path):
    missing = (tmp_path / "no-such-repo").as_uri()
    path = _manifest(tmp_path, repos, one=missing)
    before = path.read_text()
    proc = cli("bump", "one", "--sources", str(path), cwd=tmp_path)
    _one_line_error(proc, "[one]", f"cannot reach {missing}", "fatal:")
    assert path.read_text() == before


def test_bump_unknown_source_name(cli, repos, tmp_path):
    path = _manifest(tmp_path, repos)
    _one_line_error(cli("bump", "three", "--sources", str(path), cwd=tmp_path), "no source 'three'", "one, two")


@pytest.mark.parametrize("change, needle", [
    (('commit = "' + ZERO, 'commit = "main'), "[one]: commit 'main' is not a 40-hex commit"),
    (('mode = "git-clone"', 'mode = "svn"'), "[one]: mode 'svn' is not one of git-clone, pip-vcs"),
    (('tracking_ref = "main"   # follows main\n', ''), "[one]: missing tracking_ref"),
    (("[two]", "[two]\npatches = 1"), "[two]: unknown key 'patches'"),
    (("[two]", "[two"), "not valid TOML"),
])
def test_a_malformed_manifest_is_one_line(cli, repos, tmp_path, change, needle):
    path = _manifest(tmp_path, repos)
    path.write_text(path.read_text().replace(*change))
    _one_line_error(cli("bump", "--sources", str(path), cwd=tmp_path), str(path), needle)


def test_a_commit_kept_in_an_inline_table_cannot_be_rewritten_in_place():
    text = f'one = {{ url = "file:///x", tracking_ref = "main", commit = "{ZERO}", mode = "git-clone" }}\n'
    assert parse_manifest(text, "m.toml")["one"].commit == ZERO  # valid TOML, valid manifest
    with pytest.raises(SourcesError, match=r"cannot rewrite the commit of \[one\] in place"):
        rewrite_commits(text, {"one": "a" * 40}, "m.toml")


def test_plans_pass_url_and_commit_from_the_manifest(cli, repos, tmp_path):
    one, _ = repos
    head = one.commit()
    # Every built-in plugin reads the manifest, so a manifest of one's own starts from the shipped one.
    path = tmp_path / "sources.toml"
    shipped = (stages_dir() / "sources.toml").read_text()
    path.write_text(shipped.replace("https://github.com/google-research/t5x.git", one.url))
    assert cli("bump", "t5x", "--sources", str(path), cwd=tmp_path).returncode == 0
    proc = cli("--target", "upstream-t5x", "--format", "json", "-o", "-", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    args = json.loads(proc.stdout)["target"]["upstream-t5x-mealkit"]["args"]
    assert args["URLREF_T5X"] == f"{one.url}#{head}"
    # The same through the environment.
    env = dict(os.environ, BAKE_PLAN_SOURCES=str(path))
    proc = cli("--target", "upstream-t5x", "--format", "json", "-o", "-", cwd=tmp_path, env=env)
    assert json.loads(proc.stdout)["target"]["upstream-t5x-mealkit"]["args"]["URLREF_T5X"] == f"{one.url}#{head}"


def test_a_plan_with_a_broken_manifest_names_the_file(cli, tmp_path):
    path = tmp_path / "sources.toml"
    path.write_text((stages_dir() / "sources.toml").read_text().replace("[flax]", "[flax-gone]"))
    _one_line_error(cli("--target", "jax", "--sources", str(path), cwd=tmp_path), "plugin 'jax'", "no source 'flax'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sources.toml"]


PIP_VCS = """
from bake import Source, Stage, hookimpl
from bake.resources import stage_dir

@hookimpl
def bake_plan_stages():
    return [Stage(name="vcs", image="vcs", parent="base", context=stage_dir("jax"),
                  sources=(Source("TOOL", "https://example.com/tool.git", "main", mode="pip-vcs"),))]
"""


def test_a_pip_vcs_source_on_a_branch_is_refused(cli, make_plugin, tmp_path):
    site = make_plugin(PIP_VCS, name="vcs-source")
    _one_line_error(cli("--target", "vcs", cwd=tmp_path, pythonpath=[site]),
                    "plugin 'vcs-source', stage 'vcs'", "source 'TOOL'", "40-hex commit")
