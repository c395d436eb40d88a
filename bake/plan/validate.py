"""Checking one stage a plugin returned: every field of :class:`bake.plan.stage.Stage`, one line
naming the plugin, the stage and the field when one is wrong."""

from __future__ import annotations

import collections.abc
import dataclasses
import os.path
from pathlib import Path
from typing import Optional, Set, Tuple

from bake.errors import PluginError, StageError
from bake.patterns import LazyPattern
from bake.plan.requirement_lines import requirement_fault
from bake.plan.names import (
    ARG_NAME,
    check_image_name,
    check_platform,
    check_reference,
    check_registry,
    check_tag,
)
from bake.plan.stage import SOURCE_MODES, ImageTest, Source, Stage
from bake.plan.text import control_fault, expansion_fault, git_fault, label_fault, printable
from bake.plan.variants import check as check_variants

KINDS = ("mealkit", "single")
_STAGE_NAME = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_SOURCE_NAME = LazyPattern(r"[A-Z][A-Z0-9_]*\Z")
_COMMIT = LazyPattern(r"[0-9a-fA-F]{40}\Z")
_PYTHON = LazyPattern(r"3\.(?:0|[1-9][0-9]?)(?:\.(?:0|[1-9][0-9]{0,2}))?\Z")
_GLIBC = LazyPattern(r"2\.(?:1[7-9]|[2-9][0-9])\Z")
_CONTEXT_NAME = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9_./:-]*\Z")
# Named-context values buildx takes as they are, rather than as a local directory.
_CONTEXT_SCHEMES = ("target:", "docker-image://", "oci-layout://", "https://", "http://", "git@", "ssh://")

# A git+ URL pinned to a full commit: "…git+<url>@<40 hex>" then a fragment, a space, a marker or the end.
# The same rule as stages/scripts/pip-finalize.sh, so a line the host accepts the image accepts too.
_VCS_PINNED = LazyPattern(r"git\+\S*@[0-9a-fA-F]{40}(?=[#\s;]|$)")


LINT_RULE = LazyPattern(r"(DL|SC)[0-9]{4}\Z|[A-Z][A-Za-z]{2,63}\Z")
"""A rule ``lint_ignore`` names: a hadolint rule (``DL3008``, ShellCheck's ``SC2086``) or a BuildKit
Dockerfile check (``FromAsCasing``)."""


def unpinned_vcs(line: str) -> bool:
    """True when ``line`` has a ``git+`` URL that is not pinned to a full 40-hex commit
    (``pkg @ git+https://…@main``). Such a line makes an image depend on when it was built."""
    return "git+" in line and not _VCS_PINNED.search(line)


def is_context_url(value: str) -> bool:
    """True when a context value is something buildx resolves itself, not a local directory."""
    return value.startswith(_CONTEXT_SCHEMES) or "://" in value


