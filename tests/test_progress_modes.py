"""``build --progress`` modes, ``-q``/``-v`` and ``build --dry-run`` without an engine: every mode
shows buildx's progress its own way from the one reader (so the sitrep's record is the same in
each), the settings gate parses the mode once, and the buildx command a dry run prints grants
exactly the paths the plan reads. ``test_build_modes_engine.py`` runs the same on the engine."""

from __future__ import annotations

import base64
import json
import shlex

import pytest
from test_progress import BROKEN_STEP, CACHE_MISS, T1, _plan, log, vertex

from bake.cli import main, parse_args
from bake.plan.render import read_paths
from bake.run.build import console_mode
from bake.run.engine import bake_command, command_line
from bake.run.progress import LiveConsole, ProgressReader, redact_raw
from bake.settings.merge import gather

FAILING_RUN = CACHE_MISS + [
    vertex("root", '[tf-root mealkit 2/2] RUN bake-write-requirements base "beta"', completed=T1, cached=True),
    vertex("broken", BROKEN_STEP),
    log("broken", "first line\n"),
    vertex("broken", BROKEN_STEP, completed=T1, error="exit code: 3"),
    "ERROR: target tf-broken: failed to solve: exit code: 3",
]


def _read(lines, only_errors):
    shown = []
    reader = ProgressReader(_plan(), None, shown.append, only_errors=only_errors)
    for line in lines:
        reader.feed(line + "\n")
    reader.finish()
    return reader, [line for line in "".join(shown).splitlines() if line]


def test_quiet_shows_only_the_errors_and_records_all_of_it():
    quiet, shown = _read(FAILING_RUN, only_errors=True)
    plain, _ = _read(FAILING_RUN, only_errors=False)
    assert shown == [f"#3 {BROKEN_STEP}", "#3 ERROR: exit code: 3",
                     "ERROR: target tf-broken: failed to solve: exit code: 3"]
    # The record behind the sitrep is the same as plain progress's.
    assert quiet.steps() == plain.steps() == {"tf-root-mealkit": {"cached": 1, "run": 0},
                                              "tf-broken-mealkit": {"cached": 0, "run": 1}}
    assert quiet.failed() == plain.failed() == ["tf-broken"]
    assert quiet.failed_steps() == plain.failed_steps()
    assert quiet.last_error == plain.last_error == "ERROR: target tf-broken: failed to solve: exit code: 3"


def test_a_missing_cache_ref_is_no_error_in_any_mode():
    reader, shown = _read(CACHE_MISS, only_errors=False)
    assert shown[-1] == "#1 no cache there yet"
    assert not any("ERROR" in line for line in shown)
    assert reader.last_error == "" and reader.failed() == []
    assert _read(CACHE_MISS, only_errors=True)[1] == []


def test_the_live_console_rewrites_one_status_line_and_keeps_errors():
    written, now = [], [100.0]
    live = LiveConsole(written.append, width=lambda: 60, clock=lambda: now[0])
    for line in ["#1 [a 1/2] FROM busybox", "#1 DONE 0.1s", "#2 [a 2/2] RUN make", "#2 compiling",
                 "#3 [b 1/1] RUN true", "#3 CACHED"]:
        now[0] += 0.5
        live(line + "\n")
    live("#2 ERROR: exit code: 2\n")
    live("ERROR: target a: failed to solve: exit code: 2\n")
    live.close()
    assert written[0] == "\r\x1b[K[+] Building 0.5s (0/1) #1 [a 1/2] FROM busybox"
    assert written[3] == "\r\x1b[K[+] Building 2.0s (1/2) #2 [a 2/2] RUN make"
    assert all(len(w) <= len("\r\x1b[K") + 59 for w in written[:-1] if "\n" not in w)  # fits the terminal
    # A failure stays: its header and error line, then buildx's own error report.
    assert "\r\x1b[K#2 [a 2/2] RUN make\n#2 ERROR: exit code: 2\n" in written
    assert "\r\x1b[KERROR: target a: failed to solve: exit code: 2\n" in written
    assert written[-1] == "\r\x1b[K[+] Building 3.0s (2/3, 1 cached) FINISHED\n"


