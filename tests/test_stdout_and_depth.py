"""Stdout that is not ours, and input nested or chained too deep.

Kind 5: a plugin writes to "stdout" every way a process can (``print``, ``sys.__stdout__``,
``os.write(1, …)``, a subprocess, an ``atexit`` handler); the real ``bake-plan`` console script's
stdout is still exactly the document, and the plugin's text is on stderr.

Kind 6: TOML and JSON files nested deeper than the parsers' stack are one line, exit 2, naming the
file; families 1,000 stages deep compose, expand their variants, draw and fan out into a matrix,
with the interpreter's recursion limit as it is.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys

import pytest
from conftest import console_script
from test_errors import assert_one_line_error

from bake import Stage, hookimpl
from bake.documents import MAX_DEPTH, DocumentError, parse_json, parse_toml
from bake.plan import variants
from bake.plan.matrix import jobs
from bake.plan.validate import validate
from bake.testing import compose_plan

DATE = datetime.date(2026, 11, 29)
EPOCH = {"SOURCE_DATE_EPOCH": "1764374400"}  # 2025-11-29: both runs of a comparison share the date

# --- kind 5: stdout that is not ours --------------------------------------------------------------

CHATTY = """
import atexit, os, subprocess, sys
from bake import hookimpl

def chatter(when):
    print(f"CHAT print {when}")
    sys.__stdout__.write(f"CHAT __stdout__ {when}\\n")
    sys.__stdout__.flush()
    os.write(1, f"CHAT os.write {when}\\n".encode())
    subprocess.run(["echo", f"CHAT subprocess {when}"], check=True)

chatter("at import")
atexit.register(chatter, "at exit")

@hookimpl
def bake_plan_stages():
    chatter("in bake_plan_stages")
    return []

@hookimpl
def bake_plan_adjust_target(name, target):
    if name == "base":
        chatter("in bake_plan_adjust_target")