def validate(stage: object, plugin: str, checked_contexts: Optional[Set[Tuple[str, str]]] = None) -> Stage:
    """Check one value a plugin returned from ``bake_plan_stages`` and stamp it with the plugin.

    :param checked_contexts: ``(context, dockerfile)`` pairs already found on disk, shared by the
        calls of one collection so that stages sharing a context do not look it up again; each
        pair this call finds is added.
    :returns: the stage with ``plugin`` set and sequences normalised to tuples.
    :raises StageError: one line naming the plugin, the stage and the field that is wrong
        (a requirement line, a source's URL or ref, a name-like field holding a line break or
        control character: :mod:`bake.plan.text`).
    :raises PluginError: the plugin's entry-point name holds a control character.
    """
    if not isinstance(stage, Stage):
        raise StageError(
            f"plugin '{plugin}': bake_plan_stages returned {type(stage).__name__} {stage!r:.60}, "
            "expected bake.Stage objects"
        )
    fault = control_fault(plugin, allow="") if isinstance(plugin, str) else None
    if fault:  # every message and the `stages` listing name the plugin: printable text only
        raise PluginError(f"plugin {plugin!r}: its entry-point name holds {fault}; name it in printable text")
    where = f"plugin '{plugin}', stage '{getattr(stage, 'name', '?')}'"

    def fail(fld: str, msg: str) -> StageError:
        return StageError(f"{where}, field '{fld}': {msg}")

    if not isinstance(stage.name, str) or not _STAGE_NAME.match(stage.name):
        raise StageError(
            f"plugin '{plugin}': stage name {stage.name!r} must match [A-Za-z0-9][A-Za-z0-9_.-]*"
        )
    _check_str(stage, "registry", fail, optional=True)
    try:
        if stage.registry is not None:
            check_registry(stage.registry)
    except ValueError as err:
        raise fail("registry", str(err)) from None
    for fld in ("image", "parent", "base_image", "dockerfile_inline", "target", "variant", "cache_scope"):
        _check_str(stage, fld, fail, optional=True)
    _check_str(stage, "dockerfile", fail, optional=False)
    _check_str(stage, "base_image_arg", fail, optional=False)
    if stage.image is not None:
        try:
            check_image_name(stage.image)
        except ValueError as err:
            raise fail("image", str(err)) from None
    # A stage with variants has {axis} placeholders here: bake.plan.variants checks each filled-in one.
    if stage.base_image is not None and not stage.variants:
        try:
            check_reference(stage.base_image)
        except ValueError as err:
            raise fail("base_image", str(err)) from None
    if stage.variant is not None:
        try:
            check_tag(stage.variant)
        except ValueError as err:
            raise fail("variant", str(err)) from None
    if stage.parent is not None and stage.base_image is not None:
        raise fail("parent", "a stage has a parent stage or an external base_image, not both")
    if stage.parent == stage.name:
        raise fail("parent", "a stage cannot be its own parent")
    if stage.kind not in KINDS:
        raise fail("kind", f"{stage.kind!r} is not one of {', '.join(KINDS)}")
    if not isinstance(stage.base_image_arg, str) or not ARG_NAME.match(stage.base_image_arg):
        raise fail("base_image_arg", f"{stage.base_image_arg!r} is not a valid build-arg name")

    context = stage.context
    if isinstance(context, Path):
        context = str(context)
    if not isinstance(context, str) or not context:
        raise fail("context", f"expected a directory path or URL, got {type(stage.context).__name__}")
    checked = (context, stage.dockerfile if stage.dockerfile_inline is None else "")
    if not is_context_url(context) and (checked_contexts is None or checked not in checked_contexts):
        if not os.path.isabs(context):
            raise fail("context", f"{context!r} must be an absolute directory (or a URL)")
        if not os.path.isdir(context):
            raise fail("context", f"directory {context} does not exist")
        dockerfile = os.path.join(context, stage.dockerfile)
        if stage.dockerfile_inline is None and not os.path.isfile(dockerfile):
            raise fail("dockerfile", f"{dockerfile} does not exist")
        if checked_contexts is not None:
            checked_contexts.add(checked)

    args = _check_mapping(stage, "args", fail, key_re=ARG_NAME)
    labels = _check_mapping(stage, "labels", fail, key_re=None)
    for key, value in labels.items():  # printed and pushed as image metadata: no terminal controls, no bidi
        fault = label_fault(key, value)
        if fault:
            raise fail("labels", f"label '{printable(key)}' holds {fault}")
    uses = _check_mapping(stage, "uses", fail, key_re=_CONTEXT_NAME)
    contexts = _check_mapping(stage, "contexts", fail, key_re=_CONTEXT_NAME)
    for name, value in contexts.items():
        fault = control_fault(value, allow="")
        if fault:
            raise fail("contexts", f"context {name!r} holds {fault}")
        if not is_context_url(value) and not os.path.isabs(value):
            raise fail("contexts", f"context {name!r}: {value!r} must be an absolute directory or a URL")
        if not is_context_url(value) and (checked_contexts is None or (value, "") not in checked_contexts):
            if not os.path.isdir(value):  # checked as `context` is: buildx would fail on it mid-build
                raise fail("contexts", f"context {name!r}: directory {value} does not exist")
            if checked_contexts is not None:
                checked_contexts.add((value, ""))
    if set(uses) & set(contexts):
        raise fail("uses", f"named context {sorted(set(uses) & set(contexts))[0]!r} is also in 'contexts'")
    for reserved in ("base", "mealkit"):
        if reserved in uses or reserved in contexts:
            raise fail("contexts", f"the named context {reserved!r} is reserved (parent's meal kit, own meal kit)")

    platforms = _check_seq(stage, "platforms", fail, str)
    if not platforms:
        raise fail("platforms", "at least one platform is needed")
    try:
        platforms = tuple(dict.fromkeys(check_platform(p) for p in platforms))
    except ValueError as err:
        raise fail("platforms", str(err)) from None
    requirements = _check_seq(stage, "requirements", fail, str)
    for line in requirements:
        # pip reads a requirements file with str.splitlines: "alpha\f-r /etc/x" would be two lines.
        fault = control_fault(line)
        if fault:
            raise fail("requirements", f"{line!r} holds {fault}: one requirement per line, of printable text")
        fault = expansion_fault(line)  # the image's pip-compile would expand it from the build's environment
        if fault:
            raise fail("requirements", f"{line!r} {fault}: the image's pip-compile would send the build's value "
                                       "(an index URL with its credentials, a token) to the host the line names; "
                                       "write the value itself")
        fault = requirement_fault(line)
        if fault:
            raise fail("requirements", f"{line!r} is not a line pip can read: {fault}")
        if unpinned_vcs(line):
            raise fail("requirements", f"{line!r} is a git+ requirement not pinned to a 40-hex commit "
                                       "(write …@<commit>; a branch or tag makes the image depend on when it was built)")
    host_paths = _check_mapping(stage, "host_paths", fail, key_re=None)
    for image_path, host_path in host_paths.items():
        if not image_path.startswith("/"):
            raise fail("host_paths", f"{image_path!r} must be an absolute path in the image")
        if not Path(host_path).is_absolute():
            raise fail("host_paths", f"{image_path!r}: {host_path!r} must be an absolute path on the host")
    if stage.python is not None and (not isinstance(stage.python, str) or not _PYTHON.match(stage.python)):
        raise fail("python", f"{stage.python!r} is not a Python version such as '3.10' (major.minor) "
                             "or '3.10.14' (the exact one)")
    if stage.glibc is not None and (not isinstance(stage.glibc, str) or not _GLIBC.match(stage.glibc)):
        raise fail("glibc", f"{stage.glibc!r} is not a glibc version such as '2.36' (2.17 or later: "
                            "the oldest manylinux, manylinux2014)")
    sources = _check_seq(stage, "sources", fail, Source)
    seen = set()
    for src in sources:
        sfail = lambda msg, src=src: fail("sources", f"source {src.name!r}: {msg}")  # noqa: E731
        if not isinstance(src.name, str) or not _SOURCE_NAME.match(src.name):
            raise sfail("name must be upper-case [A-Z][A-Z0-9_]* (it becomes URLREF_<name>)")
        if src.name in seen:
            raise sfail("defined twice")
        seen.add(src.name)
        for attr in ("url", "ref"):
            value = getattr(src, attr)
            # (str.split() cuts at exactly the characters str.isspace() is true for)
            if (not isinstance(value, str) or not value or control_fault(value, allow="")
                    or "#" in value or value.split() != [value]):
                raise sfail(f"{attr} {value!r} must be a non-empty string without '#', spaces, line breaks "
                            "or control characters")
            fault = git_fault(value, attr)  # handed to git (lock's checkout, the image's fetch)
            if fault:
                raise sfail(f"{attr} {value!r} {fault}")
        if src.mode == "pip-vcs" and expansion_fault(src.url):  # the URL reaches uv and pip
            raise sfail(f"url {expansion_fault(src.url)}; a pip-vcs URL must be literal")
        if src.path is not None and (not isinstance(src.path, str) or not src.path.startswith("/")):
            raise sfail(f"path {src.path!r} must be an absolute path in the image")
        if src.mode not in SOURCE_MODES:
            raise sfail(f"mode {src.mode!r} is not one of {', '.join(SOURCE_MODES)}")
        patches = src.patches
        if not isinstance(patches, (tuple, list)) or not all(
                isinstance(p, str) and p and not control_fault(p, allow="")
                and not any(c.isspace() or c in "#'\"\\$`" for c in p)
                and (p.startswith("file://") or not git_fault(p)) for p in patches):
            raise sfail(f"patches {patches!r} must be a sequence of git refs or file://<path>, without spaces")
        if patches and src.mode != "git-clone":
            raise sfail(f"patches need mode 'git-clone' (pip installs a {src.mode} source as it is)")
        if src.mode == "pip-vcs" and not _COMMIT.match(src.ref):
            raise sfail(f"ref {src.ref!r}: a pip-vcs source installs 'git+{src.url}@<ref>', "
                        "which must be pinned to a 40-hex commit")

    tests = _check_tests(stage, platforms, fail)
    lint_ignore = _check_mapping(stage, "lint_ignore", fail, key_re=LINT_RULE)
    for rule, reason in lint_ignore.items():
        if not reason.strip() or control_fault(reason, allow=""):
            raise fail("lint_ignore", f"{rule}: the reason must be one line of text saying why the rule does not apply")
    arch_differences = _check_arch_differences(stage, platforms, fail)
    variant_fields = check_variants(stage, fail)

    return dataclasses.replace(
        stage,
        **variant_fields,
        variant_of=None,
        context=context,
        args=args,
        labels=labels,
        uses=uses,
        contexts=contexts,
        platforms=platforms,
        requirements=requirements,
        host_paths=host_paths,
        sources=sources,
        tests=tests,
        lint_ignore=lint_ignore,
        arch_differences=arch_differences,
        plugin=plugin,
    )


