"""Text that splits or spoofs, and secrets in places the checks did not look.

- Every character ``str.splitlines`` splits on (pip reads requirement files with it) and NUL is
  refused wherever one line is expected, by one function (:mod:`bake.plan.text`); NUL is refused
  in every string of a plan.
- Control characters from users, plugins and buildx are shown escaped in every message, on the
  console and in ``config`` output (which stays valid TOML).
- One redaction (:func:`bake.plan.secrets.redact`) for every output: error lines, the build's
  console, the sitrep files and step summary, ``config``; a URL's password or token user name is a
  credential; a manifest URL with userinfo is refused; python-on-whales' debug dump of the
  environment never happens.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tomllib
import uuid

import pytest
from test_errors import assert_one_line_error, plugin_with

from bake.pip.sources import parse_manifest
from bake.plan.secrets import credential_value, redact, shown
from bake.plan.text import LINE_BREAKS, control_fault, line_fault, one_line, printable

# What a terminal obeys or a reader is fooled by; none may reach stderr raw.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
ZERO = "0" * 40


def assert_no_raw_controls(*texts):
    for text in texts:
        found = RAW.search(text)
        assert found is None, f"raw {found.group()!r} in {text!r}"


# --- kind 2: text that splits -------------------------------------------------------------------

def test_the_one_line_check_refuses_every_character_splitlines_splits_on():
    """The one function is complete: every code point that splits a line, and NUL, and nothing else."""
    splitting = {chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) > 1}
    assert splitting == set(LINE_BREAKS)
    for char in splitting | {"\x00"}:
        assert line_fault(f"alpha{char}-r /etc/passwd"), repr(char)
        assert control_fault(f"alpha{char}-r /etc/passwd"), repr(char)
    assert line_fault("alpha\x1b[2K==1") is None and control_fault("alpha\x1b[2K==1") == "an escape (U+001B)"
    assert line_fault("numpy<2 ; python_version >= '3.9'\t# tab") is None
    assert control_fault("numpy<2\t# a tab is text") is None
    assert line_fault("alpha\x0c-r /x") == "a form feed (U+000C)"
    assert line_fault("a\u2028b") == "a line separator (U+2028)"


def test_text_python_calls_printable_holds_no_character_the_control_checks_find():
    """control_fault and printable pass text str.isprintable() accepts without their pattern: every
    character the pattern finds is one Python calls unprintable (all of them are below U+10000)."""
    from bake.plan.text import _CONTROL

    assert [hex(c) for c in range(0x10000) if _CONTROL.match(chr(c)) and chr(c).isprintable()] == []
    assert printable("plain text, é and 名字") == "plain text, é and 名字" and control_fault("ok ✓") is None
    assert printable("a\u200eb") == "a\\u200eb" and control_fault("a\u202eb") == "a control character (U+202E)"


SPLITTERS = ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x00", "\x1b"]


@pytest.mark.parametrize("char", SPLITTERS, ids=[f"U+{ord(c):04X}" for c in SPLITTERS])
def test_a_requirement_line_pip_would_split_is_refused(cli, make_plugin, tmp_path, char):
    line = f"alpha{char}-r /etc/hostname"
    site = plugin_with(make_plugin, f"    fields['requirements'] = [{line!r}]", name="splitter")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    shown_line = repr(line)
    assert_one_line_error(proc, f"bake-plan: error: plugin 'splitter', stage 'odd', field 'requirements': {shown_line} "
                                f"holds {line_fault(line) or control_fault(line)}: one requirement per line, of "
                                "printable text", cwd=tmp_path)
    assert_no_raw_controls(proc.stderr)


def test_lock_never_reads_a_host_file_through_a_split_requirement_line(cli, make_plugin, tmp_path):
    """The issue's case: ``alpha\\f-r FILE`` made ``lock`` read FILE and echo its first line."""
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("first-line-of-a-host-file==1\n")
    work = tmp_path / "work"
    work.mkdir()
    line = f"alpha\x0c-r {host_file}"
    site = plugin_with(make_plugin, f"    fields['requirements'] = [{line!r}]", name="splitter")
    proc = cli("lock", "--target", "odd", cwd=work, pythonpath=[site])
    assert_one_line_error(proc, "field 'requirements': ", f"{line!r} holds a form feed (U+000C): one requirement per "
                                "line", cwd=work)
    assert "first-line-of-a-host-file" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("field, value", [
    ("url", "https://example.com/x.git\x0c--upload-pack=touch /tmp/x"),
    ("url", "https://example.com/x\x85.git"),
    ("ref", "main\u2028"),
    ("ref", "main\x1b[2K"),
    ("ref", "main\tx"),
])
def test_a_source_url_or_ref_that_is_not_one_printable_line_is_refused(cli, make_plugin, tmp_path, field, value):
    src = dict(url="https://example.com/x.git", ref="a" * 40)
    src[field] = value
    site = plugin_with(make_plugin, f"    fields['sources'] = [Source('SRC', {src['url']!r}, {src['ref']!r})]", name="srcs")
    proc = cli("--target", "odd", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, f"bake-plan: error: plugin 'srcs', stage 'odd', field 'sources': source 'SRC': {field} "
                                f"{value!r} must be a non-empty string without '#', spaces, line breaks or control "
                                "characters", cwd=tmp_path)
    assert_no_raw_controls(proc.stderr)


