"""``BAKE_PLAN_<SETTING>`` environment variables: between the configuration file and the flags
(defaults < file < environment < command line), each through the flag's own parser, shown by
``bake-plan config`` with its source, written in the plan's header; an empty one is unset and a
misspelt one is warned about (docs/usage.md "Configuration", docs/security.md)."""

from __future__ import annotations

import json
import os
import re

import pytest
from test_errors import one_line_error

from bake.settings.merge import ENV_PLUGINS_DISABLE, ENVIRONMENT, FLAGS, OTHER_VARIABLES, _misspelt, gather
from conftest import ROOT, make_wheel

SETTINGS = {k: v for k, v in os.environ.items() if not k.upper().startswith("BAKE_PLAN_") and k != "SOURCE_DATE_EPOCH"}
"""The test's environment without any BAKE_PLAN_* variable (the stray-plugin block list aside:
added back by :func:`env`) and without SOURCE_DATE_EPOCH."""


def env(**variables) -> dict:
    out = dict(SETTINGS, **variables)
    if ENV_PLUGINS_DISABLE in os.environ and ENV_PLUGINS_DISABLE not in variables:
        out[ENV_PLUGINS_DISABLE] = os.environ[ENV_PLUGINS_DISABLE]
    return out


def shown(cli, cwd, *args, environ) -> dict:
    """``bake-plan config --format json``'s settings."""
    return json.loads(cli("config", "--format", "json", *args, cwd=cwd, env=environ, check=True).stdout)["settings"]


# key: (the file's TOML, the variable's text, the value it gives, the flag's arguments or None
# when `config` takes no such flag, the flag's value). Every key a flag sets has a row.
ROWS = {
    "registry": ('"localhost:5555/file"', "localhost:5555/env", "localhost:5555/env",
                 ["--registry", "localhost:5555/flag"], "localhost:5555/flag"),
    "platforms": ('["linux/amd64"]', "linux/arm64,linux/amd64", ["linux/arm64", "linux/amd64"],
                  ["--platform", "linux/amd64"], ["linux/amd64"]),
    "date": ('"2026-01-01"', "2026-02-02", "2026-02-02", ["--date", "2026-03-03"], "2026-03-03"),
    "targets": ('["jax"]', "base, te", ["base", "te"], ["--target", "jax"], ["jax"]),
    "base-images": ('{ "busybox" = "localhost:5555/file/busybox" }',
                    "busybox=localhost:5555/env/busybox,python:3.11=localhost:5555/env/python:3.11",
                    {"busybox": "localhost:5555/env/busybox", "python:3.11": "localhost:5555/env/python:3.11"},
                    ["--base-image", "busybox=localhost:5555/flag/busybox"], {"busybox": "localhost:5555/flag/busybox"}),
    "cache-from-branch": ('"main"', "develop", "develop", ["--cache-from-branch", "release"], "release"),
    "metadata-targets": ('["jax"]', "base", ["base"], ["--metadata-targets", "te"], ["te"]),
    "pull": ("false", "Yes", True, None, None),
    "wheelhouse": ('"file-wheels"', "env-wheels", "{cwd}/env-wheels", None, None),
}


def test_every_setting_a_flag_sets_has_its_variable():
    assert ENVIRONMENT == {
        "registry": "BAKE_PLAN_REGISTRY", "platforms": "BAKE_PLAN_PLATFORMS", "date": "BAKE_PLAN_DATE",
        "targets": "BAKE_PLAN_TARGETS", "base-images": "BAKE_PLAN_BASE_IMAGES",
        "cache-from-branch": "BAKE_PLAN_CACHE_FROM_BRANCH", "metadata-targets": "BAKE_PLAN_METADATA_TARGETS",
        "pull": "BAKE_PLAN_PULL", "wheelhouse": "BAKE_PLAN_WHEELHOUSE",
        **{key: ENVIRONMENT[key] for key in set(FLAGS) - set(ROWS)},  # keys added since: named by the same rule
    }
    for key, variable in ENVIRONMENT.items():
        assert variable == "BAKE_PLAN_" + re.sub("[-.]", "_", key).upper()
    assert ENV_PLUGINS_DISABLE == "BAKE_PLAN_PLUGINS_DISABLE"


