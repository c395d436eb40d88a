#!/usr/bin/env python3
"""bake-plan's lock benchmark: ``bake-plan lock`` (A) against plain pip-compile (P) and
``uv pip compile`` (U), on the same requirement files of a real family: three stages of the JAX
stack, or (``--set stack``) the real JAX stack of two stages and 228 pins.

The family is ``bench/bake-plan-lockbench`` (the JAX stack over ``lockbench-root`` ←
``lockbench-nn`` ← ``lockbench-ckpt``, Python 3.11 on linux/amd64), a real plugin installed into
a scratch directory on ``PYTHONPATH``. P and U read the very ``requirements-<stage>.in`` files A
writes (same names, same lines), with the same index options, for the same Python and platform:
U as ``--python-version 3.11 --python-platform x86_64-manylinux_2_28`` (what A gives uv for a
chain that declares Python 3.11, with the options bake-plan gives uv, ``bake.pip.lock.UV_OPTIONS``),
P with the running Python (it resolves for its own interpreter). With ``--python host`` the
family declares no Python: A resolves for the interpreter running it, and U gets ``--python``
that interpreter (what A gives uv then).

``--set stack`` is ``bench/bake-plan-stackbench``: ``pax-root`` (jax, jaxlib and flax, pinned)
← ``pax-leaf`` (paxml and praxis), ``python="3.10.13"``, ``glibc="2.36"``, linux/amd64; U gets
``--python-version 3.10.13 --python-platform x86_64-manylinux_2_36``. Its wheels (about 900 MB)
are made once, online: ``bake-plan lock`` against uv's default index, then ``bake-plan
wheelhouse`` of that lock with pip's own configuration (it builds the two pins that exist only
as sdists into wheels), kept in ``~/.cache/bake-plan-bench/lock-wheels-stack``. No P: the stack
needs Python 3.10, and pip-compile resolves for the Python running it.

The wheels are downloaded once, with pip's own configuration, into ``~/.cache/bake-plan-bench/``
(``$BAKE_PLAN_BENCH_CACHE``; reused by later runs), and every side then runs with ``--no-index -f DIR``, so the figures are
not the network's. Each side's caches are the benchmark's own: warm (one directory per side, filled
by a warm-up run) and cold (a fresh ``UV_CACHE_DIR``, ``PIP_CACHE_DIR`` and ``XDG_CACHE_HOME`` per
run, passed through the environment, so bake-plan's uv gets them too). Runs alternate A, P, U;
the report gives medians and the ratios A/U and A/P. The warm-up also checks that A's lock, less
its ``# bake-plan`` header, is byte for byte U's output, and has P's pins.

F (``bake-plan graph --target …``, in the same rotation) is bake-plan's floor: what any bake-plan
command costs before its own work (about 0.1 s: a Python interpreter, the imports, the plugins and
the chain). uv resolves the three-stage family from local wheels in tens of milliseconds, less
than F, so a Python program cannot take ≤ 1.1 × uv as a whole (checked, and missed there), and
the report checks the lock's own work as well: A − F ≤ 1.1 × U, that is A ≤ F + 1.1 × U (the
lock at resolver speed; docs/benchmarks.md's target on the real stack).

Standalone (``bench/run.py`` calls :func:`measure`, :func:`report` and :func:`checks` too)::

    python bench/lock.py --repeat 7 --markdown
    python bench/lock.py --set stack --repeat 7 --markdown --check
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from run import table_report, timed  # bench/run.py, beside this script: the one timer of the benchmarks

ROOT = Path(__file__).resolve().parent.parent
FAMILY_PACKAGE = ROOT / "bench" / "bake-plan-lockbench"
STACK_PACKAGE = ROOT / "bench" / "bake-plan-stackbench"
CACHE_ROOT = Path(os.environ.get("BAKE_PLAN_BENCH_CACHE")
                  or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bake-plan-bench")
"""Where the downloaded wheels are kept between runs: ``$BAKE_PLAN_BENCH_CACHE``, else
``~/.cache/bake-plan-bench``."""
MAX_RATIO = 1.1
"""docs/benchmarks.md: ``bake-plan lock`` takes at most 1.1 × ``uv pip compile`` (A), and its own
work does (A − F ≤ 1.1 × U, that is A ≤ F + 1.1 × U: the target on the real stack), warm and cold."""
SIDES = ("bake-plan lock", "pip-compile", "uv pip compile", "bake-plan floor")
"""A, P, U and F: F is ``bake-plan graph`` of the same target, a new process that does what A does
before it resolves (interpreter, imports, plugins, the chain) and nothing else."""
OTHER = "other bake-plan lock"
"""With ``--compare BAKE_PLAN``: a second bake-plan (e.g. an older release), in the same rotation."""


class Family(NamedTuple):
    """What one ``--set`` locks: its row label, its plugin distribution, the Python and glibc
    its root declares, and whether plain pip-compile (which resolves for the Python running it)
    can lock it too."""

    label: str
    package: Path
    python: str
    glibc: Optional[str]
    pip_compile: bool


SETS = ("jax", "tiny", "stack")
PLATFORM = "linux/amd64"


def family(set_name: str) -> Family:
    """The family ``--set`` names (:data:`SETS`)."""
    if set_name == "stack":
        return Family("pax stack, 2 stages", STACK_PACKAGE, "3.10.13", "2.36", False)
    return Family(f"{set_name} family, 3 stages", FAMILY_PACKAGE, "3.11", None, True)


class LockResult(NamedTuple):
    """Medians of one cache state (``warm``/``cold``) for each of :data:`SIDES`, and the lock's size;
    ``python``: ``image`` (the family declares its Python) or ``host`` (it declares none)."""

    set_name: str
    python: str
    cache: str
    pins: int
    medians: Dict[str, float]
    cpu: Optional[Dict[str, float]] = None
    """Median CPU seconds (user + system, the command's children included) per side: on a loaded
    machine a steadier measure than wall time, which the targets are judged on."""


def install_family(site: Path, package: Path = FAMILY_PACKAGE) -> None:
    """``pip install`` a family's plugin distribution (default: the lock family's) into ``site``
    (for PYTHONPATH)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--target", str(site), str(package)], check=True, timeout=900)


