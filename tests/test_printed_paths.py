"""A path or value bake-plan prints on success is shown escaped, as error lines show it (a
terminal never obeys an ``ESC [2J`` in a file name), and a command line it suggests is quoted for
the shell."""

from __future__ import annotations

import shlex

from test_errors import assert_one_line_error

from bake import commands


def test_the_commands_print_escapes_each_value(capsys):
    commands.print("wheelhouse /w\x1b[2J/x: 9 wheels added", "\u202eevil", 3)
    out = capsys.readouterr().out
    assert out == "wheelhouse /w\\x1b[2J/x: 9 wheels added \\u202eevil 3\n"
    assert "\x1b" not in out and "\u202e" not in out


def test_plan_to_a_file_named_with_an_escape_prints_it_escaped(cli, tmp_path):
    name = "x\x1b[31m.hcl"
    proc = cli("plan", "--target", "jax", "-o", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).is_file()
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "to x\\x1b[31m.hcl\n" in proc.stdout + proc.stderr


def test_the_suggested_lock_command_quotes_the_locks_dir(cli, tmp_path):
    proc = cli("plan", "--target", "jax", "--locked", "--locks-dir", "my locks", "-o", "p.hcl", cwd=tmp_path)
    assert_one_line_error(proc)
    suggested = proc.stderr.split("make the locks there: ", 1)[1].rstrip(")\n")
    assert shlex.split(suggested) == ["bake-plan", "lock", "--target", "T", "--locks-dir", "my locks"]
    proc = cli("plan", "--target", "jax", "--locked", "--locks-dir", "l\nx", "-o", "p.hcl", cwd=tmp_path)
    assert_one_line_error(proc)
    assert "--locks-dir $'l\\x0ax')" in proc.stderr
