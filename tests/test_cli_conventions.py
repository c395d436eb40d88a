"""What users of buildx, pip-tools and pytest expect of a command line:

- a plan file bake-plan did not write (a hand-written ``docker-bake.hcl``) is never replaced
  without ``--force``; the plans bake-plan writes say so in their first lines;
- ``stages --format json`` (``publish --format json`` is on the engine: test_publish_json_engine.py);
- bash and zsh completion generated from the parser, run in real bash (``COMPREPLY`` of the
  function ``complete -F`` names) and real zsh (compinit, a line typed in a pseudo-terminal, TAB);
- every command's ``--help`` has a description and examples, and every example parses.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import CI
from test_errors import one_line_error as one_line

from bake.cli import COMMANDS, HELP, build_parser, parse_args
from bake.owned import MARK

NO_ENGINE = dict(os.environ, DOCKER_HOST="unix:///nonexistent/docker.sock")
HAND_WRITTEN = 'target "app" {\n  context = "."\n}\n'


# --- plan files bake-plan did not write -----------------------------------------------------------

@pytest.mark.parametrize("command", ["plan", "build"])
def test_a_hand_written_docker_bake_hcl_is_refused_and_kept(cli, tmp_path, command):
    (tmp_path / "docker-bake.hcl").write_text(HAND_WRITTEN)
    proc = cli(command, "--target", "jax", cwd=tmp_path, env=NO_ENGINE)
    assert one_line(proc) == ("docker-bake.hcl: bake-plan did not write this file (its first lines do not say "
                              f"'{MARK}'), so it will not replace it: pass --force to replace it, or -o another file")
    assert (tmp_path / "docker-bake.hcl").read_text() == HAND_WRITTEN
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docker-bake.hcl"], "nothing else is written either"


def test_force_replaces_it_and_then_the_plan_is_bake_plans(cli, tmp_path):
    (tmp_path / "docker-bake.hcl").write_text(HAND_WRITTEN)
    cli("--target", "jax", "--force", cwd=tmp_path, check=True)
    text = (tmp_path / "docker-bake.hcl").read_text()
    assert text.startswith(f"# docker-bake.hcl: {MARK} ") and 'target "jax-mealkit"' in text
    cli("--target", "base", cwd=tmp_path, check=True)  # its own plan: replaced without --force
    assert 'target "jax-mealkit"' not in (tmp_path / "docker-bake.hcl").read_text()


def test_a_json_plan_says_who_wrote_it_and_buildx_ignores_that(cli, tmp_path, buildx):
    """The JSON plan's first key is the HCL JSON syntax's comment ``"//"``: bake-plan recognises
    its own plan by it, and buildx's --print leaves it out (both buildx 0.29 and 0.13)."""
    cli("--target", "base", "-o", "plan.json", cwd=tmp_path, check=True)
    raw = json.loads((tmp_path / "plan.json").read_text())
    assert list(raw)[0] == "//" and raw["//"].startswith(f"{MARK} ")
    printed = buildx.print_plan(tmp_path / "plan.json", cwd=tmp_path)
    assert set(printed) == {"group", "target"} and "base-mealkit" in printed["target"]
    cli("--target", "jax", "-o", "plan.json", cwd=tmp_path, check=True)  # replaced without --force
    assert "jax-mealkit" in json.loads((tmp_path / "plan.json").read_text())["target"]


def test_a_hand_written_json_plan_is_refused_unless_forced(cli, tmp_path):
    hand = json.dumps({"target": {"app": {"context": "."}}})
    (tmp_path / "bake.json").write_text(hand)
    assert "bake.json: bake-plan did not write this file" in one_line(
        cli("--target", "base", "-o", "bake.json", cwd=tmp_path))
    assert (tmp_path / "bake.json").read_text() == hand
    cli("--target", "base", "-o", "bake.json", "--force", cwd=tmp_path, check=True)
    assert "base-mealkit" in json.loads((tmp_path / "bake.json").read_text())["target"]