_DISTRIBUTION_PATTERN = LazyPattern(r"[A-Za-z0-9*?][A-Za-z0-9._*?-]{0,199}\Z")


def _check_arch_differences(stage: Stage, platforms: Tuple[str, ...], fail) -> dict:
    """The stage's ``arch_differences``: platform (one of the stage's) → a tuple of distribution
    name patterns (letters, digits, ``._-`` and the wildcards ``*?``, at most 200 characters)."""
    value = stage.arch_differences
    if not isinstance(value, collections.abc.Mapping):
        raise fail("arch_differences", f"expected a mapping of platform to distribution names, got {type(value).__name__}")
    if not value and type(value) is dict:  # most stages: nothing to normalise, nothing to copy
        return value
    out = {}
    for platform, names in value.items():
        try:
            key = check_platform(platform)
        except (ValueError, AttributeError, TypeError) as err:
            raise fail("arch_differences", f"{platform!r:.60}: {err}") from None
        if key not in platforms:
            raise fail("arch_differences", f"platform {key} is not one of the stage's ({', '.join(platforms)})")
        if isinstance(names, (str, bytes)) or not isinstance(names, (list, tuple)) or not names:
            raise fail("arch_differences", f"{key}: expected a non-empty list of distribution names, got "
                                           f"{type(names).__name__} {names!r:.40}")
        for name in names:
            if not isinstance(name, str) or not _DISTRIBUTION_PATTERN.match(name):
                raise fail("arch_differences", f"{key}: {name!r:.60} is not a distribution name or pattern "
                                               "(letters, digits, '._-', and the wildcards '*' and '?')")
        out[key] = tuple(dict.fromkeys(names))
    return out