def test_a_secret_file_path_with_a_line_break_is_refused(cli, tmp_path):
    odd = tmp_path / "key\x0cfile"
    odd.write_text("x")
    proc = cli("--target", "jax", "--secret", f"id=k,src={odd.name}", "-o", "plan.hcl", cwd=tmp_path)
    assert_one_line_error(proc, "bake-plan: error: --secret: 'id=k,src=key\\x0cfile': src '", "key\\x0cfile' cannot be "
                                "written in a bake secret entry (it holds a form feed (U+000C))")
    assert_no_raw_controls(proc.stderr)
    assert not (tmp_path / "plan.hcl").exists()


@pytest.mark.parametrize("where", ["args value", "label key", "label value", "dockerfile_inline", "adjusted context"])
def test_a_nul_anywhere_in_a_plan_is_refused_at_plan_time(cli, make_plugin, tmp_path, where):
    body = {
        "args value": "    fields['args'] = {'FLAVOUR': 'a\\x00b'}",
        "label key": "    fields['labels'] = {'org.example\\x00x': 'v'}",
        "label value": "    fields['labels'] = {'org.example.x': 'v\\x00'}",
        "dockerfile_inline": "    fields['dockerfile_inline'] = 'FROM scratch\\n# \\x00\\n'",
        "adjusted context": "",
    }[where]
    site = plugin_with(make_plugin, body, name="nul")
    extra = []
    if where == "adjusted context":
        extra = [make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_adjust_target(stage, target):
    if stage.name == "odd":
        target["context"] = target["context"] + "\\x00"
""", name="nul-adjust")]
    proc = cli("--target", "odd", "-o", "plan.hcl", cwd=tmp_path, pythonpath=[site, *extra])
    path = {"args value": "args['FLAVOUR']", "label key": "labels key 'org.example\\x00x'",
            "label value": "labels['org.example.x']", "dockerfile_inline": "dockerfile-inline",
            "adjusted context": "context"}[where]
    # The line names the plugin that put the NUL there: the adjusting one, not the stage's own.
    culprit = "nul-adjust" if where == "adjusted context" else "nul"
    if where.startswith("label"):  # labels are checked with the stage's fields, before any target
        label = "org.example\\x00x" if where == "label key" else "org.example.x"
        assert_one_line_error(proc, "bake-plan: error: plugin 'nul', stage 'odd', field 'labels': "
                              f"label '{label}' holds a NUL (U+0000)")
    else:
        assert_one_line_error(proc, f"bake-plan: error: plugin '{culprit}', stage 'odd', target 'odd",
                              f"{path}: holds a NUL (U+0000), which nothing a build reads can carry")
    assert not (tmp_path / "plan.hcl").exists()


# --- kind 2: text that spoofs -------------------------------------------------------------------

def test_printable_escapes_what_a_terminal_would_obey():
    assert printable("ok\x1b[2K\u202egnp.exe\r\x9b31m\u2028\ud800") == "ok\\x1b[2K\\u202egnp.exe\\x0d\\x9b31m\\u2028\\ud800"
    assert printable("tab\tand é 日本") == "tab\tand é 日本"
    assert printable(printable("\x1b\x00")) == "\\x1b\\x00"
    assert one_line("registry credentials missing\nsecond\tline\x0c!") == "registry credentials missing second line\\x0c!"


def test_a_plugin_message_with_terminal_controls_is_shown_escaped(cli, make_plugin, tmp_path):
    site = make_plugin("""
from bake import hookimpl
@hookimpl
def bake_plan_stages():
    raise RuntimeError("fine\\x1b[2K\\rbake-plan: all good\\u202e\\x9b")
""", name="spoof")
    proc = cli("--target", "jax", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'spoof' raised RuntimeError in bake_plan_stages: "
                                "fine\\x1b[2K bake-plan: all good\\u202e\\x9b", cwd=tmp_path)
    assert_no_raw_controls(proc.stderr)


def test_a_config_key_with_terminal_controls_is_shown_escaped(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text('"\\u001b[2Kregistry" = "x"\n')
    proc = cli("config", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "\\x1b[2Kregistry" in proc.stderr and "Traceback" not in proc.stderr
    assert_no_raw_controls(proc.stderr)


@pytest.mark.parametrize("key, value, needle", [
    ("url", "https://example.com/x\x1b[2K.git", "url 'https://example.com/x\\x1b[2K.git' holds an escape (U+001B)"),
    ("tracking_ref", "main\x85", "tracking_ref 'main\\x85' holds a next-line (U+0085)"),
    ("mirror_url", "https://example.com/y\u2028.git", "mirror_url 'https://example.com/y\\u2028.git' holds a line "
                                                     "separator (U+2028)"),
    ("tracking_ref", "main\x00", "tracking_ref 'main\\x00' holds a NUL (U+0000)"),
])
def test_a_manifest_value_with_control_characters_is_one_escaped_line(cli, tmp_path, key, value, needle):
    table = {"url": "https://example.com/x.git", "tracking_ref": "main", "commit": ZERO, "mode": "git-clone"}
    table[key] = value
    text = "[one]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items())
    manifest = tmp_path / "sources.toml"
    manifest.write_text(text)
    proc = cli("bump", "--sources", str(manifest), cwd=tmp_path)
    assert_one_line_error(proc, f"bake-plan: error: {manifest}: [one]: {needle}; it must be one line of text")
    assert_no_raw_controls(proc.stderr)


def test_a_plugin_name_with_terminal_controls_is_refused_before_the_stages_listing(cli, make_plugin, tmp_path):
    site = plugin_with(make_plugin, "", name="esc\x1b[2Kp")
    proc = cli("stages", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "bake-plan: error: plugin 'esc\\x1b[2Kp': its entry-point name holds an escape "
                                "(U+001B); name it in printable text")
    assert_no_raw_controls(proc.stdout, proc.stderr)


@pytest.mark.parametrize("field, value", [("parent", "ja\x1b[2Kx"), ("image", "odd\u202e"), ("dockerfile", "Docker\x0cfile")])
def test_a_name_like_stage_field_with_a_control_character_is_refused(cli, make_plugin, tmp_path, field, value):
    site = plugin_with(make_plugin, f"    fields[{field!r}] = {value!r}", name="names")
    proc = cli("stages", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, f"bake-plan: error: plugin 'names', stage 'odd', field '{field}': {value!r} holds "
                                f"{control_fault(value, allow='')}")
    assert_no_raw_controls(proc.stdout, proc.stderr)


def test_config_output_is_valid_toml_with_every_control_character_escaped(cli, tmp_path):
    value = "a\x7fb\x1b[2Kc\x85d\u2028e\"f\\g\th"
    (tmp_path / "bake-plan.toml").write_text(
        "[stages.jax]\nargs = { ODD = " + json.dumps(value) + " }\n")
    proc = cli("config", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_no_raw_controls(proc.stdout)
    assert tomllib.loads(proc.stdout)["stages"]["jax"]["args"] == {"ODD": value}
    proc = cli("config", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_no_raw_controls(proc.stdout)
    assert json.loads(proc.stdout)["stages"]["jax"]["value"]["args"] == {"ODD": value}
    # An arg name no build could take is refused by config as by every command, escaped in its line.
    (tmp_path / "bake-plan.toml").write_text('[stages.jax]\nargs = { ' + json.dumps("K\x7f") + ' = "v" }\n')
    proc = cli("config", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert_no_raw_controls(proc.stderr)


# --- kind 3: secrets anywhere -------------------------------------------------------------------

OPAQUE = "abcdef0123456789abcdef"


@pytest.mark.parametrize("text, expected", [
    (f"https://{OPAQUE}@example.com/x.git", "https://<redacted>@example.com/x.git"),
    ("https://ghp_" + "a1" * 18 + "@github.com/x.git", "https://<redacted>@github.com/x.git"),
    ("https://x-access-token:ghp_" + "b2" * 18 + "@github.com/x.git", "https://x-access-token:<redacted>@github.com/x.git"),
    ("https://me:s3cret@example.com/", "https://me:<redacted>@example.com/"),
    ("fatal: unable to access 'https://oauth2:glpat-xxxxxxxxxxxxxxxxxxxxxxxx@gitlab.example/x.git/': 403",
     "fatal: unable to access 'https://oauth2:<redacted>@gitlab.example/x.git/': 403"),
    # Names, not credentials: kept.
    ("ssh://git@github.com/x.git", "ssh://git@github.com/x.git"),
    ("git@github.com:x/y.git", "git@github.com:x/y.git"),
    ("https://deploy@example.com/x.git", "https://deploy@example.com/x.git"),
    ("pkg @ git+https://github.com/x/y@" + "c" * 40, "pkg @ git+https://github.com/x/y@" + "c" * 40),
    (f"docker-image://{OPAQUE}@sha256:" + "d" * 64, f"docker-image://{OPAQUE}@sha256:" + "d" * 64),
    ("docker-image://localhost:5555/x:tag@sha256:" + "e" * 64, "docker-image://localhost:5555/x:tag@sha256:" + "e" * 64),
])
def test_the_one_redaction_takes_a_urls_password_or_token_user_name(text, expected):
    assert redact(text) == expected
    assert (credential_value(text) is not None) == (text != expected)


def test_each_line_of_a_multi_line_secret_is_redacted():
    body = [secrets.token_urlsafe(30) for _ in range(3)]
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END OPENSSH PRIVATE KEY-----\n"
    printed = "#7 " + body[1] + "\n#7 short\n"
    assert redact(printed, [key]) == "#7 <redacted>\n#7 short\n"
    assert shown("tok=" + body[0] + "\x1b[2K", [key]) == "tok=<redacted>\\x1b[2K"


def test_an_arg_holding_a_url_with_a_token_user_name_is_refused(cli, make_plugin, tmp_path):
    site = plugin_with(make_plugin, f"    fields['args'] = {{'MIRROR': 'https://{OPAQUE}@example.com/x.git'}}", name="tok")
    proc = cli("--target", "odd", "-o", "plan.hcl", cwd=tmp_path, pythonpath=[site])
    assert_one_line_error(proc, "plugin 'tok', stage 'odd', target 'odd", "args['MIRROR']: the value looks like a URL "
                                "with a token as its user name; build secrets go through --secret")
    assert OPAQUE not in proc.stderr


@pytest.mark.parametrize("url, what", [
    (f"https://{OPAQUE}@github.com/x.git", "credentials (a password, or a token as its user name)"),
    ("https://x-access-token:ghp_" + "f3" * 18 + "@github.com/x.git", "credentials (a password, or a token as its user name)"),
    ("https://me:s3cret@example.com/x.git", "credentials (a password, or a token as its user name)"),
    ("https://someone@github.com/x.git", "a user name"),
], ids=["token-user", "x-access-token", "password", "https-user"])
def test_a_manifest_url_with_userinfo_is_refused_without_showing_it(cli, tmp_path, url, what):
    manifest = tmp_path / "sources.toml"
    manifest.write_text(f'[one]\nurl = "{url}"\ntracking_ref = "main"\ncommit = "{ZERO}"\nmode = "git-clone"\n')
    proc = cli("bump", "--sources", str(manifest), cwd=tmp_path)
    assert_one_line_error(proc, f"bake-plan: error: {manifest}: [one]: url carries {what} before '@'; plans pass it as "
                                "a build arg (URLREF_*), which ends up in the image's metadata")
    secret_part = url.split("://", 1)[1].split("@", 1)[0].split(":")[-1]
    assert secret_part not in proc.stderr


def test_a_manifest_url_with_an_ssh_login_is_accepted():
    text = f'[one]\nurl = "ssh://git@github.com/x/y.git"\ntracking_ref = "main"\ncommit = "{ZERO}"\nmode = "git-clone"\n'
    assert parse_manifest(text, "m.toml")["one"].url == "ssh://git@github.com/x/y.git"


def test_config_output_redacts_credentials(cli, tmp_path):
    (tmp_path / "bake-plan.toml").write_text(
        '[stages.jax]\nargs = { MIRROR = "https://me:s3cretpass@example.com/simple", '
        f'CLONE = "https://{OPAQUE}@example.com/x.git" }}\n')
    for fmt in ("toml", "json"):  # refused as every command refuses it, the password hidden in the line
        proc = cli("config", "--format", fmt, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        assert "s3cretpass" not in proc.stderr and OPAQUE not in proc.stderr
        assert "args.MIRROR: the value looks like a URL with a password" in proc.stderr


def test_python_on_whales_debug_never_prints_the_environment(cli, tmp_path):
    if shutil.which("docker") is None:
        pytest.skip("the docker CLI is not installed")
    token = "ghp_" + secrets.token_hex(18)
    env = dict(os.environ, PYTHON_ON_WHALES_DEBUG="1", BAKE_PLAN_TEST_TOKEN=token, DOCKER_HOST="unix:///nonexistent.sock")
    proc = cli("build", "--target", "jax", "--sitrep-dir", "s", cwd=tmp_path, env=env)
    assert_one_line_error(proc, "cannot reach a Docker engine at unix:///nonexistent.sock")
    assert token not in proc.stdout + proc.stderr
    assert "Env:" not in proc.stdout + proc.stderr and "------" not in proc.stdout


# --- on the engine: the build's console and reports ---------------------------------------------

DOCKERFILE = """\
FROM busybox:1.36
ARG NONCE
RUN --mount=type=secret,id=tok,required=true --mount=type=secret,id=key,required=true sh -c '\\
    echo "token: $(cat /run/secrets/tok)"; \\
    echo "clone https://$(echo $NONCE | sha256sum | cut -c1-24)@example.invalid/x.git"; \\
    sed -n 2p /run/secrets/key; \\
    printf "spoof:\\033[2K\\033]0;title\\007end\\n"; \\
    echo "ERROR: https://$(echo $NONCE | sha256sum | cut -c1-24)@example.invalid $(cat /run/secrets/tok)" >&2; \\
    exit 3'
"""


@pytest.mark.engine
def test_a_step_printing_tokens_and_terminal_controls_shows_neither(cli, engine, make_plugin, tmp_path):
    """A step prints a ``--secret`` (token-shaped), a line of a multi-line secret file, a URL whose
    user name is a token made in the build (no --secret knows it), and terminal controls, then
    fails: none of the secrets is on the console, in sitrep.json, the badge, sitrep.md or the step
    summary, and the controls are shown escaped; python-on-whales' debug dump is off."""
    import hashlib

    nonce = uuid.uuid4().hex
    url_token = hashlib.sha256(f"{nonce}\n".encode()).hexdigest()[:24]
    assert re.search("[a-f]", url_token) and re.search("[0-9]", url_token)  # token-shaped (letters and digits)
    token = "ghp_" + secrets.token_hex(18)
    key_line = secrets.token_urlsafe(40)
    (tmp_path / "deploy.key").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key_line}\n"
                                         "-----END OPENSSH PRIVATE KEY-----\n")
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(registry="ghcr.io/nvidia", name="chatty", image="chatty", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline={DOCKERFILE!r},
                  args={{"NONCE": {nonce!r}}})]