@pytest.mark.parametrize("key", list(ROWS))
def test_the_variable_beats_the_file_and_loses_to_the_flag(cli, tmp_path, key):
    toml, text, value, flag_args, flag_value = ROWS[key]
    (tmp_path / "bake-plan.toml").write_text(f"{key} = {toml}\n")
    (tmp_path / "env-wheels").mkdir()
    variable = ENVIRONMENT[key]
    if isinstance(value, str):
        value = value.format(cwd=tmp_path)
    from_file = shown(cli, tmp_path, environ=env())[key]
    assert from_file["source"] == "bake-plan.toml" and from_file["value"] != value
    assert shown(cli, tmp_path, environ=env(**{variable: text}))[key] == {"value": value, "source": f"env {variable}"}
    assert shown(cli, tmp_path, environ=env(**{variable: ""}))[key] == from_file, "an empty variable is unset"
    if flag_args is not None:
        beaten = shown(cli, tmp_path, *flag_args, environ=env(**{variable: text}))[key]
        assert beaten == {"value": flag_value, "source": flag_args[0]}


def test_the_flag_beats_pull_and_wheelhouse_variables(tmp_path, monkeypatch):
    """``--pull``/``--no-pull`` and ``--wheelhouse`` are not `config`'s flags: the same merge through
    :func:`gather`, as the CLI calls it with the flags of `build`."""
    monkeypatch.chdir(tmp_path)
    for name in ("env-wheels", "flag-wheels"):
        make_wheel(tmp_path / name, "alpha", "1.0")
    environ = {"BAKE_PLAN_PULL": "true", "BAKE_PLAN_WHEELHOUSE": "env-wheels"}
    given = {"target": ["jax"], "config": os.devnull}
    from_env = gather("build", given, environ)
    assert (from_env.pull, from_env.wheelhouse) == (True, str(tmp_path / "env-wheels"))
    assert from_env.where("wheelhouse") == "env BAKE_PLAN_WHEELHOUSE"
    from_flags = gather("build", dict(given, pull=False, wheelhouse="flag-wheels"), environ)
    assert (from_flags.pull, from_flags.wheelhouse) == (False, str(tmp_path / "flag-wheels"))
    assert from_flags.where("pull") == "--pull" and from_flags.environment == ()


@pytest.mark.parametrize("text, pull", [("1", True), ("TRUE", True), ("on", True), ("yes", True),
                                         ("0", False), ("False", False), ("off", False), ("no", False)])
def test_pull_takes_pips_words_for_yes_and_no(text, pull):
    assert gather("config", {"config": os.devnull}, {"BAKE_PLAN_PULL": text})["pull"] is pull


# (key, bad text, the flag and its value refusing it with the same words, or None; the words)
BAD = [
    ("registry", "Bad Registry", ("--registry", "Bad Registry"), "is not host[:port][/namespace]"),
    ("platforms", "linux/amd64,linux/mips", ("--platform", "linux/amd64,linux/mips"), "unsupported platform 'linux/mips'"),
    ("date", "2026-13-01", ("--date", "2026-13-01"), "is not a date in the form YYYY-MM-DD"),
    ("targets", "jax,,te", ("--target", "jax,,te"), "empty target name in 'jax,,te'"),
    ("base-images", "Python:3.11=localhost:5555/python:3.11", ("--base-image", "Python:3.11=localhost:5555/python:3.11"),
     "'Python:3.11' is not an image reference"),
    ("base-images", "busybox", ("--base-image", "busybox"), "'busybox' is not ORIGINAL=REPLACEMENT"),
    ("base-images", "busybox=localhost:5555/a/busybox,busybox:latest=localhost:5555/b/busybox", None,
     "replace one image (docker.io/library/busybox:latest) differently"),
    ("cache-from-branch", "feature branch", ("--cache-from-branch", "feature branch"), "holds whitespace"),
    ("metadata-targets", ",", ("--metadata-targets", ","), "empty target name"),
    ("pull", "maybe", None, "'maybe' is not a boolean (1/true/yes/on or 0/false/no/off)"),
    ("wheelhouse", "no-such-dir", None, "no-such-dir: no such directory (make one: bake-plan wheelhouse"),
]


