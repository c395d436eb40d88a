"""A lock and a wheel built in the image, without an engine: ``bake-pip-finalize`` refuses a lock
that pins the index's release of a name a meal kit wrote as a URL line; ``lock --in-image``'s flags;
the lock files it writes are what ``--locked`` takes (:mod:`bake.pip.image_lock`)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from test_lock import _finalize

from bake.errors import LockError
from bake.pip.image_lock import RESOLVER, lock_texts
from bake.pip.lock import lock_specs, locked_contexts, read_header
from bake.run.image_lock import MEALKIT_CONTEXT, SUFFIX, lock_plan
from bake.testing import compose_plan

TE_LINE = "click @ file:///opt/nc-te/dist/click-99.0-py3-none-any.whl"


def test_a_lock_pinning_the_index_release_of_a_wheel_built_in_the_image_is_refused_in_one_line(tmp_path):
    ins = {"requirements-nc-te.in": "numpy<2\n" + TE_LINE + "\n"}
    lock = ("# bake-plan target: upstream-pax\nnumpy==1.26.4\n    # via -r requirements-nc-te.in\n"
            "click==8.5.1\n    # via -r requirements-nc-te.in\n")
    proc = _finalize(tmp_path, ins, {"requirements.lock": lock})
    assert proc.returncode == 1
    where = tmp_path / "pip-tools.d" / "requirements-nc-te.in"
    lines = proc.stderr.splitlines()
    assert f"bake-pip-finalize: {where}:2: {TE_LINE}: the lock pins click==8.5.1 from the index, not this URL" \
        in lines, proc.stderr
    assert not any("requirements-nc-te.in:1" in line for line in lines)  # numpy==1.26.4 satisfies numpy<2
    # The way out is the lock made in the image, not the host lock again (which would loop).
    assert "remake it with `bake-plan lock --in-image --target upstream-pax`" in proc.stderr, proc.stderr


def test_a_lock_with_the_wheels_own_line_is_taken(tmp_path):
    lock = f"numpy==1.26.4\n{TE_LINE}\n    # via -r requirements-nc-te.in\n"
    proc = _finalize(tmp_path, {"requirements-nc-te.in": "numpy<2\n" + TE_LINE + "\n"}, {"requirements.lock": lock})
    assert "using pre-made lock" in proc.stdout and "not this URL" not in proc.stderr, proc.stderr
    assert proc.returncode != 0  # it went on to sync, into the stand-in, which fails


def test_a_build_time_line_missing_from_the_lock_points_at_the_lock_in_the_image(tmp_path):
    proc = _finalize(tmp_path, {"requirements-nc-te.in": TE_LINE + "\n"},
                     {"requirements.lock": "# bake-plan target: nc\nnumpy==1.26.4\n"})
    assert proc.returncode == 1
    assert f"{TE_LINE}: not in the lock" in proc.stderr
    assert "`bake-plan lock --in-image --target nc`" in proc.stderr, proc.stderr


def test_compile_only_writes_the_lock_and_the_python_and_syncs_nothing(tmp_path):
    """``BAKE_PIP_COMPILE_ONLY`` (what ``lock --in-image`` runs): the image's pip-compile, even with a
    pre-made lock mounted and BAKE_PIP_LOCKED set; the target interpreter only says its version."""
    from conftest import make_wheel

    house = tmp_path / "house"
    make_wheel(house, "alpha", "1.0")
    make_wheel(house, "alpha", "2.0")
    wheel = make_wheel(tmp_path / "dist", "beta", "0.1", requires=("alpha<2",))
    out = tmp_path / "out"
    proc = _finalize(tmp_path, {"requirements-a.in": f"beta @ file://{wheel}\n", "requirements-b.in": "alpha\n"},
                     {"requirements.lock": "alpha==2.0\n"}, python_says="3.11.2", BAKE_PIP_COMPILE_ONLY=str(out),
                     BAKE_PIP_LOCKED="1", PIP_NO_INDEX="1", PIP_FIND_LINKS=str(house))
    assert proc.returncode == 0, proc.stderr
    body = (out / "requirements.txt").read_text()
    assert "alpha==1.0" in body and f"beta @ file://{wheel}" in body, body
    assert (out / "python").read_text() == "3.11.2\n"
    assert "using pre-made lock" not in proc.stdout


def test_lock_in_image_flags_are_checked_before_anything_is_built(cli, tmp_path):
    proc = cli("lock", "--target", "base", "--wheelhouse", str(tmp_path), "--config", os.devnull, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().endswith(
        "--wheelhouse is for the build of `lock --in-image`: add --in-image (or drop it)"), proc.stderr
    proc = cli("lock", "--in-image", "--target", "base", "--no-index", "--config", os.devnull, cwd=tmp_path)
    assert proc.returncode == 2 and "lock --in-image: --no-index is for the host's resolver" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "locks").exists()


def test_the_lock_made_in_the_image_is_what_locked_takes(tmp_path):
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64"])
    specs = lock_specs(composition, "jax")
    body = "jax @ file:///opt/jax\nte @ file:///opt/transformer-engine/dist/te-1.0-py3-none-any.whl\n"
    results = lock_texts(specs, {"jax": {"linux/amd64": (body, "3.10.12")}})
    (tmp_path / "jax.txt").write_text(results[0][1])
    head = read_header(results[0][1])
    assert head["resolver"] == [RESOLVER] and head["python"] == ["3.10.12"] and "skipped" not in head
    assert "`bake-plan lock --in-image --target jax`" in head["lock"][0]
    assert results[0][1].endswith(body)
    [(name, directory)] = locked_contexts(composition, tmp_path)
    assert name == "jax" and (Path(directory) / "requirements.lock").read_text() == results[0][1]


def test_arches_that_compile_differently_get_a_lock_each():
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64", "linux/arm64"])
    specs = lock_specs(composition, "jax")
    results = lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.10.1"), "linux/arm64": ("a==2\n", "3.10.1")}})
    assert [spec.filename for spec, _ in results] == ["jax-amd64.txt", "jax-arm64.txt"]
    with pytest.raises(LockError, match="no compile of 'jax' for linux/arm64"):
        lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.10.1")}})


def test_the_compile_target_starts_from_the_meal_kit_and_writes_nothing_else(tmp_path):
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64"], registry="localhost:5555/x",
                               wheelhouse="/srv/wheels", wheelhouse_users=frozenset({"base", "jax"}))
    plan = lock_plan(composition.plan, {"jax": ["linux/amd64"]}, tmp_path)
    target = plan["target"]["jax" + SUFFIX]
    assert target["contexts"][MEALKIT_CONTEXT] == "target:jax-mealkit"
    assert target["contexts"]["wheelhouse"] == "/srv/wheels" and target["args"]["PIP_NO_INDEX"] == "1"
    assert target["output"] == [f"type=local,dest={tmp_path / 'jax'}"]
    assert plan["group"] == {"default": {"targets": ["jax" + SUFFIX]}}
    assert not any("cache-to" in t or "output" in t for name, t in plan["target"].items() if name != "jax" + SUFFIX)


def test_an_image_of_another_python_than_the_chain_declares_is_refused():
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64"])
    specs = [dataclasses.replace(spec, python="3.11") for spec in lock_specs(composition, "jax")]
    with pytest.raises(LockError, match=r"has Python 3\.12\.1, the chain declares python = \"3\.11\""):
        lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.12.1")}})
    assert "# bake-plan python: 3.11.4" in lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.11.4")}})[0][1]


def test_an_exact_declared_python_is_compared_in_full():
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64"])
    specs = [dataclasses.replace(spec, python="3.11.2") for spec in lock_specs(composition, "jax")]
    assert "# bake-plan python: 3.11.2" in lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.11.2")}})[0][1]
    with pytest.raises(LockError, match=r"has Python 3\.11\.7, the chain declares python = \"3\.11\.2\""):
        lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.11.7")}})


def _write_requirements(tmp_path, *args):
    import subprocess

    from bake.resources import stages_dir

    env = dict(os.environ, BAKE_PIP_TOOLS_D=str(tmp_path / "pip-tools.d"))
    return subprocess.run(["bash", str(stages_dir() / "scripts" / "write-requirements.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_write_requirements_writes_a_line_per_wheel_built_in_the_image(tmp_path):
    from conftest import make_wheel

    dist = tmp_path / "dist"
    make_wheel(dist, "nc_te", "0.1.0")
    (dist / "jaxlib-0.4.30+cuda12-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    (dist / "README").write_text("not a wheel")
    proc = _write_requirements(tmp_path, "--wheels", "jax", f"{dist}/")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "pip-tools.d" / "requirements-jax.in").read_text().splitlines() == [
        f"jaxlib @ file://{dist}/jaxlib-0.4.30+cuda12-cp311-cp311-manylinux2014_x86_64.whl",
        f"nc-te @ file://{dist}/nc_te-0.1.0-py3-none-any.whl"]
    again = _write_requirements(tmp_path, "--wheels", "jax", str(dist))  # a line already there is written once
    assert again.returncode == 0 and len((tmp_path / "pip-tools.d" / "requirements-jax.in").read_text().splitlines()) == 2


@pytest.mark.parametrize("where, says", [("missing", "no such directory"), ("empty", "no wheel (*.whl) there"),
                                         ("relative", "give the directory as an absolute path")])
def test_write_requirements_stops_the_meal_kit_without_a_wheel(tmp_path, where, says):
    (tmp_path / "empty").mkdir()
    directory = "dist" if where == "relative" else str(tmp_path / where)
    proc = _write_requirements(tmp_path, "--wheels", "jax", directory)
    assert proc.returncode == 1 and proc.stderr.startswith(f"bake-write-requirements: --wheels {directory}: {says}")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_an_out_of_date_lock_made_in_the_image_says_to_make_it_in_the_image_again(tmp_path):
    composition = compose_plan(targets=["jax"], platforms=["linux/amd64"])
    specs = lock_specs(composition, "jax")
    text = lock_texts(specs, {"jax": {"linux/amd64": ("a==1\n", "3.10.12")}})[0][1]
    (tmp_path / "jax.txt").write_text(text.replace(specs[0].digest, "0" * 64))
    with pytest.raises(Exception, match=r"is out of date .*: run `bake-plan lock --in-image --target jax`"):
        locked_contexts(composition, tmp_path)


def test_which_stages_write_requirement_lines_at_build_time():
    from bake.pip.image_lock import build_time_lines

    chain = {stage.name: stage for stage in compose_plan(targets=["upstream-pax"], platforms=["linux/amd64"]).chain}
    assert build_time_lines(chain["jax"]).startswith('RUN set -eu; bake-write-requirements jax "-e file://')
    assert build_time_lines(chain["base"]) is None  # only "${REQUIREMENTS}", the declared lines
    assert build_time_lines(chain["te"]) is None  # a one-target stage writes no .in a final stage reads


KIT_PLUGIN = """
from bake import Stage, hookimpl

