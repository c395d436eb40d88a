"""Variants: one stage declared for a matrix of toolchains, expanded into concrete stages.

A stage declares axes and how a combination is tagged::

    Stage(name="xla-ci", ...,
          variants={"python": ("3.10", "3.12"), "cuda": ("12.1", "12.4")},
          variant_format="dev-{python}_cuda_{cuda}",
          variant_args={"python": "python_version", "cuda": "CUDA_VERSION"},
          base_image=".../development:{python}_cuda_{cuda}")

Before composition, :func:`expand` turns it into one ordinary stage per combination, so the plan
holds plain targets and no bake ``matrix`` (buildx 0.11+): buildx 0.13 and ``--set`` overrides
keep working. Each concrete stage gets:

- a name: the declared name plus ``-<value>`` for every axis with more than one value
  (``xla-ci-3.10-12.1``; the bake target is ``xla-ci-3_10-12_1``). A stage whose axes each have
  one value keeps its own name, so a matrix of one is the stage as it always was;
- ``variant``: ``variant_format`` filled in (``dev-3.10_cuda_12.1``), which the default policies
  (:mod:`bake.plan.policies`) use for tags (``dev-3.10_cuda_12.1``, ``dev-3.10_cuda_12.1-nightly-DATE``)
  and the cache key (``cache-silo-<cache_scope or declared name>-dev-3.10_cuda_12.1``);
- build args: each axis's value under ``variant_args[axis]`` (default: the axis name), and
  ``{axis}`` placeholders in ``base_image`` and in arg values filled in;
- ``variants`` narrowed to its own combination (one value per axis) and ``variant_of`` set to the
  declared name when the name changed.

Children: a stage that builds on (``parent``) or copies from (``uses``) a variant stage inherits
its axes: one concrete child per combination, each on the matching concrete parent. Its own axes,
if any, multiply in; an own axis may not repeat an inherited one. Without a ``variant_format`` of
its own, a child uses its parent's, with ``-{axis}`` appended for each own axis.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple

from bake.errors import StageError
from bake.patterns import LazyPattern
from bake.plan.names import ARG_NAME, check_reference, check_tag
from bake.plan.stage import Stage, dependencies

_AXIS = LazyPattern(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_VALUE = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_FIELD = LazyPattern(r"\{([^{}]*)\}")


def check(stage, fail: Callable[[str, str], Exception]) -> dict:
    """Check a declared stage's variant fields (called by :func:`bake.plan.validate.validate`).

    :param fail: ``fail(field, message)`` gives the exception to raise (it names plugin and stage).
    :returns: the normalised fields: ``variants`` (axis → tuple of values), ``variant_args``.
    :raises: what ``fail`` gives, for a malformed axis, value, format or arg name.
    """
    variants = stage.variants
    if not isinstance(variants, Mapping):
        raise fail("variants", f"expected a mapping of axis name to a list of values, got {type(variants).__name__}")
    args = stage.variant_args
    if type(variants) is dict and type(args) is dict and not variants and not args and stage.variant_format is None:
        return {"variants": variants, "variant_args": args}  # no variants (most stages): the plugin's dicts kept
    axes: Dict[str, Tuple[str, ...]] = {}
    for axis, values in variants.items():
        if not isinstance(axis, str) or not _AXIS.match(axis):
            raise fail("variants", f"axis {axis!r} is not a name ([A-Za-z_][A-Za-z0-9_]*)")
        if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)) or not values:
            raise fail("variants", f"axis {axis!r}: expected a non-empty list of strings")
        for value in values:
            if not isinstance(value, str) or not _VALUE.match(value):
                raise fail("variants", f"axis {axis!r}: value {value!r} must match [A-Za-z0-9][A-Za-z0-9_.-]*")
        if len(set(values)) != len(values):
            raise fail("variants", f"axis {axis!r} lists a value twice")
        axes[axis] = tuple(values)
    if stage.variant_format is not None:
        if not axes:
            raise fail("variant_format", "only a stage with variants has a variant_format")
        if not isinstance(stage.variant_format, str) or not stage.variant_format:
            raise fail("variant_format", "expected a non-empty string such as 'dev-{python}_cuda_{cuda}'")
        for name in _FIELD.findall(stage.variant_format):
            if name not in axes:
                raise fail("variant_format", f"'{{{name}}}' is not an axis ({', '.join(axes)})")
    if not isinstance(args, Mapping):
        raise fail("variant_args", f"expected a mapping of axis to build-arg name, got {type(args).__name__}")
    for axis, arg in args.items():
        if axis not in axes:
            raise fail("variant_args", f"{axis!r} is not an axis ({', '.join(axes) or 'none declared'})")
        if not isinstance(arg, str) or not ARG_NAME.match(arg):
            raise fail("variant_args", f"axis {axis!r}: {arg!r} is not a valid build-arg name")
    if axes and stage.variant is not None:
        raise fail("variant", "a stage with variants gets its variant tag from variant_format; drop 'variant'")
    return {"variants": axes, "variant_args": dict(args)}


def fill(text: Optional[str], values: Mapping[str, str]) -> Optional[str]:
    """``{axis}`` placeholders in ``text`` replaced by their values; other braces stay as they are
    (``${VAR}``, ``%{ if }`` and JSON in args are not ours)."""
    if text is None:
        return None
    return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), text)


class _Matrix(NamedTuple):
    """The axes a stage varies along: inherited ones first, then its own."""

    axes: Dict[str, Tuple[str, ...]]
    own: Tuple[str, ...]
    fmt: Optional[str]
    args: Dict[str, str]  # axis → build-arg name

    def name_of(self, declared: str, values: Mapping[str, str]) -> str:
        return declared + "".join(f"-{values[a]}" for a, vals in self.axes.items() if len(vals) > 1)


_NONE = _Matrix(axes={}, own=(), fmt=None, args={})


def expand(stages: Dict[str, Stage]) -> Dict[str, Stage]:
    """Every stage with variants (declared or inherited) replaced by its concrete stages.

    :param stages: validated stages by name, in declaration order.
    :returns: stages by name; a family without variants comes back as it is.
    :raises StageError: a concrete name clashes with another stage, two variants of a stage get
        the same variant tag, a filled-in tag is not a valid tag, or a child's inherited axes
        disagree / repeat its own.
    """

    if not any(s.variants for s in stages.values()):
        return stages
    matrices = _matrices(stages, _on_cycles(stages, dependencies))

    def matrix(name: str) -> _Matrix:
        return matrices.get(name, _NONE)

    out: Dict[str, Stage] = {}
    for stage in stages.values():
        m = matrix(stage.name)
        if not m.axes:
            _put(out, stage, stages)
            continue
        tags: Dict[str, str] = {}
        for combo in itertools.product(*m.axes.values()):
            values = dict(zip(m.axes, combo))
            concrete = _concrete(stage, m, values, matrix, dependencies)
            if concrete.variant in tags:
                raise StageError(
                    f"plugin '{stage.plugin}', stage '{stage.name}': variants '{tags[concrete.variant]}' and "
                    f"'{concrete.name}' both get the variant tag '{concrete.variant}'; put every axis in variant_format"
                )
            tags[concrete.variant] = concrete.name
            _put(out, concrete, stages)
    return out


def _matrices(stages: Dict[str, Stage], cyclic: Set[str]) -> Dict[str, _Matrix]:
    """Every stage's :class:`_Matrix`, each worked out after those of its dependencies.

    Iterative (an explicit stack, not recursion through the parents), so a family thousands of
    stages deep is as fine as a short one. A missing dependency or a stage on a cycle gets no
    axes here: composition reports it, on the declared names.
    """
    matrices: Dict[str, _Matrix] = {}
    for root in stages:
        stack = [root]
        while stack:
            name = stack[-1]
            stage = stages.get(name)
            if name in matrices or stage is None or name in cyclic:
                matrices.setdefault(name, _NONE)
                stack.pop()
                continue
            todo = [dep for dep in dependencies(stage) if dep not in matrices]
            if todo:  # the dependencies first; this stage stays on the stack until they are done
                stack.extend(reversed(todo))
                continue
            matrices[name] = _matrix_of(stage, matrices.__getitem__, dependencies)
            stack.pop()
    return matrices


def _matrix_of(stage, matrix, dependencies) -> _Matrix:
    axes: Dict[str, Tuple[str, ...]] = {}
    source: Dict[str, str] = {}
    args: Dict[str, str] = {}
    fmt = None
    for dep in dependencies(stage):
        inherited = matrix(dep)
        for axis, values in inherited.axes.items():
            if axis in axes and axes[axis] != values:
                raise StageError(
                    f"plugin '{stage.plugin}', stage '{stage.name}': it builds on '{source[axis]}' and '{dep}', "
                    f"whose variants differ on axis '{axis}'"
                )
            axes.setdefault(axis, values)
            source.setdefault(axis, dep)
        for axis, arg in inherited.args.items():
            args.setdefault(axis, arg)
        if fmt is None and inherited.axes:
            fmt = inherited.fmt
    own = tuple(stage.variants)
    for axis in own:
        if axis in axes:
            raise StageError(
                f"plugin '{stage.plugin}', stage '{stage.name}', field 'variants': axis '{axis}' is inherited "
                f"from stage '{source[axis]}'; a child varies along its parent's axes already"
            )
        axes[axis] = tuple(stage.variants[axis])
        args[axis] = stage.variant_args.get(axis, axis)
    if stage.variant_format is not None:
        fmt = stage.variant_format
    elif fmt is not None:
        fmt += "".join(f"-{{{axis}}}" for axis in own)
    elif axes:
        fmt = "_".join(f"{axis}{{{axis}}}" for axis in axes)
    return _Matrix(axes=axes, own=own, fmt=fmt, args=args)


def _concrete(stage, m: _Matrix, values: Dict[str, str], matrix, dependencies):
    def dep_name(dep: str) -> str:
        dm = matrix(dep)
        return dm.name_of(dep, values) if dm.axes else dep

    variant = fill(m.fmt, values)
    try:
        check_tag(variant)
    except ValueError as err:
        raise StageError(f"plugin '{stage.plugin}', stage '{stage.name}', field 'variant_format': {err}") from None
    inherited_args = {m.args[a]: values[a] for a in m.axes if a not in m.own}
    own_args = {m.args[a]: values[a] for a in m.own}
    name = m.name_of(stage.name, values)
    base_image = fill(stage.base_image, values)
    if base_image is not None:

        try:
            check_reference(base_image)
        except ValueError as err:
            raise StageError(f"plugin '{stage.plugin}', stage '{name}', field 'base_image': {err}") from None
    return dataclasses.replace(
        stage,
        name=name,
        parent=dep_name(stage.parent) if stage.parent else None,
        uses={ctx: dep_name(used) for ctx, used in stage.uses.items()},
        base_image=base_image,
        args={**inherited_args, **{k: fill(v, values) for k, v in stage.args.items()}, **own_args},
        variant=variant,
        variants={a: (values[a],) for a in m.axes},
        variant_format=m.fmt,
        variant_args=dict(m.args),
        cache_scope=stage.cache_scope or stage.name,
        variant_of=stage.name if name != stage.name else None,
    )


def _put(out: dict, stage, declared: dict) -> None:
    if stage.name in out:
        other = out[stage.name]
        raise StageError(
            f"stage '{stage.name}' (a variant of '{stage.variant_of or other.variant_of}') is defined twice: "
            f"by plugin '{other.plugin}' and by plugin '{stage.plugin}'"
        )
    if stage.variant_of and stage.name in declared:
        other = declared[stage.name]
        raise StageError(
            f"variant '{stage.name}' of stage '{stage.variant_of}' (plugin '{stage.plugin}') has the name of "
            f"a stage of plugin '{other.plugin}'"
        )
    out[stage.name] = stage


def _on_cycles(stages: dict, dependencies) -> Set[str]:
    """Names of the stages that lie on a dependency cycle (iterative DFS, so deep families are fine)."""
    on_cycle: Set[str] = set()
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    for root in stages:
        if root in state:
            continue
        path: List[str] = []
        stack = [(root, iter(dependencies(stages[root])))]
        state[root] = 1
        path.append(root)
        while stack:
            name, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                path.pop()
                state[name] = 2
            elif dep in stages and state.get(dep) == 1:
                on_cycle.update(path[path.index(dep):])
            elif dep in stages and dep not in state:
                state[dep] = 1
                path.append(dep)
                stack.append((dep, iter(dependencies(stages[dep]))))
    return on_cycle
