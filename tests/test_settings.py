"""One gate for settings: every kind of value has one parser, so the command line and the
configuration file refuse the same bad value with the same words; the settings are built once,
fully checked, from plain values (no argparse below the CLI); reports read back are checked too."""

from __future__ import annotations

import datetime
import json

import pytest
from test_errors import assert_one_line_error

from bake.errors import ConfigError, UsageError
from bake.settings.merge import gather

# (configuration key, TOML value, flag, flag value, the parser's words)
SAME_VALUE_BOTH_WAYS = [
    ("registry", '"Bad Registry"', "--registry", "Bad Registry", "is not host[:port][/namespace]"),
    ("platforms", '["linux/mips"]', "--platform", "linux/mips", "unsupported platform 'linux/mips'"),
    ("date", '"2026-13-01"', "--date", "2026-13-01", "is not a date in the form YYYY-MM-DD"),
    ("base-images", '{ "Python:3.11" = "localhost:5555/python:3.11" }', "--base-image",
     "Python:3.11=localhost:5555/python:3.11", "'Python:3.11' is not an image reference"),
    ("cache-from-branch", '"feature branch"', "--cache-from-branch", "feature branch",
     "holds whitespace or a control character"),
]


@pytest.mark.parametrize("key, toml, flag, value, words", SAME_VALUE_BOTH_WAYS,
                         ids=[row[0] for row in SAME_VALUE_BOTH_WAYS])
