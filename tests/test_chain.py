"""Ordering the chain: the same order as a plain recursive depth-first walk, for any family, and no
recursion limit: a chain thousands of stages deep plans and renders like a short one."""

from __future__ import annotations

import datetime
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from bake import Stage, hookimpl
from bake.api import make_plan, render
from bake.errors import StageError
from bake.plan.compose import PlanOptions, chain_of, dependencies
from bake.plan.plugins import get_plugin_manager
from bake.resources import stage_dir

CONTEXT = str(stage_dir("jax"))


def reference_chain(stages, roots):
    """Depth-first, recursive: every stage after what it depends on, in declaration order."""
    order, done, path = [], set(), []

    def visit(name):
        if name in done:
            return
        if name in path:
            raise StageError("cycle " + " -> ".join(path[path.index(name):] + [name]))
        if name not in stages:
            raise StageError("missing " + name)
        path.append(name)
        for dep in dependencies(stages[name]):
            visit(dep)
        path.pop()
        done.add(name)
        order.append(name)

    for root in roots:
        visit(root)
    return order


@st.composite
def families(draw):
    """Up to 12 stages named s0…, each with an optional parent and used stages among all names
    (cycles and missing names included), and some requested roots."""
    count = draw(st.integers(1, 12))
    names = [f"s{i}" for i in range(count)]
    others = st.sampled_from(names + ["ghost"])
    stages = {}
    for name in names:
        parent = draw(st.none() | others.filter(lambda n, me=name: n != me))
        uses = draw(st.dictionaries(st.sampled_from(["a", "b", "c"]), others, max_size=2))
        stages[name] = Stage(registry="ghcr.io/nvidia", name=name, context=CONTEXT, parent=parent, uses=uses, plugin="p")
    roots = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    return stages, roots


@settings(max_examples=300, deadline=None)
@given(families())
def test_chain_order_and_errors_match_a_recursive_walk(family):
    stages, roots = family
    try:
        expected = reference_chain(stages, roots)
    except StageError as err:
        kind, _, detail = str(err).partition(" ")
        try:
            chain_of(stages, roots)
        except StageError as got:
            if kind == "cycle":
                assert str(got).startswith(f"cycle between stages: {detail} (")
            else:
                assert f"stage '{detail}' does not exist" in str(got)
        else:
            raise AssertionError(f"expected a {kind} error")
    else:
        assert [s.name for s in chain_of(stages, roots)] == expected


DEPTH = max(3000, sys.getrecursionlimit() * 2)


class DeepChain:
    """A plugin with one chain DEPTH stages deep: deep-0 <- deep-1 <- … (each builds on the last)."""

    @hookimpl
    def bake_plan_stages(self):
        return [
            Stage(registry="ghcr.io/nvidia", name=f"deep-{i}", image=f"deep-{i}", parent=f"deep-{i - 1}" if i else None,
                  base_image=None if i else "python:3.11-slim", context=CONTEXT)
            for i in range(DEPTH)
        ]


def test_a_chain_deeper_than_the_recursion_limit():
    stages = {s.name: s for s in DeepChain().bake_plan_stages()}
    chain = chain_of(stages, [f"deep-{DEPTH - 1}"])
    assert [s.name for s in chain] == [f"deep-{i}" for i in range(DEPTH)]


def test_a_deep_chain_plans_and_renders():
    pm = get_plugin_manager(plugins=[DeepChain()])
    composition = make_plan(PlanOptions(targets=(f"deep-{DEPTH - 1}",), date=datetime.date(2026, 11, 29)), pm)
    targets = composition.plan["target"]
    assert len([t for t in targets if t.startswith("deep-")]) == 2 * DEPTH
    assert targets[f"deep-{DEPTH - 1}-mealkit"]["contexts"] == {"base": f"target:deep-{DEPTH - 2}-mealkit"}
    assert f'target "deep-{DEPTH - 1}"' in render(composition, "hcl")
