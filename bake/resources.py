"""Where the files bake-plan ships live (``stages/`` and ``docker-bake.hcl.tmpl``), and its cache.

An installed wheel carries them in ``bake/_data/`` (see ``pyproject.toml``); a source checkout
keeps them at the top of the tree (design.md). Paths are absolute so a written plan works when
bake runs from another directory.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

_PACKAGE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def data_dir() -> Path:
    """The directory holding ``stages/`` and the template: ``bake/_data`` when installed, else the checkout root."""
    installed = _PACKAGE / "_data"
    if (installed / "stages").is_dir():
        return installed
    return _PACKAGE.parent


def stages_dir() -> Path:
    """Absolute path of ``stages/``: Dockerfiles and the scripts they run."""
    return data_dir() / "stages"


def stage_dir(name: str) -> Path:
    """Absolute path of one built-in stage's build context, ``stages/<name>``."""
    return stages_dir() / name


def template_path() -> Path:
    """Absolute path of ``docker-bake.hcl.tmpl``."""
    return data_dir() / "docker-bake.hcl.tmpl"


def cache_dir() -> Optional[str]:
    """``$XDG_CACHE_HOME/bake-plan`` (``~/.cache/bake-plan`` by default), where bake-plan remembers
    what it can ask again (the entry points, buildx's version, pip-tools' wheels); ``None`` when there
    is no cache directory: the XDG spec ignores a relative ``$XDG_CACHE_HOME``, and a service user's
    ``HOME=/nonexistent`` has none. Nothing is created here."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home) or not os.path.isdir(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "bake-plan")