def _check_tests(stage: Stage, platforms: Tuple[str, ...], fail) -> Tuple[ImageTest, ...]:
    """The stage's ``tests`` as :class:`ImageTest` objects (a bare string is one run by ``sh -c``
    on every platform), each checked: a non-empty command without a NUL (a string) or a non-empty
    list of non-empty strings without one (an argv), a printable one-line name unique in the
    stage, platforms among the stage's, a positive timeout; and an ``image`` to run them in."""
    items = _check_seq(stage, "tests", fail, (str, ImageTest))
    if items and stage.image is None:
        raise fail("tests", "a stage without an image has no image to test: give it an image (or move the tests "
                            "to a stage that has one)")
    out, names = [], set()
    for item in items:
        test = ImageTest(command=item) if isinstance(item, str) else item
        command = test.command
        if isinstance(command, list):
            command = tuple(command)
        if isinstance(command, str):
            bad = not command.strip() or "\0" in command
        else:
            bad = (not isinstance(command, tuple) or not command
                   or not all(isinstance(a, str) and a and "\0" not in a for a in command))
        if bad:
            raise fail("tests", f"command {test.command!r:.60} must be a non-empty string (run by sh -c) or a "
                                "non-empty list of non-empty strings (an argv), without NUL")
        name = test.name
        if name is not None and (not isinstance(name, str) or not name.strip() or control_fault(name, allow="")):
            raise fail("tests", f"test name {name!r:.60} must be a non-empty line of printable text")
        label = ImageTest(command, name).label
        if label in names:
            raise fail("tests", f"two tests are named {label!r:.60}; give one a name= (the sitrep tells them apart by it)")
        names.add(label)
        wanted = test.platforms
        if isinstance(wanted, str) or not isinstance(wanted, (list, tuple)):
            raise fail("tests", f"test {label!r:.60}: platforms must be a list or tuple, got {type(wanted).__name__}")
        try:
            wanted = tuple(dict.fromkeys(check_platform(p) for p in wanted))
        except (ValueError, AttributeError, TypeError) as err:
            raise fail("tests", f"test {label!r:.60}: platforms: {err}") from None
        outside = [p for p in wanted if p not in platforms]
        if outside:
            raise fail("tests", f"test {label!r:.60}: platform {outside[0]} is not one of the stage's "
                                f"({', '.join(platforms)})")
        timeout = test.timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise fail("tests", f"test {label!r:.60}: timeout_s {timeout!r} must be a positive number of seconds")
        out.append(ImageTest(command=command, name=name, platforms=wanted, timeout_s=float(timeout)))
    return tuple(out)


