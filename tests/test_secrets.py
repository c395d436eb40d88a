"""Secrets reach builds only through bake's ``secret`` attribute, and nothing that looks like a
credential gets into a plan: ``--secret`` on every target (read back by both buildx versions),
credential-looking arg and label names and values refused with a line pointing to ``--secret``,
no false alarm on ordinary names and values, and error lines that never repeat a credential."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_errors import STAGE_IMPORTS, assert_one_line_error

from bake.plan.secrets import credential_name, credential_value, parse_secret, redact

DATE = "2026-11-29"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # the shape of a GitHub token; not a real one
KEY_FILE = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n"


@pytest.mark.buildx
@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_secrets_are_on_every_target_and_their_values_nowhere(buildx, cli, tmp_path, fmt):
    key = tmp_path / "deploy.key"
    key.write_text(KEY_FILE)
    env = dict(os.environ, MY_TOKEN=TOKEN)
    out = tmp_path / f"plan.{fmt}"
    proc = cli("--target", "upstream-pax", "--date", DATE, "--format", fmt, "-o", str(out),
               "--secret", "id=mytoken,env=MY_TOKEN", "--secret", "id=deploykey,src=deploy.key",
               cwd=tmp_path, env=env, check=True)
    text = out.read_text(encoding="utf-8")
    assert TOKEN not in text and "OPENSSH" not in text and "b3BlbnNzaC1" not in text
    assert TOKEN not in proc.stdout + proc.stderr
    printed = buildx.print_plan(out, cwd=tmp_path / "..")
    expected = [{"id": "mytoken", "env": "MY_TOKEN"}, {"id": "deploykey", "src": str(key)}]
    for name, target in printed["target"].items():
        assert target["secret"] == expected, name  # normalised: 0.29 prints objects, 0.13 strings
        assert TOKEN not in str(target)


def test_a_secret_file_given_relative_is_written_absolute(cli, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "s.txt").write_text("x")
    out = cli("--target", "base", "--date", DATE, "--format", "json", "-o", "-",
              "--secret", "id=s,src=sub/s.txt", cwd=tmp_path, check=True).stdout
    assert f'"id=s,src={tmp_path}/sub/s.txt"' in out


def test_a_plugin_that_puts_a_secret_value_in_an_arg_is_refused(cli, make_plugin, tmp_path):
    """A value no pattern knows, but the value of a --secret: found by value, never printed."""
    site = make_plugin(STAGE_IMPORTS + """
import os
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="leaks", image="leaks", parent="jax", context=stage_dir("jax"),
                  args={"BUILD_FLAVOUR": "x-" + os.environ.get("ODD_VALUE", "") + "-y"})]
