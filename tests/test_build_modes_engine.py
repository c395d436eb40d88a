"""``build`` on the real engine and registry, as a user at a terminal or in CI meets it: the
``--progress`` modes and ``-q``/``-v`` (the sitrep the same in each), ``--dry-run``'s command run
in bash, ``--load`` without cache export or cache errors, and no privileges prompt: bake-plan
grants exactly the paths the plan reads (a context and a secret file outside the working
directory), and buildx refuses the same command without those grants."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import uuid

import pytest

pytestmark = pytest.mark.engine

DATE = "2026-11-29"


@pytest.fixture
def family(cli, engine, make_plugin, tmp_path):
    """rm-root → rm-leaf, single-target stages FROM the stand-in busybox, their context and a
    secret file outside the working directory (``tmp_path/work``), in a fresh registry namespace.
    ``family.run(*args)`` runs ``bake-plan`` there; ``family.broken`` adds a stage that fails."""
    context, work = tmp_path / "context", tmp_path / "work"
    context.mkdir()
    work.mkdir()
    (context / "hello.txt").write_text(uuid.uuid4().hex)  # new to the engine: the first build runs its steps
    secret = tmp_path / "secret.txt"
    secret.write_text("not-a-real-password\n")
    busybox = f"{engine.registry}/stand-in/busybox:latest"
    site = make_plugin(f"""
from bake import Stage, hookimpl
COMMON = dict(kind="single", context={str(context)!r}, platforms=("linux/amd64",))
@hookimpl
def bake_plan_stages():
    return [Stage(name="rm-root", image="rm-root", base_image="{busybox}",
                  dockerfile_inline="FROM {busybox}\\nCOPY hello.txt /hello.txt\\n"
                                    "RUN --mount=type=secret,id=pw test -s /run/secrets/pw\\n", **COMMON),
            Stage(name="rm-leaf", image="rm-leaf", parent="rm-root",
                  dockerfile_inline="FROM base\\nRUN echo leaf > /leaf\\n", **COMMON),
            Stage(name="rm-broken", image="rm-broken", parent="rm-root",
                  dockerfile_inline="FROM base\\nRUN echo 'rm-broken fails on purpose' && exit 3\\n", **COMMON)]
