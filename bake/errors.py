"""The exception hierarchy: the core raises these, the CLI turns them into one line and an exit status."""

from __future__ import annotations


class BakePlanError(Exception):
    """Base class. ``exit_status`` is what the CLI exits with; ``str(err)`` is the one line it prints."""

    exit_status = 2


class UsageError(BakePlanError):
    """Bad command-line input: an unknown target, a malformed date or platform (exit 2)."""


class StageError(BakePlanError):
    """A stage is malformed or does not fit the family: bad field, missing parent, cycle (exit 2)."""


class PluginError(BakePlanError):
    """A plugin failed to load, raised, or returned something that is not what its hook promises (exit 2)."""


class OutputError(BakePlanError):
    """The plan could not be written where asked (exit 2)."""