def test_a_bad_value_is_refused_alike_from_the_file_and_the_flag(cli, tmp_path, key, toml, flag, value, words):
    from_flag = cli("plan", "--target", "jax", flag, value, cwd=tmp_path)
    assert_one_line_error(from_flag, f"{flag}", words, cwd=tmp_path)
    (tmp_path / "bake-plan.toml").write_text(f"{key} = {toml}\n")
    from_file = cli("plan", "--target", "jax", cwd=tmp_path)
    assert_one_line_error(from_file, "bake-plan.toml", key, words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bake-plan.toml"], "no plan on bad input"


def test_a_parent_report_with_a_malformed_digest_is_refused(cli, tmp_path):
    report = tmp_path.parent / f"{tmp_path.name}-sitrep.json"
    report.write_text(json.dumps({"targets": {"base-mealkit": {"digest": "sha256:abc\n  pull = true"}}}))
    proc = cli("--target", "jax", "--platform", "linux/amd64", "--from-registry", "--parent-report", str(report),
               cwd=tmp_path)
    assert_one_line_error(proc, "--parent-report", "target 'base-mealkit'", "is not an image digest", cwd=tmp_path)


def test_a_blank_cache_branch_is_refused(cli, tmp_path):
    proc = cli("plan", "--target", "jax", "--cache-branch", " ", cwd=tmp_path)
    assert_one_line_error(proc, "--cache-branch", "holds whitespace", cwd=tmp_path)


EMPTY_BOTH_WAYS = [("registry", '""', "--registry"), ("platforms", '[""]', "--platform"),
                   ("date", '""', "--date"), ("cache-from-branch", '""', "--cache-from-branch")]


@pytest.mark.parametrize("key, toml, flag", EMPTY_BOTH_WAYS, ids=[row[0] for row in EMPTY_BOTH_WAYS])
def test_an_empty_value_is_refused_alike_from_the_file_and_the_flag(cli, tmp_path, key, toml, flag):
    assert_one_line_error(cli("plan", "--target", "jax", flag, "", cwd=tmp_path), f"{flag}: empty string",
                          cwd=tmp_path)
    (tmp_path / "bake-plan.toml").write_text(f"{key} = {toml}\n")
    assert_one_line_error(cli("plan", "--target", "jax", cwd=tmp_path), f"bake-plan.toml: {key}: empty string")


@pytest.mark.parametrize("content", ["[" * 100000, '{"buildx.build.warnings": [], "base-mealkit": '
                                     '{"containerimage.digest": "sha256:' + "0" * 64 + '"}}'],
                         ids=["deeply-nested", "buildx-warnings-key"])
def test_parent_reports_of_odd_shapes(cli, tmp_path, content):
    report = tmp_path.parent / f"{tmp_path.name}-metadata.json"
    report.write_text(content)
    proc = cli("-o", "-", "--format", "json", "--target", "jax", "--platform", "linux/amd64", "--from-registry",
               "--parent-report", str(report), cwd=tmp_path)
    if content.startswith("["):
        assert_one_line_error(proc, "--parent-report", "nested too deeply", cwd=tmp_path)
    else:  # buildx's own key is not a target; the digest reaches the plan
        assert proc.returncode == 0, proc.stderr
        assert "sha256:" + "0" * 64 in proc.stdout


@pytest.mark.parametrize("epoch", ["-1", " 1700000000 ", "1_700_000_000", "+5", "\u0661\u0662"])
def test_source_date_epoch_is_ascii_digits_only(tmp_path, monkeypatch, epoch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="is not a Unix time in seconds"):
        gather("plan", {"target": ["jax"]}, environ={"SOURCE_DATE_EPOCH": epoch})


def test_settings_are_gathered_from_plain_values_once_and_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bake-plan.toml").write_text('registry = "localhost:5555/team"\ntargets = ["jax"]\n')
    settings = gather("plan", {"platform": ["linux/arm64,linux/x86_64"], "base_image": ["python:3.11=py:1"]},
                      environ={"SOURCE_DATE_EPOCH": "86400"})
    assert settings.targets == ("jax",)
    assert settings.registry == "localhost:5555/team"
    assert settings.platforms == ("linux/arm64", "linux/amd64")
    assert settings.date == datetime.date(1970, 1, 2) and settings.date_source == "env SOURCE_DATE_EPOCH"
    assert settings.base_images == (("python:3.11", "py:1"),)
    assert settings.provenance["registry"].source == "bake-plan.toml"
    assert settings.provenance["platforms"].source == "--platform"
    options = settings.plan_options()
    assert (options.targets, options.platforms, options.date) == (("jax",), ("linux/arm64", "linux/amd64"),
                                                                   datetime.date(1970, 1, 2))


def test_gather_raises_the_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="no target"):
        gather("plan", {}, environ={})
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH 'soon' is not a Unix time"):
        gather("plan", {"target": ["jax"]}, environ={"SOURCE_DATE_EPOCH": "soon"})
    (tmp_path / "bake-plan.toml").write_text('date = "yesterday"\n')
    with pytest.raises(ConfigError, match=r"bake-plan.toml: date: 'yesterday' is not a date"):
        gather("plan", {"target": ["jax"]}, environ={})


def test_a_parent_report_of_another_arch_is_refused(cli, tmp_path):
    report = tmp_path.parent / f"{tmp_path.name}-arm64-sitrep.json"
    digest = "sha256:" + "1" * 64
    report.write_text(json.dumps({"targets": {"base-mealkit": {"digest": digest, "platforms": ["linux/arm64"]}}}))
    args = ["--target", "jax", "--from-registry", "--parent-report", str(report), "--format", "json", "-o", "-"]
    proc = cli(*args, "--platform", "linux/amd64", cwd=tmp_path)
    assert_one_line_error(proc, f"--parent-report: {report}: target 'base-mealkit' was built for linux/arm64, "
                                "not linux/amd64", cwd=tmp_path)
    proc = cli(*args, "--platform", "linux/arm64", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert digest in proc.stdout


def test_a_sources_manifest_that_is_a_directory_says_so(cli, tmp_path):
    (tmp_path / "src").mkdir()
    proc = cli("--target", "jax", "--sources", "src", cwd=tmp_path)
    assert_one_line_error(proc, "--sources src: is a directory (the sources manifest)")
