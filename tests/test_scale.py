"""Linear to 20,000 stages: what the speed work must not change.

- ``--target`` flags are folded into one word before argparse (:func:`bake.cli.fold_targets`,
  argparse is quadratic in option strings): every command line parses to the same namespace, or
  fails with the same message, as argparse alone gives.
- The plans of the synthetic benchmark family and of upstream-pax are byte-for-byte the plans the
  code before the planning speed-ups wrote (digests pinned below, paths of the install replaced), whether the
  targets come from ``--target`` flags, ``bake-plan.toml`` or ``$BAKE_PLAN_TARGETS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from bake.cli import TARGET_OPTION_COMMANDS, TARGET_OPTIONS, build_parser, fold_targets, parse_args
from bake.errors import UsageError


def argparse_alone(argv):
    """What :func:`bake.cli.parse_args` gives without folding: the namespace, or the error line."""
    try:
        args, extra = build_parser().parse_known_args(argv)
    except UsageError as err:
        return str(err)
    return (vars(args), extra)


def folded(argv):
    try:
        args, extra = build_parser().parse_known_args(fold_targets(argv)[0])
    except UsageError as err:
        return str(err)
    if fold_targets(argv)[1]:
        args.target = [n for w in args.target for n in w.split("\0")]
    return (vars(args), extra)


WORDS = ["--target", "-t", "--target=jax", "--target=", "--target=-x", "-t=base", "-tbase", "--targ", "jax",
         "base", "a,b", "", " ", "-x", "--", "--platform", "linux/amd64", "--date", "2026-11-29", "-q", "-v",
         "--registry", "extra", "--target=a,,b"]


@settings(max_examples=150, deadline=None)
@given(command=st.sampled_from(["plan", "build", "matrix", "lock", "config", "bump", "stages", "graph"]),
       words=st.lists(st.sampled_from(WORDS), max_size=12))
def test_folding_the_targets_changes_nothing_argparse_says(command, words):
    argv = [command, *words]
    assert folded(argv) == argparse_alone(argv)


@pytest.mark.parametrize("argv, message", [
    (["--target"], "plan: argument --target/-t: expected one argument"),
    (["--target", "jax", "--target"], "plan: argument --target/-t: expected one argument"),
    (["--target", "jax", "-t", "--date", "x"], "plan: argument --target/-t: expected one argument"),
    (["build", "-t", "a", "--target", "b", "x"], "build: unrecognized arguments: x"),
    (["--target", "jax", "--target", "base", "--", "--target", "te"], "unrecognized arguments: -- --target te"),
    (["--target", "jax", "--target", "base", "surplus"], "unrecognized arguments: surplus"),
])
def test_target_errors_read_as_before(argv, message):  # the messages of the code before folding
    with pytest.raises(UsageError) as err:
        parse_args(argv)
    assert str(err.value) == message


def test_thousands_of_targets_become_one_word_and_split_back_in_order():
    names = [f"s{i}" for i in range(15000)]
    argv = ["plan", *(w for n in names for w in ("--target", n)), "--date", "2026-11-29"]
    words, was_folded = fold_targets(argv)
    assert was_folded and words == ["plan", "--target=" + "\0".join(names), "--date", "2026-11-29"]
    args = parse_args(argv[1:])
    assert args.target == names and args.date == "2026-11-29"


def test_runs_are_folded_in_place_so_the_order_is_kept():
    # argparse reads -t=b and -tb as -t b: in a run too; -v between runs keeps them apart
    argv = ["plan", "--target", "a", "--target", "c", "-t=b", "-tf", "-v", "-t", "d", "--target=e"]
    assert fold_targets(argv)[0] == ["plan", "--target=a\0c\0b\0f", "-v", "--target=d\0e"]
    assert parse_args(argv[1:]).target == ["a", "c", "b", "f", "d", "e"]


def test_the_commands_that_fold_are_the_ones_with_a_target_option():
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    takes = {name for name, sub in commands.items()
             if all(o in sub._option_string_actions for o in TARGET_OPTIONS)}
    assert takes == set(TARGET_OPTION_COMMANDS)
    assert fold_targets(["bump", "--target", "a", "--target", "b"]) == (["bump", "--target", "a", "--target", "b"],
                                                                         False)


# --- the checks of every target, made cheaper, say the same ---------------------------------------

JSONISH = st.recursive(
    st.one_of(st.text(max_size=8), st.integers(), st.booleans()),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(node=st.one_of(JSONISH, st.dictionaries(st.sampled_from(["", "args", "tags"]), JSONISH, max_size=3)))
def test_strings_in_are_the_strings_walk_strings_yields(node):
    from bake.plan.checks import strings_in
    from bake.plan.secrets import walk_strings

    assert strings_in(node) == [text for _, text in walk_strings(node)]


TOKENS = ["ghp_" + "a1" * 18, "github_pat_" + "B2" * 16, "glpat-" + "x" * 20, "AKIA" + "Z" * 16, "xoxb-" + "1" * 10,
          "AIza" + "k" * 35, "hf_" + "q" * 30, "npm_" + "n" * 36, "pypi-AgE" + "p" * 20, "dckr_pat_" + "d" * 20,
          "sk-" + "s" * 32, "eyJ" + "a" * 8 + ".eyJ" + "b" * 8 + "." + "c" * 8,
          "-----BEGIN RSA PRIVATE KEY-----"]


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(st.one_of(st.sampled_from(TOKENS), st.text(alphabet="ab_-.:/@ Z1\n", max_size=6)), max_size=4))
def test_the_one_pass_token_search_finds_what_the_patterns_find(parts):
    from bake.plan.secrets import _ANY_TOKEN, _URL_PATTERNS, VALUE_PATTERNS

    text = "".join(parts)
    alone = any(p.search(text) for _, p in VALUE_PATTERNS if p not in _URL_PATTERNS)
    assert bool(_ANY_TOKEN.search(text)) == alone


@pytest.mark.parametrize("index", range(12))
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_every_token_pattern_match_holds_a_clue(index, data):
    """The cheap first look (_TOKEN_CLUES: substrings, before any pattern runs) lets through
    whatever any token pattern matches: a match drawn from each pattern holds a clue."""
    from bake.plan.secrets import _URL_PATTERNS, VALUE_PATTERNS, _has_clue, _patterns_for

    tokens = [p.pattern for _, p in VALUE_PATTERNS if p not in _URL_PATTERNS]
    assert len(tokens) == 12  # a new pattern: add it to the range above
    pattern = tokens[index].replace(r"\b", "")  # hypothesis draws no word boundaries; they only narrow a match
    token = data.draw(st.from_regex(pattern, fullmatch=True))
    assert _has_clue(token)
    assert _patterns_for(" " + token + " ")


# --- the plans are the bytes they were ----------------------------------------------------------

# sha256 of the plans the code before the planning speed-ups wrote, the install's paths replaced by
# SITE (the bench plugin's directory) and BAKE (bake's package); `python tests/test_scale.py`
# prints them for the installed code. A change meant to change plans updates them, and says so.
PINNED = {
    ("synthetic", "hcl"): "08b13d3e74d1b2f590f2601dbcfaac1ca530d35097f96b025a25c85c86f3643c",
    ("synthetic", "json"): "2c66e89503d839f760557fcc7845f97f14e3506e8b8db1148665569f00e6cf1b",
    ("upstream-pax", "hcl"): "b70fc3d8d885ecb7f5630884f9252379a3322bbc7d777626f4a17b8dcf9c99af",
    ("upstream-pax", "json"): "6b50673397dc5e60cacfedaec0b6d72d5a641d0667f62434d30e63d56b78b1ef",
}
STAGES = "300"


def install_bench_plugin(site: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--target", str(site), str(ROOT / "bench" / "bake-plan-bench")], check=True)


def plan_digest(cwd: Path, site: Path, family: str, fmt: str, how: str = "flags") -> str:
    """Plan ``family`` (``synthetic``: the bench plugin's 300 stages, every leaf requested;
    ``upstream-pax``) in ``cwd``, with its targets from ``how`` (flags, config, env), and the
    sha256 of the plan with the install's paths replaced."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAKE_PLAN_") or k == "BAKE_PLAN_PLUGINS_DISABLE"}
    if family == "synthetic":
        env.update(PYTHONPATH=str(site), BAKE_PLAN_BENCH_STAGES=STAGES)
        sys.path.insert(0, str(site))
        try:
            from bake_plan_bench import leaves
        finally:
            sys.path.remove(str(site))
        targets = leaves(int(STAGES))
    else:
        env.pop("PYTHONPATH", None)
        targets = ["upstream-pax"]
    argv = [sys.executable, "-m", "bake.cli", "--date", "2026-11-29", "-o", f"plan.{fmt}"]
    (cwd / "bake-plan.toml").unlink(missing_ok=True)
    if how == "flags":
        argv += [w for t in targets for w in ("--target", t)]
    elif how == "config":
        (cwd / "bake-plan.toml").write_text(f"targets = {json.dumps(targets)}\n", encoding="utf-8")
    else:
        env["BAKE_PLAN_TARGETS"] = ",".join(targets)
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = (cwd / f"plan.{fmt}").read_text(encoding="utf-8")
    package, stages = subprocess.run(
        [sys.executable, "-c", "import bake, os; from bake.resources import stages_dir; "
                               "print(os.path.dirname(bake.__file__)); print(stages_dir())"],
        cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.split("\n")[:2]
    # an installed wheel keeps the stages under the package (bake/_data/stages), a checkout
    # installed for editing beside it: both are written as the wheel has them
    text = text.replace(str(site), "SITE").replace(stages, "BAKE/_data/stages").replace(package, "BAKE")
    # each target's input digest hashes the files of its contexts (stages/ included): pinned as a shape
    text = re.sub(r'("?io\.bake-plan\.input-digest"? = |"io\.bake-plan\.input-digest": )"sha256:[0-9a-f]{64}"',
                  r'\1"INPUT"', text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def bench_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("bench-site")
    install_bench_plugin(site)
    return site


@pytest.mark.parametrize("fmt", ["hcl", "json"])
@pytest.mark.parametrize("family", ["synthetic", "upstream-pax"])
def test_the_plans_are_byte_for_byte_the_plans_before(bench_site, tmp_path, family, fmt):
    assert plan_digest(tmp_path, bench_site, family, fmt) == PINNED[(family, fmt)]


@pytest.mark.parametrize("how", ["config", "env"])
def test_targets_from_the_configuration_or_the_environment_make_the_same_plan(bench_site, tmp_path, how):
    # JSON: the HCL header names the BAKE_PLAN_* variables the plan was made with
    assert plan_digest(tmp_path, bench_site, "synthetic", "json", how) == PINNED[("synthetic", "json")]


if __name__ == "__main__":  # the digests of the installed code, for PINNED
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        install_bench_plugin(Path(tmp, "site"))
        for family, fmt in PINNED:
            work = Path(tmp, f"{family}-{fmt}")
            work.mkdir()
            print(family, fmt, plan_digest(work, Path(tmp, "site"), family, fmt))


# --- a plan written in parts is still written whole or not at all ---------------------------------

def test_a_plan_written_in_parts_is_whole_or_not_there(tmp_path):
    from bake.output import write_atomic

    path = tmp_path / "docker-bake.hcl"
    write_atomic(str(path), iter(["target \"a\" {", "\n}", "\n"]))
    assert path.read_text() == 'target "a" {\n}\n'

    def failing():
        yield "half a plan"
        raise ValueError("a part failed")

    with pytest.raises(ValueError):
        write_atomic(str(path), failing())
    assert path.read_text() == 'target "a" {\n}\n'  # the old file, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"]  # no temporary file left


def test_render_parts_join_to_render():
    from bake.api import render, render_parts
    from bake.testing import compose_plan

    composition = compose_plan(targets=["upstream-pax"])
    for fmt in ("hcl", "json"):
        parts = list(render_parts(composition, fmt))
        assert len(parts) > 5 and "".join(parts) == render(composition, fmt)


@pytest.mark.parametrize("order", ["parents first", "children first"])
def test_the_declared_python_of_a_deep_chain_walks_each_stage_once(order):
    """Composing asks every target which Python its chain declares: with the answers kept in
    ``known``, a chain thousands of stages deep is walked once in all, not once per target (N²)."""
    from bake.plan.compose import declared_python
    from bake.plan.stage import Stage

    class Counting(dict):
        looked = 0

        def get(self, key, default=None):
            Counting.looked += 1
            return super().get(key, default)

    n = 3000
    stages = Counting({f"s{i}": Stage(name=f"s{i}", context="/ctx", parent=f"s{i - 1}" if i else None,
                                      python="3.11" if i == 0 else None) for i in range(n)})
    names = list(stages) if order == "parents first" else list(reversed(stages))
    known: dict = {}
    assert [declared_python(stages[name], stages, known) for name in names] == [("3.11", "s0")] * n
    assert Counting.looked <= n
    assert declared_python(stages["s2999"], stages) == ("3.11", "s0")  # alone, the whole walk as before
    loop = {"a": Stage(name="a", context="/ctx", parent="b"), "b": Stage(name="b", context="/ctx", parent="a")}
    assert declared_python(loop["a"], loop, {}) is None  # a cycle of parents declares nothing


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_off_while_a_plan_is_made_and_as_it_was_after(tmp_path, monkeypatch, enabled):
    """The cyclic garbage collector walks a large plan's millions of new objects again and again
    while it grows (no cycles to find): it is off while the plan is made, then as it was."""
    import gc

    from bake import commands
    from bake.settings.merge import gather

    monkeypatch.chdir(tmp_path)
    seen = []
    make_plan = commands.make_plan
    monkeypatch.setattr(commands, "make_plan", lambda *a, **k: seen.append(gc.isenabled()) or make_plan(*a, **k))
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        composition = commands.compose(gather("plan", {"target": ["jax"]}, environ={"SOURCE_DATE_EPOCH": "86400"}))
        after = gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False] and after is enabled
    assert "jax" in composition.plan["target"]
