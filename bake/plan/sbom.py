"""A nightly record as a CycloneDX SBOM (JSON, spec 1.6): what bake-plan knows of an image, with
no scanner and no network.

Pure: made from one record (:mod:`bake.plan.records`) by cyclonedx-python-lib, which is imported
only here, inside :func:`sbom_json` (not on the startup path). The SBOM (docs/nightly-record.md):

- ``metadata.component``: the image, type ``container``, its ``pkg:oci`` purl pinned to the
  image digest (``repository_url``, ``tag``, ``arch`` qualifiers) when it was pushed;
- one ``library`` component per pin of the lock (``pkg:pypi/<name>@<version>``) with the
  lock's ``--hash`` values as its hashes; a pin to a URL has no version and the URL as its
  ``distribution`` reference;
- one ``library`` component per source the build fetched: the commit as its version, the
  repository as its ``vcs`` reference, a ``pkg:github``/``pkg:bitbucket`` purl on those forges,
  the patches applied as ``bake-plan:patch`` properties;
- one ``container`` component per base image, pinned by the digest BuildKit resolved
  (``pkg:docker/<path>@<digest>`` on Docker Hub, else ``pkg:oci/<name>@<digest>`` with its
  ``repository_url``), with its platform;
- the input digest, target, arch, nightly and outcome as ``bake-plan:*`` properties; the image
  depends on every other component.

The serial number is a UUID made from the record's identity, and the timestamp its date: the same
record gives the same document.
"""

from __future__ import annotations

import datetime
import re
import urllib.parse
import uuid
from typing import List, Optional, Tuple

from bake.plan.names import DEFAULT_DOMAIN, split_reference

MEDIA_TYPE = "application/vnd.cyclonedx+json"
"""The media type of the JSON this module writes."""

SPEC_VERSION = "1.6"
"""The CycloneDX specification version written."""

_FORGES = {"github.com": "github", "bitbucket.org": "bitbucket"}
"""Hosts whose repositories have a purl type of their own."""

_HASH_NAMES = {"sha256": "SHA-256", "sha384": "SHA-384", "sha512": "SHA-512"}


def forge_repository(url: str) -> Optional[Tuple[str, str, str]]:
    """``(purl type, owner, name)`` of a repository URL on a forge with a purl type
    (``https://github.com/google/jax.git`` → ``("github", "google", "jax")``), else ``None``."""
    parts = urllib.parse.urlsplit(url if "://" in url else "ssh://" + url.replace(":", "/", 1))
    kind = _FORGES.get((parts.hostname or "").lower())
    path = parts.path.strip("/").removesuffix(".git").split("/")
    if kind is None or len(path) != 2 or not all(re.fullmatch(r"[A-Za-z0-9_.\-]+", p) for p in path):
        return None
    return kind, path[0], path[1]


def _image_purl(image: str, digest: Optional[str], platform: Optional[str] = None):
    """The purl of an image: ``pkg:docker`` on Docker Hub, else ``pkg:oci`` with its
    ``repository_url``; pinned to ``digest`` when known, else its tag. ``None`` when ``image`` is
    not an image reference."""
    from packageurl import PackageURL

    try:
        domain, path, tag, pinned = split_reference(image)
    except ValueError:
        return None
    version = digest or pinned or tag or "latest"
    qualifiers = {}
    if platform:
        qualifiers["arch"] = platform.split("/")[1] if "/" in platform else platform
    if domain == DEFAULT_DOMAIN:
        namespace, _, name = path.rpartition("/")
        return PackageURL(type="docker", namespace=namespace or None, name=name, version=version,
                          qualifiers=qualifiers or None)
    if tag and version != tag:
        qualifiers["tag"] = tag
    qualifiers["repository_url"] = f"{domain}/{path}"
    return PackageURL(type="oci", name=path.rpartition("/")[2].lower(), version=version, qualifiers=qualifiers)