def test_a_link_to_a_hand_written_file_is_refused(cli, tmp_path):
    (tmp_path / "mine.hcl").write_text(HAND_WRITTEN)
    (tmp_path / "docker-bake.hcl").symlink_to("mine.hcl")
    assert one_line(cli("--target", "base", cwd=tmp_path)).startswith("docker-bake.hcl: bake-plan did not write")
    assert (tmp_path / "mine.hcl").read_text() == HAND_WRITTEN


def test_stdout_and_an_empty_file_are_not_refused(cli, tmp_path):
    """``-o -`` replaces nothing; an empty file says nothing, so it is refused like any other."""
    (tmp_path / "docker-bake.hcl").write_text(HAND_WRITTEN)
    assert cli("--target", "base", "-o", "-", cwd=tmp_path, check=True).stdout.startswith("# docker-bake.hcl")
    (tmp_path / "empty.hcl").write_text("")
    assert "empty.hcl: bake-plan did not write" in one_line(cli("--target", "base", "-o", "empty.hcl", cwd=tmp_path))


def test_a_mention_of_bake_plan_further_down_is_not_a_header(cli, tmp_path):
    text = HAND_WRITTEN + "#" * 600 + f"\n# {MARK}\n"
    (tmp_path / "docker-bake.hcl").write_text(text)
    assert "bake-plan did not write" in one_line(cli("--target", "base", cwd=tmp_path))
    assert (tmp_path / "docker-bake.hcl").read_text() == text


# --- stages --format json ------------------------------------------------------------------------

def test_stages_as_json(cli, tmp_path):
    proc = cli("stages", "--format", "json", cwd=tmp_path, check=True)
    listing = json.loads(proc.stdout)
    assert [s["name"] for s in listing] == sorted(s["name"] for s in listing)
    by_name = {s["name"]: s for s in listing}
    assert by_name["jax"] == {
        "name": "jax", "plugin": "jax", "kind": "mealkit", "image": "ghcr.io/nvidia/jax", "parent": "base",
        "base_image": None, "platforms": ["linux/amd64", "linux/arm64"], "python": None, "variant": None,
        "variant_of": None, "targets": ["jax-mealkit", "jax"],
    }
    assert by_name["base"]["parent"] is None and by_name["base"]["base_image"].startswith("nvidia/cuda:")
    table = cli("stages", cwd=tmp_path, check=True).stdout.splitlines()
    assert len(table) == len(listing) + 1 and table[0].split() == ["STAGE", "PLUGIN", "PARENT", "PLATFORMS"]


# --- completion ----------------------------------------------------------------------------------

def _script(cli, shell: str, tmp_path: Path) -> Path:
    path = tmp_path / f"bake-plan.{shell}"
    path.write_text(cli("completion", shell, cwd=tmp_path, check=True).stdout)
    return path


