"""The stage model: what a plugin declares about one image of the family.

A two-stage image (``kind="mealkit"``, the JAX-Toolbox layout) has a Dockerfile with a
``mealkit`` stage and a last stage ``FROM mealkit AS final``; bake-plan turns it into the bake
targets ``<name>-mealkit`` and ``<name>``. A one-target stage (``kind="single"``) is built as is:
a wheel builder such as ``te``, or a CI image such as ``xla-ci``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import os.path
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Set, Tuple, Union

from bake.errors import StageError
from bake.naming import check_image_name, check_platform, check_reference, check_registry, check_tag
from bake.requirements import unpinned_vcs
from bake.variants import check as check_variants

KINDS = ("mealkit", "single")
SOURCE_MODES = ("git-clone", "pip-vcs")
_STAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SOURCE_NAME = re.compile(r"[A-Z][A-Z0-9_]*\Z")
_COMMIT = re.compile(r"[0-9a-fA-F]{40}\Z")
_CONTEXT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./:-]*\Z")
# Named-context values buildx takes as they are, rather than as a local directory.
_CONTEXT_SCHEMES = ("target:", "docker-image://", "oci-layout://", "https://", "http://", "git@", "ssh://")


@dataclass(frozen=True)
class Source:
    """A source a stage fetches at build time (the JAX-Toolbox sources manifest).

    :param name: upper-case suffix of the args: ``URLREF_<name>`` = ``<url>#<ref>`` and
        ``SRC_PATH_<name>`` = ``path``.
    :param url: git URL.
    :param ref: branch, tag or commit.
    :param path: where the source lands in the image; default ``/opt/<name lower-cased>``.
    :param mode: ``git-clone`` (cloned, installed editable) or ``pip-vcs`` (a ``git+`` line; its
        ``ref`` must then be a 40-hex commit, as pip-finalize refuses unpinned ``git+`` lines).

    Built-in plugins take url and commit from the sources manifest (:func:`bake.sources.source`).
    """

    name: str
    url: str
    ref: str = "main"
    path: Optional[str] = None
    mode: str = "git-clone"

    @property
    def urlref(self) -> str:
        """``<url>#<ref>``, the ``URLREF_<name>`` arg."""
        return f"{self.url}#{self.ref}"

    @property
    def src_path(self) -> str:
        """Where the source lands in the image, the ``SRC_PATH_<name>`` arg."""
        return self.path or "/opt/" + self.name.lower().replace("_", "-")


