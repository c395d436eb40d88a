"""The input digest of a target: one sha256 of everything that decides its image.

Pure (no Docker, no network): it reads the plan's finished targets and the local files they
name. What goes in, per target (docs/nightly-record.md):

- every attribute of the target except the ones below, as canonical JSON (the Dockerfile
  ``target``, ``platforms``, ``dockerfile-inline``, a plugin's own attributes…);
- the build ``context`` and every named context that is a local directory: each file under it,
  walked in sorted order, as its relative path, its mode and the sha256 of its content (a
  symbolic link as the text it points to, a directory as its path and mode), less what its
  ignore file leaves out of the build (:mod:`bake.plan.dockerignore`: ``<Dockerfile>.dockerignore``
  or the context's ``.dockerignore``; a named context's own ``.dockerignore``);
- the Dockerfile's own text (``dockerfile`` under the context, or an absolute path);
- the args, without ``SOURCE_DATE_EPOCH`` (the date) and ``CACHE_SILO`` (a cache key): so the
  base image reference (``BASE_IMAGE``), the source commits and patches (``URLREF_*``,
  ``PATCHES_*``), the requirement lines; a ``--locked`` lock is the ``pip-lock`` context directory;
- the labels, without ``org.opencontainers.image.created`` (the date) and :data:`INPUT_DIGEST_LABEL`;
- a ``target:`` named context as the input digest of that target, so a change propagates down
  the chain; a ``docker-image://…@sha256:…`` or ``oci-layout://…@sha256:…`` one as its digest
  alone (not the registry or tag it was found at); any other reference as its text;
- the digest of each image a ``FROM`` line names by tag (:func:`base_references`), when the
  caller asked the registry for it (``resolved``: :func:`bake.run.build.resolve_base_digests`,
  which ``build --skip-unchanged`` runs); planning alone asks no registry, and the tag counts as
  its text.

Not inputs: ``tags``, ``cache-from``, ``cache-to``, ``output``, ``attest`` (where the image goes
and what is attached to it, not what it is), the date, the registry.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from typing import Dict, List, Mapping, Optional, Tuple

from bake.plan.dockerfile import from_images
from bake.plan.dockerfile import read as read_dockerfile
from bake.plan.dockerignore import PatternMatcher, ignore_file, matcher_for
from bake.plan.names import context_name

INPUT_DIGEST_LABEL = "io.bake-plan.input-digest"
"""The label every target of a plan carries: ``sha256:<64 hex>``, its input digest."""

NOT_INPUT_ATTRIBUTES = frozenset({"tags", "cache-from", "cache-to", "output", "attest"})
"""Target attributes that say where an image goes or what is attached to it, not what it is."""

NOT_INPUT_ARGS = frozenset({"SOURCE_DATE_EPOCH", "CACHE_SILO"})
"""Args that carry the date or a cache key."""

NOT_INPUT_LABELS = frozenset({"org.opencontainers.image.created", INPUT_DIGEST_LABEL})
"""Labels that carry the date, or the input digest itself."""

_CHUNK = 1 << 20
_FILES: Dict[Tuple[str, int, int, int], str] = {}
"""``(path, mtime_ns, size, inode)`` → sha256 of the content, for the life of the process."""


def file_digest(path: str, st: Optional[os.stat_result] = None) -> str:
    """The hex sha256 of a regular file's content, remembered by ``(path, mtime_ns, size,
    inode)`` for the life of the process; ``"unreadable"`` when it cannot be read (buildx
    would fail to send it, so the build fails anyway).

    :param st: its ``os.lstat`` result, when the caller has it.
    """
    try:
        st = st or os.stat(path)
    except OSError:
        return "unreadable"
    key = (path, st.st_mtime_ns, st.st_size, st.st_ino)
    found = _FILES.get(key)
    if found is None:
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(_CHUNK), b""):
                    h.update(chunk)
        except OSError:
            return "unreadable"
        found = _FILES[key] = h.hexdigest()
    return found


class Hasher:
    """Digests of local directories, each walked once per :class:`Hasher` (one plan)."""

    def __init__(self) -> None:
        self._trees: Dict[Tuple[str, Optional[str]], Optional[str]] = {}  # (directory, ignore file) → digest
        self._places: Dict[Tuple[str, Optional[str]], Optional[str]] = {}  # (directory, dockerfile) → digest
        self._dockerfiles: Dict[Tuple[str, str], Optional[str]] = {}

    def tree(self, directory: str, dockerfile: Optional[str] = None) -> Optional[str]:
        """``sha256:<hex>`` of the part of a directory's tree a build of it sends (paths, modes,
        contents; symbolic links as their text, not followed; what its ignore file leaves out,
        left out: :func:`bake.plan.dockerignore.ignore_file` of ``directory`` and
        ``dockerfile``), or ``None`` when ``directory`` is not a local directory (a URL, a
        missing path). An ignore file with a pattern BuildKit refuses leaves nothing out (the
        build fails on it anyway).

        :raises StageError: the ignore file is larger than
            :data:`bake.plan.dockerignore.IGNORE_FILE_BYTES`, or a FIFO or a device."""
        place = (directory, dockerfile)
        if place not in self._places:  # a family's targets share a few contexts: each looked up once
            self._places[place] = self._tree(directory, dockerfile)
        return self._places[place]

    def _tree(self, directory: str, dockerfile: Optional[str]) -> Optional[str]:
        if not os.path.isdir(directory):
            return None
        ignore = ignore_file(directory, dockerfile)
        key = (directory, ignore)
        if key not in self._trees:
            try:
                matcher = matcher_for(ignore)
            except ValueError:
                matcher = None
            self._trees[key] = _tree(directory, matcher)
        return self._trees[key]


def _tree(root: str, matcher: Optional[PatternMatcher] = None) -> str:
    h = hashlib.sha256()
    for top, dirs, files in os.walk(root, followlinks=False):
        rel_top = os.path.relpath(top, root).replace(os.sep, "/")
        if matcher is not None and not matcher.exclusions:  # a directory left out: nothing under it is sent
            dirs[:] = [d for d in dirs if not matcher.excluded(d if rel_top == "." else f"{rel_top}/{d}")]
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            rel = name if rel_top == "." else f"{rel_top}/{name}"
            if matcher is not None and matcher.excluded(rel):
                continue  # a directory left out is still walked when a "!" pattern may put back what is under it
            try:
                st = os.lstat(path)
            except OSError:
                continue  # gone while walking
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                try:
                    what = "l " + os.readlink(path)
                except OSError:
                    what = "l ?"
            elif stat.S_ISDIR(st.st_mode):
                what = "d"
            elif stat.S_ISREG(st.st_mode):
                what = "f " + file_digest(path, st)
            else:
                what = "o"
            h.update(json.dumps([rel, f"{mode:o}", what]).encode("utf-8", "surrogateescape") + b"\n")
    return "sha256:" + h.hexdigest()


def pinned_digest(value: str) -> Optional[str]:
    """The ``sha256:…`` a ``docker-image://`` or ``oci-layout://`` named-context value is pinned
    to (``…@sha256:<64 hex>``), else ``None``."""
    if value.startswith(("docker-image://", "oci-layout://")) and "@sha256:" in value:
        return "sha256:" + value.rsplit("@sha256:", 1)[1]
    return None


def _dockerfile(target: dict, hasher: Hasher) -> Optional[str]:
    """The Dockerfile's content digest, when it is a local file."""
    if "dockerfile-inline" in target:
        return None
    key = (str(target.get("context") or "."), str(target.get("dockerfile") or "Dockerfile"))
    found = hasher._dockerfiles.get(key, False)
    if found is False:
        context, name = key
        path = name if os.path.isabs(name) else os.path.join(context, name)
        found = hasher._dockerfiles[key] = file_digest(path) if os.path.isfile(path) else None
    return found


