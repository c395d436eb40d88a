"""``bake-plan completion bash|zsh``: a shell completion script generated from the argparse parser
itself by shtab (https://github.com/iterative/shtab), so it never lags behind the options.

The script completes the commands, each command's options, the choices of an option (``--format``
values, ``completion``'s shells), and file or directory names after an option whose metavar is
``FILE`` or ``DIR``. It calls no Python at completion time: no plugin is loaded to complete, so
stage names after ``--target`` are not offered.
"""

from __future__ import annotations

import argparse
from typing import Iterator

PATH_METAVARS = {"FILE": "file", "DIR": "directory"}
"""An option's metavar → what its value completes to (shtab's ``FILE``/``DIRECTORY``)."""


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every sub-command's parser below it."""
    yield parser
    for action in parser._actions:  # argparse has no public walk; shtab reads the same list
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from _parsers(sub)


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` for ``shell`` (``bash`` or ``zsh``), as text.

    Options with a ``FILE``/``DIR`` metavar (:data:`PATH_METAVARS`) complete to paths.
    :raises ValueError: a shell shtab does not know (argparse's ``choices`` keep it out).
    """
    import shtab

    marks = {"file": shtab.FILE, "directory": shtab.DIRECTORY}
    for each in _parsers(parser):
        for action in each._actions:
            kind = PATH_METAVARS.get(action.metavar) if isinstance(action.metavar, str) else None
            if kind is not None:
                action.complete = marks[kind]
    return shtab.complete(parser, shell=shell, root_prefix=parser.prog)