""", name="leaky-plugin")
    env = dict(os.environ, ODD_VALUE="correct horse battery staple")
    proc = cli("--target", "leaks", "--secret", "id=phrase,env=ODD_VALUE", cwd=tmp_path, env=env, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'leaky-plugin'", "stage 'leaks'", "target 'leaks-mealkit'",
                          "args['BUILD_FLAVOUR']", "secret 'phrase' (env ODD_VALUE)", "--secret", cwd=tmp_path)
    assert "correct horse" not in proc.stderr


@pytest.mark.parametrize("name", [
    "GITHUB_TOKEN", "HF_TOKEN", "NPM_AUTH_TOKEN", "DB_PASSWORD", "PGPASSWORD", "ftp_passwd", "apiKey", "X-Api-Key",
    "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "PRIVATE_KEY", "ssh_private_key", "CLIENT_SECRET", "GCP_CREDENTIALS",
    "REGISTRY_CREDS", "SIGNING_KEY", "passphrase",
])
def test_credential_names_are_recognised(name):
    assert credential_name(name), name


@pytest.mark.parametrize("value", [
    TOKEN, "github_pat_" + "a" * 40, "glpat-" + "x" * 20, "AKIAIOSFODNN7EXAMPLE", "xoxb-1234567890-abcdefghij",
    "AIza" + "B" * 35, "hf_" + "a" * 34, "npm_" + "a" * 36, "pypi-AgEIcHlwaS5vcmc" + "x" * 30, "dckr_pat_" + "y" * 24,
    "sk-" + "z" * 40, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmn", KEY_FILE,
    "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "https://user:hunter2@git.example.com/repo.git", "git+https://oauth2:abcdef@gitlab.com/x/y.git#main",
    "pip install --index-url https://__token__:pypi-xyz@pypi.example/simple pkg",
])
def test_credential_values_are_recognised(value):
    assert credential_value(value), value


@pytest.mark.parametrize("name", [
    "CACHE_SILO", "TOKENIZERS_PARALLELISM", "MAX_TOKENS", "NVTE_FRAMEWORK", "NVTE_FUSED_ATTN", "BAZEL_CACHE",
    "URLREF_TRANSFORMER_ENGINE", "SRC_PATH_JAX", "REQUIREMENTS", "BASE_IMAGE", "SOURCE_DATE_EPOCH", "SECRETARY_NAME",
    "SORT_KEY", "KEY_ID", "PWD", "AUTHOR", "PASS_COUNT", "org.opencontainers.image.title", "cuda_compute", "tpuvm",
    "python_version",
])
def test_ordinary_names_are_not_credentials(name):
    assert credential_name(name) is None, name


@pytest.mark.parametrize("value", [
    "https://github.com/google/jax.git#main", "git@github.com:org/repo.git", "ssh://git@github.com/org/repo.git",
    "docker-image://python:3.11@sha256:" + "a" * 64, "docker-image://localhost:5555/x/y:mealkit@sha256:" + "b" * 64,
    "https://localhost:5555/v2/", "user@example.com", "numpy<2", "5.2,7.5", "cache-silo-ci-dev-3.8_cuda_12.1",
    "sha256:" + "c" * 64, "ghp_short", "AKIA-not-a-key", "sk-learn", "hf_hub_download", "-----BEGIN CERTIFICATE-----",
    "gamma @ file:///opt/wheels/gamma-1.0-py3-none-any.whl", "http://[::1]:8080/path",
])
def test_ordinary_values_are_not_credentials(value):
    assert credential_value(value) is None, value


@pytest.mark.parametrize("field, code, needles", [
    ("arg name", 'args={"GITHUB_TOKEN": "x"}', ["arg 'GITHUB_TOKEN'", "its name contains 'token'", "--not-secret GITHUB_TOKEN"]),
    ("label name", 'labels={"com.example.password": "x"}', ["label 'com.example.password'", "'password'"]),
    ("arg value", f'args={{"GREETING": "hello {TOKEN}"}}', ["args['GREETING']", "a GitHub token"]),
    ("label value", 'labels={"org.example.src": "https://bot:s3cr3tpass@git.example.com/x.git"}',
     ["labels['org.example.src']", "a URL with a password"]),
    ("inline Dockerfile", 'dockerfile_inline="FROM x\\nRUN echo AKIAIOSFODNN7EXAMPLE"',
     ["dockerfile-inline", "an AWS access key id"]),
    ("source URL", 'sources=(Source("PRIV", "https://ci:glpat-aaaaaaaaaaaaaaaaaaaa@gitlab.com/x.git"),)',
     ["args['URLREF_PRIV']", "a"]),
])
def test_credential_looking_args_and_labels_are_refused(cli, make_plugin, tmp_path, field, code, needles):
    site = make_plugin(STAGE_IMPORTS + f"""
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="creds", image="creds", parent="jax", context=stage_dir("jax"), {code})]
""", name="cred-plugin")
    proc = cli("--target", "creds", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'cred-plugin'", "stage 'creds'", "looks like", "--secret", *needles,
                          cwd=tmp_path)
    for secret in ("hello ghp_", "s3cr3tpass", "AKIAIOSFODNN7EXAMPLE", "glpat-aaaa"):
        assert secret not in proc.stderr


def test_not_secret_lets_a_name_through(cli, make_plugin, tmp_path):
    site = make_plugin(STAGE_IMPORTS + """
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="tok", image="tok", parent="jax", context=stage_dir("jax"), args={"PAD_TOKEN": "<pad>"})]
""", name="tokenizer")
    proc = cli("--target", "tok", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "arg 'PAD_TOKEN'", "--not-secret PAD_TOKEN", cwd=tmp_path)
    cli("--target", "tok", "--not-secret", "PAD_TOKEN", cwd=tmp_path, pythonpath=[site], check=True)


def test_error_lines_never_repeat_a_credential(cli, make_plugin, tmp_path):
    site = make_plugin(f"""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    raise RuntimeError("login to https://bot:hunter2@registry.example failed with {TOKEN}")
