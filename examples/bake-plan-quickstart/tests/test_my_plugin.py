# my-plugin/tests/test_my_plugin.py
import my_plugin
from bake.testing import plan_for


def test_my_leaf_builds_on_my_roots_meal_kit(bake_plan_plan):
    targets = bake_plan_plan["target"]
    assert targets["my-leaf-mealkit"]["contexts"]["base"] == "target:my-root-mealkit"
    assert targets["my-leaf-mealkit"]["args"]["REQUIREMENTS"] == "tomli>=2"


def test_buildx_reads_the_plan(bake_plan_printed):
    assert bake_plan_printed["target"]["my-leaf"]["target"] == "final"


def test_stages_are_named_after_the_entry_point(bake_plan_stages):
    assert bake_plan_stages["my-leaf"].plugin == "my-plugin"


def test_tags_per_arch():
    targets = plan_for(my_plugin, targets=["my-leaf"], platforms=["linux/arm64"],
                       registry="localhost:5000/me")["target"]
    assert targets["my-leaf"]["tags"][0] == "localhost:5000/me/my-leaf:latest-arm64"
