"""The exception hierarchy: the core raises these, the CLI turns them into one line and an exit status."""

from __future__ import annotations


class BakePlanError(Exception):
    """Base class. ``exit_status`` is what the CLI exits with; ``str(err)`` is the one line it prints.

    Exit status 2 means the work did not start: bad input, or no engine to run on. Exit status 1
    (:class:`RunError`) means it started and failed part-way: a build, a push, a publish.
    """

    exit_status = 2


class UsageError(BakePlanError):
    """Bad command-line input: an unknown target, a malformed date or platform (exit 2)."""


class StageError(BakePlanError):
    """A stage is malformed or does not fit the family: bad field, missing parent, cycle (exit 2)."""


class PluginError(BakePlanError):
    """A plugin failed to load, raised, or returned something that is not what its hook promises (exit 2)."""


class OutputError(BakePlanError):
    """The plan could not be written where asked (exit 2)."""


class RunError(BakePlanError):
    """The work started and failed: the registry refused a push or a manifest, the engine went
    away (exit 1, like a failed build). Not the user's input: a rerun finishes the work."""

    exit_status = 1
