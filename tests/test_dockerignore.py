"""The context's ignore file (bake/plan/dockerignore.py), read as BuildKit reads it: moby's
pattern tables, the file's own syntax, and the input digest counting only the files a build sees
(and, on the engine, the same files BuildKit sends)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from bake.plan.dockerignore import PatternMatcher, clean, ignore_file, read_patterns
from bake.plan.inputs import Hasher, input_digests

# (pattern, path, left out) — the matching table of moby's patternmatcher, parents included
ONE_PATTERN = [
    ("**", "file", True), ("**", "file/", True), ("**/", "file", True), ("**/", "file/", True),
    ("**", "/", True), ("**/", "/", True), ("**", "dir/file", True), ("**/", "dir/file", True),
    ("**", "dir/file/", True), ("**/", "dir/file/", True), ("**/**", "dir/file", True),
    ("**/**", "dir/file/", True), ("dir/**", "dir/file", True), ("dir/**", "dir/file/", True),
    ("dir/**", "dir/dir2/file", True), ("dir/**", "dir/dir2/file/", True), ("**/dir", "dir", True),
    ("**/dir", "dir/file", True), ("**/dir2/*", "dir/dir2/file", True), ("**/dir2/*", "dir/dir2/file/", True),
    ("**/dir2/**", "dir/dir2/dir3/file", True), ("**/dir2/**", "dir/dir2/dir3/file/", True),
    ("**file", "file", True), ("**file", "dir/file", True), ("**/file", "dir/file", True),
    ("**file", "dir/dir/file", True), ("**/file", "dir/dir/file", True), ("**/file*", "dir/dir/file", True),
    ("**/file*", "dir/dir/file.txt", True), ("**/file*txt", "dir/dir/file.txt", True),
    ("**/file*.txt", "dir/dir/file.txt", True), ("**/file*.txt*", "dir/dir/file.txt", True),
    ("**/**/*.txt", "dir/dir/file.txt", True), ("**/**/*.txt2", "dir/dir/file.txt", False),
    ("**/*.txt", "file.txt", True), ("**/**/*.txt", "file.txt", True), ("a**/*.txt", "a/file.txt", True),
    ("a**/*.txt", "a/dir/file.txt", True), ("a**/*.txt", "a/dir/dir/file.txt", True),
    ("a/*.txt", "a/dir/file.txt", False), ("a/*.txt", "a/file.txt", True), ("a/*.txt**", "a/file.txt", True),
    ("a[b-d]e", "ae", False), ("a[b-d]e", "ace", True), ("a[b-d]e", "aae", False), ("a[^b-d]e", "aze", True),
    (".*", ".foo", True), (".*", "foo", False), ("abc.def", "abcdef", False), ("abc.def", "abc.def", True),
    ("abc.def", "abcZdef", False), ("abc?def", "abcZdef", True), ("abc?def", "abcdef", False),
    ("**/foo/bar", "foo/bar", True), ("**/foo/bar", "dir/foo/bar", True), ("**/foo/bar", "dir/dir2/foo/bar", True),
    ("abc/**", "abc", False), ("abc/**", "abc/def", True), ("abc/**", "abc/def/ghi", True),
    ("**/.foo", ".foo", True), ("**/.foo", "bar.foo", False), ("a(b)c/def", "a(b)c/def", True),
    ("a(b)c/def", "a(b)c/xyz", False), ("a.|)$(}+{bc", "a.|)$(}+{bc", True),
    ("dist/*.whl", "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl", True),
    ("a\\\\", "a\\", True), ("a\\*b", "a*b", True), ("a\\*b", "ab", False),
    # Go's filepath.Match table, as BuildKit sees it
    ("*", "abc", True), ("*c", "abc", True), ("a*", "a", True), ("a*", "ab/c", True), ("a*/b", "abc/b", True),
    ("a*/b", "a/c/b", False), ("a*b*c*d*e*/f", "axbxcxdxe/f", True), ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", False),
    ("a*b?c*x", "abxbbxdbxebxczzx", True), ("a*b?c*x", "abxbbxdbxebxczzy", False), ("ab[^c]", "abc", False),
    ("ab[^e-g]", "abc", True), ("a?b", "a☺b", True), ("a???b", "a☺b", False), ("[a-ζ]*", "α", True),
    ("*[a-ζ]", "A", False), ("a?b", "a/b", False), ("a*b", "a/b", False), ("[\\]a]", "]", True),
    ("[x\\-]", "-", True), ("[x\\-]", "z", False), ("*x", "xxx", True),
    # a pattern matches a parent directory: everything under it is left out
    ("docs", "docs/README.md", True), ("docs/", "docs/a/b", True), ("/docs", "docs/a", True), ("doc", "docs/a", False),
]

# (patterns, path, left out): later patterns decide, "!" puts back
PATTERNS = [
    (["**", "!util/docker/web"], "util/docker/web/foo", False),
    (["**", "!util/docker/web", "util/docker/web/foo"], "util/docker/web/foo", True),
    (["**", "!dist/*.whl"], "dist/proxy.py-2.4.0rc3.dev36+g08acad9-py3-none-any.whl", False),
    (["!fileutils.go", "*.go"], "fileutils.go", True),
    (["*.go", "!fileutils.go"], "fileutils.go", False),
    (["docs", "!docs/README.md"], "docs/README.md", False),
    (["docs/*", "!docs/README.md"], "docs/README.md", False),
    (["docs/*", "!docs/README.md"], "docs/other.md", True),
    (["*.md", "!README*.md", "README-secret.md"], "README-secret.md", True),
    (["*.md", "!README*.md", "README-secret.md"], "README-public.md", False),
]

BAD = ["!", "[", "[^", "[^bc", "a[", "[]a]", "[-]", "[x-]", "[-x]", "\\", "[a-b-c]"]


@pytest.mark.parametrize("pattern, path, left_out", ONE_PATTERN)
def test_one_pattern_as_buildkit_matches_it(pattern, path, left_out):
    assert PatternMatcher(read_patterns(pattern)).excluded(path) is left_out


@pytest.mark.parametrize("patterns, path, left_out", PATTERNS)
def test_the_last_matching_pattern_decides(patterns, path, left_out):
    assert PatternMatcher(patterns).excluded(path) is left_out


@pytest.mark.parametrize("pattern", BAD)
def test_a_pattern_buildkit_refuses_is_refused(pattern):
    with pytest.raises(ValueError):
        PatternMatcher([pattern])


def test_the_file_syntax_comments_blank_lines_bom_and_leading_slash():
    text = "\ufeff# a comment\n\n  /build/  \n !  /keep/this \na #not a comment\n\t\n# !x\n/\n./x/../y\n"
    assert read_patterns(text) == ["build", "!keep/this", "a #not a comment", "/", "y"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c.txt", "d"]), min_size=1, max_size=4),
       st.sampled_from(["", "**/", "/"]))
def test_a_literal_path_leaves_out_itself_and_what_is_under_it(parts, prefix):
    path = "/".join(parts)
    matcher = PatternMatcher(read_patterns(prefix + path))
    assert matcher.excluded(path) and matcher.excluded(path + "/under/it")
    assert not matcher.excluded(path + "x") and not PatternMatcher(["!" + path]).excluded(path)


# patterns a backtracking regular expression takes exponential time on: (pattern, path, left out)
HOSTILE = [
    ("*a" * 40 + " b", "a" * 200, False),
    ("*a" * 40 + "b", "a" * 199 + "b", True),
    ("*a" * 10 + "b", "a" * 40, False),
    ("*a" * 10 + "b", "xa" * 20 + "b", True),
    ("**/" * 8 + "b", "/".join(["d"] * 30) + "/x", False),
    ("**/" * 8 + "b", "/".join(["d"] * 30) + "/b", True),
    ("**/" * 8 + "b", "/".join(["d"] * 15) + "/b/" + "/".join(["d"] * 15), True),  # a parent matches
]


def test_hostile_patterns_match_in_one_pass_over_the_path(monkeypatch):
    from bake.plan import dockerignore
    steps = []
    real = dockerignore._Glob._step
    monkeypatch.setattr(dockerignore._Glob, "_step", lambda self, states, ch: steps.append(ch) or real(self, states, ch))
    for pattern, path, left_out in HOSTILE:
        matcher = PatternMatcher(read_patterns(pattern))
        steps.clear()
        assert matcher.excluded(path) is left_out, pattern
        assert 0 < len(steps) <= len(path), pattern  # at most one new step a character, none taken twice
        glob = matcher.patterns[0].glob
        assert all(len(states) <= 2 * glob.end + 1 for states, _ in glob._steps), pattern


def test_hostile_patterns_do_not_hang_a_process():
    code = ("from bake.plan.dockerignore import PatternMatcher, read_patterns\n"
            f"cases = {HOSTILE!r}\n"
            "print([PatternMatcher(read_patterns(p)).excluded(x) for p, x, _ in cases])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == str([left_out for _, _, left_out in HOSTILE]), proc.stderr


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "/", "*", "**", "**/", "?", "[a-b]", "[^a]", "\\*", ".", "x"]),
                min_size=1, max_size=7),
       st.text(alphabet="ab/x.*", max_size=12))
def test_the_matcher_agrees_with_a_regular_expression_of_moby_s_translation(parts, path):
    pattern = clean("".join(parts))
    try:
        matcher = PatternMatcher([pattern])
    except ValueError:
        return
    if matcher.patterns[0].kind != "regex":  # "d/**", "**/x", "x": plain string comparisons
        return
    assert matcher.excluded(path) is _reference_excluded(pattern, path)


def _reference_excluded(pattern: str, path: str) -> bool:
    """moby's matching written out plainly: the pattern as a regular expression (fine on these
    short cases), tried on the path and each parent."""
    import re
    out, i = "", 0
    while i < len(pattern):
        ch, i = pattern[i], i + 1
        if pattern.startswith("*", i - 1) and pattern.startswith("*", i):
            i += 1
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i >= len(pattern) else "(.*/)?"
        elif ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\":
            out, i = out + re.escape(pattern[i]), i + 1
        elif ch == "[":
            end = pattern.index("]", i + 1)
            out, i = out + pattern[i - 1:end + 1], end + 1
        else:
            out += re.escape(ch)
    regex = re.compile(out)
    parent = os.path.dirname(path)
    parents = parent.split("/") if parent else []
    candidates = [path] + ["/".join(parents[:k + 1]) for k in range(len(parents))]
    return any(regex.fullmatch(c) for c in candidates)


def test_which_ignore_file_a_build_reads(tmp_path):
    ctx = tmp_path / "ctx"
    (ctx / "sub").mkdir(parents=True)
    assert ignore_file(str(ctx), "Dockerfile") is None
    (ctx / ".dockerignore").write_text("x\n")
    assert ignore_file(str(ctx), "Dockerfile") == str(ctx / ".dockerignore")
    (ctx / "sub" / "app.Dockerfile.dockerignore").write_text("y\n")
    assert ignore_file(str(ctx), "sub/app.Dockerfile") == str(ctx / "sub" / "app.Dockerfile.dockerignore")
    assert ignore_file(str(ctx), "Dockerfile") == str(ctx / ".dockerignore")
    outside = tmp_path / "elsewhere.Dockerfile"
    (tmp_path / "elsewhere.Dockerfile.dockerignore").write_text("z\n")
    assert ignore_file(str(ctx), str(outside)) == str(tmp_path / "elsewhere.Dockerfile.dockerignore")


def _context(tmp_path, ignore: str):
    ctx = tmp_path / "ctx"
    for rel in ("Dockerfile", "app.py", "notes.md", "README.md", "build/out.o", "build/keep.txt", "logs/a/b.log",
                "src/x.pyc", "src/y.py"):
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx / rel).write_text(f"{rel}\n")
    (ctx / ".dockerignore").write_text(ignore)
    return ctx


IGNORE = "# not sent\n*.md\n!README.md\nbuild\n!build/keep.txt\nlogs/\n**/*.pyc\n"
SENT = {".dockerignore", "Dockerfile", "app.py", "README.md", "build/keep.txt", "src/y.py"}
LEFT_OUT = {"notes.md", "build/out.o", "logs/a/b.log", "src/x.pyc"}


def _digest(ctx) -> str:
    return input_digests({"t": {"context": str(ctx), "dockerfile": "Dockerfile"}}, Hasher())["t"]


def test_a_file_left_out_does_not_change_the_digest_and_one_sent_does(tmp_path):
    ctx = _context(tmp_path, IGNORE)
    before = _digest(ctx)
    for rel in sorted(LEFT_OUT):
        (ctx / rel).write_text("changed\n")
    (ctx / "logs" / "new.log").write_text("new\n")
    assert _digest(ctx) == before
    for rel in sorted(SENT - {".dockerignore"}):
        (ctx / rel).write_text(f"{rel} changed\n")
        assert _digest(ctx) != before, rel
        (ctx / rel).write_text(f"{rel}\n")
    assert _digest(ctx) == before
    (ctx / "src" / "new.py").write_text("new\n")  # a new file that is sent
    assert _digest(ctx) != before


def test_the_dockerfile_specific_ignore_file_wins(tmp_path):
    ctx = _context(tmp_path, IGNORE)
    (ctx / "Dockerfile.dockerignore").write_text("app.py\n")
    before = _digest(ctx)
    (ctx / "notes.md").write_text("changed\n")  # only .dockerignore leaves it out: now it is sent
    assert _digest(ctx) != before
    before = _digest(ctx)
    (ctx / "app.py").write_text("changed\n")
    assert _digest(ctx) == before


def test_a_named_context_reads_its_own_ignore_file(tmp_path):
    ctx = _context(tmp_path, IGNORE)
    other = tmp_path / "other"
    other.mkdir()
    (other / ".dockerignore").write_text("cache\n")
    (other / "cache").write_text("1\n")
    (other / "kept").write_text("1\n")
    targets = lambda: {"t": {"context": str(ctx), "contexts": {"extra": str(other)}}}  # noqa: E731
    before = input_digests(targets(), Hasher())["t"]
    (other / "cache").write_text("2\n")
    assert input_digests(targets(), Hasher())["t"] == before
    (other / "kept").write_text("2\n")
    assert input_digests(targets(), Hasher())["t"] != before


def test_an_ignore_file_buildkit_refuses_leaves_nothing_out(tmp_path):
    ctx = _context(tmp_path, "[\n")
    before = _digest(ctx)
    (ctx / "notes.md").write_text("changed\n")
    assert _digest(ctx) != before


def _sent_by_buildkit(engine, ctx, out) -> set:
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY . /\n")
    engine.docker("buildx", "build", "--output", f"type=local,dest={out}", str(ctx), timeout=300)
    return {os.path.relpath(os.path.join(top, f), out).replace(os.sep, "/")
            for top, _, files in os.walk(out) for f in files}


def test_buildkit_sends_exactly_the_files_the_digest_counts(engine, tmp_path):
    ctx = _context(tmp_path, IGNORE)
    assert _sent_by_buildkit(engine, ctx, tmp_path / "out") == SENT
    (ctx / "Dockerfile.dockerignore").write_text("app.py\n**/*.pyc\n")
    assert _sent_by_buildkit(engine, ctx, tmp_path / "out2") == (
        SENT | LEFT_OUT | {"Dockerfile.dockerignore"}) - {"app.py", "src/x.pyc"}


def test_buildkit_reads_a_named_context_s_own_ignore_file(engine, tmp_path):
    ctx, other, out = tmp_path / "ctx", tmp_path / "other", tmp_path / "out"
    ctx.mkdir()
    other.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\nCOPY --from=extra . /extra\n")
    (other / ".dockerignore").write_text("cache\n")
    (other / "cache").write_text("1\n")
    (other / "kept").write_text("1\n")
    engine.docker("buildx", "build", "--build-context", f"extra={other}", "--output", f"type=local,dest={out}",
                  str(ctx), timeout=300)
    assert sorted(p.name for p in (out / "extra").iterdir()) == [".dockerignore", "kept"]


def _plugin_on(make_plugin, ctx):
    """A plugin with a stage ``odd`` (on jax) whose context is ``ctx``."""
    return make_plugin(f"""
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="odd", image="odd", parent="jax", context={str(ctx)!r}, registry="ghcr.io/nvidia")]
""", name="odd-context")


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bake-plan: error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_an_ignore_file_over_its_bound_is_one_line_and_not_read(cli, make_plugin, tmp_path):
    from bake.plan.dockerignore import IGNORE_FILE_BYTES
    ctx, cwd = tmp_path / "ctx", tmp_path / "cwd"
    ctx.mkdir()
    cwd.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    site = _plugin_on(make_plugin, ctx)
    # At the bound, to the byte: read. One pattern and a long comment (200,000 patterns would say
    # the same about the bound, slowly).
    text = "*.md\n#" + "x" * (IGNORE_FILE_BYTES - 7) + "\n"
    assert len(text.encode()) == IGNORE_FILE_BYTES
    (ctx / ".dockerignore").write_text(text)
    assert cli("plan", "--target", "odd", cwd=cwd, pythonpath=[site]).returncode == 0
    for rel in cwd.iterdir():
        rel.unlink()
    with open(ctx / ".dockerignore", "ab") as f:
        f.truncate(IGNORE_FILE_BYTES + 1)
    line = _one_error_line(cli("plan", "--target", "odd", cwd=cwd, pythonpath=[site]))
    assert str(ctx / ".dockerignore") in line and "larger than 1 MiB" in line, line
    assert list(cwd.iterdir()) == []


def test_an_ignore_file_that_is_a_fifo_is_refused_not_waited_on(cli, make_plugin, tmp_path):
    ctx, cwd = tmp_path / "ctx", tmp_path / "cwd"
    ctx.mkdir()
    cwd.mkdir()
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    os.mkfifo(ctx / ".dockerignore")
    line = _one_error_line(cli("plan", "--target", "odd", cwd=cwd, pythonpath=[_plugin_on(make_plugin, ctx)]))
    assert str(ctx / ".dockerignore") in line and "a FIFO" in line, line
