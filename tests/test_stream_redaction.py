"""Redaction of a stream that arrives in pieces: under ``--progress rawjson`` a step's output reaches
buildx's JSON as log chunks cut anywhere (two writes of the step are two chunks). Each vertex's
stream is redacted as one stream (:class:`bake.run.progress.RawRedactor`,
:class:`bake.plan.secrets.StreamRedactor`), so a secret cut across chunks never comes out whole,
wherever it is cut."""

from __future__ import annotations

import base64
import json
import os
import secrets
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bake.plan.secrets import StreamRedactor, held_back, redact
from bake.run.progress import RawRedactor

GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5" * 4
URL_WITH_PASSWORD = "https://deploy:s3cr3t-pa55@git.example.com/x.git"


def _log(vertex: str, data: bytes, stream: int = 1) -> str:
    return json.dumps({"logs": [{"vertex": vertex, "stream": stream, "data": base64.b64encode(data).decode(),
                                 "timestamp": "2026-11-29T00:00:00Z"}]}) + "\n"


def _streams(lines) -> dict:
    """Per (vertex, stream), the bytes the redacted JSON lines carry, in order."""
    out: dict = {}
    for line in lines:
        for event in json.loads(line).get("logs") or ():
            key = (event["vertex"], event.get("stream", 1))
            out[key] = out.get(key, b"") + base64.b64decode(event["data"])
    return out


def _through(redactor: RawRedactor, lines) -> list:
    out = [redactor(line) for line in lines]
    tail = redactor.finish()
    return out + ([tail] if tail else [])


def test_a_secret_printed_in_two_writes_is_redacted_under_rawjson():
    value = "hunter2-correct-horse"
    chunks = [_log("sha256:step", b"token: hunter2-co"), _log("sha256:step", b"rrect-horse done\n")]
    out = _through(RawRedactor([value]), chunks)
    text = "".join(out)
    assert value not in text and "hunter2-co" not in "".join(
        base64.b64decode(e["data"]).decode() for line in out for e in json.loads(line)["logs"])
    assert _streams(out) == {("sha256:step", 1): b"token: <redacted> done\n"}
    # Each chunk alone does not hold the value: redacted one line at a time, it came out whole.
    assert "".join(base64.b64decode(json.loads(c)["logs"][0]["data"]).decode() for c in chunks).count(value) == 1


def test_streams_are_apart_per_vertex_and_per_stdout_and_stderr():
    value = "split-across-streams-1"
    lines = [_log("v1", b"split-across-"), _log("v1", b"secret on stderr ", stream=2),
             _log("v2", b"streams-1 is not the rest of v1's\n"), _log("v1", b"streams-1\n")]
    got = _streams(_through(RawRedactor([value]), lines))
    assert got[("v1", 1)] == b"<redacted>\n"
    assert got[("v1", 2)] == b"secret on stderr "
    assert got[("v2", 1)] == b"streams-1 is not the rest of v1's\n"


def test_output_that_is_no_utf8_and_a_character_cut_in_two_come_out_as_they_went_in():
    data = "naïve ☃ output\n".encode() + b"\xff\xfe raw bytes\n"
    for cut in range(1, len(data)):
        got = _streams(_through(RawRedactor(["not-in-this-text"]), [_log("v", data[:cut]), _log("v", data[cut:])]))
        assert got == {("v", 1): data}, cut


def test_text_lines_and_other_fields_are_redacted_as_before():
    redactor = RawRedactor(["hunter2-secret"])
    assert redactor("ERROR: pass hunter2-secret\n") == "ERROR: pass <redacted>\n"
    line = json.dumps({"vertexes": [{"digest": "d", "name": "[a 1/2] RUN echo hunter2-secret"}]})
    assert json.loads(redactor(line))["vertexes"][0]["name"] == "[a 1/2] RUN echo <redacted>"
    assert redactor.finish() == ""


def test_at_every_offset_a_known_value_a_token_and_a_url_password_are_never_shown():
    value = "multi word secret: Zq9-xx"
    text = f"start {value} then {GITHUB_TOKEN} and {URL_WITH_PASSWORD} end\n"
    whole = redact(text, [value])
    assert value not in whole and GITHUB_TOKEN not in whole and "s3cr3t-pa55" not in whole
    data = text.encode()
    for cut in range(len(data) + 1):
        got = _streams(_through(RawRedactor([value]), [_log("v", data[:cut]), _log("v", data[cut:])]))
        assert got == {("v", 1): whole.encode()}, cut


_TEXT = st.text(alphabet=st.sampled_from("ab -:/@\n_x9é☃"), max_size=30)
_SECRET = st.text(alphabet=st.sampled_from("abcXYZ019-_ .@:/é"), min_size=8, max_size=24).filter(
    lambda s: s.strip() == s and "\n" not in s)


