"""The exception hierarchy: the core raises these, the CLI turns them into one line and an exit status."""

from __future__ import annotations

from typing import Sequence


class BakePlanError(Exception):
    """Base class. ``exit_status`` is what the CLI exits with; ``str(err)`` is the one line it prints.

    ``details`` are further lines the CLI prints under it, indented (empty for bad input, which is
    always one line).

    Exit status 2 means the work did not start: bad input, or no engine to run on. Exit status 1
    (:class:`RunError`) means it started and failed part-way: a build, a push, a publish.
    """

    exit_status = 2

    def __init__(self, message: str, details: Sequence[str] = ()):
        super().__init__(message)
        self.details = tuple(details)


class UsageError(BakePlanError):
    """Bad command-line input: an unknown target, a malformed date or platform (exit 2)."""


class StageError(BakePlanError):
    """A stage is malformed or does not fit the family: bad field, missing parent, cycle (exit 2)."""


class PluginError(BakePlanError):
    """A plugin failed to load, raised, or returned something that is not what its hook promises (exit 2)."""


class OutputError(BakePlanError):
    """The plan could not be written where asked (exit 2)."""


class ReportUnreadable(OutputError):
    """A report bake-plan adds to (the ``sitrep.json`` of the sitrep directory, which ``test``
    merges its results into) is there but cannot be read: unreadable, too large, not JSON, or not
    a sitrep. Refused rather than replaced; nothing is written (exit 2). The message names the
    file and why."""


class SourcesError(BakePlanError):
    """The sources manifest is malformed, names an unknown source, or a tracking ref cannot be
    resolved (unknown ref, unreachable URL) (exit 2)."""


class LockError(BakePlanError):
    """pip-compile could not make a lock from the stages' requirements, e.g. a requirement no
    index has (exit 1: the input is well-formed, the resolution failed)."""

    exit_status = 1


class LockConflict(LockError):
    """The requirements of a chain's stages conflict. ``details`` name each conflicting
    requirement with the stage and plugin that contributed it (exit 1)."""


class StaleFile(BakePlanError):
    """``--check`` found a committed file (a generated CI workflow) missing or different from what
    bake-plan writes now (exit 1, like ``black --check``: the input is fine, the file is not)."""

    exit_status = 1


class LintError(BakePlanError):
    """``bake-plan lint`` could not lint: hadolint is not installed, or a linter did not finish in
    time or gave no report (exit 2; findings themselves are exit 1)."""


class ConfigError(UsageError):
    """A configuration file is unreadable or malformed TOML, or names an unknown key, stage or
    plugin, or a value of the wrong shape (exit 2). The message names the file and the key."""


class PrivilegeError(UsageError):
    """A plan asks buildx for a privilege beyond reading its contexts (an entitlement such as
    ``network.host``) that the user did not grant (``--allow``, ``allow = [...]``): refused before
    buildx runs (exit 2). The message names the plugin, the stage, the target and the privilege."""


def did_you_mean(name: str, known, n: int = 3) -> str:
    """A hint such as ``"; did you mean 'args'?"`` with the nearest of ``known`` (difflib, case
    ignored), or ``""`` when nothing is near."""
    import difflib

    by_lower = {}
    for item in known:
        by_lower.setdefault(str(item).lower(), str(item))
    near = difflib.get_close_matches(str(name).lower(), list(by_lower), n=n, cutoff=0.6)
    if not near:
        return ""
    return "; did you mean " + " or ".join(f"'{by_lower[x]}'" for x in near) + "?"


class RunError(BakePlanError):
    """The work started and failed: the registry refused a push or a manifest, the engine went
    away (exit 1, like a failed build). Not the user's input: a rerun finishes the work."""

    exit_status = 1


class RecordError(RunError):
    """A nightly record in the registry (``record-<target>-<date>-<arch>``) is not one bake-plan
    can read: no record annotation, not JSON, or another schema (exit 1)."""