def sbom_json(record: dict, tool_version: Optional[str] = None) -> str:
    """The CycloneDX 1.6 JSON document of one nightly record (see the module's docstring).

    :param record: a record (:func:`bake.plan.records.make_records`, or one read back from the
        registry); ``pins``, ``hashes``, ``sources``, ``base_images`` may be ``null``.
    :param tool_version: bake-plan's version, named as the tool that made it (default: this one).
    :returns: the JSON text, indented, ending in a newline.
    """
    from cyclonedx.model import (ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, Property,
                                 XsUri)
    from cyclonedx.model.bom import Bom, BomMetaData
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    from bake.version import DISTRIBUTION, __version__

    def props(**values) -> List[Property]:
        return [Property(name=f"bake-plan:{k.replace('_', '-')}", value=str(v)) for k, v in values.items()
                if v not in (None, "")]

    target, arch = record.get("target") or "image", record.get("arch") or ""
    repository = record.get("repository") or target
    tags = [t for t in record.get("tags") or [] if isinstance(t, str)]
    tag = tags[0].rsplit(":", 1)[1] if tags and ":" in tags[0].rsplit("/", 1)[-1] else None
    image = Component(
        type=ComponentType.CONTAINER, name=repository, version=record.get("image_digest") or tag,
        bom_ref=f"image:{repository}:{target}:{arch}",
        purl=_image_purl(f"{repository}:{tag}" if tag else repository, record.get("image_digest"),
                         record.get("platform")),
        properties=props(target=target, arch=arch, platform=record.get("platform"),
                         input_digest=record.get("input_digest"), built_in=record.get("built_in"),
                         outcome=record.get("outcome"), date=record.get("date")))
    components: List[Component] = []
    hashes = record.get("hashes") or {}
    for name, version in sorted((record.get("pins") or {}).items()):
        is_url = "://" in str(version)
        found = [HashType(alg=HashAlgorithm(_HASH_NAMES[a]), content=h) for a, _, h in
                 (str(x).partition(":") for x in hashes.get(name) or []) if a in _HASH_NAMES]
        components.append(Component(
            type=ComponentType.LIBRARY, name=name, version=None if is_url else str(version),
            bom_ref=f"pypi:{name}", purl=PackageURL(type="pypi", name=name, version=None if is_url else str(version)),
            hashes=found,
            external_references=[ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(str(version)))]
            if is_url else None))
    for key, source in sorted((record.get("sources") or {}).items()):
        url, ref = str(source.get("url") or ""), str(source.get("ref") or "")
        forge = forge_repository(url)
        name = forge[2] if forge else (url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") or key.lower())
        components.append(Component(
            type=ComponentType.LIBRARY, name=name, group=forge[1] if forge else None, version=ref or None,
            bom_ref=f"source:{key}",
            purl=PackageURL(type=forge[0], namespace=forge[1], name=forge[2], version=ref or None) if forge else None,
            external_references=[ExternalReference(type=ExternalReferenceType.VCS, url=XsUri(url))] if url else None,
            properties=props(source=key) + [Property(name="bake-plan:patch", value=str(p))
                                            for p in source.get("patches") or []]))
    for n, base in enumerate(record.get("base_images") or []):
        ref, digest, platform = str(base.get("image") or ""), base.get("digest"), base.get("platform")
        components.append(Component(
            type=ComponentType.CONTAINER, name=ref, version=digest, bom_ref=f"base:{n}:{ref}",
            purl=_image_purl(ref, digest, platform), properties=props(platform=platform)))
    stamp = None
    if record.get("date"):
        stamp = datetime.datetime.combine(datetime.date.fromisoformat(record["date"]), datetime.time(),
                                          datetime.timezone.utc)
    identity = "|".join(str(record.get(k)) for k in ("repository", "target", "arch", "date", "input_digest",
                                                      "image_digest"))
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, "bake-plan-record:" + identity),
              metadata=BomMetaData(component=image, timestamp=stamp or datetime.datetime.now(datetime.timezone.utc)),
              components=components)
    bom.metadata.tools.components.add(Component(type=ComponentType.APPLICATION, name=DISTRIBUTION,
                                                version=tool_version or __version__))
    bom.register_dependency(image, components)
    return JsonV1Dot6(bom).output_as_string(indent=2) + "\n"