""", name="chatty")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'chatty' raised RuntimeError", "https://bot:<redacted>@registry.example",
                          "with <redacted>", cwd=tmp_path)
    assert "hunter2" not in proc.stderr and TOKEN not in proc.stderr


def test_redact_hides_known_values_and_patterns():
    assert redact(f"a {TOKEN} b", known=["plain-but-secret"]) == "a <redacted> b"
    assert redact("x plain-but-secret y", known=["plain-but-secret"]) == "x <redacted> y"
    assert redact("short", known=["short"]) == "short"  # under 8 characters: too likely to be ordinary text


@pytest.mark.parametrize("value, needle", [
    ("mytoken", "is not KEY=VALUE"),
    ("id=mytoken", "needs exactly one of env=VAR or src=FILE"),
    ("id=x,env=A,src=/etc/hostname", "needs exactly one of"),
    ("id=x,env=A,colour=blue", "unknown key 'colour'"),
    ("id=has space,env=A", "needs id=NAME"),
    ("id=x,env=NOT-A-NAME", "is not an environment variable name"),
    ("id=x,src=no/such/file", "is not a file"),
    ("id=x,env=A,id=y", "'id' is given twice"),
])
def test_malformed_secret_is_one_line(cli, tmp_path, value, needle):
    proc = cli("--target", "jax", "--secret", value, cwd=tmp_path)
    assert_one_line_error(proc, "--secret", needle, cwd=tmp_path)


def test_secret_id_given_twice(cli, tmp_path):
    proc = cli("--target", "jax", "--secret", "id=a,env=X", "--secret", "id=a,env=Y", cwd=tmp_path)
    assert_one_line_error(proc, "--secret: id 'a' is given twice", cwd=tmp_path)


def test_build_with_a_secret_variable_that_is_not_set(cli, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_SECRET_VAR"}
    proc = cli("build", "--target", "jax", "--secret", "id=s,env=NO_SUCH_SECRET_VAR", cwd=tmp_path, env=env)
    assert_one_line_error(proc, "--secret id=s,env=NO_SUCH_SECRET_VAR: NO_SUCH_SECRET_VAR is not set", cwd=tmp_path)


def test_buildx_secret_forms_are_accepted(tmp_path):
    (tmp_path / "f").write_text("x")
    assert parse_secret("type=env,id=GH_TOKEN").to_bake() == "id=GH_TOKEN,env=GH_TOKEN"
    assert parse_secret(f"type=file,id=f,source={tmp_path}/f").to_bake() == f"id=f,src={tmp_path}/f"
    assert parse_secret("id=t,env=GH_TOKEN").to_bake() == "id=t,env=GH_TOKEN"


_PLAN_NODES = st.recursive(
    st.text(max_size=3) | st.integers() | st.booleans() | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2) | st.integers(), inner, max_size=3),
    max_leaves=12)


@given(_PLAN_NODES)
def test_strings_in_is_walk_strings_without_the_paths(node):
    """The checks read a target's strings through strings_in, and walk_strings only to name an
    error: the two must see the same strings in the same order (empty keys and non-string keys
    included), or a string would go unchecked."""
    from bake.plan.secrets import strings_in, walk_strings

    assert strings_in(node) == [text for _, text in walk_strings(node)]