def _bash_complete(script: Path, line: str, cwd: Path) -> list:
    """COMPREPLY of the script's completion function for the command ``line`` (the cursor at its end),
    in a real non-interactive bash, as ``complete -F`` calls it."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    program = (f"source {shlex.quote(str(script))}\n"
               f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
               f"COMP_CWORD={len(words) - 1}\nCOMP_LINE={shlex.quote(line)}\nCOMP_POINT=${{#COMP_LINE}}\n"
               "fn=$(complete -p bake-plan | sed -E 's/.* -F ([^ ]+) .*/\\1/')\n"
               '"$fn" bake-plan "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.mark.parametrize("line, expected", [
    ("bake-plan ", list(COMMANDS)),
    ("bake-plan st", ["stages"]),
    ("bake-plan comp", ["completion"]),
    ("bake-plan completion ", ["bash", "zsh"]),
    ("bake-plan stages --f", ["--format"]),
    ("bake-plan stages --format ", ["text", "json"]),
    ("bake-plan publish --format j", ["json"]),
    ("bake-plan graph --format ", ["mermaid", "markdown", "dot"]),
    ("bake-plan build --pu", ["--push", "--pull"]),
    ("bake-plan plan --fo", ["--format", "--force"]),
    ("bake-plan graph --da", []),  # graph takes no --date
], ids=lambda v: v if isinstance(v, str) else None)
def test_bash_completes_commands_options_and_choices(cli, tmp_path, line, expected):
    if shutil.which("bash") is None:
        pytest.fail("bash is needed") if CI else pytest.skip("no bash")
    assert sorted(_bash_complete(_script(cli, "bash", tmp_path), line, tmp_path)) == sorted(expected)


def test_bash_completes_paths_after_file_and_dir_options(cli, tmp_path):
    script = _script(cli, "bash", tmp_path)
    work = tmp_path / "work"
    (work / "reports").mkdir(parents=True)
    (work / "rules.hcl").write_text("")
    assert _bash_complete(script, "bake-plan build --sitrep-dir r", work) == ["reports"]
    assert sorted(_bash_complete(script, "bake-plan plan -o r", work)) == ["reports", "rules.hcl"]


# Real zsh completion, driven the way a user drives it: an interactive zsh in a pseudo-terminal
# (zsh/zpty), the script on $fpath as _bake-plan and loaded by compinit, a line typed, TAB pressed.
# compadd is wrapped to print each candidate it is given; ^X prints an end marker.
ZSH_HARNESS = r"""
zmodload zsh/zpty
zpty z env TERM=dumb zsh -f -i
zpty -w z "PROMPT=''; unsetopt zle_bracketed_paste"
zpty -w z "fpath=($1 \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z 'compadd () { if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi; typeset -a __hits; builtin compadd -A __hits "$@"; local h; for h in $__hits; do print -r -- "HIT""::$h"; done }'
zpty -w z "bindkey '^I' complete-word; zle_eot () { print -r -- 'E''OT::'; }; zle -N zle_eot; bindkey '^X' zle_eot"
zpty -w z "$2"$'\t\C-x'
integer quiet=0
while (( quiet < 200 )); do  # the end marker, else 10 s without output
  if zpty -rt z line; then
    quiet=0
    line=${line//$'\r'/}
    [[ $line == *EOT::* ]] && break
    [[ $line == *HIT::* ]] && print -r -- "${line##*HIT::}"
  else
    (( quiet++ )); sleep 0.05
  fi
done
zpty -d z
"""


def _zsh_complete(zsh: str, functions: Path, line: str, cwd: Path) -> list:
    proc = subprocess.run([zsh, "-f", "-c", ZSH_HARNESS, "harness", str(functions), line], cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def _zsh(tmp_path: Path, cli) -> tuple:
    zsh = shutil.which("zsh")
    if zsh is None:
        pytest.fail("zsh is needed (apt-get install zsh)") if CI else pytest.skip("no zsh")
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "_bake-plan").write_text(_script(cli, "zsh", tmp_path).read_text())
    return zsh, functions


def test_zsh_script_is_valid_zsh(cli, tmp_path):
    zsh, functions = _zsh(tmp_path, cli)
    assert (functions / "_bake-plan").read_text().startswith("#compdef bake-plan")
    proc = subprocess.run([zsh, "-n", str(functions / "_bake-plan")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("line, expected", [
    ("bake-plan ", list(COMMANDS)),
    ("bake-plan st", ["stages"]),
    ("bake-plan completion ", ["bash", "zsh"]),
    ("bake-plan stages --format ", ["text", "json"]),
    ("bake-plan graph --format ", ["mermaid", "markdown", "dot"]),
    ("bake-plan plan --format ", ["hcl", "json"]),
    ("bake-plan build --pu", ["--push", "--pull"]),
    ("bake-plan graph --da", []),
], ids=lambda v: v if isinstance(v, str) else None)
def test_zsh_completes_commands_options_and_choices(cli, tmp_path, line, expected):
    zsh, functions = _zsh(tmp_path, cli)
    work = tmp_path / "work"
    work.mkdir()
    assert sorted(_zsh_complete(zsh, functions, line, work)) == sorted(expected)


@pytest.mark.parametrize("args, line", [
    (["completion"], "completion: the following arguments are required: shell"),
    (["completion", "fish"], "completion: argument shell: invalid choice: 'fish' (choose from 'bash', 'zsh')"),
    (["complete", "bash"], "unknown command 'complete'; did you mean 'completion'? (commands: "
                           + ", ".join(COMMANDS) + ")"),
])
def test_completion_mistakes_are_one_line(cli, tmp_path, args, line):
    assert one_line(cli(*args, cwd=tmp_path)) == line


# --- help: a description and examples that parse -------------------------------------------------

def _examples(epilog: str) -> list:
    """The command lines of an epilog's ``examples:`` block, as argv without ``bake-plan``
    (a trailing ``# comment`` and a redirection dropped)."""
    out = []
    for line in epilog.split("examples:\n", 1)[1].splitlines():
        argv = shlex.split(line, comments=True)
        cut = next((i for i, word in enumerate(argv) if word.startswith((">", "<", "|"))), len(argv))
        assert argv[0] == "bake-plan", line
        out.append(argv[1:cut])
    return out


def test_every_command_has_a_description_and_examples_that_parse():
    parser = build_parser()
    subcommands = next(a for a in parser._actions if a.dest == "command").choices
    assert sorted(subcommands) == sorted(COMMANDS) == sorted(HELP)
    for name, command in subcommands.items():
        # Its first line is a whole sentence: zsh's completion menu shows it beside the command.
        assert command.description[0].isupper() and command.description.splitlines()[0].endswith("."), name
        examples = _examples(command.epilog)
        assert 1 <= len(examples) <= 3, name
        parsed = [parse_args(argv) for argv in examples]
        assert any(args.command == name for args in parsed), f"{name}: no example runs {name}"


def test_help_shows_the_description_and_examples_as_written(cli, tmp_path):
    out = cli("build", "--help", cwd=tmp_path, check=True).stdout
    assert "Write the plan, build it with docker buildx bake, and write the sitrep.\nsitrep.json" in out
    assert "examples:\n  bake-plan build --target upstream-pax --push\n" in out
    assert "--force" in out


def test_a_plan_beside_another_file_buildx_reads_by_default_is_written_with_a_warning(cli, tmp_path):
    """`docker buildx bake` without --file merges docker-bake.hcl, docker-bake.json and Compose
    files: a JSON plan written beside an HCL one is right, but plain bake would read both."""
    first = cli("--target", "jax", cwd=tmp_path, check=True)
    assert "warning" not in first.stderr
    second = cli("--target", "jax", "--format", "json", cwd=tmp_path, check=True)
    assert ("bake-plan: warning: docker-bake.hcl is here too: `docker buildx bake` without --file reads it "
            "together with docker-bake.json; build with --file docker-bake.json, or move it away") in second.stderr
    assert (tmp_path / "docker-bake.json").is_file()


# --- -v: every docker command ----------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("docker") is None and not CI, reason="needs the docker CLI")
def test_verbose_shows_each_python_on_whales_call_as_its_docker_line():
    """``bake.run.engine.show_commands`` shows python-on-whales' calls as the docker command they
    run (its ``Running command:`` log), without the ``timeout(1)`` put in front of registry calls;
    the same words ``publish --dry-run`` prints, and nothing once it is turned off."""
    from bake.errors import BakePlanError
    from bake.run import engine

    shown = []
    ref = "127.0.0.1:9/nowhere/image:tag"  # nothing listens on port 9: refused at once
    engine.show_commands(shown.append)
    try:
        with pytest.raises(BakePlanError):
            engine.image_digest(ref, timeout_s=30)
        with pytest.raises(BakePlanError):
            engine.create_manifest(f"{ref}-all", [f"{ref}-amd64", f"{ref}-arm64"], timeout_s=30)
    finally:
        engine.show_commands(None)
    assert shown == [engine.command_line(engine.imagetools_inspect_command(ref)),
                     engine.command_line(engine.imagetools_create_command(f"{ref}-all", [f"{ref}-amd64", f"{ref}-arm64"]))]
    assert shown[0] == f"docker buildx imagetools inspect --format '{{{{json .Manifest}}}}' {ref}"
    with pytest.raises(BakePlanError):
        engine.image_digest(ref, timeout_s=30)
    assert len(shown) == 2
