"""The stage model: what a plugin declares about one image of the family.

Checking a stage a plugin returned is :mod:`bake.plan.validate`.

A two-stage image (``kind="mealkit"``, the JAX-Toolbox layout) has a Dockerfile with a
``mealkit`` stage and a last stage ``FROM mealkit AS final``; bake-plan turns it into the bake
targets ``<name>-mealkit`` and ``<name>``. A one-target stage (``kind="single"``) is built as is:
a wheel builder such as ``te``, or a CI image such as ``xla-ci``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Mapping, Optional, Tuple, Union

SOURCE_MODES = ("git-clone", "pip-vcs")
DEFAULT_TEST_TIMEOUT_S = 600.0
"""How long one image test may run by default, in seconds (a hung import must not hang a nightly)."""

# The model's objects keep their fields in slots where Python has them (3.10+), not in an instance
# dict: from 30 attributes on, CPython (3.11) gives each object a dict of its own, 1.5 KB, instead of
# one sharing its keys with the others, 0.3 KB. A Stage has 31 fields: in a dict each, a 20,000-stage
# plan's stages took 30 MB more, twice over while they are collected (the plugin's and the checked).
_SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}


@dataclass(frozen=True, **_SLOTS)
class Source:
    """A source a stage fetches at build time (the JAX-Toolbox sources manifest).

    :param name: upper-case suffix of the args: ``URLREF_<name>`` = ``<url>#<ref>`` and
        ``SRC_PATH_<name>`` = ``path``.
    :param url: git URL.
    :param ref: branch, tag or commit.
    :param path: where the source lands in the image; default ``/opt/<name lower-cased>``.
    :param mode: ``git-clone`` (cloned, installed editable) or ``pip-vcs`` (a ``git+`` line; its
        ``ref`` must then be a 40-hex commit, as pip-finalize refuses unpinned ``git+`` lines);
        passed as ``MODE_<name>``.
    :param patches: applied in order on ``ref`` by ``bake-fetch-source`` (``git-clone`` only): git
        refs fetched from ``url`` (``pull/12/head``) or ``file://<path>`` files under the stage's
        ``patches`` named context; passed as ``PATCHES_<name>`` (space-separated) when any.

    Built-in plugins take url and commit from the sources manifest (:func:`bake.pip.sources.source`).
    """

    name: str
    url: str
    ref: str = "main"
    path: Optional[str] = None
    mode: str = "git-clone"
    patches: Tuple[str, ...] = ()

    @property
    def urlref(self) -> str:
        """``<url>#<ref>``, the ``URLREF_<name>`` arg."""
        return f"{self.url}#{self.ref}"

    @property
    def src_path(self) -> str:
        """Where the source lands in the image, the ``SRC_PATH_<name>`` arg."""
        return self.path or "/opt/" + self.name.lower().replace("_", "-")


@dataclass(frozen=True, **_SLOTS)
class ImageTest:
    """A smoke test run in a stage's final image by ``bake-plan test``, once per platform.

    :param command: a string, run as ``sh -c COMMAND`` (the image needs a shell), or an argv list
        (``["python", "-c", "import jax"]``) run as is; either goes after the image's entrypoint,
        as ``docker run IMAGE COMMAND`` does. Exit status 0 passes.
    :param name: what the sitrep calls it; default the command itself. Unique within a stage.
    :param platforms: the platforms it runs on (a subset of the stage's); empty: every one.
    :param timeout_s: seconds it may run before it is stopped and fails.

    A bare string in ``Stage.tests`` is ``ImageTest(command=that string)``.
    """

    command: Union[str, Tuple[str, ...]]
    name: Optional[str] = None
    platforms: Tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TEST_TIMEOUT_S

    @property
    def argv(self) -> List[str]:
        """The container's command: ``["sh", "-c", command]`` for a string, else the list."""
        return ["sh", "-c", self.command] if isinstance(self.command, str) else list(self.command)

    @property
    def label(self) -> str:
        """The name the sitrep shows: ``name``, else the command (an argv joined by spaces)."""
        if self.name:
            return self.name
        return self.command if isinstance(self.command, str) else " ".join(self.command)


