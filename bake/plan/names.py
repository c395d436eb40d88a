"""Names the registries and buildx accept: image repositories, registries, tags, platforms, targets.

The grammars come from the distribution reference spec (distribution/reference, as used by
Docker) and from buildx: target names match ``[a-zA-Z0-9_-]+``. Checkers raise ``ValueError``
with a message; callers add where the value came from.
"""

from __future__ import annotations

from typing import Optional, Tuple

from bake.patterns import LazyPattern

# distribution/reference: path components and tags.
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_NAME = LazyPattern(rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*\Z")
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_REGISTRY = LazyPattern(rf"{_HOST}(?:/{_PATH_COMPONENT})*\Z")
_TAG = LazyPattern(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_TAG_CHAR = LazyPattern(r"[A-Za-z0-9_.-]")
ARG_NAME = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""A build-arg name: the only names a Dockerfile ``ARG`` can declare and read."""
_MAX_TAG = 128
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
# A whole image reference: [host[:port]/]path[:tag][@digest] (distribution/reference).
_REFERENCE = LazyPattern(
    rf"(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@{_DIGEST})?\Z"
)
_SHA256_DIGEST = LazyPattern(r"sha256:[0-9a-f]{64}\Z")
_TARGET_UNSAFE = LazyPattern(r"[^A-Za-z0-9_-]")
_MAX_REPOSITORY = 255  # distribution: the whole "host/path" name

# Platforms bake-plan knows how to name per arch: buildx's os/arch[/variant] → tag suffix.
PLATFORM_ARCH = {
    "linux/amd64": "amd64",
    "linux/arm64": "arm64",
    "linux/arm/v7": "armv7",
    "linux/arm/v6": "armv6",
    "linux/ppc64le": "ppc64le",
    "linux/s390x": "s390x",
    "linux/riscv64": "riscv64",
    "linux/386": "386",
}
_PLATFORM_ALIASES = {"linux/arm64/v8": "linux/arm64", "linux/x86_64": "linux/amd64", "linux/aarch64": "linux/arm64"}


def check_image_name(name: str) -> str:
    """A repository path under a registry, e.g. ``jax`` or ``team/upstream-pax``. Lower case only."""
    if not _IMAGE_NAME.match(name):
        raise ValueError(
            f"image name {name!r} is not a valid repository path (lower-case letters, digits, "
            "and . _ - between them, components separated by /)"
        )
    return name


def check_registry(registry: str) -> str:
    """A registry host with an optional port and namespace, e.g. ``ghcr.io/nvidia``, ``localhost:5555``.

    :raises ValueError: not ``host[:port][/namespace]``; an upper-case letter anywhere (Docker
        takes ``UPPER/x`` for a host named ``UPPER``, and registries name repositories in lower
        case); a port outside 1 to 65535.
    """
    if not _REGISTRY.match(registry):
        raise ValueError(
            f"registry {registry!r} is not host[:port][/namespace] (namespace in lower case)"
        )
    if registry != registry.lower():
        raise ValueError(f"registry {registry!r} has upper-case letters: write host and namespace in lower case")
    _check_port(registry.split("/", 1)[0], f"registry {registry!r}")
    return registry


def _check_port(host: str, what: str) -> None:
    """A ``host[:port]`` whose port, if any, is one TCP has (1 to 65535). :raises ValueError: else."""
    _, sep, port = host.rpartition(":")
    if sep and not 1 <= int(port) <= 65535:
        raise ValueError(f"{what}: port {port} is not 1 to 65535")


def _show(value: str, limit: int = 60) -> str:
    """``repr`` of a value, cut to ``limit`` characters (an error line stays one readable line)."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + "…"


def check_tag(tag: str) -> str:
    """A tag registries accept: ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``.

    :raises ValueError: naming what is wrong: the length, the first character or the first
        character registries refuse.
    """
    if not isinstance(tag, str):
        raise ValueError(f"tag {tag!r} is {type(tag).__name__}, not a string")
    if _TAG.match(tag):
        return tag
    rule = "registries take 1 to 128 of A-Z a-z 0-9 _ . -, not starting with . or -"
    if not tag:
        raise ValueError(f"a tag is empty: {rule}")
    if len(tag) > _MAX_TAG:
        raise ValueError(f"tag {_show(tag)} is {len(tag)} characters long: {rule}")
    bad = next((c for c in tag if not _TAG_CHAR.match(c)), None)
    if bad is not None:
        raise ValueError(f"tag {_show(tag)} contains {bad!r}: {rule}")
    raise ValueError(f"tag {_show(tag)} starts with {tag[0]!r}: {rule}")


def check_repository(repository: str) -> str:
    """A whole ``registry/image`` name; registries refuse names over 255 characters."""
    if len(repository) > _MAX_REPOSITORY:
        raise ValueError(
            f"image name {_show(repository)} is {len(repository)} characters long; registries take at most "
            f"{_MAX_REPOSITORY} (registry, namespace and image together)"
        )
    return repository


def check_reference(ref: str) -> str:
    """A whole image reference as ``FROM`` and ``docker pull`` take it:
    ``[host[:port]/]path[:tag][@digest]``, e.g. ``nvidia/cuda:12.2.0-devel-ubuntu22.04``."""
    if not isinstance(ref, str) or not _REFERENCE.match(ref):
        raise ValueError(
            f"{_show(str(ref))} is not an image reference ([host[:port]/]path[:tag][@digest], "
            "path in lower case)"
        )
    name = ref.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name.rsplit(":", 1)[0]
    check_repository(name)
    if "/" in name and _has_domain(name.split("/", 1)[0]):
        _check_port(name.split("/", 1)[0], _show(ref))
    return ref


# distribution/reference's defaults (normalize.go): what ParseNormalizedNamed fills in.
DEFAULT_DOMAIN = "docker.io"
_LEGACY_DOMAIN = "index.docker.io"
_OFFICIAL_PREFIX = "library/"
DEFAULT_TAG = "latest"


def _has_domain(first: str) -> bool:
    """Whether the first path component of a reference is a registry host (distribution's
    ``splitDockerDomain``): it has a ``.`` or ``:``, is ``localhost``, or has an upper-case letter."""
    return "." in first or ":" in first or first == "localhost" or first.lower() != first


def split_reference(ref: str) -> Tuple[str, str, Optional[str], Optional[str]]:
    """``(domain, path, tag, digest)`` of a checked image reference, normalised as Docker and
    BuildKit read it (distribution/reference ``ParseNormalizedNamed``): no host means
    ``docker.io``, ``index.docker.io`` is ``docker.io``, and a one-component path on Docker Hub
    is under ``library/``. ``tag`` and ``digest`` are ``None`` when not written.

    :raises ValueError: not an image reference (:func:`check_reference`).
    """
    check_reference(ref)
    name, _, digest = ref.partition("@")
    head, slash, last = name.rpartition("/")
    tag = None
    if ":" in last:
        last, tag = last.split(":", 1)
    name = f"{head}{slash}{last}"
    first, sep, rest = name.partition("/")
    if sep and _has_domain(first):
        domain, path = first, rest
    else:
        domain, path = DEFAULT_DOMAIN, name
    if domain == _LEGACY_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = _OFFICIAL_PREFIX + path
    return domain, path, tag, digest or None


def normalise_reference(ref: str) -> str:
    """One spelling per image: ``busybox``, ``busybox:latest``, ``library/busybox`` and
    ``index.docker.io/library/busybox:latest`` are all ``docker.io/library/busybox:latest``
    (:func:`split_reference`; no tag and no digest means ``:latest``, as ``docker pull`` reads it).

    :raises ValueError: not an image reference.
    """
    domain, path, tag, digest = split_reference(ref)
    if tag is None and digest is None:
        tag = DEFAULT_TAG
    return f"{domain}/{path}" + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def context_name(ref: str) -> str:
    """The named-context key BuildKit's Dockerfile frontend looks ``FROM ref`` up under: the
    familiar name (``docker.io/`` and ``library/`` dropped) with its tag and digest, less a
    trailing ``:latest`` (dockerui ``NamedContext``). Every spelling of one image has the same
    key, e.g. ``busybox`` for ``docker.io/library/busybox:latest``.

    :raises ValueError: not an image reference.
    """
    domain, path, tag, digest = split_reference(ref)
    if domain == DEFAULT_DOMAIN:
        name = path[len(_OFFICIAL_PREFIX):] if path.startswith(_OFFICIAL_PREFIX) and path.count("/") == 1 else path
    else:
        name = f"{domain}/{path}"
    key = name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")
    return key[: -len(":" + DEFAULT_TAG)] if key.endswith(":" + DEFAULT_TAG) else key


def repository_name(ref: str) -> str:
    """The normalised repository of a reference, without tag or digest:
    ``localhost:5555/ns/base:mealkit@sha256:…`` → ``localhost:5555/ns/base``, ``busybox`` →
    ``docker.io/library/busybox``.

    :raises ValueError: not an image reference.
    """
    domain, path, _, _ = split_reference(ref)
    return f"{domain}/{path}"


def check_digest(digest: str) -> str:
    """A content digest as registries and buildx write it: ``sha256:<64 hex>`` (the OCI image
    spec's ``algorithm:encoded``; bake-plan pins images by sha256 only).

    :raises ValueError: anything else.
    """
    if not isinstance(digest, str) or not _SHA256_DIGEST.match(digest):
        raise ValueError(f"{_show(str(digest))} is not an image digest (sha256: and 64 lower-case hex digits)")
    return digest


def check_platform(platform: str) -> str:
    """Normalise a platform to buildx's ``os/arch[/variant]`` form.

    :raises ValueError: for a platform outside :data:`PLATFORM_ARCH` (bake-plan needs to name its
        arch in per-arch tags).
    """
    if not isinstance(platform, str):
        raise ValueError(f"platform {platform!r} is not a string")
    value = platform.strip().lower()
    value = _PLATFORM_ALIASES.get(value, value)
    if value not in PLATFORM_ARCH:
        raise ValueError(
            f"unsupported platform {platform!r} (known: {', '.join(PLATFORM_ARCH)})"
        )
    return value


def arch_of(platform: str) -> str:
    """The per-arch tag suffix of a normalised platform: ``linux/arm64`` → ``arm64``."""
    return PLATFORM_ARCH[platform]


def target_name(name: str) -> str:
    """A bake target name: buildx takes ``[a-zA-Z0-9_-]+``, so every other character becomes ``_``
    (``jax-0.4.30`` → ``jax-0_4_30``)."""
    return _TARGET_UNSAFE.sub("_", name)