def family_lines(site: Path, set_name: str) -> Dict[str, Tuple[str, ...]]:
    """``{stage: lines}`` of the installed family for ``set_name``, root first."""
    sys.path.insert(0, str(site))
    if set_name == "stack":
        from bake_plan_stackbench import LINES

        return dict(LINES)
    from bake_plan_lockbench import ENV, STAGES, requirement_set

    return dict(zip(STAGES, requirement_set({ENV: set_name})))


def wheels(set_name: str, lines: Sequence[str]) -> Path:
    """The directory of every wheel ``lines`` need for CPython 3.11 on x86_64 manylinux ≤ 2.28
    (what uv's ``x86_64-manylinux_2_28`` takes), downloaded once with pip's own configuration.

    :raises RuntimeError: pip could not download them.
    """
    from bake.pip.wheelhouse import platform_tags

    dest = CACHE_ROOT / f"lock-wheels-{set_name}"
    done = dest / ".complete"
    want = "\n".join(sorted(lines)) + "\n"
    if done.is_file() and done.read_text() == want:
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    tags = [arg for tag in platform_tags("linux/amd64", glibc_max=28) for arg in ("--platform", tag)]
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "download", "--quiet", "--dest", str(dest),
            "--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", *tags, *lines]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"pip download for the lock benchmark failed:\n{proc.stderr[-2000:]}")
    done.write_text(want)
    return dest


