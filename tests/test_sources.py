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
        return getattr(self, "_url", None) or self.path.as_uri()

    @url.setter
    def url(self, value: str) -> None:
        self._url = value

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
    (("[two]", "[two]\nbranch = 1"), "[two]: unknown key 'branch'"),
    (("[two]", "[two]\npatches = 1"), "[two]: patches must be a list of strings"),
    (("[two]", '[two]\npatches = ["pull/1/head"]'), "[two]: patches need mode 'git-clone'"),
    (("[one]", '[one]\npatches = ["file://../x.patch"]'), "[one]: patch 'file://../x.patch': a patch file is"),
    (("[one]", '[one]\npatches = ["file://p/missing.patch"]'), "[one]: patch 'file://p/missing.patch': no such file"),
    (("[one]", '[one]\npatches = ["pull/1/head", "pull/1/head"]'), "[one]: patches name 'pull/1/head' twice"),
    (("[one]", '[one]\nmirror_url = "has space"'), "[one]: mirror_url 'has space' must be"),
    (("[one]", '[one]\nmirror_url = "https://me:s3cret@example.com/x.git"'), "[one]: mirror_url carries credentials"),
    (("[one]", '[one]\nmirror_url = "-u/tmp/evil.sh"'), "[one]: mirror_url '-u/tmp/evil.sh' starts with '-'"),
    (("[two]", "[two"), "not valid TOML"),
    (("[two]", "[two\udcff]"), "not UTF-8"),
])
def test_a_malformed_manifest_is_one_line(cli, repos, tmp_path, change, needle):
    path = _manifest(tmp_path, repos)
    path.write_bytes(path.read_text().replace(*change).encode("utf-8", "surrogateescape"))
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


# ---- placeholders, mirrors, patches, modes and the built-in chain's lock ---------------------

SHIPPED_URLS = {
    "jax": "https://github.com/google/jax.git", "xla": "https://github.com/openxla/xla.git",
    "flax": "https://github.com/google/flax.git", "transformer-engine": "https://github.com/NVIDIA/TransformerEngine.git",
    "t5x": "https://github.com/google-research/t5x.git", "paxml": "https://github.com/google/paxml.git",
    "praxis": "https://github.com/google/praxis.git", "fiddle": "https://github.com/google/fiddle.git",
}


def _shipped():
    return (stages_dir() / "sources.toml").read_text()


def test_the_shipped_manifest_has_real_commits_and_every_url_of_the_chain():
    manifest = parse_manifest(_shipped(), "sources.toml")
    assert {key: e.url for key, e in manifest.items()} == SHIPPED_URLS
    assert all(len(e.commit) == 40 and e.commit != ZERO for e in manifest.values())
    # It says where they come from: JAX-Toolbox's manifest, at the version they were taken from.
    assert "latest_verified_commit" in _shipped() and "00356a2241ee8e6214f71fa2a676954812f64335" in _shipped()