@pytest.mark.parametrize("key, text, flag, words", BAD, ids=[f"{row[0]}-{i}" for i, row in enumerate(BAD)])
def test_a_bad_value_is_one_line_naming_the_variable_with_the_flags_words(cli, tmp_path, key, text, flag, words):
    variable = ENVIRONMENT[key]
    command = ["build", "--target", "jax"] if key == "pull" else ["plan", "--target", "jax"]
    from_env = one_line_error(cli(*command, cwd=tmp_path, env=env(**{variable: text})))
    assert from_env.startswith(f"env {variable}: ") and words in from_env
    assert list(tmp_path.iterdir()) == [], "no plan on bad input"
    if flag is not None:
        from_flag = one_line_error(cli(*command, *flag, cwd=tmp_path, env=env()))
        assert from_flag.split(": ", 1)[1] == from_env.split(": ", 1)[1], "the same parser, the same words"


def test_a_credential_in_a_variable_is_redacted_in_errors_and_in_config(cli, tmp_path):
    token = "ghp_" + "A1b2C3d4" * 5
    proc = cli("plan", "--target", "jax", cwd=tmp_path, env=env(BAKE_PLAN_REGISTRY=f"https://me:{token}@host"))
    line = one_line_error(proc)
    assert line.startswith("env BAKE_PLAN_REGISTRY: ") and token not in proc.stderr and "<redacted>" in line
    environ = env(BAKE_PLAN_CACHE_FROM_BRANCH=token)
    toml = cli("config", cwd=tmp_path, env=environ, check=True).stdout
    assert token not in toml
    assert re.search(r'^cache-from-branch = "<redacted>" +# env BAKE_PLAN_CACHE_FROM_BRANCH$', toml, re.M), toml
    assert shown(cli, tmp_path, environ=environ)["cache-from-branch"] == {
        "value": "<redacted>", "source": "env BAKE_PLAN_CACHE_FROM_BRANCH"}


def test_config_toml_shows_the_variable_as_the_source(cli, tmp_path):
    environ = env(BAKE_PLAN_REGISTRY="localhost:5555/env", BAKE_PLAN_PLATFORMS="linux/arm64", BAKE_PLAN_DATE="today")
    toml = cli("config", cwd=tmp_path, env=environ, check=True).stdout
    assert toml.splitlines()[0] == ("# bake-plan configuration: built-in defaults < no configuration file "
                                    "< environment (BAKE_PLAN_*) < command line")
    assert re.search(r'^registry = "localhost:5555/env" +# env BAKE_PLAN_REGISTRY$', toml, re.M), toml
    assert re.search(r'^platforms = \["linux/arm64"\] +# env BAKE_PLAN_PLATFORMS$', toml, re.M), toml
    assert re.search(r'^date = "today" +# env BAKE_PLAN_DATE; today: \d{4}-\d\d-\d\d$', toml, re.M), toml


def test_targets_from_the_environment_are_named_in_errors_and_plan_without_a_flag(cli, tmp_path):
    assert one_line_error(cli("plan", cwd=tmp_path, env=env(BAKE_PLAN_TARGETS="jaxx"))) == (
        "env BAKE_PLAN_TARGETS: unknown target 'jaxx'; did you mean 'jax'?")
    out = cli("plan", "-o", "-", "--format", "json", cwd=tmp_path, env=env(BAKE_PLAN_TARGETS="base"), check=True)
    assert set(json.loads(out.stdout)["target"]) == {"base-mealkit", "base"}


