"""No ambient leakage: a plan resolves to the same JSON whatever the environment holds.

bake lets an environment variable override a declared bake ``variable`` of the same name, and
buildx passes an ambient ``SOURCE_DATE_EPOCH`` to every build as an arg. bake-plan's plans declare
no variables, write every ``${…}`` as a literal, and pin ``SOURCE_DATE_EPOCH`` to the plan date.
Shown here with both buildx versions, both formats: bake-plan writes the same bytes, and buildx
resolves them to the same JSON, under a clean environment and under one that sets ``TAG``,
``HOME``, ``REGISTRY``, ``PLATFORM``, ``SOURCE_DATE_EPOCH``, bake's ``BAKE_*`` names and every name
that appears anywhere in the plan.
"""

from __future__ import annotations

import datetime
import json
import os
import re

import pytest

from bake.plan.compose import source_date_epoch

DATE = "2026-11-29"
LITERALS = {
    "LIT_HOME": "${HOME}",
    "LIT_TAG": "v${TAG}-%{ if TAG != \"\" }${TAG}%{ endif }",
    "LIT_MIXED": "${REGISTRY}/${PLATFORM} ${BAKE_LOCAL_PLATFORM} $${SOURCE_DATE_EPOCH} ${CACHE_SILO}",
    "LIT_FUNC": "${upper(\"x\")} ${timestamp()}",
}
# Variables the machinery needs: leave them as they are (a hostile PATH would run other binaries).
KEEP = {"PATH", "PYTHONPATH", "PYTHONHOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "TMPDIR",
        "LD_PRELOAD", "LD_LIBRARY_PATH", "BAKE_PLAN_BUILDX_OLD"}
ALWAYS = ["TAG", "HOME", "REGISTRY", "PLATFORM", "SOURCE_DATE_EPOCH", "BAKE_LOCAL_PLATFORM", "BAKE_CMD_CONTEXT",
          "BAKE_TARGET", "DOCKER_DEFAULT_PLATFORM", "VERSION", "DATE", "ARCH", "TARGETPLATFORM"]


@pytest.fixture
def plugin_site(make_plugin):
    return make_plugin(f"""
from bake import Stage, hookimpl
from bake.resources import stage_dir
LITERALS = {LITERALS!r}
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="leaky", image="leaky", parent="jax", context=stage_dir("jax"), args=LITERALS,
                  labels={{"org.example." + k.lower(): v for k, v in LITERALS.items()}},
                  requirements=("pkg @ https://example.com/HOME/pkg.whl",))]
""", name="leaky")


def _names_in(text: str) -> set:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))


def _envs(tmp_path, plan_texts):
    """A clean environment and a hostile one, for the same machinery."""
    base = {k: v for k, v in os.environ.items() if k in KEEP}
    clean_home = tmp_path / "clean-home"
    clean_home.mkdir()
    clean = dict(base, HOME=str(clean_home))
    names = set(ALWAYS)
    for text in plan_texts:
        names |= _names_in(text)
    hostile = dict(base)
    for name in sorted(names - KEEP):
        hostile[name] = f"LEAKED-{name}"
    hostile_home = tmp_path / "LEAKED-HOME"
    hostile_home.mkdir()
    hostile["HOME"] = str(hostile_home)
    hostile["SOURCE_DATE_EPOCH"] = "86400"  # a valid epoch, so buildx would use it
    return clean, hostile


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_plan_resolves_the_same_under_a_hostile_environment(buildx, cli, plugin_site, tmp_path, fmt):
    args = ["--target", "leaky", "--target", "xla-ci", "--date", DATE, "--format", fmt]
    first, clean_file, hostile_file = (tmp_path / d / f"plan.{fmt}" for d in ("first", "clean", "hostile"))
    for path in (first, clean_file, hostile_file):
        path.parent.mkdir()
    cli(*args, "-o", str(first), pythonpath=[plugin_site], check=True)
    clean, hostile = _envs(tmp_path, [first.read_text(encoding="utf-8")])
    assert len(hostile) > 100, "the hostile environment should set every name the plan holds"

    # bake-plan writes the same bytes...
    cli(*args, "-o", str(clean_file), env=clean, pythonpath=[plugin_site], check=True)
    cli(*args, "-o", str(hostile_file), env=hostile, pythonpath=[plugin_site], check=True)
    assert hostile_file.read_bytes() == clean_file.read_bytes() == first.read_bytes()

    # ...and buildx resolves them to the same JSON, with every literal intact.
    resolved_clean = buildx.print_plan(clean_file, cwd=tmp_path, env=clean)
    resolved_hostile = buildx.print_plan(hostile_file, cwd=tmp_path, env=hostile)
    assert resolved_hostile == resolved_clean
    assert "variable" not in resolved_clean
    assert "LEAKED" not in json.dumps(resolved_hostile)
    leaky = resolved_hostile["target"]["leaky-mealkit"]
    for key, value in LITERALS.items():
        assert leaky["args"][key] == value
        assert leaky["labels"]["org.example." + key.lower()] == value
    assert leaky["args"]["SOURCE_DATE_EPOCH"] == str(source_date_epoch(datetime.date(2026, 11, 29)))
    for target in resolved_hostile["target"].values():
        assert target["args"]["SOURCE_DATE_EPOCH"] == leaky["args"]["SOURCE_DATE_EPOCH"]


def test_plan_file_declares_no_variables(cli, tmp_path):
    cli("--target", "upstream-pax", "--target", "xla-ci", "--date", DATE, cwd=tmp_path, check=True)
    text = (tmp_path / "docker-bake.hcl").read_text(encoding="utf-8")
    assert not re.search(r"^\s*variable\s", text, re.MULTILINE)
    cli("--target", "upstream-pax", "--date", DATE, "--format", "json", cwd=tmp_path, check=True)
    assert "variable" not in json.loads((tmp_path / "docker-bake.json").read_text(encoding="utf-8"))