@hookimpl
def bake_plan_stages():
    return [Stage(name="kit", image="kit", context={context!r}, base_image="python:3.11-slim-bookworm",
                  python="3.11", requirements=("alpha",), registry="localhost:5000/me", platforms=("linux/amd64",))]
"""

KIT_DOCKERFILE = """FROM scratch AS pip-lock
FROM ${BASE_IMAGE} AS mealkit
ARG REQUIREMENTS=""
RUN bake-write-requirements kit "${REQUIREMENTS}" && \\
    bake-write-requirements --wheels kit /opt/kit/dist
FROM mealkit AS final
ARG BAKE_PIP_LOCKED
RUN --mount=type=bind,from=pip-lock,target=/opt/pip-lock bake-pip-finalize
"""


def test_a_host_lock_of_a_chain_that_writes_lines_at_build_time_says_to_lock_in_the_image(cli, make_plugin, tmp_path):
    from conftest import hermetic_pip_env, make_wheel

    (tmp_path / "kit").mkdir()
    (tmp_path / "kit" / "Dockerfile").write_text(KIT_DOCKERFILE)
    make_wheel(tmp_path / "house", "alpha", "1.0")
    site = make_plugin(KIT_PLUGIN.format(context=str(tmp_path / "kit")), name="kit-plugin")
    proc = cli("lock", "--target", "kit", "--no-index", "-f", str(tmp_path / "house"), "--config", os.devnull,
               cwd=tmp_path, env=hermetic_pip_env(), pythonpath=[site])
    assert proc.returncode == 0, proc.stderr
    [note] = [line for line in proc.stderr.splitlines() if line.startswith("bake-plan: note: ")]
    assert note.startswith("bake-plan: note: stage 'kit' (plugin 'kit-plugin') writes requirement lines at build "
                           "time (RUN bake-write-requirements kit \"${REQUIREMENTS}\" && bake-write-requirements "), note
    assert note.endswith("…), which this lock cannot see; `build --locked` needs the lock made in the image: "
                         "bake-plan lock --in-image --target kit"), note


def test_a_lock_missing_a_platform_suggests_locking_every_platform_the_plan_needs(tmp_path):
    from bake.errors import UsageError
    from bake.pip.lock import checked_lock, header

    spec = lock_specs(compose_plan(targets=["jax"], platforms=["linux/amd64", "linux/arm64"]), "jax")[0]
    spec = dataclasses.replace(spec, per_arch=False, platforms=("linux/amd64", "linux/arm64"))
    (tmp_path / spec.filename).write_text(header(dataclasses.replace(spec, platforms=("linux/amd64",)), None) + "a==1\n")
    with pytest.raises(UsageError) as caught:
        checked_lock(spec, tmp_path)
    assert str(caught.value).endswith(
        f"covers linux/amd64, not linux/arm64: run `bake-plan lock --target {spec.target} "
        "--platform linux/amd64 --platform linux/arm64`"), caught.value