def stack_wheels(bake_plan: str, site: Path, lines: Sequence[str]) -> Path:
    """The directory of every wheel the real stack's lock pins, for CPython 3.10 on x86_64
    manylinux ≤ 2.36, made once, online: in a scratch directory, ``bake-plan lock`` of
    ``pax-leaf`` (uv's default index), then ``bake-plan wheelhouse`` of that lock (pip's own
    configuration; the pins that exist only as sdists built into wheels), its wheels moved into
    ``lock-wheels-stack``.

    :param site: where the stack's plugin is installed (put on PYTHONPATH).
    :raises RuntimeError: the lock or the wheelhouse failed.
    """
    dest = CACHE_ROOT / "lock-wheels-stack"
    done = dest / ".complete"
    want = "\n".join(sorted(lines)) + "\n"
    if done.is_file() and done.read_text() == want:
        return dest
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    target = "pax-leaf"
    env = dict(os.environ, PYTHONPATH=str(site))
    with tempfile.TemporaryDirectory(prefix="lock-wheels-stack-", dir=CACHE_ROOT) as tmp:
        for argv, limit in (([bake_plan, "lock", "--target", target, "--locks-dir", "locks"], 1800),
                            ([bake_plan, "wheelhouse", "--target", target, "--locks-dir", "locks", "-o", "wheels"], 3600)):
            print(f"bench: {' '.join(argv[1:])} (online, once)", file=sys.stderr)
            proc = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=limit,
                                  stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"bake-plan {argv[1]} of the stack failed:\n{proc.stderr[-2000:]}")
        dest.mkdir(parents=True, exist_ok=True)
        for wheel in (Path(tmp) / "wheels").glob("*.whl"):
            os.replace(wheel, dest / wheel.name)
    done.write_text(want)
    return dest


def _environment(site: Path, set_name: str, python: str, caches: Path) -> Dict[str, str]:
    """The process environment without pip's or uv's settings, with the family on PYTHONPATH
    and every cache under ``caches``; Python writes its bytecode, as an installed bake-plan has
    it (with ``PYTHONDONTWRITEBYTECODE`` set, a module changed since its ``.pyc`` was written is
    compiled from source on every run: 50–170 ms for ``bake/pip/lock.py`` on a loaded machine,
    paid by A alone)."""
    from bake.pip.lock import without_pip_configuration

    env = {k: v for k, v in without_pip_configuration(os.environ).items()
           if not k.startswith("UV_") and k not in ("PYTHONPATH", "XDG_CACHE_HOME", "PYTHONDONTWRITEBYTECODE")}
    env.update(PYTHONPATH=str(site), BAKE_PLAN_LOCKBENCH_SET=set_name,
               BAKE_PLAN_LOCKBENCH_PYTHON=python,
               UV_CACHE_DIR=str(caches / "uv"), PIP_CACHE_DIR=str(caches / "pip"),
               XDG_CACHE_HOME=str(caches / "xdg"))
    return env


def commands(bake_plan: str, target: str, ins: Sequence[str], house: Path, python: str,
             other: Optional[str] = None, fam: Optional[Family] = None) -> Dict[str, List[str]]:
    """Each side's command line, run in a directory holding ``ins``; ``python``: ``image`` or
    ``host``; ``fam``: the family (default: the jax set's), whose declared Python and glibc U
    resolves for, as A does (no P when pip-compile cannot lock it)."""
    from bake.pip.lock import UV_OPTIONS, Target, exact_python, python_platform, uv_binary

    fam = fam or family("jax")
    index = ["--no-index", "--find-links", str(house)]
    resolve_for = ["--python", bake_interpreter(bake_plan)] if python == "host" else \
        Target(exact_python(fam.python), python_platform(PLATFORM, fam.glibc)).uv_args()
    out = {
        SIDES[0]: [bake_plan, "lock", "--quiet", "--target", target, *index, "--locks-dir", "locks"],
        SIDES[1]: [sys.executable, "-m", "piptools", "compile", "--quiet", "--no-header", "--strip-extras",
                   "--allow-unsafe", *index, "--output-file", "pip-compile.txt", *ins],
        SIDES[2]: [uv_binary(), "pip", "compile", *UV_OPTIONS, *resolve_for, *index, "--output-file", "uv.txt", *ins],
        SIDES[3]: [bake_plan, "graph", "--quiet", "--target", target, "-o", "graph.mmd"],
    }
    if not fam.pip_compile:
        del out[SIDES[1]]
    if other:
        out[OTHER] = [other, "lock", "--quiet", "--target", target, *index, "--locks-dir", "other-locks"]
    return out