"""
WAYS = ("print", "__stdout__", "os.write", "subprocess")


@pytest.fixture(scope="module")
def chatty(tmp_path_factory):
    """A plugin that writes to stdout in every way, at import, in hooks and at exit."""
    site = tmp_path_factory.mktemp("chatty-site")
    (site / "bake_plan_chatty.py").write_text(CHATTY)
    dist = site / "bake_plan_chatty-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bake_plan_chatty\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text("[bake_plan]\nchatty = bake_plan_chatty\n")
    return site


def _run(cli, chatty, cwd, *args, to_stdout=True):
    proc = cli(*args, cwd=cwd, pythonpath=[chatty], env={**os.environ, **EPOCH}, check=True)
    if to_stdout:
        assert "CHAT" not in proc.stdout, proc.stdout
    return proc


def _said_everything(stderr: str, *whens: str) -> None:
    for when in whens:
        for way in WAYS:
            assert f"CHAT {way} {when}\n" in stderr, (way, when, stderr)


@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_a_plan_on_stdout_is_exactly_the_plan_file(cli, chatty, tmp_path, fmt):
    name = f"docker-bake.{fmt}"
    _run(cli, chatty, tmp_path, "--target", "base", "--format", fmt, "-o", name, to_stdout=False)
    to_stdout = _run(cli, chatty, tmp_path, "--target", "base", "--format", fmt, "-o", "-")
    assert to_stdout.stdout == (tmp_path / name).read_text(encoding="utf-8")
    if fmt == "json":
        assert json.loads(to_stdout.stdout)["target"]["base"]
    _said_everything(to_stdout.stderr, "at import", "in bake_plan_stages", "in bake_plan_adjust_target", "at exit")
    assert "bake-plan: wrote 2 targets for base to stdout" in to_stdout.stderr


@pytest.mark.parametrize("fmt", ["github", "json"])
def test_the_matrix_on_stdout_is_exactly_the_json(cli, chatty, tmp_path, fmt):
    proc = _run(cli, chatty, tmp_path, "matrix", "--target", "jax", "--format", fmt)
    if fmt == "github":
        assert proc.stdout.count("\n") == 1 and proc.stdout.endswith("\n")  # one line for $GITHUB_OUTPUT
    assert {job["id"] for job in json.loads(proc.stdout)["include"]} == {
        f"{stage}/{arch}" for stage in ("base", "jax") for arch in ("amd64", "arm64")}
    _said_everything(proc.stderr, "at import", "in bake_plan_stages", "at exit")


def test_a_graph_on_stdout_is_exactly_the_graph_file(cli, chatty, tmp_path):
    _run(cli, chatty, tmp_path, "graph", "--target", "jax", "--format", "dot", "-o", "jax.dot", to_stdout=False)
    proc = _run(cli, chatty, tmp_path, "graph", "--target", "jax", "--format", "dot")
    assert proc.stdout == (tmp_path / "jax.dot").read_text(encoding="utf-8")
    assert proc.stdout.startswith('digraph "bake-plan" {')
    _said_everything(proc.stderr, "at import", "in bake_plan_stages", "at exit")


def test_stages_and_config_on_stdout_are_only_theirs(cli, chatty, tmp_path):
    stages = _run(cli, chatty, tmp_path, "stages")
    rows = stages.stdout.splitlines()
    assert rows[0].split() == ["STAGE", "PLUGIN", "PARENT", "PLATFORMS"]
    assert any(row.split()[:2] == ["jax", "jax"] for row in rows[1:])
    _said_everything(stages.stderr, "at import", "in bake_plan_stages", "at exit")
    config = _run(cli, chatty, tmp_path, "config", "--format", "json", "--target", "jax")
    assert json.loads(config.stdout)  # the whole of stdout is one JSON document


@pytest.mark.parametrize("command", [["matrix", "--target", "jax"], ["--target", "base", "-o", "-"], ["stages"],
                                     ["config"], ["graph", "--target", "jax"]], ids=lambda c: c[0])
def test_a_document_with_stdout_closed_is_one_line(tmp_path, command):
    """``bake-plan … >&-``: the document has nowhere to go; one line, exit 2 (not a traceback,
    not a silent success)."""
    proc = subprocess.run([str(console_script()), *command], stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                          preexec_fn=lambda: os.close(1), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == "bake-plan: error: cannot write the output: Bad file descriptor\n"


# --- kind 6: deep input ---------------------------------------------------------------------------

TOO_DEEP_TOML = f"nested too deeply (more than {MAX_DEPTH} levels of arrays or tables within each other)"
TOO_DEEP_JSON = f"nested too deeply (more than {MAX_DEPTH} levels of arrays or objects within each other)"
DEEP = 500  # a 1 KB file


def _nested(n: int) -> str:
    return "[" * n + "]" * n


def test_the_readers_bound_the_depth_without_touching_the_recursion_limit():
    limit = sys.getrecursionlimit()
    inner = MAX_DEPTH - 1  # the top-level table is one level
    assert parse_toml(f"a = {_nested(inner)}")["a"]
    assert parse_json(_nested(MAX_DEPTH))
    for text, parse, message in (
        (f"a = {_nested(inner + 1)}", parse_toml, TOO_DEEP_TOML),
        (f"a = {_nested(100_000)}", parse_toml, TOO_DEEP_TOML),
        ("a = " + "{b = " * DEEP + "1" + "}" * DEEP, parse_toml, TOO_DEEP_TOML),  # inline tables
        ("[" + ".".join(["a"] * (MAX_DEPTH + 1)) + "]\nx = 1\n", parse_toml, TOO_DEEP_TOML),  # headers: no recursion
        (_nested(MAX_DEPTH + 1), parse_json, TOO_DEEP_JSON),
        ('{"a": ' * 100_000, parse_json, TOO_DEEP_JSON),
    ):
        with pytest.raises(DocumentError) as err:
            parse(text)
        assert str(err.value) == message
    assert sys.getrecursionlimit() == limit


@pytest.mark.parametrize("name", ["bake-plan.toml", "pyproject.toml"])
def test_a_deep_configuration_file_is_one_line(cli, tmp_path, name):
    table = "[tool.bake-plan]\n" if name == "pyproject.toml" else ""
    (tmp_path / name).write_text(f"{table}registry = {_nested(DEEP)}\n")
    proc = cli("--target", "jax", "-o", "plan.hcl", cwd=tmp_path)
    assert_one_line_error(proc)
    assert proc.stderr == f"bake-plan: error: {name}: {TOO_DEEP_TOML}\n"
    assert not (tmp_path / "plan.hcl").exists()
    other = tmp_path.parent / f"{tmp_path.name}-given.toml"
    other.write_text(f"platforms = {_nested(DEEP)}\n")
    proc = cli("config", "--config", str(other), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"bake-plan: error: {other}: {TOO_DEEP_TOML}\n"


def test_a_deep_parent_report_is_one_line(cli, tmp_path):
    report = tmp_path.parent / f"{tmp_path.name}-report.json"
    report.write_text(_nested(DEEP))
    proc = cli("--target", "jax", "--platform", "linux/amd64", "--from-registry", "--parent-report", str(report),
               cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr == f"bake-plan: error: --parent-report: {report}: {TOO_DEEP_JSON}\n"


def test_a_deep_metadata_bake_file_is_one_line(cli, tmp_path):
    bake_file = tmp_path.parent / f"{tmp_path.name}-meta.json"
    bake_file.write_text('{"target": {"docker-metadata-action": {"labels": ' + _nested(DEEP) + "}}}")
    proc = cli("--target", "jax", "--metadata-bake-file", str(bake_file), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr == f"bake-plan: error: --metadata-bake-file {bake_file}: {TOO_DEEP_JSON}\n"


def test_a_deep_sources_manifest_is_one_line(cli, tmp_path):
    manifest = tmp_path.parent / f"{tmp_path.name}-sources.toml"
    manifest.write_text(f"[paxml]\nurl = {_nested(DEEP)}\n")
    before = manifest.read_text()
    proc = cli("bump", "--sources", str(manifest), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr == f"bake-plan: error: {manifest}: {TOO_DEEP_TOML}\n"
    assert manifest.read_text() == before
    # `plan --sources`: the plugin that reads it first names itself; still one line, exit 2
    proc = cli("--target", "jax", "--sources", str(manifest), cwd=tmp_path)
    assert_one_line_error(proc, cwd=tmp_path)
    assert proc.stderr.endswith(f": {manifest}: {TOO_DEEP_TOML}\n")


DEPTH = 1000
HERE = os.path.dirname(os.path.abspath(__file__))  # a context directory: the plans are never built


def _chain(depth: int = DEPTH, published_every: int = 1, variants_at_root: bool = False):
    """A plugin declaring ``s0 <- s1 <- … <- s<depth-1>``, children before parents (so no walk
    finds a parent done already); ``s<i>`` publishes an image when ``i % published_every == 0``
    or it is the last."""

    class Chain:
        @hookimpl
        def bake_plan_stages(self):
            out = [Stage(registry="ghcr.io/nvidia", name="s0", image="s0", kind="single", context=HERE, base_image="busybox:1.36",
                         platforms=("linux/amd64",), dockerfile_inline="ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n",
                         variants={"py": ("3.10", "3.11")} if variants_at_root else {})]
            for i in range(1, depth):
                published = i % published_every == 0 or i == depth - 1
                out.append(Stage(registry="ghcr.io/nvidia", name=f"s{i}", image=f"s{i}" if published else None, kind="single", context=HERE,
                                 parent=f"s{i - 1}", platforms=("linux/amd64",),
                                 dockerfile_inline="ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n"))
            return out[::-1]

    return Chain()


def test_variants_of_a_chain_1000_deep_expand():
    limit = sys.getrecursionlimit()
    stages = {s.name: validate(s, "chain") for s in _chain(variants_at_root=True).bake_plan_stages()}
    expanded = variants.expand(stages)
    assert len(expanded) == 2 * DEPTH
    leaf = expanded[f"s{DEPTH - 1}-3.11"]
    assert leaf.parent == f"s{DEPTH - 2}-3.11" and leaf.variant == "py3.11" and leaf.args["py"] == "3.11"
    assert sys.getrecursionlimit() == limit


def test_a_chain_1000_deep_plans_and_fans_out():
    limit = sys.getrecursionlimit()
    composition = compose_plan(_chain(variants_at_root=True), targets=[f"s{DEPTH - 1}"], date=DATE)
    assert len(composition.plan["target"]) == 2 * DEPTH
    entries = jobs(composition)
    assert len(entries) == 2 * DEPTH
    assert max(e["wave"] for e in entries) == DEPTH - 1
    last = next(e for e in entries if e["stage"] == f"s{DEPTH - 1}-3.10")
    assert last["needs"] == [f"s{DEPTH - 2}-3.10/amd64"]
    assert sys.getrecursionlimit() == limit


def test_a_matrix_looks_through_1000_unpublished_stages():
    """Every stage but the root and the leaf is built inside the leaf's job: the leaf needs the
    root's job only, in the next wave."""
    composition = compose_plan(_chain(published_every=DEPTH), targets=[f"s{DEPTH - 1}"], date=DATE)
    entries = jobs(composition)
    assert [(e["id"], e["wave"], e["needs"]) for e in entries] == [
        ("s0/amd64", 0, []), (f"s{DEPTH - 1}/amd64", 1, ["s0/amd64"])]