@dataclass(frozen=True)
class Stage:
    """One image of the family, as a plugin declares it.

    :param name: stage name, unique in the family (``[A-Za-z0-9][A-Za-z0-9_.-]*``).
    :param context: the build context: an absolute directory (built-in stages live under
        ``stages/``, see :func:`bake.resources.stage_dir`) or a URL buildx accepts.
    :param image: repository under the registry (``jax`` → ``ghcr.io/nvidia/jax``); ``None`` for a
        stage that is only consumed by others (no tags, not pushed).
    :param registry: default registry and namespace; ``--registry`` replaces it.
    :param parent: the stage this one builds on (its meal kit, through the ``base`` named context).
    :param base_image: the external image a root stage starts from, passed as ``base_image_arg``.
    :param kind: ``"mealkit"`` (targets ``<name>-mealkit`` and ``<name>``) or ``"single"``.
    :param target: the Dockerfile stage a ``single`` stage builds (``None``: the last one).
    :param args: build args (name → value); values are plain strings, never secrets: a name or
        value that looks like a credential is refused (:mod:`bake.secrets`); secrets reach builds
        through ``--secret`` and ``RUN --mount=type=secret``.
    :param platforms: platforms the stage supports, ``os/arch[/variant]``.
    :param sources: :class:`Source` list, passed as ``URLREF_*``/``SRC_PATH_*`` args.
    :param requirements: pip requirement lines the stage contributes to
        ``/opt/pip-tools.d/requirements-<name>.in`` (passed as the ``REQUIREMENTS`` arg). A
        ``git+`` URL must be pinned to a 40-hex commit (``pkg @ git+https://…@<commit>``).
    :param host_paths: for ``bake-plan lock``, which compiles the requirements on the host: in-image
        absolute path → host absolute path, for lines that name a path in the image
        (``{"/opt/delta": "/src/delta"}`` resolves ``-e file:///opt/delta`` from ``/src/delta``;
        a directory key covers everything under it). The lock names the in-image paths again.
    :param uses: named context → stage name, for stages whose output this one copies
        (``{"te": "te"}``: jax ships the Transformer Engine wheel). Becomes ``target:<that>``.
    :param contexts: extra named contexts: name → absolute directory or URL.
    :param variant: the toolchain variant tag, e.g. ``dev-3.8_cuda_12.1`` (Python 3.8, CUDA 12.1).
    :param cache_scope: the scope of the cache key (``cache-silo-<scope>-…``); default the name.
    :param variants: a matrix: axis → values, e.g. ``{"python": ("3.10", "3.12"), "cuda": ("12.1",
        "12.4")}``; the stage is expanded into one concrete stage per combination
        (:mod:`bake.variants`). ``{axis}`` in ``base_image`` and in arg values is filled in.
    :param variant_format: the variant tag of a combination, e.g. ``dev-{python}_cuda_{cuda}``
        (default: the parent's, else ``python{python}_cuda{cuda}``).
    :param variant_args: axis → build-arg name that carries its value (default: the axis name).
    :param variant_of: filled in by bake-plan on a concrete variant: the declared stage's name.
    :param plugin: filled in by bake-plan with the name of the plugin that returned the stage.
    """

    name: str
    context: Union[str, Path]
    image: Optional[str] = None
    registry: str = "ghcr.io/nvidia"
    parent: Optional[str] = None
    base_image: Optional[str] = None
    base_image_arg: str = "BASE_IMAGE"
    dockerfile: str = "Dockerfile"
    dockerfile_inline: Optional[str] = None
    kind: str = "mealkit"
    target: Optional[str] = None
    args: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    platforms: Tuple[str, ...] = ("linux/amd64", "linux/arm64")
    sources: Tuple[Source, ...] = ()
    requirements: Tuple[str, ...] = ()
    uses: Mapping[str, str] = field(default_factory=dict)
    contexts: Mapping[str, str] = field(default_factory=dict)
    host_paths: Mapping[str, str] = field(default_factory=dict)
    variant: Optional[str] = None
    cache_scope: Optional[str] = None
    variants: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    variant_format: Optional[str] = None
    variant_args: Mapping[str, str] = field(default_factory=dict)
    variant_of: Optional[str] = None
    plugin: str = ""

    def build_args(self) -> dict:
        """The stage's own args plus the ones bake-plan derives (base image, sources, requirements)."""
        out = {}
        if self.base_image is not None:
            out[self.base_image_arg] = self.base_image
        for src in self.sources:
            out[f"URLREF_{src.name}"] = src.urlref
            out[f"SRC_PATH_{src.name}"] = src.src_path
        if self.kind == "mealkit":
            out["REQUIREMENTS"] = "\n".join(self.requirements)
        out.update(self.args)
        return out


def is_context_url(value: str) -> bool:
    """True when a context value is something buildx resolves itself, not a local directory."""
    return value.startswith(_CONTEXT_SCHEMES) or "://" in value


