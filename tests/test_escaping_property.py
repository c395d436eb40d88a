"""Escaping, proven: hypothesis feeds arbitrary strings (``${``, ``$${``, ``%{``, quotes,
backslashes, newlines, tabs, control characters, non-ASCII, very long values) into args, label
keys and values, tags' free parts and inline Dockerfiles; every plan goes through the real
``docker buildx bake --print`` (0.29 and 0.13, HCL and JSON) and every value must come back
exactly. Labels hold no control or bidirectional character (refused; their escapes are fed instead).

A ``buildx --print`` costs about 0.1-0.3 s, so examples are not printed one by one: hypothesis
generates ``EXAMPLES`` examples (``max_examples``) once per run, each example becomes one target
of one plan, and that plan is printed once per format and buildx version. A mismatch names the
target, the attribute and both values.

What cannot come back exactly is refused, and that is a property too: a string that is not in
Unicode NFC (bake stores strings through cty, which NFC-normalises them) and a tag outside the
registry alphabet ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``.
"""

from __future__ import annotations

import datetime
import re
import unicodedata

import pytest
from conftest import expected_target
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bake import Stage, hookimpl
from bake.api import make_plan, render
from bake.errors import BakePlanError, StageError
from bake.plan import policies
from bake.plan.compose import PlanOptions
from bake.plan.plugins import get_plugin_manager
from bake.plan.secrets import credential_name, credential_value
from bake.plan.text import printable

EXAMPLES = 500
DATE = datetime.date(2026, 11, 29)
TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
REGISTRY = "localhost:5555/prop"
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
REFUSAL_EXAMPLES = 100
"""The refusals make one plan per example (in-process, about 0.05 s each), not one plan for all."""
REFUSAL_SETTINGS = settings(SETTINGS, max_examples=REFUSAL_EXAMPLES)

# Pieces that broke bake file generators before, mixed with arbitrary text.
FRAGMENTS = ["${", "$${", "$$${", "%{", "%%{", "}", "{", "$", "%", "$}", "\\", "\\\\", "\\n", "\\${", '"', "'",
             "\n", "\r\n", "\r", "\t", "\x1b[0m", "\x7f", "\u0085", "\u2028", "\u2029", "\ufeff",
             "${HOME}", "${TAG}", "%{ if true }x%{ endif }", "${ }", "<<EOF\n", "EOF", "é", "日本", "🐳", " ", "#", "//"]


def _nfc(text: str) -> str:
    # Without NUL: a plan refuses it (nothing a build reads can carry it; test_text_and_redaction.py).
    return unicodedata.normalize("NFC", text).replace("\x00", "")


pieces = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=8).map("".join)
long_values = st.builds(lambda piece, n: piece * n, pieces.filter(bool), st.integers(20, 200))  # up to ~4 kB
text_values = st.one_of(pieces, pieces, pieces, pieces, pieces, pieces, pieces, pieces, long_values).map(_nfc)
# And one value far longer than any hypothesis draws: every fragment, 300 kB.
VERY_LONG = _nfc("".join(FRAGMENTS) * 2000)
# Labels refuse control and bidirectional characters (a stage's labels are printed and pushed as
# image metadata): their hostile text is the rest, with each such character written as an escape.
label_values = text_values.map(lambda t: printable(t, keep=""))
EXAMPLE = st.fixed_dictionaries({
    "args": st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True), text_values,
                            min_size=1, max_size=2),
    "labels": st.dictionaries(label_values.filter(bool), label_values, min_size=1, max_size=2),
    "tags": st.lists(st.from_regex(TAG, fullmatch=True), min_size=1, max_size=2, unique=True),
    "dockerfile_inline": text_values.filter(bool),
})


def _credential_looking(example: dict) -> bool:
    """bake-plan refuses these on purpose (test_secrets.py); keep them out of the round trip."""
    names = [f"A_{k}" for k in example["args"]] + list(example["labels"])
    values = list(example["args"].values()) + list(example["labels"].items()) + [example["dockerfile_inline"]]
    flat = [v for item in values for v in (item if isinstance(item, tuple) else (item,))]
    return any(credential_name(n) for n in names) or any(credential_value(v) for v in flat + names)


class Family:
    """One stage per example, and a tag policy answering each stage's generated tags."""

    def __init__(self, examples, context):
        self.examples, self.context = examples, str(context)

    def stage(self, i: int) -> Stage:
        ex = self.examples[i]
        return Stage(name=f"s{i}", image=f"img{i}", kind="single", registry=REGISTRY, context=self.context,
                     dockerfile_inline=ex["dockerfile_inline"], platforms=("linux/amd64",),
                     args={f"A_{k}": v for k, v in ex["args"].items()}, labels=ex["labels"])

    @hookimpl
    def bake_plan_stages(self):
        return [self.stage(i) for i in range(len(self.examples))]

    @hookimpl
    def bake_plan_tags(self, stage):
        return list(self.examples[int(stage.name[1:])]["tags"])