CHAIN_PLUGIN = """
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    out = [Stage(registry="ghcr.io/nvidia", name="s0", image="s0", kind="single", context=os.path.dirname(__file__),
                 base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline="ARG BASE_IMAGE\\nFROM ${BASE_IMAGE}\\n",
                 variants={"py": ("3.10", "3.11")})]
    for i in range(1, 1000):
        out.append(Stage(registry="ghcr.io/nvidia", name=f"s{i}", image=f"s{i}" if i % 2 == 0 or i == 999 else None, kind="single",
                         context=os.path.dirname(__file__), parent=f"s{i - 1}", platforms=("linux/amd64",),
                         dockerfile_inline="ARG BASE_IMAGE\\nFROM ${BASE_IMAGE}\\n"))
    return out[::-1]
"""


def test_the_cli_plans_draws_and_fans_out_a_chain_1000_deep(cli, make_plugin, tmp_path):
    site = make_plugin(CHAIN_PLUGIN, name="chain")
    plan = cli("--target", "s999", "--format", "json", "-o", "-", cwd=tmp_path, pythonpath=[site], check=True)
    assert len(json.loads(plan.stdout)["target"]) == 2 * 1000
    matrix = cli("matrix", "--target", "s999", cwd=tmp_path, pythonpath=[site], check=True)
    entries = json.loads(matrix.stdout)["include"]
    assert len(entries) == 2 * 500 + 2  # s0 and every even stage, s999, for each variant
    assert next(e for e in entries if e["stage"] == "s999-3.11")["needs"] == ["s998-3.11/amd64"]
    graph = cli("graph", "--target", "s999", cwd=tmp_path, pythonpath=[site], check=True)
    assert graph.stdout.startswith("flowchart TD\n") and graph.stdout.count(" -->|") >= 2 * 999
    for proc in (plan, matrix, graph):
        assert "Traceback" not in proc.stderr

