"""``bake-plan graph``: the stage DAG as Mermaid (GitHub renders it) and Graphviz dot, checked by
parsing the text back: every node declared once with a safe id, every edge between declared nodes,
and the edges exactly the plan's ``target:`` contexts."""

from __future__ import annotations

import datetime
import re
import shutil
import subprocess

import pytest

from bake.api import make_plan
from bake.plan.compose import PlanOptions
from bake.plan.graph import mermaid_text, to_dot, to_markdown, to_mermaid

DATE = datetime.date(2026, 11, 29)
CUDA = "nvidia/cuda:12.2.0-devel-ubuntu22.04"

_ID = r"[A-Za-z][A-Za-z0-9_]*"
_SHAPES = {"([": "])", "[": "]", "[[": "]]", "[(": ")]"}
_NODE = re.compile(rf"^ +({_ID})(\(\[|\[\[|\[\(|\[)\"([^\"]*)\"(\]\)|\]\]|\)\]|\])$")
_EDGE = re.compile(rf'^  ({_ID}) -->\|"([^"]*)"\| ({_ID})$')
_SUBGRAPH = re.compile(rf'^  subgraph ({_ID})\["([^"]*)"\]$')


def parse_mermaid(text: str):
    """Nodes (id → (shape, label lines)), clusters (label → node ids) and edges by first label line."""
    lines = text.splitlines()
    assert lines[0] == "flowchart TD"
    nodes, clusters, edges, current = {}, {}, [], None
    for line in lines[1:]:
        if m := _SUBGRAPH.match(line):
            assert current is None, "nested subgraph"
            current = m.group(2)
            clusters[current] = []
        elif line == "  end":
            assert current is not None
            current = None
        elif m := _NODE.match(line):
            nid, opening, label, closing = m.groups()
            assert _SHAPES[opening] == closing, line
            assert nid not in nodes and nid.lower() != "end", nid
            nodes[nid] = (opening, label.split("<br/>"))
            if current is not None:
                clusters[current].append(nid)
        elif m := _EDGE.match(line):
            edges.append(m.groups())
        else:
            assert re.match(rf"^  (classDef {_ID} [a-z:#0-9,-]+|class {_ID}(,{_ID})* {_ID})$", line), line
    assert current is None, "unclosed subgraph"
    for src, _, dst in edges:
        assert src in nodes and dst in nodes, (src, dst)
    named = {(nodes[s][1][0], label, nodes[d][1][0]) for s, label, d in edges}
    return nodes, clusters, named


def composition(*targets, platforms=()):
    return make_plan(PlanOptions(targets=targets, date=DATE, platforms=platforms))


def test_mermaid_draws_every_target_and_exactly_the_plans_contexts():
    comp = composition("upstream-pax")
    nodes, clusters, edges = parse_mermaid(to_mermaid(comp))
    titles = {label[0]: (shape, label) for shape, label in nodes.values()}
    assert set(titles) == set(comp.plan["target"]) | {CUDA}
    assert titles["jax-mealkit"] == ("([", ["jax-mealkit", "meal kit · amd64, arm64"])
    assert titles["jax"] == ("[", ["jax", "final · amd64, arm64"])
    assert titles["te"] == ("[[", ["te", "single target · amd64, arm64"])
    assert titles[CUDA][0] == "[("
    assert edges == {
        (CUDA, "BASE_IMAGE", "base-mealkit"),
        ("base-mealkit", "mealkit", "base"),
        ("base-mealkit", "base", "te"),
        ("base-mealkit", "base", "jax-mealkit"),
        ("te", "te", "jax-mealkit"),
        ("jax-mealkit", "mealkit", "jax"),
        ("jax-mealkit", "base", "upstream-pax-mealkit"),
        ("upstream-pax-mealkit", "mealkit", "upstream-pax"),
    }
    assert list(clusters) == [f"{s} · plugin {s} · supports amd64, arm64" for s in ("base", "te", "jax", "upstream-pax")]