def test_rawjson_passes_buildx_lines_through_with_secrets_redacted():
    line = log("broken", "token is hunter2-secret\n")
    out = redact_raw(line + "\n", lambda text: text.replace("hunter2-secret", "<redacted>"))
    event = json.loads(out)["logs"][0]
    assert base64.b64decode(event["data"]).decode() == "token is <redacted>\n"
    assert out.endswith("\n") and "\n" not in out[:-1]
    untouched = vertex("root", "[tf-root mealkit 1/2] FROM x")
    assert json.loads(redact_raw(untouched, lambda text: text)) == json.loads(untouched)
    binary = json.dumps({"logs": [{"vertex": "v", "data": base64.b64encode(b"\xff\xfe").decode()}]})
    assert json.loads(redact_raw(binary, lambda text: text)) == json.loads(binary)  # bytes kept as they were
    assert redact_raw("ERROR: pass hunter2-secret\n", lambda t: t.replace("hunter2-secret", "x")) == "ERROR: pass x\n"


@pytest.mark.parametrize("progress, terminal, shown", [
    ("auto", True, "tty"), ("auto", False, "plain"), ("plain", True, "plain"), ("quiet", True, "quiet"),
    ("rawjson", False, "rawjson"), ("tty", False, "tty"),
])
def test_auto_is_tty_on_a_terminal_else_plain(progress, terminal, shown):
    assert console_mode(progress, terminal) == shown


def _settings(*argv, environ=None):
    args = parse_args(list(argv))
    return gather(args.command, vars(args), environ={} if environ is None else environ)


@pytest.mark.parametrize("argv, progress, verbosity", [
    ((), "auto", 0),
    (("-q",), "quiet", -1),
    (("--progress", "plain", "-q"), "plain", -1),  # the flag of its own beats -q
    (("--progress", "rawjson"), "rawjson", 0),
    (("-vv",), "auto", 2),
])
def test_progress_and_verbosity_settings(tmp_path, monkeypatch, argv, progress, verbosity):
    monkeypatch.chdir(tmp_path)
    settings = _settings("build", "--target", "base", "--config", "/dev/null", *argv)
    assert (settings.progress, settings.verbosity) == (progress, verbosity)