def _plan(examples, context):
    family = Family(examples, context)
    pm = get_plugin_manager(load_entrypoints=False, plugins=[policies, family])
    options = PlanOptions(targets=tuple(f"s{i}" for i in range(len(examples))), date=DATE)
    return make_plan(options, pm)


def _collect(strategy, check=lambda ex: True) -> list:
    examples = []

    @SETTINGS
    @given(strategy)
    def generate(example):
        assume(check(example))
        examples.append(example)

    generate()
    return examples


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """``EXAMPLES`` generated examples, plus one with very long values, and the composition of
    their plan (one target each)."""
    examples = _collect(EXAMPLE, lambda ex: not _credential_looking(ex))
    assert len(examples) >= EXAMPLES
    examples.append({"args": {"LONG": VERY_LONG}, "labels": {printable(VERY_LONG[:5000], keep=""): printable(VERY_LONG, keep="")}, "tags": ["t" * 128],
                     "dockerfile_inline": VERY_LONG})
    return examples, _plan(examples, tmp_path_factory.mktemp("hostile-context"))


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_hostile_strings_round_trip_through_buildx(buildx, hostile, tmp_path, fmt):
    examples, composition = hostile
    plan = composition.plan

    # bake-plan kept every value as given...
    for i, ex in enumerate(examples):
        target = plan["target"][f"s{i}"]
        assert target["dockerfile-inline"] == ex["dockerfile_inline"]
        assert {k: target["args"][f"A_{k}"] for k in ex["args"]} == ex["args"]
        assert {k: target["labels"][k] for k in ex["labels"]} == ex["labels"]
        assert target["tags"] == [f"{REGISTRY}/img{i}:{tag}" for tag in ex["tags"]]

    # ...and buildx reads every one back exactly, from one file of EXAMPLES targets.
    plan_file = tmp_path / f"plan.{fmt}"
    plan_file.write_text(render(composition, fmt), encoding="utf-8")
    printed = buildx.print_plan(plan_file, cwd=tmp_path)
    assert set(printed["target"]) == set(plan["target"])
    mismatches = []
    for name, target in plan["target"].items():
        got = printed["target"][name]
        for key, value in expected_target(target).items():
            if got.get(key) != value:
                mismatches.append(f"{name}.{key}: wrote {value!r:.300}, buildx read {got.get(key)!r:.300}")
    assert not mismatches, f"{len(mismatches)} mismatches, e.g.:\n" + "\n".join(mismatches[:5])


NOT_NFC = ["e\u0301", "A\u030a", "\u212b", "\u1e0b\u0323", "\u0041\u0308", "\uf900", "\u0958"]


@given(st.tuples(text_values, st.sampled_from(NOT_NFC), text_values,
                 st.sampled_from(["args", "label key", "label value", "dockerfile_inline"])))
@REFUSAL_SETTINGS
def test_text_buildx_would_normalise_is_refused(tmp_path_factory, case):
    prefix, odd, suffix, where = case
    if where.startswith("label"):  # no control characters: refused before NFC is looked at
        prefix, suffix = printable(prefix, keep=""), printable(suffix, keep="")
    text = prefix + odd + suffix
    assume(not unicodedata.is_normalized("NFC", text))
    example = {"args": {}, "labels": {}, "tags": ["t"], "dockerfile_inline": "FROM scratch"}
    if where == "args":
        example["args"]["X"] = text
    elif where == "label key":
        example["labels"][text] = "v"
    elif where == "label value":
        example["labels"]["k"] = text
    else:
        example["dockerfile_inline"] = text
    assume(not _credential_looking(example))
    with pytest.raises(StageError) as err:
        _plan([example], tmp_path_factory.getbasetemp())
    message = str(err.value)
    assert "not in Unicode NFC" in message and "stage 's0'" in message and "target 's0'" in message
    assert {"args": "args['A_X']", "label key": "labels key", "label value": "labels['k']",
            "dockerfile_inline": "dockerfile-inline"}[where] in message
    assert "\n" not in message


# Tags registries refuse: arbitrary text that is not in the alphabet, and valid text made too long.
bad_tags = st.one_of(
    st.text(max_size=40).filter(lambda t: not re.fullmatch(TAG, t)),
    st.builds(lambda tag, more: tag + more, st.from_regex(TAG, fullmatch=True),
              st.from_regex(r"[A-Za-z0-9_.-]{129}", fullmatch=True)),
)


@given(bad_tags)
@REFUSAL_SETTINGS
def test_tags_registries_refuse_are_refused(tmp_path_factory, tag):
    example = {"args": {}, "labels": {}, "tags": [tag], "dockerfile_inline": "FROM scratch"}
    with pytest.raises(BakePlanError) as err:
        _plan([example], tmp_path_factory.getbasetemp())
    message = str(err.value)
    assert "plugin 'Family', stage 's0', single tag: " in message, message
    assert any(why in message for why in ("is empty", "characters long", "contains", "starts with")), message
