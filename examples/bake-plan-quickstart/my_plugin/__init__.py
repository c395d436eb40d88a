# my-plugin/my_plugin/__init__.py
from pathlib import Path

from bake import Stage, hookimpl

HERE = Path(__file__).resolve().parent


@hookimpl
def bake_plan_stages():
    return [
        Stage(name="my-root", image="my-root", context=HERE / "my-root",
              base_image="python:3.11-slim-bookworm", python="3.11", requirements=("click>=8",)),
        Stage(name="my-leaf", image="my-leaf", parent="my-root", context=HERE / "my-leaf",
              requirements=("tomli>=2",)),
    ]