@settings(max_examples=300, deadline=None)
@given(before=_TEXT, after=_TEXT, secret=_SECRET, token=st.booleans(),
       cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_split_anywhere_the_output_never_holds_a_secret(before, after, secret, token, cuts):
    shown_secrets = [secret] + ([GITHUB_TOKEN] if token else [])
    text = before + secret + after + (f" {GITHUB_TOKEN} " if token else "")
    data = text.encode()
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]
    got = _streams(_through(RawRedactor([secret]), [_log("v", p) for p in pieces])).get(("v", 1), b"").decode()
    for one in shown_secrets:
        assert one not in got
    assert got == redact(text, [secret])


@settings(max_examples=200, deadline=None)
@given(text=_TEXT, secret=_SECRET, sizes=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=20))
def test_stream_redactor_gives_out_what_whole_text_redaction_gives(text, secret, sizes):
    whole = text + secret + text
    stream, out, at = StreamRedactor([secret]), [], 0
    for size in sizes:
        out.append(stream.feed(whole[at:at + size]))
        at += size
    out.append(stream.feed(whole[at:]))
    out.append(stream.finish())
    assert "".join(out) == redact(whole, [secret])
    assert secret not in "".join(out)


def test_only_what_could_begin_a_secret_is_held_back():
    assert held_back("plain words and a space ", ["hunter2-secret"]) == 0
    assert held_back("tail hunt", ["hunter2-secret"]) == 4  # "hunt": a run with no space
    assert held_back("a value with spaces: corr", ["correct horse battery"]) == 4
    assert held_back("x: correct hor", ["correct horse battery"]) == len("correct hor")
    assert held_back("key -----BEGIN RS", []) == len("-----BEGIN RS")
    assert held_back("x" * 10000, []) == 4096  # a run with no space is held back up to a bound


@pytest.mark.engine
def test_on_the_engine_a_secret_a_step_prints_in_two_writes_is_never_shown_under_rawjson(cli, engine, make_plugin,
                                                                                      tmp_path):
    # A plain random value: no credential pattern would catch it, only the --secret's own value.
    value = secrets.token_hex(20)
    dockerfile = ("FROM busybox:1.36\n"
                  "RUN --mount=type=secret,id=plain sh -c 'printf \"first: %s\" \"$(head -c 17 /run/secrets/plain)\"; "
                  "sleep 2; printf \"%s :last\\n\" \"$(tail -c +18 /run/secrets/plain)\"; exit 7'\n")
    site = make_plugin(f"""
import os
from bake import Stage, hookimpl
@hookimpl
def bake_plan_stages():
    return [Stage(name="twowrites", image="twowrites", kind="single", context=os.path.dirname(__file__),
                  base_image="busybox:1.36", platforms=("linux/amd64",), dockerfile_inline={dockerfile!r},
                  args={{"NONCE": {uuid.uuid4().hex!r}}})]
""", name="twowrites")
    env = dict(os.environ, BAKE_PLAN_PLAIN=value)
    proc = cli("build", "--target", "twowrites", "--registry", f"{engine.registry}/tw{uuid.uuid4().hex[:8]}",
               "--date", "2026-11-29", "--base-image", f"busybox:1.36={engine.registry}/stand-in/busybox:latest",
               "--secret", "id=plain,env=BAKE_PLAN_PLAIN", "--progress", "rawjson", "--sitrep-dir", "sitrep",
               cwd=tmp_path, env=env, pythonpath=[site])
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("{")]
    chunks = [json.loads(line)["logs"] for line in lines if '"logs"' in line]
    printed = [base64.b64decode(e["data"]) for events in chunks for e in events]
    # BuildKit sent the two writes as two chunks: the first went out without the value's start,
    # held back until the second finished it
    assert b"first: " in printed and any(p.startswith(b"<redacted> :last") for p in printed)
    whole = b"".join(printed).decode()
    assert "first: <redacted> :last" in whole  # the step's two writes, joined, the value redacted across them
    assert value not in whole and value[:17] not in whole and value[17:] not in whole
    assert value not in proc.stdout + proc.stderr


def test_a_key_file_is_redacted_line_by_line_across_chunks_and_in_linear_time():
    import time

    lines = [secrets.token_hex(32) for _ in range(2000)]
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----\n"
    printed = "cat key:\n" + key
    stream = StreamRedactor([key])
    stream.feed("warm the patterns up\n")
    started = time.monotonic()
    out = [stream.feed(printed[at:at + 97]) for at in range(0, len(printed), 97)]  # cut inside every line
    out.append(stream.finish())
    assert time.monotonic() - started < 10
    text = "".join(out)
    assert not any(line in text for line in lines) and text.count("<redacted>") >= 2000