def test_a_plan_of_the_shipped_manifest_passes_only_real_commits(cli, tmp_path):
    proc = cli("--target", "upstream-pax", "--format", "json", "-o", "-", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = {e.name: e for e in parse_manifest(_shipped(), "m").values()}
    urlrefs = {arg: value for t in json.loads(proc.stdout)["target"].values()
               for arg, value in t["args"].items() if arg.startswith("URLREF_")}
    assert set(urlrefs) == {f"URLREF_{n}" for n in ("JAX", "XLA", "FLAX", "TRANSFORMER_ENGINE", "PAXML", "PRAXIS", "FIDDLE")}
    for arg, value in urlrefs.items():
        url, _, commit = value.rpartition("#")
        assert re.fullmatch(r"[0-9a-f]{40}", commit) and commit != ZERO, value
        assert commit == manifest[arg[len("URLREF_"):]].commit


@pytest.mark.parametrize("key", ["paxml", "transformer-engine"])
def test_a_placeholder_commit_is_an_error_naming_the_source(cli, tmp_path, key):
    path = tmp_path / "sources.toml"
    text = _shipped()
    head, _, rest = text.partition(f"[{key}]")
    path.write_text(head + f"[{key}]" + re.sub(r'commit = "[0-9a-f]{40}"', f'commit = "{ZERO}"', rest, count=1))
    _one_line_error(cli("--target", "upstream-pax", "--sources", str(path), cwd=tmp_path),
                    str(path), f"[{key}]: commit is a placeholder (all zeros)", f"bake-plan bump {key}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sources.toml"]


def test_a_missing_commit_is_an_error_naming_the_source(cli, tmp_path):
    path = tmp_path / "sources.toml"
    head, _, rest = _shipped().partition("[praxis]")
    path.write_text(head + "[praxis]" + re.sub(r'commit = "[0-9a-f]{40}"\n', "", rest, count=1))
    _one_line_error(cli("--target", "upstream-pax", "--sources", str(path), cwd=tmp_path), "[praxis]: missing commit")


def _plan_args(cli, path, tmp_path, target="upstream-pax-mealkit"):
    proc = cli("--target", "upstream-pax", "--format", "json", "-o", "-", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["target"][target]


def test_mirror_patches_and_mode_reach_the_plan(cli, tmp_path):
    (tmp_path / "patches" / "praxis").mkdir(parents=True)
    (tmp_path / "patches" / "praxis" / "fix.patch").write_text("")
    path = tmp_path / "sources.toml"
    text = _shipped().replace('[praxis]\n', '[praxis]\nmirror_url = "https://example.com/mirror/praxis.git"\n'
                                            'patches = ["pull/36/head", "file://patches/praxis/fix.patch"]\n')
    head, _, rest = text.partition("[paxml]")
    path.write_text(head + "[paxml]" + rest.replace('mode = "git-clone"', 'mode = "pip-vcs"', 1))
    target = _plan_args(cli, path, tmp_path)
    args = target["args"]
    manifest = parse_manifest(path.read_text(), "m")
    # praxis: fetched from the mirror, the patches in order, the manifest's directory as context.
    assert args["URLREF_PRAXIS"] == f"https://example.com/mirror/praxis.git#{manifest['praxis'].commit}"
    assert args["PATCHES_PRAXIS"] == "pull/36/head file://patches/praxis/fix.patch"
    assert target["contexts"]["patches"] == str(tmp_path)
    # paxml in pip-vcs mode: a git+ line instead of a checkout, no host path for the lock.
    assert args["MODE_PAXML"] == "pip-vcs" and args["MODE_PRAXIS"] == "git-clone"
    lines = args["REQUIREMENTS"].splitlines()
    assert f"paxml @ git+https://github.com/google/paxml.git@{manifest['paxml'].commit}" in lines
    assert "-e file:///opt/praxis" in lines and "-e file:///opt/paxml" not in lines
    assert "PATCHES_PAXML" not in args


def test_a_source_the_stage_builds_from_must_be_cloned(cli, tmp_path):
    path = tmp_path / "sources.toml"
    head, _, rest = _shipped().partition("[xla]")
    path.write_text(head + "[xla]" + rest.replace('mode = "git-clone"', 'mode = "pip-vcs"', 1))
    _one_line_error(cli("--target", "jax", "--sources", str(path), cwd=tmp_path),
                    "[xla]: mode 'pip-vcs'", "must be 'git-clone'")


def test_the_builtin_chain_declares_its_requirement_lines(cli, tmp_path):
    plan = json.loads(cli("--target", "upstream-pax", "--target", "upstream-t5x", "--format", "json", "-o", "-",
                          cwd=tmp_path, check=True).stdout)["target"]
    fiddle = parse_manifest(_shipped(), "m")["fiddle"]
    assert plan["jax-mealkit"]["args"]["REQUIREMENTS"].splitlines() == ["-e file:///opt/jax", "-e file:///opt/flax"]
    assert plan["upstream-t5x-mealkit"]["args"]["REQUIREMENTS"].splitlines() == ["-e file:///opt/t5x"]
    assert plan["upstream-pax-mealkit"]["args"]["REQUIREMENTS"].splitlines() == [
        "-e file:///opt/praxis", "-e file:///opt/paxml", f"fiddle @ git+{fiddle.url}@{fiddle.commit}"]


# Stand-ins for the upstream repositories: each a tiny Python project whose metadata comes from
# meta.txt through an in-tree PEP 517 backend (no build requirements: pip needs no index for it),
# so a patch that edits meta.txt shows in what pip resolves.
BACKEND = '''
import base64, hashlib, os, zipfile

def _meta():
    with open("meta.txt") as f:
        text = f.read()
    fields = dict(line.split(": ", 1) for line in text.splitlines() if line.startswith(("Name:", "Version:")))
    return fields["Name"], fields["Version"], "Metadata-Version: 2.1\\n" + text

def get_requires_for_build_wheel(config_settings=None):
    return []

get_requires_for_build_editable = get_requires_for_build_wheel

def prepare_metadata_for_build_wheel(directory, config_settings=None):
    name, version, meta = _meta()
    info = f"{name}-{version}.dist-info"
    os.makedirs(os.path.join(directory, info), exist_ok=True)
    with open(os.path.join(directory, info, "METADATA"), "w") as f:
        f.write(meta)
    return info

prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel

def build_wheel(directory, config_settings=None, metadata_directory=None, editable=False):
    name, version, meta = _meta()
    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": meta,
             f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    if editable:
        files[f"{name}.pth"] = os.getcwd() + "\\n"
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(t.encode())}" for p, t in files.items()]
    files[f"{info}/RECORD"] = "\\n".join(record + [f"{info}/RECORD,,"]) + "\\n"
    wheel = f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w") as zf:
        for p, t in files.items():
            zf.writestr(p, t)
    return wheel

def build_editable(directory, config_settings=None, metadata_directory=None):
    return build_wheel(directory, editable=True)
'''
PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'


class Project(Repo):
    """A stand-in repository holding a Python project ``name`` that requires ``requires``."""

    def __init__(self, path, name, requires=()):
        super().__init__(path)
        (path / "backend.py").write_text(BACKEND)
        (path / "pyproject.toml").write_text(PYPROJECT)
        self.write_meta(name, "1.0", requires)
        git(path, "add", ".")
        git(path, "commit", "--quiet", "-m", "project")

    def write_meta(self, name, version, requires):
        (self.path / "meta.txt").write_text(f"Name: {name}\nVersion: {version}\n"
                                            + "".join(f"Requires-Dist: {r}\n" for r in requires))

    def pull_request(self, number, edit) -> str:
        """A commit on a side branch from HEAD, made by ``edit(path)``, left only as ``refs/pull/<n>/head``."""
        git(self.path, "checkout", "--quiet", "-b", f"pr{number}")
        edit(self.path)
        git(self.path, "commit", "--quiet", "-am", f"pull request {number}")
        head = git(self.path, "rev-parse", "HEAD")
        git(self.path, "checkout", "--quiet", "main")
        git(self.path, "branch", "--quiet", "-D", f"pr{number}")
        git(self.path, "update-ref", f"refs/pull/{number}/head", head)
        return head


def _fetch(tmp_path, *args, patch_dir=None):
    env = dict(GIT_ENV, BAKE_PIP_TOOLS_D=str(tmp_path / "pip-tools.d"))
    env.pop("GIT_AUTHOR_NAME"), env.pop("GIT_COMMITTER_NAME")  # no identity: the script brings one
    if patch_dir:
        env["BAKE_PATCH_DIR"] = str(patch_dir)
    return subprocess.run(["bash", str(stages_dir() / "scripts" / "fetch-source.sh"), *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def patched(tmp_path):
    """A project whose main moved on after a pull request branched off, a ref patch (adds a
    requirement) and a file patch that edits the ref patch's line (so order matters)."""
    lib = Project(tmp_path / "lib", "lib", ["alpha"])
    lib.pull_request(1, lambda p: p.joinpath("meta.txt").write_text(p.joinpath("meta.txt").read_text()
                                                                    + "Requires-Dist: zeta\n"))
    pinned = lib.commit()  # main moves on (file.txt) after the pull request branched off
    git(lib.path, "checkout", "--quiet", "refs/pull/1/head")
    meta = lib.path / "meta.txt"
    meta.write_text(meta.read_text().replace("zeta", "zeta>=1").replace("Version: 1.0", "Version: 1.1"))
    (tmp_path / "patches" / "lib").mkdir(parents=True)
    (tmp_path / "patches" / "lib" / "fix.patch").write_text(git(lib.path, "diff") + "\n")
    git(lib.path, "checkout", "--quiet", "--", ".")
    git(lib.path, "checkout", "--quiet", "main")
    return lib, pinned, tmp_path / "patches"


def test_fetch_source_applies_a_ref_then_a_file_patch_in_order(tmp_path, patched):
    lib, pinned, patches = patched
    dest = tmp_path / "out"
    proc = _fetch(tmp_path, "--urlref", f"{lib.url}#{pinned}", "--dest", str(dest), "--stage", "s",
                  "--patches", "pull/1/head file://lib/fix.patch", patch_dir=patches)
    assert proc.returncode == 0, proc.stderr
    assert (dest / "meta.txt").read_text() == "Name: lib\nVersion: 1.1\nRequires-Dist: alpha\nRequires-Dist: zeta>=1\n"
    assert (dest / "file.txt").exists()  # the pinned commit, not the pull request's base
    assert git(dest, "rev-parse", "HEAD~2") == pinned
    assert git(dest, "log", "--format=%s", "-2").splitlines() == [
        "bake-fetch-source: apply file://lib/fix.patch", "bake-fetch-source: apply pull/1/head"]
    assert git(dest, "status", "--porcelain") == ""
    assert (tmp_path / "pip-tools.d" / "requirements-s.in").read_text() == f"-e file://{dest}\n"
    # The same line again (a stage declaring it too) is written once.
    assert _fetch(tmp_path, "--urlref", f"{lib.url}#{pinned}", "--stage", "s", "--mode", "git-clone",
                  "--dest", str(tmp_path / "again")).returncode == 0
    assert (tmp_path / "pip-tools.d" / "requirements-s.in").read_text().count("-e file://") == 2  # two dests


def test_fetch_source_skips_a_pull_request_the_commit_already_has(tmp_path, patched):
    lib, _, _ = patched
    git(lib.path, "merge", "--quiet", "--no-edit", "refs/pull/1/head")
    merged = git(lib.path, "rev-parse", "HEAD")
    dest = tmp_path / "out"
    proc = _fetch(tmp_path, "--urlref", f"{lib.url}#{merged}", "--dest", str(dest), "--stage", "s",
                  "--patches", "pull/1/head")
    assert proc.returncode == 0, proc.stderr
    assert f"pull/1/head is already in {merged}" in proc.stdout
    assert git(dest, "rev-parse", "HEAD") == merged


def test_fetch_source_patches_in_the_wrong_order_fail_in_one_line(tmp_path, patched):
    lib, pinned, patches = patched
    proc = _fetch(tmp_path, "--urlref", f"{lib.url}#{pinned}", "--dest", str(tmp_path / "out"), "--stage", "s",
                  "--patches", "file://lib/fix.patch pull/1/head", patch_dir=patches)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        f"bake-fetch-source: patch 'file://lib/fix.patch' does not apply on {pinned} of {lib.url}")


@pytest.mark.parametrize("patch, needle", [
    ("pull/9/head", "patch 'pull/9/head': ref not found in"),
    ("file://lib/none.patch", "patch 'file://lib/none.patch': no such file"),
])
def test_fetch_source_a_missing_patch_is_one_line(tmp_path, patched, patch, needle):
    lib, pinned, patches = patched
    proc = _fetch(tmp_path, "--urlref", f"{lib.url}#{pinned}", "--dest", str(tmp_path / "out"), "--stage", "s",
                  "--patches", patch, patch_dir=patches)
    assert proc.returncode != 0 and needle in proc.stderr.strip().splitlines()[-1]


def test_fetch_source_pip_vcs_writes_the_line_the_stage_declares(tmp_path):
    commit = "a" * 40
    proc = _fetch(tmp_path, "--urlref", f"https://github.com/google/fiddle.git#{commit}", "--stage", "s",
                  "--mode", "pip-vcs")
    assert proc.returncode == 0, proc.stderr
    wrote = (tmp_path / "pip-tools.d" / "requirements-s.in").read_text()
    assert wrote == f"fiddle @ git+https://github.com/google/fiddle.git@{commit}\n"
    assert "needs --mode git-clone" in _fetch(tmp_path, "--urlref", f"x#{commit}", "--stage", "s", "--mode",
                                              "pip-vcs", "--patches", "pull/1/head").stderr


STAND_INS = {  # manifest key -> (distribution, requirements)
    "jax": ("jax", ["alpha"]), "xla": ("xla", []), "flax": ("flax", ["jax"]),
    "transformer-engine": ("transformer-engine", []), "t5x": ("t5x", ["flax"]),
    "paxml": ("paxml", ["praxis"]), "praxis": ("praxis", ["jax", "fiddle"]), "fiddle": ("fiddle", ["alpha"]),
}


@pytest.fixture
def stand_ins(tmp_path):
    """A repository standing in for each source of the shipped manifest, and a copy of the
    manifest pointing at them (file:// URLs), its commits zeroed: what bump must fill."""
    (tmp_path / "upstream").mkdir()
    projects = {key: Project(tmp_path / "upstream" / key, *spec) for key, spec in STAND_INS.items()}
    text = _shipped()
    for key, url in SHIPPED_URLS.items():
        # file://localhost/…: pip's requirement parser wants a host in a git+file URL; git takes it.
        projects[key].url = f"file://localhost{projects[key].path}"
        text = text.replace(f'"{url}"', f'"{projects[key].url}"')
    path = tmp_path / "sources.toml"
    path.write_text(re.sub(r'commit = "[0-9a-f]{40}"', f'commit = "{ZERO}"', text))
    return projects, path


def test_bump_moves_the_shipped_manifest_to_the_stand_ins(cli, tmp_path, stand_ins):
    projects, path = stand_ins
    before = path.read_text()
    proc = cli("bump", "--sources", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(STAND_INS)} of {len(STAND_INS)} sources moved" in proc.stdout
    manifest = parse_manifest(path.read_text(), "m")
    assert {k: e.commit for k, e in manifest.items()} == {k: git(p.path, "rev-parse", "HEAD") for k, p in projects.items()}
    assert _without_commits(path.read_text()) == _without_commits(before)  # comments and layout kept
    head = projects["paxml"].commit()
    assert cli("bump", "paxml", "--sources", str(path), cwd=tmp_path).returncode == 0
    assert parse_manifest(path.read_text(), "m")["paxml"].commit == head
    args = _plan_args(cli, path, tmp_path)["args"]
    assert args["URLREF_PAXML"] == f"{projects['paxml'].url}#{head}"


def test_the_builtin_chain_locks_against_the_stand_ins(cli, tmp_path, stand_ins):
    from conftest import hermetic_pip_env, make_wheel

    projects, path = stand_ins
    house = tmp_path / "house"
    make_wheel(house, "alpha", "1.0")
    make_wheel(house, "zeta", "1.0")
    # paxml carries a pull request that adds a requirement: the lock sees the patched checkout.
    projects["paxml"].pull_request(1, lambda p: p.joinpath("meta.txt").write_text(
        p.joinpath("meta.txt").read_text() + "Requires-Dist: zeta\n"))
    path.write_text(path.read_text().replace("[paxml]\n", '[paxml]\npatches = ["pull/1/head"]\n'))
    assert cli("bump", "--sources", str(path), cwd=tmp_path).returncode == 0
    env = dict(hermetic_pip_env(), BAKE_PLAN_CHECKOUTS=str(tmp_path / "checkouts"), BAKE_PLAN_SOURCES=str(path))
    proc = cli("lock", "--target", "upstream-pax", "--platform", "linux/amd64", "--no-index",
               "--find-links", str(house), cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    lock = (tmp_path / "locks" / "upstream-pax.txt").read_text()
    body = [line for line in lock.splitlines() if line and not line.startswith("#") and not line[0].isspace()]
    fiddle = parse_manifest(path.read_text(), "m")["fiddle"]
    for wanted in ["-e file:///opt/jax", "-e file:///opt/flax", "-e file:///opt/praxis", "-e file:///opt/paxml",
                   f"fiddle @ git+{fiddle.url}@{fiddle.commit}", "alpha==1.0", "zeta==1.0"]:
        assert wanted in body, (wanted, lock)
    assert str(tmp_path / "checkouts") not in lock  # the lock names in-image paths, not host checkouts
    checkouts = sorted(p.name.split("-")[0] for p in (tmp_path / "checkouts").iterdir())
    assert checkouts == ["flax", "jax", "paxml", "praxis"]
    # A second lock reuses the checkouts.
    proc = cli("lock", "--target", "upstream-pax", "--platform", "linux/amd64", "--no-index",
               "--find-links", str(house), cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "checked out" not in proc.stderr, proc.stderr


def test_the_lock_of_an_unreachable_source_is_one_line(cli, tmp_path, stand_ins):
    projects, path = stand_ins
    assert cli("bump", "--sources", str(path), cwd=tmp_path).returncode == 0
    import shutil
    shutil.rmtree(projects["praxis"].path)
    env = dict(os.environ, BAKE_PLAN_CHECKOUTS=str(tmp_path / "checkouts"))
    proc = cli("lock", "--target", "upstream-pax", "--sources", str(path), cwd=tmp_path, env=env)
    _one_line_error(proc, "stage 'upstream-pax': source PRAXIS: the lock needs a host checkout",
                    f"cannot check out {projects['praxis'].url}#")
    assert not (tmp_path / "locks").exists()
    assert not any(p.name.startswith(("praxis", ".praxis")) for p in (tmp_path / "checkouts").iterdir())


def test_the_manifest_is_read_once_while_unchanged_and_again_when_edited_or_relinked(tmp_path, monkeypatch):
    """:func:`load_manifest` is called for every source of every plugin: it parses the file once,
    and again after an edit, or when a link in its path points at another file (the key
    is the file's absolute path, device, inode, mtime and size, not a resolved path)."""
    from bake.pip import sources

    text = (stages_dir() / "sources.toml").read_text()
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text(text)
    second.write_text(text.replace("[jax]", "[jax]\n# another file", 1))
    link = tmp_path / "sources.toml"
    link.symlink_to(first)
    parsed = []
    parse = sources.parse_manifest
    monkeypatch.setattr(sources, "parse_manifest", lambda *a, **k: parsed.append(a[1]) or parse(*a, **k))
    monkeypatch.setattr(sources, "_cache", {})
    monkeypatch.chdir(tmp_path)
    assert sources.load_manifest("sources.toml") is sources.load_manifest(link) is sources.load_manifest(link)
    assert len(parsed) == 1
    link.unlink()
    link.symlink_to(second)
    assert "jax" in sources.load_manifest(link) and len(parsed) == 2
    with first.open("a") as handle:
        handle.write("\n# edited\n")
    assert sources.load_manifest(first) and len(parsed) == 3
