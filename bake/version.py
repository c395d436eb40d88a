"""bake-plan's version: the one place it is written (``pyproject.toml`` reads it from here)."""

__version__ = "0.1.0"

DISTRIBUTION = "bake-plan"


def install_requirement() -> str:
    """How the running bake-plan was installed, as a pip requirement that installs it again on a
    CI runner (the generated workflow's default when the configuration names no ``install``).

    The direct URL pip recorded for it (PEP 610 ``direct_url.json``, through
    :mod:`importlib.metadata`): a git checkout as ``bake-plan @ git+URL@REV`` (the revision asked
    for, else the commit), an archive URL as ``bake-plan @ URL``; else, and for a local directory or
    file (which a runner does not have), its version: ``bake-plan==0.1.0``.

    :returns: one requirement line, without a newline.
    """
    import json
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
        recorded = json.loads(dist.read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return f"{DISTRIBUTION}=={__version__}"
    if not isinstance(recorded, dict) or not isinstance(recorded.get("url"), str):
        return f"{DISTRIBUTION}=={__version__}"
    url = recorded["url"]
    if url.startswith("file:") or any(c.isspace() for c in url):
        return f"{DISTRIBUTION}=={__version__}"
    vcs = recorded.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        revision = vcs.get("requested_revision") or vcs.get("commit_id")
        url = f"{vcs['vcs']}+{url}" + (f"@{revision}" if isinstance(revision, str) and revision else "")
    subdirectory = recorded.get("subdirectory")
    if isinstance(subdirectory, str) and subdirectory:
        url += f"#subdirectory={subdirectory}"
    return f"{DISTRIBUTION} @ {url}"