""")
    namespace = f"{engine.registry}/rm{uuid.uuid4().hex[:8]}"

    def run(*args, target="rm-leaf"):
        return cli("build", "--target", target, "--registry", namespace, "--date", DATE, "--config", os.devnull,
                   "--secret", f"id=pw,src={secret}", "--sitrep-dir", "sitrep", *args, cwd=work,
                   env=dict(os.environ, PYTHONPATH=str(site)))

    def sitrep():
        return json.loads((work / "sitrep" / "sitrep.json").read_text())

    run.namespace, run.work, run.context, run.secret, run.sitrep = namespace, work, context, secret, sitrep
    return run


def _cache_tags(engine, namespace):
    return sorted(t for image in ("rm-root", "rm-leaf") for t in engine.tags(f"{namespace}/{image}")
                  if t.startswith("cache-"))


def test_a_first_load_build_shows_no_cache_error_and_a_push_writes_the_cache(engine, family):
    proc = family("--load")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert family.sitrep()["outcome"] == "pass"
    # The cache refs do not exist yet: said as such, never as an error; nothing is exported.
    assert "failed to configure registry cache importer" not in proc.stderr
    assert "ERROR" not in proc.stderr
    assert re.search(r"^#(\d+) .*importing cache manifest from .*\n#\1 no cache there yet$", proc.stderr, re.MULTILINE)
    assert "exporting cache" not in proc.stderr
    assert "cache-to" not in (family.work / "docker-bake.hcl").read_text()
    assert _cache_tags(engine, family.namespace) == []
    # The images are in the engine's store.
    assert engine.docker("image", "inspect", f"{family.namespace}/rm-leaf:latest").returncode == 0

    proc = family("--push")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert _cache_tags(engine, family.namespace) == ["cache-silo-rm-leaf-latest", "cache-silo-rm-root-latest"]


def test_no_privileges_prompt_and_the_same_command_without_the_grants_is_refused(engine, family):
    proc = family("--push", "-v")
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "requesting privileges" not in proc.stderr and "--allow" not in proc.stderr.split("running:", 1)[0]
    ran = next(line for line in proc.stderr.splitlines() if line.startswith("bake-plan: running: docker buildx bake"))
    # -v shows every docker command, each one shell line starting with docker: the engine probe,
    # the bake, and the registry's answers for the pushed sizes (python-on-whales' calls)
    shown = [line.removeprefix("bake-plan: running: ") for line in proc.stderr.splitlines()
             if line.startswith("bake-plan: running: ")]
    assert shown[0] in ("docker info --format '{{json .}}'", "docker version --format '{{json .Server}}'"), shown
    assert all(shlex.split(line)[0] == "docker" for line in shown), shown
    assert any(line.startswith("docker buildx imagetools inspect --raw ") for line in shown), shown
    argv = shlex.split(ran.removeprefix("bake-plan: running: "))
    granted = sorted(w.removeprefix("--allow=fs.read=") for w in argv if w.startswith("--allow="))
    assert granted == sorted([str(family.context), str(family.secret)])  # the context and the secret file, no more

    # buildx checks (and prompts) under every progress mode but rawjson, the one bake-plan reads:
    # the same command with plain progress passes with these grants and is refused without them.
    plain = ["plain" if w == "rawjson" else w for w in argv]

    def run(words):
        return subprocess.run(words, cwd=family.work, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)

    granted_run = run(plain)
    assert granted_run.returncode == 0, granted_run.stderr[-4000:]
    assert "requesting privileges" not in granted_run.stderr
    refused = run([w for w in plain if not w.startswith("--allow=")])
    assert refused.returncode != 0
    assert "additional privileges requested" in refused.stderr
    # Each grant is needed: without it, buildx refuses naming that path (a context, a secret file).
    for path in granted:
        without = run([w for w in plain if w != f"--allow=fs.read={path}"])
        assert without.returncode != 0, path
        assert f"Read access to path {os.path.relpath(path, family.work)}\n" in without.stderr, without.stderr


def test_the_dry_run_command_builds_when_run_in_bash(engine, family):
    proc = family("--push", "--dry-run", "--progress", "plain")
    assert proc.returncode == 0, proc.stderr
    assert list((family.work / "sitrep").iterdir()) == []  # made for --metadata-file; no report written
    assert engine.tags(f"{family.namespace}/rm-leaf") == []  # nothing was built
    command = proc.stdout.strip()
    assert "\n" not in command and command.startswith("docker buildx bake --file docker-bake.hcl ")
    built = subprocess.run(["bash", "-c", command], cwd=family.work, capture_output=True, text=True, timeout=600,
                           stdin=subprocess.DEVNULL)
    assert built.returncode == 0, built.stderr[-4000:]
    assert "requesting privileges" not in built.stderr
    assert {"latest", f"nightly-{DATE}"} <= set(engine.tags(f"{family.namespace}/rm-leaf"))
    assert json.loads((family.work / "sitrep" / "bake-metadata.json").read_text())["rm-leaf"]["containerimage.digest"]
    assert not (family.work / "sitrep" / "sitrep.json").exists()


def test_every_progress_mode_keeps_the_sitrep_whole(engine, family):
    def steps():
        report = family.sitrep()
        assert report["outcome"] == "pass"
        return {n: (t["steps_cached"], t["steps_run"]) for n, t in report["targets"].items()}

    first = family("--push", "--progress", "plain")
    assert first.returncode == 0, first.stderr[-4000:]
    assert steps() == {"rm-root": (1, 2), "rm-leaf": (0, 1)}  # FROM busybox is local: cached; COPY, RUN ran
    cached = {"rm-root": (3, 0), "rm-leaf": (1, 0)}  # what each later run must count, whatever it shows

    quiet = family("--push", "-q")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert quiet.stdout == "bake-plan: rm-leaf build: all 2 targets built\n"
    assert steps() == cached

    raw = family("--push", "--progress", "rawjson")
    assert raw.returncode == 0, raw.stderr
    statuses = [json.loads(line) for line in raw.stderr.splitlines() if line.startswith("{")]
    assert any("vertexes" in s for s in statuses) and "#1 " not in raw.stderr
    assert all(line.startswith("{") for line in raw.stderr.splitlines() if line)
    assert steps() == cached

    tty = family("--push", "--progress", "tty")
    assert tty.returncode == 0, tty.stderr
    assert "\x1b[K[+] Building " in tty.stderr  # after "\r", read here as a newline (text mode)
    assert not re.search(r"^#\d+ (DONE|CACHED)", tty.stderr, re.MULTILINE)
    assert re.search(r"\[\+\] Building \d+\.\ds \(\d+/\d+, \d+ cached\) FINISHED\n\Z", tty.stderr)
    assert steps() == cached


def test_a_quiet_failing_build_shows_the_error_and_nothing_else(engine, family):
    proc = family("--load", "-q", target="rm-broken")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "exit code: 3" in proc.stderr and "rm-broken fails on purpose" in proc.stderr  # buildx's excerpt
    assert not re.search(r"^#\d+ (DONE|CACHED)", proc.stderr, re.MULTILINE)
    assert proc.stderr.rstrip().splitlines()[-1].startswith("bake-plan: rm-broken build: ")
    report = family.sitrep()
    assert report["outcome"] == "fail" and report["targets"]["rm-broken"]["outcome"] == "fail"
    # rm-root's three steps are each counted; a loaded engine once reported one of them, in a
    # build cut short by rm-broken's failure, under a second vertex digest (4 counted), and the
    # sitrep counts distinct digests (docs/sitrep.md, "Step counts")
    assert report["targets"]["rm-root"]["steps_cached"] + report["targets"]["rm-root"]["steps_run"] in (3, 4)
