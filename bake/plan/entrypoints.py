"""The installed ``bake_plan`` entry points, remembered while nothing on ``sys.path`` changes.

Finding them is the standard library's job (:func:`importlib.metadata.entry_points`), but
importing :mod:`importlib.metadata` (with ``email``, ``zipfile``, ``csv``, ``socket``) and reading
every distribution's metadata is about a quarter of a plan's cold start. So the answer
is kept in ``$XDG_CACHE_HOME/bake-plan/entry-points-<interpreter>.json`` (``~/.cache`` by default)
with a stamp of what it was read from, and a later run whose stamp is the same takes it from there
without importing :mod:`importlib.metadata`.

The stamp: the interpreter, ``sys.path`` in order, and the ``stat`` (device, inode, size, mtime in
ns) of each of its entries, of each ``entry_points.txt`` that gave a ``bake_plan`` entry point and
of every ``*.dist-info``/``*.egg-info`` ``entry_points.txt`` in a ``sys.path`` directory.
``pip install``/``uninstall`` (also ``-e``, ``--target`` a directory on ``PYTHONPATH``) adds or
removes a ``*.dist-info`` directory, which changes its ``sys.path`` entry's mtime; editing an
``entry_points.txt`` in place (``setup.py egg_info``) changes that file's. Any difference, an
unreadable or foreign file, or no cache directory (no ``$XDG_CACHE_HOME`` and no home directory:
nothing is made) means one scan through :mod:`importlib.metadata`, as without a cache; a cache
that cannot be written is skipped silently.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import List, NamedTuple, Optional, Sequence

from bake.errors import OutputError, PluginError
from bake.output import write_atomic
from bake.resources import cache_dir
from bake.plan.hookspecs import PROJECT as GROUP  # the entry-point group: [project.entry-points.bake_plan]

_FORMAT = 1


class EntryPoint(NamedTuple):
    """One ``bake_plan`` entry point: ``name = value`` from distribution ``dist`` (its name, or
    ``None``), and the ``entry_points.txt`` it came from when the distribution is a directory."""

    name: str
    value: str
    dist: Optional[str]
    source: Optional[str]

    def load(self) -> object:
        """Import the module and follow the attributes, as :meth:`importlib.metadata.EntryPoint.load`.

        :raises ImportError, AttributeError: as importing or following them does.
        """
        import importlib

        module, _, attrs = self.value.partition(":")
        obj = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            obj = getattr(obj, attr)
        return obj


def entry_points() -> List[EntryPoint]:
    """The installed ``bake_plan`` entry points, one per name, sorted by name (so the load order,
    and so the hook order, does not depend on ``sys.path``).

    :returns: ``[EntryPoint(name, value, dist, source)]``; from the cache when its stamp holds.
    :raises PluginError: two distributions give an entry point of one name (pluggy registers a
        plugin by that name, so one would be dropped with its stages): both are named.
    """
    path = _cache_file()
    cached = _read(path)
    if cached is not None:
        return cached
    found = _scan()
    if path is not None:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, json.dumps({"format": _FORMAT, "stamp": _stamp([e.source for e in found]),
                                           "entry_points": [list(e) for e in found]}))
        except (OSError, OutputError):
            pass  # a read-only or full cache directory: the next run scans again
    return found


def _scan() -> List[EntryPoint]:
    from importlib import metadata

    eps = metadata.entry_points()
    selected = eps.select(group=GROUP) if hasattr(eps, "select") else eps.get(GROUP, [])
    unique = {}
    for ep in selected:
        dist = getattr(ep, "dist", None)
        where = getattr(dist, "_path", None)  # PathDistribution: the *.dist-info directory
        # A distribution inside a zip has no file of its own to stamp: the zip on sys.path is stamped.
        source = os.path.join(where, "entry_points.txt") if isinstance(where, (str, os.PathLike)) else None
        found = EntryPoint(ep.name, ep.value, getattr(dist, "name", None), source)
        other = unique.get(ep.name)
        if other is not None and (other.dist, other.value) != (found.dist, found.value):
            # One would be dropped and its stages would vanish ("unknown target"): say so instead.
            raise PluginError(f"two installed distributions give the bake_plan entry point '{ep.name}': "
                              f"{_who(other)} and {_who(found)}; uninstall one, or rename the entry point in "
                              "one's [project.entry-points.bake_plan]")
        unique.setdefault(ep.name, found)
    return [unique[name] for name in sorted(unique)]


def _who(ep: EntryPoint) -> str:
    """A distribution as the duplicate entry point's error names it: ``'name' (module:attr)``."""
    return f"'{ep.dist or '?'}' ({ep.value})"


def _cache_file() -> Optional[str]:
    base = cache_dir()
    if base is None:
        return None
    interpreter = f"{zlib.crc32(os.fsencode(sys.executable)):08x}"  # one file per interpreter (venv)
    return os.path.join(base, f"entry-points-{interpreter}.json")


def _stamp(sources: Sequence[Optional[str]]) -> list:
    def stat(path: str) -> Optional[list]:
        try:
            st = os.stat(path or ".")
        except OSError:
            return None
        return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]

    files = dict.fromkeys([*(source for source in sources if source), *_metadata_files()])
    return [sys.executable, [[entry, stat(entry)] for entry in sys.path], [[file, stat(file)] for file in files]]


def _metadata_files() -> List[str]:
    """The ``entry_points.txt`` of every ``*.dist-info`` and ``*.egg-info`` directly in a
    ``sys.path`` directory, where :mod:`importlib.metadata` looks, whether it is there or not: one
    rewritten in place (``setup.py egg_info`` does) changes no directory's mtime."""
    out = []
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # not a directory (a zip is stamped as a sys.path entry) or gone
            continue
        out += [os.path.join(entry, name, "entry_points.txt") for name in names
                if name.endswith((".dist-info", ".egg-info"))]
    return out


def _read(path: Optional[str]) -> Optional[List[EntryPoint]]:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if data["format"] != _FORMAT:
            return None
        found = [EntryPoint(*row) for row in data["entry_points"]]
        if data["stamp"] != _stamp([e.source for e in found]):
            return None
        return found
    except (OSError, ValueError, KeyError, TypeError):
        return None
