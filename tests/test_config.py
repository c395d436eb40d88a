"""Configuration in ``[tool.bake-plan]`` or ``bake-plan.toml``: found by walking up, merged under the
command line with every value's source, unknown keys refused with the nearest name, and each
setting reaching the plan."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from test_errors import assert_one_line_error

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def merged(cli, cwd, *args, env=ENV, pythonpath=None):
    proc = cli("config", "--format", "json", *args, cwd=cwd, env=env, pythonpath=pythonpath, check=True)
    return json.loads(proc.stdout)


def plan(cli, cwd, *args, env=ENV, pythonpath=None):
    out = cli("plan", "-o", "-", "--format", "json", *args, cwd=cwd, env=env, pythonpath=pythonpath, check=True).stdout
    return json.loads(out)


PYPROJECT = """
    [project]
    name = "images"

    [tool.bake-plan]
    registry = "localhost:5555/ci"
    platforms = ["linux/amd64"]
    targets = ["upstream-pax"]
    date = "2026-11-29"
"""


def test_pyproject_found_from_a_subdirectory_and_flags_beat_it(cli, tmp_path):
    write(tmp_path / "pyproject.toml", PYPROJECT)
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    data = merged(cli, sub, "--registry", "ghcr.io/acme")
    assert data["file"] == str(tmp_path / "pyproject.toml")
    settings = data["settings"]
    assert settings["registry"] == {"value": "ghcr.io/acme", "source": "--registry"}
    assert settings["platforms"]["value"] == ["linux/amd64"]
    assert settings["platforms"]["source"].endswith("pyproject.toml:tool.bake-plan")
    assert settings["date"]["value"] == "2026-11-29"
    assert settings["cache-from-branch"] == {"value": None, "source": "default"}
    # The plan follows: no --target needed, the file's platform makes it per-arch.
    targets = plan(cli, sub, "--registry", "ghcr.io/acme")["target"]
    assert targets["upstream-pax"]["tags"] == ["ghcr.io/acme/upstream-pax:latest-amd64",
                                               "ghcr.io/acme/upstream-pax:nightly-2026-11-29-amd64"]
    assert plan(cli, sub, "--platform", "linux/arm64")["target"]["jax"]["platforms"] == ["linux/arm64"]


def test_pyproject_without_the_table_is_skipped_and_bake_plan_toml_wins_in_its_directory(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", 'registry = "localhost:5555/outer"\n')
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "x"\n[tool.black]\nline-length = 99\n')
    assert merged(cli, tmp_path / "inner")["settings"]["registry"] == {
        "value": "localhost:5555/outer", "source": str(tmp_path / "bake-plan.toml")}
    write(tmp_path / "inner" / "bake-plan.toml", 'registry = "localhost:5555/own"\n')
    write(tmp_path / "inner" / "pyproject.toml", '[tool.bake-plan]\nregistry = "localhost:5555/pyproject"\n')
    assert merged(cli, tmp_path / "inner")["settings"]["registry"]["value"] == "localhost:5555/own"


def test_no_file_means_defaults(cli, tmp_path):
    data = merged(cli, tmp_path)
    assert data["file"] is None
    assert {v["source"] for v in data["settings"].values()} == {"default"}


def test_explicit_config_file(cli, tmp_path):
    write(tmp_path / "ci" / "nightly.toml", 'registry = "localhost:5555/nightly"\n')
    data = merged(cli, tmp_path, "--config", "ci/nightly.toml")
    assert data["settings"]["registry"] == {"value": "localhost:5555/nightly", "source": "ci/nightly.toml"}
    assert_one_line_error(cli("config", "--config", "missing.toml", cwd=tmp_path), "--config missing.toml", "no such file")
    write(tmp_path / "other" / "pyproject.toml", '[project]\nname = "x"\n')
    assert_one_line_error(cli("config", "--config", "other/pyproject.toml", cwd=tmp_path),
                          "other/pyproject.toml", "no [tool.bake-plan] table")


def test_date_policy_and_its_source(cli, tmp_path):
    env = dict(ENV, SOURCE_DATE_EPOCH="1700000000")  # 2023-11-14 in UTC
    assert merged(cli, tmp_path, env=env)["settings"]["date"] == {"value": "2023-11-14", "source": "env SOURCE_DATE_EPOCH"}
    write(tmp_path / "bake-plan.toml", 'date = "today"\n')
    today = merged(cli, tmp_path, env=env)["settings"]["date"]
    assert today["value"] != "2023-11-14" and today["source"] == "bake-plan.toml"
    assert merged(cli, tmp_path, "--date", "2026-01-02", env=env)["settings"]["date"] == {
        "value": "2026-01-02", "source": "--date"}
    write(tmp_path / "bake-plan.toml", 'date = "source-date-epoch"\n')
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, env=ENV),
                          "bake-plan.toml: date: source-date-epoch, but SOURCE_DATE_EPOCH is not set")
    assert_one_line_error(cli("--target", "jax", "--date", "source-date-epoch", cwd=tmp_path, env=ENV),
                          "--date: source-date-epoch, but SOURCE_DATE_EPOCH is not set")  # where it came from
    write(tmp_path / "bake-plan.toml", 'date = "tomorrow"\n')
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path, env=ENV), "bake-plan.toml", "date", "'tomorrow'")


def test_printed_configuration_is_toml_that_reads_back_the_same(cli, tmp_path):
    write(tmp_path / "pyproject.toml", PYPROJECT + """
    base-images = { "python:3.11-slim-bookworm" = "localhost:5555/stand-in/python:bookworm" }
    [tool.bake-plan.plugins]
    disable = ["upstream-t5x"]
    [tool.bake-plan.stages.jax]
    args = { BAZEL_CACHE = "https://cache.example/\\"quoted\\"" }
    sources = { JAX = { ref = "jax-v0.4.30" } }
    [tool.bake-plan.stages."xla-ci"]
    variants = { python = ["3.10", "3.12"] }
    """)
    text = cli("config", "--cache-from-branch", "main", cwd=tmp_path, env=ENV, check=True).stdout
    assert "# --cache-from-branch" in text and "# pyproject.toml:tool.bake-plan.stages.jax" in text
    data = tomllib.loads(text)
    assert data["registry"] == "localhost:5555/ci"
    assert data["cache-from-branch"] == "main"
    assert data["plugins"] == {"disable": ["upstream-t5x"]}
    assert data["stages"]["jax"]["args"] == {"BAZEL_CACHE": 'https://cache.example/"quoted"'}
    again = tmp_path / "again"
    write(again / "bake-plan.toml", text)
    first = merged(cli, tmp_path, "--cache-from-branch", "main")
    second = merged(cli, again)
    assert {k: v["value"] for k, v in first["settings"].items()} == {k: v["value"] for k, v in second["settings"].items()}
    assert {k: v["value"] for k, v in first["stages"].items()} == {k: v["value"] for k, v in second["stages"].items()}


@pytest.mark.parametrize("text, needles", [
    ('platform = ["linux/amd64"]\n', ["unknown key 'platform'", "did you mean 'platforms'?"]),
    ('[plugins]\ndisabled = ["x"]\n', ["[plugins] unknown key 'disabled'", "'disable'"]),
    ('[stages.jax]\narg = { A = "1" }\n', ["[stages.jax] unknown key 'arg'", "'args'"]),
    ('[stages.jax]\nbase_image = "x"\n', ["[stages.jax] unknown key 'base_image'", "'base-image'"]),
    ('[stages.jax.sources.JAX]\nbranch = "main"\n', ["[stages.jax.sources.JAX] unknown key 'branch'"]),
    ('platforms = "linux/amd64"\n', ["platforms: expected a list of strings"]),
    ('platforms = ["linux/sparc"]\n', ["platforms", "unsupported platform 'linux/sparc'"]),
    ('registry = "Bad Registry/"\n', ["registry", "is not host"]),
    ('[stages]\njax = 1\n', ["jax: expected a table"]),
    ('registry = "unterminated\n', ["not valid TOML"]),
    ('[tool.bake-plan]\nregistry = "x"\n', ["unknown key 'tool'", "takes the keys of [tool.bake-plan] at its top level"]),
])
def test_bad_configuration_is_one_line_naming_file_and_key(cli, tmp_path, text, needles):
    (tmp_path / "bake-plan.toml").write_text(text)
    proc = cli("--target", "jax", cwd=tmp_path, env=ENV)
    assert_one_line_error(proc, "bake-plan.toml", *needles)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bake-plan.toml"]  # no plan written


def test_pyproject_errors_name_the_table(cli, tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.bake-plan]\nregistri = "x"\n')
    assert_one_line_error(cli("stages", cwd=tmp_path), "pyproject.toml: [tool.bake-plan] unknown key 'registri'",
                          "'registry'")


def test_no_target_anywhere(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", 'registry = "localhost:5555/x"\n')
    assert_one_line_error(cli("matrix", cwd=tmp_path), "no target", "--target", "targets")


def test_matrix_and_publish_take_the_configured_targets(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", 'targets = ["jax"]\nplatforms = ["linux/arm64"]\n')
    jobs = json.loads(cli("matrix", cwd=tmp_path, env=ENV, check=True).stdout)["include"]
    assert [j["id"] for j in jobs] == ["base/arm64", "jax/arm64"]


def test_disabled_plugin_is_never_loaded(cli, make_plugin, tmp_path):
    broken = make_plugin("import not_a_module_anywhere\n", name="broken")
    assert cli("stages", cwd=tmp_path, pythonpath=[broken]).returncode == 2
    write(tmp_path / "bake-plan.toml", '[plugins]\ndisable = ["broken", "xla-ci"]\n')
    out = cli("stages", cwd=tmp_path, pythonpath=[broken], check=True).stdout
    assert "xla-ci" not in out and "upstream-pax" in out
    assert_one_line_error(cli("--target", "xla-ci", cwd=tmp_path, pythonpath=[broken]), "unknown target 'xla-ci'")


def test_enable_keeps_only_the_named_plugins(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", '[plugins]\nenable = ["base", "xla-ci"]\n')
    out = cli("stages", cwd=tmp_path, check=True).stdout
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["base", "xla-ci"]
    assert plan(cli, tmp_path, "--target", "xla-ci", "--date", "2026-11-29")["target"]["xla-ci"]["tags"]


@pytest.mark.parametrize("text, needles", [
    ('[plugins]\ndisable = ["xla-cii"]\n', ["bake-plan.toml:plugins", "no installed plugin 'xla-cii'", "'xla-ci'"]),
    ('[plugins]\nenable = ["jaxx"]\n', ["enable", "'jaxx'", "'jax'"]),
    ('[plugins]\ndisable = ["default-policies"]\n', ["'default-policies' is bake-plan's own"]),
])
def test_unknown_plugin_names(cli, tmp_path, text, needles):
    (tmp_path / "bake-plan.toml").write_text(text)
    assert_one_line_error(cli("stages", cwd=tmp_path), *needles)


def test_stage_overrides_reach_the_plan(cli, tmp_path):
    write(tmp_path / "pyproject.toml", """
    [tool.bake-plan.stages.jax]
    args = { BAZEL_CACHE = "https://cache.example", EXTRA = "1" }
    sources = { JAX = { ref = "jax-v0.4.30" }, XLA = { url = "https://example.com/xla.git", ref = "r1" } }
    [tool.bake-plan.stages.base]
    base-image = "nvidia/cuda:12.4.1-devel-ubuntu22.04"
    """)
    targets = plan(cli, tmp_path, "--target", "jax", "--date", "2026-11-29")["target"]
    args = targets["jax-mealkit"]["args"]
    assert args["BAZEL_CACHE"] == "https://cache.example" and args["EXTRA"] == "1"
    assert args["URLREF_JAX"] == "https://github.com/google/jax.git#jax-v0.4.30"
    assert args["URLREF_XLA"] == "https://example.com/xla.git#r1"
    assert args["URLREF_FLAX"].startswith("https://github.com/google/flax.git#")  # the manifest's commit
    assert targets["base-mealkit"]["args"]["BASE_IMAGE"] == "nvidia/cuda:12.4.1-devel-ubuntu22.04"


@pytest.mark.parametrize("table, needles", [
    ('[stages.jaxx]\nargs = { A = "1" }\n', ["bake-plan.toml:stages.jaxx", "no stage 'jaxx'", "'jax'"]),
    ('[stages.jax.sources.jax]\nref = "x"\n', ["stage 'jax' has no source 'jax'", "'JAX'"]),
    ('[stages.jax]\nbase-image = "x:1"\n', ["base-image", "builds on stage 'base'"]),
    ('[stages.jax]\nargs = { "bad name" = "1" }\n', ["bake-plan.toml:stages.jax: args: key 'bad name'"]),
    ('[stages.jax.sources.JAX]\nref = "a b"\n', ["source 'JAX'", "ref 'a b'"]),
    ('[stages.xla-ci]\nvariants = { python = ["3.10", "3.12"] }\nvariant-format = "dev-{cuda}"\n',
     ["bake-plan.toml:stages.xla-ci", "both get the variant tag 'dev-12.1'"]),
])
def test_bad_stage_override(cli, tmp_path, table, needles):
    (tmp_path / "bake-plan.toml").write_text(table)
    assert_one_line_error(cli("--target", "upstream-pax", cwd=tmp_path, env=ENV), *needles)


@pytest.mark.buildx
def test_configured_variants_of_xla_ci(cli, buildx, tmp_path):
    write(tmp_path / "bake-plan.toml", """
    targets = ["xla-ci"]
    date = "2026-11-29"
    [stages.xla-ci]
    variants = { python = ["3.10", "3.12"], cuda = ["12.1", "12.4"] }
    """)
    cli("-o", "plan.hcl", cwd=tmp_path, env=ENV, check=True)
    printed = buildx.print_plan(tmp_path / "plan.hcl", ["xla-ci"], cwd=tmp_path)
    assert sorted(printed["target"]) == ["xla-ci-3_10-12_1", "xla-ci-3_10-12_4", "xla-ci-3_12-12_1", "xla-ci-3_12-12_4"]
    one = printed["target"]["xla-ci-3_12-12_4"]
    assert one["args"]["CACHE_SILO"] == "cache-silo-ci-dev-3.12_cuda_12.4"
    assert one["cache-to"] == [{"type": "registry", "ref": "gcr.io/tpu-pytorch/xla_base:cache-silo-ci-dev-3.12_cuda_12.4",
                                "mode": "max", "ignore-error": "true"}]
    assert one["tags"][0] == "gcr.io/tpu-pytorch/xla_base:dev-3.12_cuda_12.4"
    assert one["args"]["base_image"].endswith("/development:3.12_cuda_12.4")
    assert one["args"]["python_version"] == "3.12" and one["args"]["CUDA_VERSION"] == "12.4"


def test_the_usage_configuration_example_works(cli, tmp_path):
    from conftest import ROOT

    readme = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
    example = readme.split("## Configuration", 1)[1].split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pyproject.toml").write_text(example)
    env = dict(ENV, SOURCE_DATE_EPOCH="1700000000")
    data = merged(cli, tmp_path, env=env)
    assert data["settings"]["date"] == {"value": "2023-11-14", "source": "env SOURCE_DATE_EPOCH"}
    assert data["settings"]["plugins.disable"]["value"] == ["upstream-t5x"]
    targets = plan(cli, tmp_path, env=env)["target"]
    assert targets["upstream-pax"]["tags"][0] == "ghcr.io/acme/upstream-pax:latest"
    assert targets["jax-mealkit"]["args"]["URLREF_JAX"].endswith("#jax-v0.4.30")
    assert targets["base-mealkit"]["args"]["BASE_IMAGE"] == "nvidia/cuda:12.4.1-devel-ubuntu22.04"
    assert targets["base-mealkit"]["contexts"]["nvidia/cuda:12.4.1-devel-ubuntu22.04"] == "docker-image://mirror.acme/cuda:12.4.1-devel-ubuntu22.04"
    xla = plan(cli, tmp_path, "--target", "xla-ci", "--platform", "linux/amd64", env=env)["target"]
    assert "xla-ci-3_12-12_4" in xla


def test_configured_variants_fan_out_in_the_ci_matrix(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", 'targets = ["xla-ci"]\n[stages.xla-ci]\nvariants = { python = ["3.10", "3.12"] }\n')
    jobs = json.loads(cli("matrix", cwd=tmp_path, env=ENV, check=True).stdout)["include"]
    assert [(j["id"], j["wave"]) for j in jobs] == [("xla-ci-3.10/amd64", 0), ("xla-ci-3.12/amd64", 0)]
    # Each job builds its own variant by name.
    out = plan(cli, tmp_path, "--target", jobs[1]["stage"], "--platform", jobs[1]["platform"])
    assert list(out["target"]) == ["xla-ci-3_12"]
    assert out["target"]["xla-ci-3_12"]["args"]["CACHE_SILO"] == "cache-silo-ci-dev-3.12_cuda_12.1-amd64"


def _not_a_file(tmp_path, name, kind):
    path = tmp_path / name
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dangling":
        path.symlink_to(tmp_path / "nowhere.toml")
    elif kind == "loop":
        path.symlink_to(tmp_path / "loop-b")
        (tmp_path / "loop-b").symlink_to(path)


@pytest.mark.parametrize("name", ["bake-plan.toml", "pyproject.toml"])
@pytest.mark.parametrize("kind, needle", [
    ("directory", "is a directory"), ("fifo", "is not a regular file (a FIFO)"),
    ("dangling", "is a dangling symlink"), ("loop", "is a symlink loop"),
])
def test_a_config_name_that_is_not_a_regular_file_is_an_error(cli, tmp_path, name, kind, needle):
    _not_a_file(tmp_path, name, kind)
    sub = tmp_path / "sub"
    sub.mkdir()
    assert_one_line_error(cli("config", cwd=sub), name, needle)
    assert_one_line_error(cli("config", "--config", str(tmp_path / name), cwd=sub), f"--config {tmp_path / name}", needle)


def test_config_flag_directory_and_dev_null(cli, tmp_path):
    assert_one_line_error(cli("config", "--config", str(tmp_path), cwd=tmp_path), "is a directory")
    proc = cli("config", "--config", "nowhere.toml", cwd=tmp_path)
    assert_one_line_error(proc, "--config nowhere.toml: no such file")
    # /dev/null is an empty configuration: every value its default, even beside a bake-plan.toml.
    write(tmp_path / "bake-plan.toml", 'registry = "localhost:5555/x"\n')
    data = merged(cli, tmp_path, "--config", os.devnull)
    assert {v["source"] for v in data["settings"].values()} == {"default"}


@pytest.mark.parametrize("table", ["bake_plan", "bakeplan", "Bake-Plan"])
def test_misspelt_pyproject_table_is_named(cli, tmp_path, table):
    write(tmp_path / "pyproject.toml", f'[project]\nname = "x"\n[tool.{table}]\nregistry = "localhost:5555/x"\n')
    needles = ["pyproject.toml", f"[tool.{table}] is not read", "did you mean [tool.bake-plan]?"]
    assert_one_line_error(cli("config", cwd=tmp_path), *needles)
    assert_one_line_error(cli("config", "--config", "pyproject.toml", cwd=tmp_path), *needles)
    # With the real table beside it, the other one is somebody else's business.
    write(tmp_path / "pyproject.toml", f'[tool.bake-plan]\nregistry = "localhost:5555/y"\n[tool.{table}]\nx = 1\n')
    assert merged(cli, tmp_path)["settings"]["registry"]["value"] == "localhost:5555/y"


@pytest.mark.parametrize("text, needle", [
    ('targets = [""]\n', "bake-plan.toml: targets[0]: empty string"),
    ('targets = ["jax", 5]\n', "bake-plan.toml: targets[1]: 5 is an integer, expected a string"),
    ('registry = ""\n', "bake-plan.toml: registry: empty string"),
    ('registry = true\n', "registry: true is a boolean, expected a string"),
    ('[stages.jax]\nargs = { GREETING = 5 }\n', "[stages.jax] args.GREETING: 5 is an integer, expected a string"),
    ('[stages.jax]\nargs = { GREETING = [1] }\n', "[stages.jax] args.GREETING: expected a string, got a list"),
    ('[stages.xla-ci]\nvariants = { python = [] }\n', "[stages.xla-ci] variants.python: no values"),
    ('[stages.xla-ci]\nvariants = { python = "3.10" }\n', "variants.python: expected a list of values, got a string"),
    ('[stages.xla-ci]\nvariants = { python = [3.1] }\n', "variants.python[0]: 3.1 is a number, expected a string"),
    ('date = 2026-11-29T10:00:00\n', "date: expected a string or a date such as 2026-11-29, got a date-time"),
])
def test_wrong_shapes_name_the_element(cli, tmp_path, text, needle):
    (tmp_path / "bake-plan.toml").write_text(text)
    assert_one_line_error(cli("config", cwd=tmp_path, env=ENV), needle)


def test_a_toml_date_is_that_day(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", "date = 2026-11-29\n")
    assert merged(cli, tmp_path)["settings"]["date"] == {"value": "2026-11-29", "source": "bake-plan.toml"}
    tags = plan(cli, tmp_path, "--target", "upstream-pax")["target"]["upstream-pax"]["tags"]
    assert any(t.endswith("nightly-2026-11-29") for t in tags)
    assert tomllib.loads(cli("config", cwd=tmp_path, env=ENV, check=True).stdout)["date"] == "2026-11-29"


def test_a_byte_order_mark_is_ignored(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_bytes(b'\xef\xbb\xbfregistry = "localhost:5555/bom"\n')
    assert merged(cli, tmp_path)["settings"]["registry"]["value"] == "localhost:5555/bom"
    (tmp_path / "bake-plan.toml").write_bytes(b'registry = "\xff"\n')
    assert_one_line_error(cli("config", cwd=tmp_path), "bake-plan.toml: not UTF-8")


@pytest.mark.parametrize("text, needles", [
    ('[plugins]\nenable = ["jax", "xla-ci"]\ndisable = ["xla-ci"]\n',
     ["bake-plan.toml: [plugins]", "'xla-ci' is both in enable and in disable"]),
    ('[plugins]\nenable = []\n', ["bake-plan.toml: [plugins] enable: empty, so no plugin is enabled"]),
])
def test_contradictory_plugin_selection(cli, tmp_path, text, needles):
    (tmp_path / "bake-plan.toml").write_text(text)
    assert_one_line_error(cli("config", cwd=tmp_path), *needles)
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path), *needles)


@pytest.mark.parametrize("table, needles", [
    ('[stages.xla-ci]\nvariants = { pyth = ["3.10"] }\n',
     ["bake-plan.toml:stages.xla-ci: variants: stage 'xla-ci' has no axis 'pyth'", "did you mean 'python'?",
      "variant-format 'dev-{python}_cuda_{cuda}'"]),
    ('[stages.xla-ci]\nvariants = { rocm = ["6.0"] }\nvariant-format = "dev-{python}_cuda_{cuda}"\n',
     ["has no axis 'rocm'", "its axes: python, cuda"]),
    ('[stages.jax]\nvariants = { python = ["3.10", "3.12"], extra = ["1"] }\nvariant-format = "py{python}"\n',
     ["bake-plan.toml:stages.jax: variants: axis 'extra' does not appear in variant-format 'py{python}'"]),
])
def test_override_axes_must_be_declared_or_in_the_variant_format(cli, tmp_path, table, needles):
    (tmp_path / "bake-plan.toml").write_text(table)
    assert_one_line_error(cli("--target", "xla-ci", cwd=tmp_path, env=ENV), *needles)


def test_override_may_add_an_axis_the_variant_format_shows(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", """
    [stages.xla-ci]
    variants = { rocm = ["6.0", "6.1"] }
    variant-format = "dev-{python}_cuda_{cuda}_rocm{rocm}"
    """)
    jobs = json.loads(cli("matrix", "--target", "xla-ci", cwd=tmp_path, env=ENV, check=True).stdout)["include"]
    assert [j["id"] for j in jobs] == ["xla-ci-6.0/amd64", "xla-ci-6.1/amd64"]


def test_enabling_only_bake_plans_own_plugin_is_an_error(cli, tmp_path):
    write(tmp_path / "bake-plan.toml", '[plugins]\nenable = ["default-policies"]\n')
    assert_one_line_error(cli("--target", "jax", cwd=tmp_path), "bake-plan.toml:plugins: no plugin is enabled",
                          "installed: ")


def test_printed_date_is_the_policy_with_the_day_in_the_comment(cli, tmp_path):
    text = cli("config", cwd=tmp_path, env=ENV, check=True).stdout
    line = next(line for line in text.splitlines() if line.startswith("date"))
    assert line.startswith('date = "auto"') and "# default; today: 20" in line
    assert tomllib.loads(text)["date"] == "auto"
    env = dict(ENV, SOURCE_DATE_EPOCH="1700000000")
    write(tmp_path / "bake-plan.toml", 'date = "today"\n')
    text = cli("config", cwd=tmp_path, env=env, check=True).stdout
    assert 'date = "today"' in text and "# bake-plan.toml; today: 20" in text
    write(tmp_path / "bake-plan.toml", "")
    text = cli("config", cwd=tmp_path, env=env, check=True).stdout
    assert 'date = "auto"' in text and "# default; env SOURCE_DATE_EPOCH: 2023-11-14" in text
    # Read back elsewhere (without the variable), it is still auto: the day is not frozen.
    write(tmp_path / "again" / "bake-plan.toml", text)
    assert merged(cli, tmp_path / "again")["settings"]["date"]["value"] != "2023-11-14"
    write(tmp_path / "bake-plan.toml", 'date = "2026-11-29"\n')
    assert 'date = "2026-11-29"' in cli("config", cwd=tmp_path, env=env, check=True).stdout


def test_config_hides_an_arg_whose_name_looks_like_a_credential(cli, tmp_path):
    """What ``plan`` refuses as a credential (by the arg's name) ``config`` does not print."""
    write(tmp_path / "bake-plan.toml", """
        [stages.jax]
        args = { DB_PASSWORD = "hunter2secret", NOTE = "plain words" }
    """)
    as_json = merged(cli, tmp_path)["stages"]["jax"]["value"]["args"]
    assert as_json == {"DB_PASSWORD": "<redacted>", "NOTE": "plain words"}
    as_toml = cli("config", cwd=tmp_path, env=ENV, check=True).stdout
    assert "hunter2secret" not in as_toml and 'DB_PASSWORD = "<redacted>"' in as_toml
    assert tomllib.loads(as_toml)["stages"]["jax"]["args"]["NOTE"] == "plain words"


@pytest.mark.parametrize("table, message", [
    ("[stages.nosuch]\nargs = { A = \"1\" }\n", "no stage 'nosuch'"),
    ("[plugins]\ndisable = [\"nosuch\"]\n", "no installed plugin 'nosuch'"),
])
def test_config_says_what_every_other_command_says_of_a_bad_configuration(cli, tmp_path, table, message):
    (tmp_path / "bake-plan.toml").write_text(table)
    config = cli("config", cwd=tmp_path, env=ENV)
    stages = cli("stages", cwd=tmp_path, env=ENV)
    assert config.returncode == stages.returncode == 2
    assert message in config.stderr and config.stderr == stages.stderr and config.stdout == ""


def test_config_checks_the_configured_targets_plan_as_plan_does(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('targets = ["jax"]\n[stages.jax]\nargs = { API_TOKEN = "abc123secretvalue" }\n')
    config, plan_ = cli("config", cwd=tmp_path, env=ENV), cli("-o", "-", cwd=tmp_path, env=ENV)
    assert config.returncode == plan_.returncode == 2 and config.stdout == ""
    assert "args.API_TOKEN: arg 'API_TOKEN' looks like a credential" in config.stderr
    assert "abc123secretvalue" not in config.stderr
    (tmp_path / "bake-plan.toml").write_text('targets = ["nosuch"]\n')
    assert "targets: unknown target 'nosuch'" in cli("config", cwd=tmp_path, env=ENV).stderr


def test_a_missing_sources_manifest_in_the_environment_names_the_variable(cli, tmp_path):
    env = dict(ENV, BAKE_PLAN_SOURCES=str(tmp_path / "nope.toml"))
    for command in ("stages", "config"):
        assert_one_line_error(cli(command, cwd=tmp_path, env=env),
                              f"env BAKE_PLAN_SOURCES {tmp_path / 'nope.toml'}: no such file (the sources manifest)",
                              cwd=tmp_path)