def test_per_arch_nodes_show_what_they_build_and_stages_what_they_support():
    nodes, clusters, _ = parse_mermaid(to_mermaid(composition("jax", platforms=("linux/arm64",))))
    assert all(label[1].endswith("· arm64") for shape, label in nodes.values() if shape != "[(")
    assert all(name.endswith("supports amd64, arm64") for name in clusters)
    nodes, clusters, edges = parse_mermaid(to_mermaid(composition("xla-ci")))
    assert list(clusters) == ["xla-ci · plugin xla-ci · supports amd64"]
    assert edges == {("us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/development:3.8_cuda_12.1",
                      "base_image", "xla-ci")}


def test_a_replaced_base_image_is_drawn_instead_of_the_original():
    comp = make_plan(PlanOptions(targets=("jax",), date=DATE, base_images=((CUDA, "mirror.example/cuda:12.2"),)))
    _, _, edges = parse_mermaid(to_mermaid(comp))
    assert ("mirror.example/cuda:12.2", CUDA, "base-mealkit") in edges
    assert not any(src == CUDA for src, _, _ in edges)


def test_labels_are_escaped_for_mermaid():
    assert mermaid_text('say "hi" #1 <b> & more\nlines') == "say #quot;hi#quot; #35;1 #lt;b#gt; #amp; more lines"


def test_markdown_is_a_fenced_mermaid_block():
    text = to_markdown(composition("jax"), title="jax")
    assert text.startswith("### jax\n\n```mermaid\nflowchart TD\n") and text.endswith("```\n")


def parse_dot(text: str):
    assert text.startswith('digraph "bake-plan" {\n') and text.endswith("}\n")
    assert text.count("{") == text.count("}")
    nodes = dict(re.findall(rf'^ +({_ID}) \[label="((?:[^"\\]|\\.)*)", ', text, re.M))
    edges = re.findall(rf'^  ({_ID}) -> ({_ID}) \[label="([^"]*)"\];$', text, re.M)
    for src, dst, _ in edges:
        assert src in nodes and dst in nodes
    return nodes, {(nodes[s].split("\\n")[0], label, nodes[d].split("\\n")[0]) for s, d, label in edges}


def test_dot_has_the_same_graph_as_mermaid():
    comp = composition("upstream-pax")
    nodes, edges = parse_dot(to_dot(comp))
    assert edges == parse_mermaid(to_mermaid(comp))[2]
    assert nodes["n_jax_mealkit"] == "jax-mealkit\\nmeal kit · amd64, arm64"
    assert to_dot(comp).count("subgraph cluster_") == 4


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_graphviz_accepts_the_dot(tmp_path):
    proc = subprocess.run(["dot", "-Tsvg"], input=to_dot(composition("upstream-pax")), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_cli_graph_writes_a_file_or_stdout(cli, tmp_path):
    out = cli("graph", "--target", "upstream-pax", cwd=tmp_path, check=True).stdout
    assert out == to_mermaid(composition("upstream-pax"))
    cli("graph", "--target", "jax", "--format", "dot", "-o", "g.dot", cwd=tmp_path, check=True)
    assert (tmp_path / "g.dot").read_text().startswith('digraph "bake-plan"')
    proc = cli("graph", "--target", "jax", "--format", "svg", cwd=tmp_path)
    assert proc.returncode == 2 and "invalid choice: 'svg'" in proc.stderr


def test_graph_of_configured_variants(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text(
        'targets = ["xla-ci"]\n[stages.xla-ci]\nvariants = { python = ["3.10", "3.12"] }\n')
    nodes, clusters, edges = parse_mermaid(cli("graph", cwd=tmp_path, check=True).stdout)
    assert sorted(label[0] for _, label in nodes.values() if _ != "[(") == ["xla-ci-3_10", "xla-ci-3_12"]
    assert {src.rsplit(":", 1)[1] for src, _, _ in edges} == {"3.10_cuda_12.1", "3.12_cuda_12.1"}


def test_the_usage_picture_is_what_graph_draws():
    from conftest import ROOT

    readme = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    block = readme.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block == to_mermaid(composition("upstream-pax"))