def base_references(target: dict) -> List[str]:
    """The images a target starts from that only a registry can tell the digest of: its
    Dockerfile's ``FROM`` images (:func:`bake.plan.dockerfile.from_images`, with the target's
    args), less those its named contexts replace (a ``target:``, a pinned ``docker-image://``)
    and those pinned by digest already (``…@sha256:…``); a ``FROM`` image a named context replaces
    by tag (``docker-image://REF`` with no digest: a ``--base-image ORIG=REPL:tag``) counts as
    ``REF``. ``[]`` when the Dockerfile cannot be read here."""
    text = read_dockerfile(target.get("context"), target.get("dockerfile") or "Dockerfile",
                           target.get("dockerfile-inline"))
    if text is None:
        return []
    contexts = target.get("contexts") or {}
    out = []
    for image in from_images(text, target.get("args") or {}):
        try:
            key = context_name(image)
        except ValueError:
            continue  # not an image reference: BuildKit refuses it
        value = str(contexts.get(image, contexts.get(key, "")))
        if value.startswith("docker-image://") and "@" not in value:  # --base-image ORIG=REPL:tag
            out.append(value[len("docker-image://"):])
        elif image in contexts or key in contexts or "@" in image:
            continue
        else:
            out.append(image)
    return list(dict.fromkeys(out))