""", name="chatty")
    summary = tmp_path / "step-summary.md"
    env = dict(os.environ, BAKE_PLAN_TEST_TOKEN=token, GITHUB_STEP_SUMMARY=str(summary), PYTHON_ON_WHALES_DEBUG="1")
    proc = cli("build", "--target", "chatty", "--registry", f"{engine.registry}/tx{uuid.uuid4().hex[:8]}",
               "--date", "2026-11-29", "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest",
               "--secret", "id=tok,env=BAKE_PLAN_TEST_TOKEN", "--secret", "id=key,src=deploy.key",
               "--sitrep-dir", "sitrep", cwd=tmp_path, env=env, pythonpath=[site])
    assert proc.returncode == 1, proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    # The step ran and its output is shown...
    assert "token: <redacted>" in console
    assert "clone https://<redacted>@example.invalid/x.git" in console
    assert "spoof:\\x1b[2K\\x1b]0;title\\x07end" in console
    places = {"the console": console, "the step summary": summary.read_text()}
    for report in ("sitrep.json", "badge.json", "sitrep.md"):
        places[report] = (tmp_path / "sitrep" / report).read_text()
    sitrep = json.loads(places["sitrep.json"])
    assert sitrep["outcome"] == "fail" and sitrep["error"]
    # ...and nothing secret or raw is anywhere.
    for where, text in places.items():
        for needle in (token, key_line, url_token, "Env:"):
            assert needle not in text, f"{needle[:12]}… in {where}"
        assert_no_raw_controls(text.replace("\n", " ").replace("\t", " "))