def test_every_command_takes_them_as_it_takes_the_file(cli, tmp_path):
    out = cli("matrix", "--format", "json", cwd=tmp_path, check=True,
              env=env(BAKE_PLAN_TARGETS="base", BAKE_PLAN_PLATFORMS="linux/arm64")).stdout
    assert [(job["stage"], job["platform"]) for job in json.loads(out)["include"]] == [("base", "linux/arm64")]


def test_the_hcl_header_records_the_variables_in_force(cli, tmp_path):
    environ = env(BAKE_PLAN_REGISTRY="localhost:5555/env", BAKE_PLAN_DATE="2026-11-29",
                  BAKE_PLAN_CACHE_FROM_BRANCH="branch/x", BAKE_PLAN_PLATFORMS="linux/arm64")
    # --platform beats BAKE_PLAN_PLATFORMS, so only the others made the plan
    text = cli("plan", "--target", "base", "--platform", "linux/amd64", "-o", "-", cwd=tmp_path, env=environ,
               check=True).stdout
    assert ("# From the environment: BAKE_PLAN_REGISTRY=localhost:5555/env BAKE_PLAN_DATE=2026-11-29 "
            "BAKE_PLAN_CACHE_FROM_BRANCH=branch/x\n") in text
    strays = os.environ.get(ENV_PLUGINS_DISABLE)  # conftest's block list of plugins installed beside bake-plan
    disabled = ",".join(filter(None, [strays, "xla-ci"]))
    manifest = tmp_path / "my sources.toml"
    manifest.write_bytes((ROOT / "stages" / "sources.toml").read_bytes())
    more = env(BAKE_PLAN_REGISTRY="localhost:5555/env", BAKE_PLAN_SOURCES=str(manifest), **{ENV_PLUGINS_DISABLE: disabled})
    text = cli("plan", "--target", "base", "-o", "-", cwd=tmp_path, env=more, check=True).stdout
    assert (f"# From the environment: BAKE_PLAN_REGISTRY=localhost:5555/env {ENV_PLUGINS_DISABLE}={disabled} "
            f"BAKE_PLAN_SOURCES='{manifest}'\n") in text, "a value with a space is one shell word"
    text = cli("plan", "--target", "base", "--sources", str(manifest), "-o", "-", cwd=tmp_path, env=more,
               check=True).stdout
    assert "BAKE_PLAN_SOURCES" not in text.split("\n#\n", 1)[0], "--sources beat it"
    bare = cli("plan", "--target", "base", "-o", "-", cwd=tmp_path, env=env(), check=True).stdout
    expected = f"{ENV_PLUGINS_DISABLE}={strays}" if strays else "no setting"
    assert f"# From the environment: {expected}\n" in bare


@pytest.mark.buildx
def test_buildx_reads_a_plan_made_with_an_environment_registry_as_one_made_with_the_flag(cli, buildx, tmp_path):
    registry = "localhost:5555/from-env"
    (tmp_path / "env").mkdir()
    (tmp_path / "flag").mkdir()
    cli("plan", "--target", "jax", "--date", "2026-11-29", cwd=tmp_path / "env", env=env(BAKE_PLAN_REGISTRY=registry),
        check=True)
    cli("plan", "--target", "jax", "--date", "2026-11-29", "--registry", registry, cwd=tmp_path / "flag", env=env(),
        check=True)
    from_env = buildx.print_plan(tmp_path / "env" / "docker-bake.hcl", cwd=tmp_path / "env")
    assert from_env == buildx.print_plan(tmp_path / "flag" / "docker-bake.hcl", cwd=tmp_path / "flag")
    tags = [tag for target in from_env["target"].values() for tag in target.get("tags", [])]
    assert tags and all(tag.startswith(registry + "/") for tag in tags), tags
    assert "jax:nightly-2026-11-29" in {t.rsplit("/", 1)[-1] for t in tags}
    assert f"# From the environment: BAKE_PLAN_REGISTRY={registry}\n" in (tmp_path / "env" / "docker-bake.hcl").read_text()