def _pins(text: str) -> List[str]:
    return sorted(row for row in text.splitlines() if row and not row[0].isspace() and not row.startswith(("#", "-")))


def _same_outputs(workdir: Path, target: str) -> int:
    """Check A's lock against U's output (byte for byte, less the header) and P's pins (when P ran).

    :returns: the number of pinned requirements.
    :raises RuntimeError: they differ.
    """
    lock = (workdir / "locks" / f"{target}.txt").read_text()
    body = "".join(row for row in lock.splitlines(keepends=True) if not row.startswith("# bake-plan "))
    uv = (workdir / "uv.txt").read_text()
    if body != uv:
        raise RuntimeError(f"bake-plan's lock is not uv's output for the same inputs:\n{lock}\n---\n{uv}")
    pip_compile = workdir / "pip-compile.txt"
    if pip_compile.exists() and _pins(body) != _pins(pip_compile.read_text()):
        raise RuntimeError("bake-plan's lock pins other versions than pip-compile for the same inputs")
    return len(_pins(body))


def bake_interpreter(bake_plan: str) -> str:
    """The Python a ``bake-plan`` console script runs (its ``#!`` line), whose markers a chain
    that declares no Python is locked for."""
    first = Path(bake_plan).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else sys.executable


def measure(bake_plan: str, repeat: int, set_name: str = "jax", python: str = "image",
            workdir: Optional[Path] = None, other: Optional[str] = None) -> List[LockResult]:
    """Download the wheels (once), then time A, P and U alternately, ``repeat`` runs each, with
    warm caches (after one warm-up run of each, which also checks they agree) and cold ones.

    :raises RuntimeError: a side failed, or the outputs differ.
    """
    fam = family(set_name)
    with tempfile.TemporaryDirectory(prefix="bake-plan-lockbench-", dir=workdir) as tmp:
        root = Path(tmp)
        site = root / "site"
        install_family(site, fam.package)
        lines = family_lines(site, set_name)
        every = [line for stage in lines.values() for line in stage]
        house = stack_wheels(bake_plan, site, every) if set_name == "stack" else wheels(set_name, every)
        work = root / "work"
        work.mkdir()
        ins = []
        for stage, stage_lines in lines.items():  # the files bake-plan writes for its uv, by the same names
            ins.append(f"requirements-{stage}.in")
            (work / ins[-1]).write_text("".join(line + "\n" for line in stage_lines))
        argv = commands(bake_plan, list(lines)[-1], ins, house, python, other, fam)
        warm_env = _environment(site, set_name, python, root / "warm")
        for side in argv:  # warm-up: fills the warm caches
            timed(argv[side], work, warm_env)
        pins = _same_outputs(work, list(lines)[-1])
        results = []
        for cache in ("warm", "cold"):
            runs: Dict[str, List[float]] = {side: [] for side in argv}
            cpu: Dict[str, List[float]] = {side: [] for side in argv}
            for _ in range(repeat):
                for side in argv:
                    caches = root / "cold"  # made afresh for every cold run
                    env = warm_env if cache == "warm" else _environment(site, set_name, python, caches)
                    before = _children_cpu()
                    runs[side].append(timed(argv[side], work, env).seconds)
                    cpu[side].append(_children_cpu() - before)
                    shutil.rmtree(caches, ignore_errors=True)
            results.append(LockResult(set_name, python, cache, pins,
                                      {s: statistics.median(t) for s, t in runs.items()},
                                      {s: statistics.median(t) for s, t in cpu.items()}))
            print(f"bench: lock, {cache} cache: " + ", ".join(f"{s} {_ms(t)} ms" for s, t in results[-1].medians.items()),
                  file=sys.stderr)
    return results


