"""Plans that would publish the wrong image are refused before anything is built: two stages
with one ``image`` (the same tags, one pushed over the other) and a platform policy answering no
platform (buildx would build the engine's own arch under every arch's tag)."""

from __future__ import annotations

from test_errors import assert_one_line_error

STAGES = """
from bake import Stage, hookimpl
from bake.resources import stage_dir
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="one", image="shared", parent="base", context=str(stage_dir("jax"))),
            Stage(registry="ghcr.io/nvidia", name="two", image={image!r}, parent="base", context=str(stage_dir("jax")))]
"""


def test_two_stages_with_one_image_are_refused(cli, make_plugin, tmp_path):
    site = make_plugin(STAGES.format(image="shared"), name="twins")
    proc = cli("plan", "--target", "one", "--target", "two", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "targets 'one-mealkit' (stage 'one', plugin 'twins') and 'two-mealkit' (stage 'two', "
                                "plugin 'twins') are both tagged", "shared:mealkit", cwd=tmp_path)
    other = make_plugin(STAGES.format(image="other"), name="apart")
    assert cli("plan", "--target", "one", "--target", "two", "-o", "-", cwd=tmp_path, pythonpath=[other]).returncode == 0


def test_a_platform_policy_answering_none_is_refused(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_platforms(stage, requested):
    return [] if stage.name == "jax" else None
""", name="no-arch")
    proc = cli("plan", "--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'no-arch': bake_plan_platforms for stage 'jax' returned no platform",
                          cwd=tmp_path)