def _inputs(target: dict, digest_of, hasher: Hasher, resolved: Optional[Mapping[str, Optional[str]]] = None) -> dict:
    out: dict = {}
    if resolved is not None:
        refs = base_references(target)
        if refs:
            out["base-image-digests"] = {ref: resolved.get(ref) or "unresolved" for ref in refs}
    for attr in sorted(target):
        if attr in NOT_INPUT_ATTRIBUTES:
            continue
        value = target[attr]
        if attr == "args":
            value = {k: v for k, v in value.items() if k not in NOT_INPUT_ARGS}
        elif attr == "labels":
            value = {k: v for k, v in value.items() if k not in NOT_INPUT_LABELS}
        elif attr == "context":
            value = {"text": value, "tree": hasher.tree(str(value), str(target.get("dockerfile") or "Dockerfile"))}
            if value["tree"] is not None:
                value["text"] = None  # where the directory is does not decide the image
        elif attr == "contexts":
            value = {name: _context(str(v), digest_of, hasher) for name, v in value.items()}
        out[attr] = value
    out["dockerfile-content"] = _dockerfile(target, hasher)
    return out


def _context(value: str, digest_of, hasher: Hasher) -> str:
    if value.startswith("target:"):
        return "target " + digest_of(value[len("target:"):])
    pinned = pinned_digest(value)
    if pinned:
        return "image " + pinned
    tree = hasher.tree(value)
    return "tree " + tree if tree is not None else "text " + value


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""How a target's inputs become the text that is hashed: keys sorted, no spaces, text as it is
(one encoder for every target, as ``json.dumps`` with these options would make one per call)."""


def input_digests(targets: Mapping[str, dict], hasher: Optional[Hasher] = None,
                  resolved: Optional[Mapping[str, Optional[str]]] = None) -> Dict[str, str]:
    """Each target's input digest, ``sha256:<64 hex>`` (see the module's docstring for what
    goes in and what does not).

    :param targets: the plan's ``target`` block (bake target name → attributes); a ``target:``
        named context naming a target not in it counts as its text.
    :param hasher: directory digests already made in this run (one is made when ``None``).
    :param resolved: image reference → the digest its registry gave (``sha256:…``, ``None`` when
        it did not answer): each target's :func:`base_references` count with those digests (one
        the registry did not give as ``unresolved``, so the target counts as changed). ``None``:
        the references count as their text alone (planning asks no registry).
    :returns: bake target name → digest, for every target.
    """
    hasher = hasher or Hasher()
    done: Dict[str, str] = {}
    visiting = set()

    def digest_of(name: str) -> str:
        if name in done:
            return done[name]
        if name not in targets or name in visiting:  # outside the plan, or a cycle buildx refuses
            return "name " + name
        visiting.add(name)
        body = _CANONICAL.encode(_inputs(targets[name], digest_of, hasher, resolved))
        visiting.discard(name)
        done[name] = "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogateescape")).hexdigest()
        return done[name]

    for name in targets:
        digest_of(name)
    return done


def label_targets(targets: Mapping[str, dict], hasher: Optional[Hasher] = None,
                  resolved: Optional[Mapping[str, Optional[str]]] = None) -> Dict[str, str]:
    """Compute :func:`input_digests` (``resolved``: the base images' digests, as there) and write
    each as the :data:`INPUT_DIGEST_LABEL` label of its target (in place). :returns: bake target
    name → digest."""
    digests = input_digests(targets, hasher, resolved)
    for name, digest in digests.items():
        targets[name].setdefault("labels", {})[INPUT_DIGEST_LABEL] = digest
    return digests