def _children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far, their own waited-for
    children included (``getrusage(RUSAGE_CHILDREN)``): its growth around one :func:`timed` run is
    that command's CPU."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def checks(results: Sequence[LockResult]) -> List[Tuple[str, bool]]:
    """Per cache state, the target in force (docs/benchmarks.md, "Targets"): the lock's own work
    at resolver speed, A − F ≤ :data:`MAX_RATIO` × U, F being bake-plan's floor (``graph`` of the
    same target). The whole process against uv alone (A ≤ 1.1 × U) is in the table (A/U), not
    checked: before bake-plan can start uv it must start Python and load the plugins, which is F,
    and on a small family uv takes less than that. (description with the values, met?)"""
    out = []
    for r in results:
        a, u, f = r.medians[SIDES[0]], r.medians[SIDES[2]], r.medians[SIDES[3]]
        where = ("the real JAX stack's " if r.set_name == "stack" else "") + f"lock ({r.python} Python), {r.cache} cache"
        out.append((f"{where}: the lock's own work ≤ {MAX_RATIO:g} × uv "
                    f"(A − F = {_ms(a)} − {_ms(f)} = {_ms(a - f)} ms vs {_ms(u)} ms, {(a - f) / u:.2f})",
                    a - f <= MAX_RATIO * u))
    return out


HEADER = ("lock", "Python", "cache", "pins", "A: bake-plan lock ms", "P: pip-compile ms", "U: uv pip compile ms",
          "F: bake-plan floor ms", "A/U", "(A − F)/U", "A/P")


def rows(results: Sequence[LockResult]) -> List[Tuple[str, ...]]:
    """One table row per cache state."""
    out = []
    for r in results:
        fam = family(r.set_name)
        a, p, u, f = (r.medians.get(s) for s in SIDES)
        python = f"{fam.python} (declared)" if r.python == "image" else f"{platform.python_version()} (bake-plan's)"
        out.append((fam.label, python, r.cache, str(r.pins), _ms(a), _ms(p) if p else "—", _ms(u), _ms(f),
                    f"{a / u:.2f}", f"{(a - f) / u:.2f}", f"{a / p:.2f}" if p else "—"))
    return out


def report(results: Sequence[LockResult], markdown: bool) -> str:
    """The table and the checks, as text or Markdown (docs/benchmarks.md)."""
    table = [HEADER, *rows(results)]
    if any(OTHER in r.medians for r in results):
        table = [row + extra for row, extra in zip(table, [("O: other bake-plan lock ms", "O/U")] + [
            (_ms(r.medians[OTHER]), f"{r.medians[OTHER] / r.medians[SIDES[2]]:.2f}") for r in results])]
    cpu = []
    for r in results:
        if r.cpu:
            a, u, f = r.cpu[SIDES[0]], r.cpu[SIDES[2]], r.cpu[SIDES[3]]
            cpu.append(f"- CPU, {r.cache} cache (user + system, children included; medians): A {_ms(a)} ms, "
                       f"U {_ms(u)} ms, F {_ms(f)} ms: (A − F)/U = {(a - f) / u:.2f}\n")
    return table_report(table, checks(results), markdown) + "".join(cpu)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the lock benchmark alone. Exit status 1 with ``--check`` when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="timed runs of each side per cache state (default 7)")
    parser.add_argument("--set", default="jax", choices=SETS,
                        help="the family's requirements (default jax); stack: the real JAX stack (its wheels, "
                        "about 900 MB, are downloaded once, online)")
    parser.add_argument("--python", default="image", choices=("image", "host"),
                        help="image: the family declares Python 3.11 (default); host: it declares none")
    parser.add_argument("--bake-plan", help="the bake-plan console script (default: beside this Python)")
    parser.add_argument("--compare", metavar="BAKE_PLAN", help="time this bake-plan too (e.g. an older one)")
    parser.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.set == "stack" and args.python == "host":
        parser.error("--python host: the stack declares its Python (3.10.13); only the jax and tiny sets lock without one")
    bake_plan = args.bake_plan or str(Path(sys.executable).parent / "bake-plan")
    results = measure(bake_plan, args.repeat, args.set, args.python, other=args.compare)
    sys.stdout.write(f"python: {sys.executable} (pip-compile's interpreter)\n" + report(results, args.markdown))
    return 1 if args.check and not all(ok for _, ok in checks(results)) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, RuntimeError) as err:  # a side that cannot run or failed: its words, no traceback
        sys.exit(f"bench: {err}")
