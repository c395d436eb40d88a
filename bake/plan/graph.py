"""Pictures of a plan: the stage DAG as a Mermaid flowchart or a Graphviz digraph.

Nodes are bake targets (meal kit, final, single), grouped by stage, each labelled with the
platforms it builds; a stage's box says which plugin declared it and which arches it supports.
External images a chain starts from are drawn as cylinders. Edges are the plan's named contexts:
``target:<name>`` (a child on its parent's meal kit, ``base``; a final on its meal kit,
``mealkit``; a copied output such as ``te``) and ``docker-image://…`` (a base-image replacement,
or a published ancestor pinned by digest), each labelled with the context's name. Local-directory
contexts (scripts, wheelhouses) are left out.

Mermaid text renders as it is in GitHub Markdown inside a fenced ```mermaid block
(:func:`to_markdown`); node ids are ``[A-Za-z0-9_]`` only (never the keyword ``end``) and every
label is quoted with Mermaid's entity codes for ``"``, ``#``, ``<``, ``>`` and ``&``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional

from bake.plan.compose import Composition, target_names
from bake.plan.names import PLATFORM_ARCH

FLAVOR_WORDS = {"mealkit": "meal kit", "final": "final", "single": "single target", "image": "image"}


@dataclasses.dataclass
class Node:
    """One box: a bake target (``kind`` = its flavor) or an external image (``kind="image"``)."""

    id: str
    kind: str
    title: str
    detail: str = ""


@dataclasses.dataclass
class Graph:
    """Nodes grouped by stage (``clusters``: stage → (label, node ids)), loose nodes (images),
    and edges ``(from id, to id, label)``."""

    clusters: Dict[str, tuple] = dataclasses.field(default_factory=dict)
    loose: List[str] = dataclasses.field(default_factory=list)
    nodes: Dict[str, Node] = dataclasses.field(default_factory=dict)
    edges: List[tuple] = dataclasses.field(default_factory=list)


def _arches(platforms) -> str:
    return ", ".join(PLATFORM_ARCH.get(p, p) for p in platforms)


def graph_of(composition: Composition) -> Graph:
    """The DAG of a composed plan (see the module docstring for what is drawn)."""
    plan = composition.plan["target"]
    graph = Graph()
    ids: Dict[str, str] = {}

    def node_id(tname: str) -> str:
        # Target names are [A-Za-z0-9_-]; "-" becomes "_" and a clash gets a number.
        base = "n_" + re.sub(r"[^A-Za-z0-9_]", "_", tname)
        candidate, n = base, 1
        while candidate in ids.values():
            n += 1
            candidate = f"{base}_{n}"
        ids[tname] = candidate
        return candidate

    def image(ref: str) -> str:
        if "image:" + ref not in ids:
            nid = ids["image:" + ref] = f"i_{len(graph.loose)}"
            graph.nodes[nid] = Node(nid, "image", ref)
            graph.loose.append(nid)
        return ids["image:" + ref]

    for stage in composition.chain:
        members = []
        for tname, flavor in target_names(stage):
            if tname not in plan:
                continue
            nid = node_id(tname)
            detail = f"{FLAVOR_WORDS[flavor]} · {_arches(plan[tname]['platforms'])}"
            graph.nodes[nid] = Node(nid, flavor, tname, detail)
            members.append(nid)
        label = f"{stage.name} · plugin {stage.plugin} · supports {_arches(stage.platforms)}"
        graph.clusters[stage.name] = (label, members)

    for stage in composition.chain:
        for tname, flavor in target_names(stage):
            target = plan.get(tname)
            if target is None:
                continue
            contexts = target.get("contexts", {})
            for ctx, value in contexts.items():
                if flavor == "final" and ctx != "mealkit":
                    continue  # a final builds FROM its meal kit; its other contexts are the meal kit's
                if value.startswith("target:") and value[len("target:"):] in ids:
                    graph.edges.append((ids[value[len("target:"):]], ids[tname], ctx))
                elif value.startswith("docker-image://") and ctx in ("base", stage.base_image, *stage.uses):
                    graph.edges.append((image(value[len("docker-image://"):]), ids[tname], ctx))
            if stage.base_image is not None and stage.base_image not in contexts and flavor != "final":
                graph.edges.append((image(stage.base_image), ids[tname], stage.base_image_arg))
    return graph


# --- Mermaid --------------------------------------------------------------------------------

_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;"}
_MERMAID_SHAPES = {"mealkit": ('(["', '"])'), "final": ('["', '"]'), "single": ('[["', '"]]'), "image": ('[("', '")]')}


def mermaid_text(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label."""
    return "".join(_MERMAID_ENTITIES.get(ch, ch) for ch in " ".join(text.split()))