def test_a_misspelt_variable_is_warned_about_and_ignored(cli, tmp_path):
    proc = cli("plan", "--target", "base", "-o", "-", "--format", "json", cwd=tmp_path,
               env=env(BAKE_PLAN_REGISTY="localhost:5555/typo", bake_plan_platforms="linux/arm64"))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("bake-plan: warning: ")]
    assert warnings == [
        "bake-plan: warning: env BAKE_PLAN_REGISTY is not a bake-plan setting, so it is ignored; "
        "did you mean 'BAKE_PLAN_REGISTRY'?",
        "bake-plan: warning: env bake_plan_platforms is not a bake-plan setting, so it is ignored; "
        "did you mean 'BAKE_PLAN_PLATFORMS'?",
    ]
    plan = json.loads(proc.stdout)
    assert "localhost:5555/typo" not in proc.stdout and plan["target"]["base"]["platforms"] == [
        "linux/amd64", "linux/arm64"]


@pytest.mark.parametrize("name, near", [
    ("BAKE_PLAN_PLATFORM", "BAKE_PLAN_PLATFORMS"), ("BAKE_PLAN_TARGET", "BAKE_PLAN_TARGETS"),
    ("BAKE_PLAN_REGSITRY", "BAKE_PLAN_REGISTRY"), ("BAKE_PLAN_BASE_IMAGE", "BAKE_PLAN_BASE_IMAGES"),
    ("BAKE_PLAN_PLUGIN_DISABLE", "BAKE_PLAN_PLUGINS_DISABLE"), ("BAKE_PLAN_SOURCE", "BAKE_PLAN_SOURCES"),
])
def test_a_name_two_characters_from_a_setting_is_a_typo(name, near):
    assert _misspelt({name: "x"}) == [f"env {name} is not a bake-plan setting, so it is ignored; did you mean '{near}'?"]


THEIRS = ["BAKE_PLAN_TEST_REGISTRY", "BAKE_PLAN_BUILDX_OLD", "BAKE_PLAN_ENGINE_DIR", "BAKE_PLAN_TEST_CACHE",
          "BAKE_PLAN_TEST_TOKEN", "BAKE_PLAN_PLAIN", "BAKE_PLAN_KEEP_ENGINE_LOG", "BAKE_PLAN_CI_VENV",
          "BAKE_PLAN_BENCH_STAGES", "BAKE_PLAN_TESTFAMILY_WHEELHOUSE", "BAKE_PLAN_TESTFAMILY_LOCAL_WHEELS",
          "BAKE_PLAN_TESTFAMILY_LEAF_INPUT", "BAKE_PLAN_"]
"""``BAKE_PLAN_*`` names of plugins, tests and scripts, which the settings do not read."""


def test_other_bake_plan_variables_are_left_alone():
    """Names that share the prefix (pip leaves unknown PIP_* alone too), and bake-plan's own."""
    assert _misspelt(dict.fromkeys([*THEIRS, *OTHER_VARIABLES, *ENVIRONMENT.values(), ENV_PLUGINS_DISABLE], "x")) == []


def test_other_bake_plan_variables_change_no_plan_and_say_nothing(cli, tmp_path):
    args = ("plan", "--target", "jax", "--date", "2026-11-29", "-o", "-")
    clean = cli(*args, cwd=tmp_path, env=env(), check=True)
    crowded = cli(*args, cwd=tmp_path, env=env(**dict.fromkeys(THEIRS, "localhost:5555/elsewhere")), check=True)
    assert crowded.stdout == clean.stdout and crowded.stderr == clean.stderr


def test_other_bake_plan_variables_match_the_modules_that_read_them():
    from bake.pip import sources

    assert OTHER_VARIABLES == (sources.MANIFEST_ENV, sources.CHECKOUTS_ENV)


def test_the_usage_doc_lists_every_variable():
    section = (ROOT / "docs" / "usage.md").read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    for variable in [*ENVIRONMENT.values(), ENV_PLUGINS_DISABLE, *OTHER_VARIABLES]:
        assert f"`{variable}`" in section, variable