@dataclass(frozen=True, **_SLOTS)
class Stage:
    """One image of the family, as a plugin declares it.

    :param name: stage name, unique in the family (``[A-Za-z0-9][A-Za-z0-9_.-]*``).
    :param context: the build context: an absolute directory (built-in stages live under
        ``stages/``, see :func:`bake.resources.stage_dir`) or a URL buildx accepts.
    :param image: repository under the registry (``jax`` → ``ghcr.io/nvidia/jax``); ``None`` for a
        stage that is only consumed by others (no tags, not pushed).
    :param registry: the stage's registry and namespace (``ghcr.io/acme``); ``--registry`` (or the
        configuration's ``registry``) replaces it. ``None`` (the default): the configured registry,
        and a plan without one is refused for this stage (:func:`bake.plan.compose.compose`), so
        a third-party image never lands in another vendor's namespace (bake-plan's built-in
        stages give their own, ``bake_plan_plugins.REGISTRY``).
    :param parent: the stage this one builds on (its meal kit, through the ``base`` named context).
    :param base_image: the external image a root stage starts from, passed as ``base_image_arg``.
    :param kind: ``"mealkit"`` (targets ``<name>-mealkit`` and ``<name>``) or ``"single"``.
    :param target: the Dockerfile stage a ``single`` stage builds (``None``: the last one).
    :param args: build args (name → value); values are plain strings, never secrets: a name or
        value that looks like a credential is refused (:mod:`bake.plan.secrets`); secrets reach builds
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
    :param python: the image's Python version, ``"3.10"`` (major.minor); ``None``: the parent's.
        ``bake-plan lock`` resolves the chain for the requested stage's Python (and each arch's
        platform) without needing that interpreter on the host; the lock records it, and the final
        stage refuses a lock made for another Python. ``"3.10.14"`` names the exact Python: the
        lock then honours ``Requires-Python`` and markers down to the patch; ``"3.10"`` is resolved
        as ``3.10.0`` (uv's reading of a version without its patch).
    :param glibc: the glibc version of the image, ``"2.36"`` (Debian bookworm); ``None``: the
        parent's, else ``2.28``. ``bake-plan lock`` resolves for the manylinux wheels pip accepts
        on it (``x86_64-manylinux_2_36``), as pip in the image does.
    :param uses: named context → stage name, for stages whose output this one copies
        (``{"te": "te"}``: jax ships the Transformer Engine wheel). Becomes ``target:<that>``.
    :param contexts: extra named contexts: name → absolute directory or URL.
    :param variant: the toolchain variant tag, e.g. ``dev-3.8_cuda_12.1`` (Python 3.8, CUDA 12.1).
    :param cache_scope: the scope of the cache key (``cache-silo-<scope>-…``); default the name.
    :param variants: a matrix: axis → values, e.g. ``{"python": ("3.10", "3.12"), "cuda": ("12.1",
        "12.4")}``; the stage is expanded into one concrete stage per combination
        (:mod:`bake.plan.variants`). ``{axis}`` in ``base_image`` and in arg values is filled in.
    :param variant_format: the variant tag of a combination, e.g. ``dev-{python}_cuda_{cuda}``
        (default: the parent's, else ``python{python}_cuda{cuda}``).
    :param variant_args: axis → build-arg name that carries its value (default: the axis name).
    :param variant_of: filled in by bake-plan on a concrete variant: the declared stage's name.
    :param tests: smoke tests run in the final image (the single image of a ``single`` stage) by
        ``bake-plan test``: command strings (``sh -c``) or :class:`ImageTest` objects; bake-plan
        turns each string into an :class:`ImageTest`. A stage with tests needs an ``image``.
    :param arch_differences: platform → distribution names (``fnmatch`` patterns, compared as pip
        normalises names: ``nvidia-*``) that may be absent or of another version in the image on
        that platform (``{"linux/arm64": ("nvidia-*", "jaxlib-cuda*")}``): ``publish --sitrep``
        compares them only between the other platforms. Each platform is one of ``platforms``.
    :param lint_ignore: rule → why it does not apply to this stage, for ``bake-plan lint``
        (``{"DL3008": "apt packages follow the base image's release"}``): a hadolint rule
        (``DL3008``, ``SC2086``) or a BuildKit check (``FromAsCasing``); the reason is one line.
    :param plugin: filled in by bake-plan with the name of the plugin that returned the stage.
    """

    name: str
    context: Union[str, Path]
    image: Optional[str] = None
    registry: Optional[str] = None
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
    python: Optional[str] = None
    glibc: Optional[str] = None
    variant: Optional[str] = None
    cache_scope: Optional[str] = None
    variants: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    variant_format: Optional[str] = None
    variant_args: Mapping[str, str] = field(default_factory=dict)
    variant_of: Optional[str] = None
    tests: Tuple[Union[str, ImageTest], ...] = ()
    lint_ignore: Mapping[str, str] = field(default_factory=dict)
    arch_differences: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    plugin: str = ""

    def build_args(self) -> dict:
        """The stage's own args plus the ones bake-plan derives (base image, sources, requirements)."""
        out = {}
        if self.base_image is not None:
            out[self.base_image_arg] = self.base_image
        for src in self.sources:
            out[f"URLREF_{src.name}"] = src.urlref
            out[f"SRC_PATH_{src.name}"] = src.src_path
            out[f"MODE_{src.name}"] = src.mode
            if src.patches:
                out[f"PATCHES_{src.name}"] = " ".join(src.patches)
        if self.kind == "mealkit":
            out["REQUIREMENTS"] = "\n".join(self.requirements)
        out.update(self.args)
        return out


def dependencies(stage: Stage) -> List[str]:
    """Stage names ``stage`` needs built first: its parent, then the stages it ``uses``."""
    deps = [stage.parent] if stage.parent else []
    return deps + [s for s in stage.uses.values() if s not in deps]

