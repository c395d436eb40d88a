"""docs/usage.md documents every command and flag the parser takes, and no other: its "Every
option" reference has a table per command whose options are exactly the parser's, and every
``bake-plan COMMAND …`` line in its code blocks (and the README's) uses only options COMMAND takes."""

import argparse
import re
import sys

import pytest
from conftest import ROOT

from bake.cli import COMMANDS, build_parser

USAGE = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def parser_options() -> dict:
    """Command → the option strings its parser takes (``-h``/``--help`` left out)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: {s for a in sub.choices[name]._actions for s in a.option_strings} - {"-h", "--help"}
            for name in COMMANDS}


def documented_options() -> dict:
    """Command → the options the first column of its table in "Every option" names."""
    reference = USAGE.split("\n## Every option\n", 1)[1]
    out = {}
    for name, table in re.findall(r"^### `bake-plan ([a-z]+)`\n(.*?)(?=^### |\Z)", reference, re.M | re.S):
        options = set()
        for row in re.findall(r"^\| (.*?) \| ", table, re.M):
            options.update(re.findall(r"`(-{1,2}[A-Za-z][\w-]*)", row))
        out[name] = options
    return out


def test_every_command_has_its_table():
    assert list(documented_options()) == list(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_the_table_lists_exactly_the_parsers_options(command):
    have, want = documented_options()[command], parser_options()[command]
    assert not want - have, f"bake-plan {command} takes {sorted(want - have)}, which docs/usage.md does not list"
    assert not have - want, f"docs/usage.md lists {sorted(have - want)} for bake-plan {command}, which it does not take"


def command_lines(markdown: str):
    """Each ``bake-plan COMMAND …`` line of the fenced code blocks (``$ `` and ``# comment`` left out)."""
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", markdown, re.M | re.S):
        for line in block.splitlines():
            line = line.split("  #", 1)[0].strip()
            for match in re.finditer(r"(?:^|&& |; |\$\(|`)bake-plan ((?:[a-z]+)?[^`;&|)]*)", line):
                yield match.group(1)


@pytest.mark.parametrize("doc", ["docs/usage.md", "README.md"])
def test_the_examples_use_only_options_their_command_takes(doc):
    options = parser_options()
    text = USAGE if doc == "docs/usage.md" else README
    checked = 0
    for words in command_lines(text):
        first = words.split()[0] if words.split() else ""
        command = first if first in COMMANDS else "plan"
        for flag in re.findall(r"(?:^|\s)(--?[A-Za-z][\w-]*)", words):
            if flag.startswith("-") and flag not in ("-h", "--help", "--version"):
                assert flag in options[command], f"{doc}: `bake-plan {words}`: {command} takes no {flag}"
        checked += 1
    assert checked >= (20 if doc == "docs/usage.md" else 5)


def option_rows(parser):
    """(option column, help column) rows of one command's table, from its parser."""
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if not action.option_strings:
            name = action.metavar or action.dest
            choices = "|".join(action.choices) if action.choices else None
            rows.append((f"`{choices or name}`" + (" …" if action.nargs in ("*", "+") else ""), action.help or ""))
            continue
        strings = list(action.option_strings)
        if isinstance(action, argparse.BooleanOptionalAction):
            shown = ", ".join(f"`{s}`" for s in strings)
        else:
            value = ""
            if action.nargs != 0:
                value = " " + ("|".join(action.choices) if action.choices else (action.metavar or action.dest.upper()))
            shown = ", ".join(f"`{s}{value}`" for s in strings).replace("|", "\\|")
        help = (action.help or "").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        if action.choices and action.default not in (None, []) and action.option_strings and "default" not in help:
            help += f" (default {action.default})"
        rows.append((shown, help))
    return rows


def reference():
    """The "Every option" tables, from the parser: ``python tests/test_usage_doc.py`` prints them
    (paste a new flag's row from there)."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name in COMMANDS:
        p = sub.choices[name]
        out.append(f"### `bake-plan {name}`\n")
        out.append("| option | what it does |\n|---|---|\n")
        for shown, help in option_rows(p):
            out.append(f"| {shown} | {' '.join(help.split()) or '—'} |\n")
        out.append("\n")
    return "".join(out)


def test_a_flag_missing_from_the_table_is_caught(monkeypatch):
    """The check can fail: a table without one of the parser's flags."""
    monkeypatch.setattr(sys.modules[__name__], "USAGE", USAGE.replace("| `--wave N` |", "| `wave` |"))
    assert "--wave" not in documented_options()["matrix"]


if __name__ == "__main__":
    print(reference())