def validate(stage: object, plugin: str, checked_contexts: Optional[Set[Tuple[str, str]]] = None) -> Stage:
    """Check one value a plugin returned from ``bake_plan_stages`` and stamp it with the plugin.

    :param checked_contexts: ``(context, dockerfile)`` pairs already found on disk, shared by the
        calls of one collection so that stages sharing a context do not look it up again; each
        pair this call finds is added.
    :returns: the stage with ``plugin`` set and sequences normalised to tuples.
    :raises StageError: one line naming the plugin, the stage and the field that is wrong.
    """
    if not isinstance(stage, Stage):
        raise StageError(
            f"plugin '{plugin}': bake_plan_stages returned {type(stage).__name__} {stage!r:.60}, "
            "expected bake.Stage objects"
        )
    where = f"plugin '{plugin}', stage '{getattr(stage, 'name', '?')}'"

    def fail(fld: str, msg: str) -> StageError:
        return StageError(f"{where}, field '{fld}': {msg}")

    if not isinstance(stage.name, str) or not _STAGE_NAME.match(stage.name):
        raise StageError(
            f"plugin '{plugin}': stage name {stage.name!r} must match [A-Za-z0-9][A-Za-z0-9_.-]*"
        )
    _check_str(stage, "registry", fail, optional=False)
    try:
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
    # A stage with variants has {axis} placeholders here: bake.variants checks each filled-in one.
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
    if not isinstance(stage.base_image_arg, str) or not _ARG_NAME.match(stage.base_image_arg):
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

    args = _check_mapping(stage, "args", fail, key_re=_ARG_NAME)
    labels = _check_mapping(stage, "labels", fail, key_re=None)
    uses = _check_mapping(stage, "uses", fail, key_re=_CONTEXT_NAME)
    contexts = _check_mapping(stage, "contexts", fail, key_re=_CONTEXT_NAME)
    for name, value in contexts.items():
        if not is_context_url(value) and not os.path.isabs(value):
            raise fail("contexts", f"context {name!r}: {value!r} must be an absolute directory or a URL")
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
        if "\n" in line or "\r" in line:
            raise fail("requirements", f"{line!r}: one requirement per line")
        if unpinned_vcs(line):
            raise fail("requirements", f"{line!r} is a git+ requirement not pinned to a 40-hex commit "
                                       "(write …@<commit>; a branch or tag makes the image depend on when it was built)")
    host_paths = _check_mapping(stage, "host_paths", fail, key_re=None)
    for image_path, host_path in host_paths.items():
        if not image_path.startswith("/"):
            raise fail("host_paths", f"{image_path!r} must be an absolute path in the image")
        if not Path(host_path).is_absolute():
            raise fail("host_paths", f"{image_path!r}: {host_path!r} must be an absolute path on the host")
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
            if not isinstance(value, str) or not value or any(c in value for c in "#\n\r "):
                raise sfail(f"{attr} {value!r} must be a non-empty string without '#', spaces or newlines")
        if src.path is not None and (not isinstance(src.path, str) or not src.path.startswith("/")):
            raise sfail(f"path {src.path!r} must be an absolute path in the image")
        if src.mode not in SOURCE_MODES:
            raise sfail(f"mode {src.mode!r} is not one of {', '.join(SOURCE_MODES)}")
        if src.mode == "pip-vcs" and not _COMMIT.match(src.ref):
            raise sfail(f"ref {src.ref!r}: a pip-vcs source installs 'git+{src.url}@<ref>', "
                        "which must be pinned to a 40-hex commit")

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
        plugin=plugin,
    )


def _check_str(stage, fld, fail, optional):
    value = getattr(stage, fld)
    if value is None and optional:
        return
    if not isinstance(value, str) or not value:
        raise fail(fld, f"expected a non-empty string, got {type(value).__name__} {value!r:.40}")


def _check_mapping(stage, fld, fail, key_re):
    value = getattr(stage, fld)
    if not isinstance(value, collections.abc.Mapping):
        raise fail(fld, f"expected a mapping of str to str, got {type(value).__name__}")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise fail(fld, f"key {key!r} is not a non-empty string")
        if key_re is not None and not key_re.match(key):
            raise fail(fld, f"key {key!r} is not a valid name")
        if not isinstance(item, str):
            raise fail(fld, f"value of {key!r} is {type(item).__name__}, expected str")
        out[key] = item
    return out


def _check_seq(stage, fld, fail, item_type):
    value = getattr(stage, fld)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise fail(fld, f"expected a list or tuple, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, item_type):
            raise fail(fld, f"item {item!r:.40} is {type(item).__name__}, expected {item_type.__name__}")
    return tuple(value)
