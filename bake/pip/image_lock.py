"""The lock files of ``bake-plan lock --in-image``: what each image's own compile wrote, with the
header ``--locked`` reads.

The compile runs in the images (:mod:`bake.run.image_lock`); this module only turns its output
into lock files: the same header a host lock has (:func:`bake.pip.lock.header`: target,
platforms, the digest of the stages' declared lines, the image's Python), ``resolver:
pip-compile (in the image)``, then the body as the image compiled it, in-image paths and all
(``name @ file:///opt/…whl``, ``-e file:///opt/src``). Nothing is skipped: every line, the ones
a Dockerfile wrote at build time too, was in the compile.

One lock per stage when every platform compiled the same body, else one per arch, as
:func:`bake.pip.lock.resolve_all` decides for a host lock.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional, Sequence, Tuple

from bake.errors import LockError
from bake.patterns import LazyPattern
from bake.pip.lock import HEADER, LockSpec, header, same_python
from bake.plan import dockerfile
from bake.plan.stage import Stage

RESOLVER = "pip-compile (in the image)"
"""The ``# bake-plan resolver:`` of a lock made in the image."""


def _in_image(spec: LockSpec) -> LockSpec:
    """``spec`` with every line counted as resolved (the image's compile saw them all): its header
    lists no skipped line. The digest (stage names and line texts) is unchanged."""
    lines = [line._replace(host=line.text, missing=None) for line in spec.lines]
    return dataclasses.replace(spec, lines=lines)


def lock_text(spec: LockSpec, body: str, python: str) -> str:
    """The whole lock of ``spec`` compiled in the image: the host lock's header (made by
    ``bake-plan lock --in-image``), ``resolver: pip-compile (in the image)``, then ``body``.

    :param body: ``requirements.txt`` as the image's ``bake-pip-finalize`` wrote it.
    :param python: the image's Python version (``"3.11.2"``).
    """
    head = header(_in_image(spec), python).replace(
        f"`bake-plan lock --target {spec.target}`", f"`bake-plan lock --in-image --target {spec.target}`", 1)
    return head + f"{HEADER}resolver: {RESOLVER}\n" + (body if body.endswith("\n") or not body else body + "\n")


def lock_texts(specs: Sequence[LockSpec],
               compiled: Mapping[str, Mapping[str, Tuple[str, str]]]) -> List[Tuple[LockSpec, str]]:
    """The lock files of ``specs`` from the images' compiles, in order: ``[(spec, text)]``.

    :param compiled: stage → platform → ``(body, python)`` (:func:`bake.run.image_lock.compile_in_images`).
    :raises LockError: a platform of a spec was not compiled, or the image's Python is not the
        Python the chain declares, compared at the declared precision (``"3.11"``: any 3.11;
        ``"3.11.2"``: that one).
    """
    out: List[Tuple[LockSpec, str]] = []
    for spec in specs:
        mine = {}
        for platform in spec.platforms:
            try:
                mine[platform] = compiled[spec.target][platform]
            except KeyError:
                raise LockError(f"lock --in-image: no compile of '{spec.target}' for {platform}") from None
            python = mine[platform][1]
            if spec.python and not same_python(python, spec.python):
                raise LockError(f"lock --in-image: the image of '{spec.target}' for {platform} has Python {python}, "
                                f"the chain declares python = \"{spec.python}\"; declare the image's Python")
        bodies = {body for body, _ in mine.values()}
        if len(bodies) == 1 and not spec.per_arch:
            body, python = mine[spec.platforms[0]]
            out.append((spec, lock_text(spec, body, python)))
        else:
            out += [(spec.for_platform(p), lock_text(spec.for_platform(p), *mine[p])) for p in spec.platforms]
    return out


_WRITE = LazyPattern(r"bake-write-requirements\s+(?:--wheels\b|[^\s;&|]+\s+(?P<lines>[^\s;&|]+))")
_DECLARED = {'"${REQUIREMENTS}"', '"$REQUIREMENTS"', "${REQUIREMENTS}", "$REQUIREMENTS"}


def build_time_lines(stage: Stage) -> Optional[str]:
    """The first ``RUN`` of ``stage``'s Dockerfile that writes requirement lines the stage does not
    declare (``bake-write-requirements --wheels …``, or lines other than ``"${REQUIREMENTS}"``): lines
    only the image's own compile sees, which a host lock cannot cover. ``None`` when there is no
    such step, for a one-target stage, or when the Dockerfile cannot be read here (a remote context).
    """
    if stage.kind != "mealkit":
        return None
    text = dockerfile.read(stage.context, stage.dockerfile, stage.dockerfile_inline)
    for instruction in dockerfile.instructions(text or ""):
        if not instruction.upper().startswith("RUN "):
            continue
        for found in _WRITE.finditer(instruction):
            if found.group("lines") is None or found.group("lines") not in _DECLARED:
                return instruction
    return None