def _mermaid_label(node: Node) -> str:
    opening, closing = _MERMAID_SHAPES[node.kind]
    text = mermaid_text(node.title) + (f"<br/>{mermaid_text(node.detail)}" if node.detail else "")
    return f"{node.id}{opening}{text}{closing}"


def to_mermaid(composition: Composition, direction: str = "TD") -> str:
    """The plan's DAG as a Mermaid ``flowchart``: a subgraph per stage, a node per target,
    cylinders for external images, edges labelled with the context name."""
    graph = graph_of(composition)
    lines = [f"flowchart {direction}"]
    for nid in graph.loose:
        lines.append(f"  {_mermaid_label(graph.nodes[nid])}")
    for index, (stage, (label, members)) in enumerate(graph.clusters.items()):
        lines.append(f'  subgraph s_{index}["{mermaid_text(label)}"]')
        lines.extend(f"    {_mermaid_label(graph.nodes[nid])}" for nid in members)
        lines.append("  end")
    for src, dst, label in graph.edges:
        lines.append(f'  {src} -->|"{mermaid_text(label)}"| {dst}')
    for kind, style in (("mealkit", "fill:#fff4d6,stroke:#b8860b"), ("image", "fill:#eef2ff,stroke:#6670a0")):
        members = [n.id for n in graph.nodes.values() if n.kind == kind]
        if members:
            lines.append(f"  classDef {kind} {style}")
            lines.append(f"  class {','.join(members)} {kind}")
    return "\n".join(lines) + "\n"


def to_markdown(composition: Composition, title: Optional[str] = None) -> str:
    """The Mermaid flowchart in a fenced block, as GitHub renders it (README, issue, or
    ``$GITHUB_STEP_SUMMARY``)."""
    heading = f"### {title}\n\n" if title else ""
    return f"{heading}```mermaid\n{to_mermaid(composition)}```\n"


# --- Graphviz -------------------------------------------------------------------------------

_DOT_SHAPES = {
    "mealkit": 'shape=box, style="rounded,filled", fillcolor="#fff4d6"',
    "final": "shape=box",
    "single": "shape=box, peripheries=2",
    "image": 'shape=cylinder, style=filled, fillcolor="#eef2ff"',
}


def dot_string(text: str) -> str:
    """A quoted DOT string whose text is ``text`` (``\\n`` for line breaks is added by callers)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(composition: Composition) -> str:
    """The plan's DAG as a Graphviz ``digraph``: a ``cluster_`` subgraph per stage."""
    graph = graph_of(composition)

    def node(n: Node, indent: str) -> str:
        label = n.title + (f"\n{n.detail}" if n.detail else "")
        return f"{indent}{n.id} [label={dot_string(label)}, {_DOT_SHAPES[n.kind]}];"

    lines = ['digraph "bake-plan" {', "  rankdir=TB;", '  fontname="Helvetica";', '  node [fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    lines.extend(node(graph.nodes[nid], "  ") for nid in graph.loose)
    for index, (stage, (label, members)) in enumerate(graph.clusters.items()):
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f"    label={dot_string(label)};")
        lines.extend(node(graph.nodes[nid], "    ") for nid in members)
        lines.append("  }")
    for src, dst, label in graph.edges:
        lines.append(f"  {src} -> {dst} [label={dot_string(label)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_graph(composition: Composition, fmt: str) -> str:
    """``fmt``: ``mermaid``, ``markdown`` or ``dot``. :raises ValueError: another format."""
    if fmt == "mermaid":
        return to_mermaid(composition)
    if fmt == "markdown":
        return to_markdown(composition, title=f"bake-plan: {', '.join(composition.requested)}")
    if fmt == "dot":
        return to_dot(composition)
    raise ValueError(f"unknown graph format {fmt!r}")