def _check_str(stage, fld, fail, optional):
    value = getattr(stage, fld)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise fail(fld, f"expected a non-empty string, got {type(value).__name__} {value!r:.40}")
    # Names, paths and references are one line of printable text (an inline Dockerfile is any
    # text a bake file carries: bake.plan.checks refuses only a NUL in it).
    fault = None if fld == "dockerfile_inline" else control_fault(value, allow="")
    if fault:
        raise fail(fld, f"{value!r:.60} holds {fault}")


def _check_mapping(stage, fld, fail, key_re):
    value = getattr(stage, fld)
    if not isinstance(value, collections.abc.Mapping):
        raise fail(fld, f"expected a mapping of str to str, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise fail(fld, f"key {key!r} is not a non-empty string")
        if key_re is not None and not key_re.match(key):
            raise fail(fld, f"key {key!r} is not a valid name")
        if not isinstance(item, str):
            raise fail(fld, f"value of {key!r} is {type(item).__name__}, expected str")
    # A copy: a checked stage holds mappings of its own, so one a plugin hands to several stages,
    # or changes later, changes no checked stage (the plugin's originals are freed with its stages).
    return dict(value)


def _check_seq(stage, fld, fail, item_type):
    value = getattr(stage, fld)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise fail(fld, f"expected a list or tuple, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, item_type):
            expected = " or ".join(t.__name__ for t in (item_type if isinstance(item_type, tuple) else (item_type,)))
            raise fail(fld, f"item {item!r:.40} is {type(item).__name__}, expected {expected}")
    return tuple(value)