def test_progress_from_the_configuration_file_and_under_q(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bake-plan.toml").write_text('progress = "plain"\ntargets = ["base"]\n')
    assert _settings("build").progress == "plain"
    assert _settings("build", "-q").progress == "quiet"
    assert _settings("-q", "build").verbosity == -1  # before the command, as pip and pytest take it
    assert _settings("build", "--progress", "tty").provenance["progress"].source == "--progress"


def test_a_bad_progress_mode_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build", "--target", "base", "--config", "/dev/null", "--progress", "plian"]) == 2
    assert capsys.readouterr().err == ("bake-plan: error: --progress: 'plian' is not a progress mode; did you mean "
                                       "'plain'? (choose from auto, tty, plain, quiet, rawjson)\n")
    (tmp_path / "bake-plan.toml").write_text('progress = "loud"\ntargets = ["base"]\n')
    assert main(["build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bake-plan: error: bake-plan.toml: progress: 'loud' is not a progress mode") and err.count("\n") == 1
    assert not (tmp_path / "docker-bake.hcl").exists()


def test_read_paths_are_every_local_path_the_plan_reads():
    plan = {"target": {
        "a": {"context": "/src/a", "dockerfile": "Dockerfile",
              "contexts": {"scripts": "/opt/scripts", "base": "target:b", "py": "docker-image://python:3.11",
                           "wheelhouse": "oci-layout:///w/house@sha256:" + "0" * 64},
              "secret": ["id=tok,env=TOKEN", 'id=key,"src=/keys/a""b"']},
        "b": {"context": "https://github.com/x/y.git", "dockerfile": "/df/Dockerfile"},
    }}
    assert read_paths(plan) == ["/df/Dockerfile", "/keys/a\"b", "/opt/scripts", "/src/a", "/w/house"]


def test_the_bake_command_grants_each_path_and_is_one_shell_line():
    argv = bake_command("docker-bake.hcl", ["default"], "out dir/meta.json", push=True, pull=True, builder="b1",
                        extra_files=["meta.json"], allow=["/src/a", "/with space"], progress="plain")
    assert argv == ["buildx", "bake", "--file", "docker-bake.hcl", "--file", "meta.json", "--allow=fs.read=/src/a",
                    "--allow=fs.read=/with space", "--progress", "plain", "--metadata-file", "out dir/meta.json",
                    "--push", "--pull", "--builder", "b1", "default"]
    line = command_line(argv)
    assert "\n" not in line and shlex.split(line) == ["docker", *argv]


def test_dry_run_writes_the_plan_prints_the_command_and_no_sitrep(cli, tmp_path):
    (tmp_path / "sitrep.json").write_text('{"outcome": "pass"}')  # an old report is left alone
    proc = cli("build", "--target", "base", "--config", "/dev/null", "--date", "2026-11-29", "--load", "--dry-run",
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    command = shlex.split(proc.stdout)
    assert proc.stdout.count("\n") == 1 and command[:6] == ["docker", "buildx", "bake", "--file", "docker-bake.hcl",
                                                            f"--allow=fs.read={read_dirs(tmp_path)[0]}"]
    assert [w for w in command if w.startswith("--allow")] == [f"--allow=fs.read={p}" for p in read_dirs(tmp_path)]
    assert command[-4:] == ["--metadata-file", "bake-metadata.json", "--load", "default"]
    assert ["--progress", "auto"] == command[command.index("--progress"):command.index("--progress") + 2]
    assert "wrote 2 targets for base" in proc.stderr
    assert (tmp_path / "sitrep.json").read_text() == '{"outcome": "pass"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl", "sitrep.json"]
    # --load pushes nothing: the plan reads cache refs but writes none.
    plan = (tmp_path / "docker-bake.hcl").read_text()
    assert "cache-from" in plan and "cache-to" not in plan
    pushed = cli("build", "--target", "base", "--config", "/dev/null", "--date", "2026-11-29", "--push", "--dry-run",
                 "--progress", "quiet", "-o", "pushed.hcl", "--no-cache", cwd=tmp_path)
    assert "cache-to" in (tmp_path / "pushed.hcl").read_text()
    assert " --progress quiet " in pushed.stdout and " --push " in pushed.stdout
    assert " --no-cache " in pushed.stdout and "--no-cache" not in proc.stdout  # buildx reads no build cache


def read_dirs(cwd):
    """The paths the plan in ``cwd`` reads, as its header comment's ``--allow`` flags list them."""
    header = next(line for line in (cwd / "docker-bake.hcl").read_text().splitlines() if "--allow=fs.read=" in line)
    return [word.removeprefix("--allow=fs.read=") for word in shlex.split(header.lstrip("# "))]


def test_quiet_plan_prints_nothing_but_errors(cli, tmp_path):
    proc = cli("-q", "--target", "base", "--config", "/dev/null", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout, proc.stderr) == ("", "")
    assert (tmp_path / "docker-bake.hcl").is_file()
    loud = cli("--target", "base", "--config", "/dev/null", cwd=tmp_path)
    assert loud.stdout.startswith("bake-plan: wrote 2 targets for base to docker-bake.hcl\n")
    bad = cli("plan", "-q", "--target", "nope", "--config", "/dev/null", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("bake-plan: error: --target: unknown target 'nope'")


@pytest.mark.parametrize("buildx, granted", [((0, 13, 1), False), ((0, 17, 0), True), ((0, 29, 1), True), (None, True)])
def test_paths_are_granted_to_a_buildx_that_asks(buildx, granted):
    from types import SimpleNamespace

    from bake.run.build import bake_argv

    composition = SimpleNamespace(plan={"target": {"a": {"context": "/src/a"}}}, bake_files=())
    argv = bake_argv(composition, "p.hcl", "m.json", buildx=buildx)
    assert ("--allow=fs.read=/src/a" in argv) is granted  # buildx 0.13's bake has no --allow
    assert argv[-1] == "default" and argv[argv.index("--progress") + 1] == "rawjson"
