"""A family's nightly as a complete GitHub Actions workflow: one job per published stage and
arch, each ``needs:`` the jobs whose images it builds on, builds and pushes its image, runs its
image tests and uploads its sitrep; then one publish job, run whatever the build jobs' outcome,
gated on every sitrep (``publish --sitrep sitreps --all-or-nothing``).

GitHub Actions cannot add jobs while a run goes (a job's ``needs`` and a matrix's size are read
from the file before anything runs), so ``bake-plan matrix --format github-workflow`` writes the
jobs of :func:`bake.plan.matrix.jobs` into the file. The user commits it and writes it again when
the family changes; its plan job runs the same command with ``--check`` and fails while the
committed file is stale. The workflow uses no matrix, so no job ever gets an empty one, and
nothing waits on a whole wave: ``jax/arm64`` starts when ``base/arm64`` is done.

Every ``run:`` step reads the job's values from environment variables (``STAGE``, ``PLATFORM``,
``NEEDS``, ``REGISTRY``, ``DATE``…), never from ``${{ }}`` inside the script, so the steps run the
same in a shell outside GitHub (``tests/test_ci_workflow_engine.py`` does) and no value is pasted
into a script. Pure text: nothing here reads files or runs anything.
"""

from __future__ import annotations

import shlex
from typing import Dict, List, Mapping, Sequence

from bake.errors import UsageError
from bake.owned import MARK
from bake.patterns import LazyPattern
from bake.plan.names import target_name
from bake.plan.text import printable

HEADER = f"# {MARK} (`bake-plan matrix --format github-workflow`): do not edit by hand."
"""The workflow's first line: how bake-plan knows a file is its own to replace."""

RUNNERS: Mapping[str, str] = {"amd64": "ubuntu-24.04", "arm64": "ubuntu-24.04-arm"}
"""GitHub-hosted runners per arch (GitHub's runner labels); other arches run on
:data:`EMULATED_ON` under QEMU (docker/setup-qemu-action)."""

EMULATED_ON = "ubuntu-24.04"

PYTHON = "3.12"
"""The Python that runs bake-plan in each job (actions/setup-python; the runner's own Python
refuses ``pip install`` outside a virtual environment, PEP 668)."""

ACTIONS: Mapping[str, str] = {
    "checkout": "actions/checkout@v6",
    "python": "actions/setup-python@v6",
    "qemu": "docker/setup-qemu-action@v4",
    "buildx": "docker/setup-buildx-action@v4",
    "login": "docker/login-action@v4",
    "download": "actions/download-artifact@v7",
    "upload": "actions/upload-artifact@v6",
}
"""The actions' major versions: the first on the node24 runtime (node20 is deprecated on GitHub)."""


def job_id(stage: str, arch: str) -> str:
    """The job of one stage and arch: ``build-<bake target name>-<arch>`` (a job id takes
    ``[A-Za-z0-9_-]`` and starts with a letter; target names are unique in a plan)."""
    return f"build-{target_name(stage)}-{arch}"


def artifact(stage: str, arch: str) -> str:
    """The artifact holding a job's sitrep: ``sitrep-<bake target name>-<arch>``."""
    return f"sitrep-{target_name(stage)}-{arch}"


# YAML's printable characters (YAML 1.2, 5.1) less '"' and '\\', which a double-quoted scalar escapes;
# also less the tab, line breaks and the BOM, escaped so the value stays on its line.
_YAML_KEEP = LazyPattern(r"[\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
_YAML_SHOWN = frozenset("\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Escaped although YAML 1.2 prints them: line breaks to YAML 1.1 (PyYAML), and the
bidirectional controls, which make a reviewed line read differently."""
_YAML_ESCAPES = {"\"": '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\x00": "\\0"}
# A plain scalar that reads back as the same string in every YAML: it starts with a letter, '_'
# or '/', so it is no number, no quoted or flow scalar, no alias, tag, comment or indicator; it
# holds no ':' or '#', so no mapping value and no comment; it ends with no space.
_PLAIN = LazyPattern(r"[A-Za-z_/][A-Za-z0-9_./=+@ \"'$,-]*(?<! )\Z")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _q(value: str) -> str:
    """``value`` as a YAML double-quoted scalar: each character YAML does not print as itself (a
    control, a line break, a tab, a BOM, a lone surrogate), and ``"`` and ``\\``, escaped
    (``\\n``, ``\\x1b``, ``\\u2028``), so the scalar reads back as ``value`` and stays on one line.
    Every value put in the workflow goes through here or :func:`_scalar`."""
    out = []
    for char in value:
        if _YAML_KEEP.match(char) and char not in _YAML_SHOWN:
            out.append(char)
        elif char in _YAML_ESCAPES:
            out.append(_YAML_ESCAPES[char])
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def _scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain when it reads back as itself in every YAML (a command of
    ordinary words stays readable), else double-quoted (:func:`_q`).

    :raises UsageError: ``value`` holds ``${{``, which GitHub evaluates as an expression after
        reading the YAML (no quoting keeps it literal), so a path could run ``${{ secrets.X }}``.
    """
    if "${{" in value:
        raise UsageError(f"--format github-workflow: {value!r} holds '${{{{', which GitHub Actions would "
                         "evaluate as an expression in the workflow")
    return value if _PLAIN.match(value) and value.lower() not in _RESERVED else _q(value)


def _run(words: Sequence[str], tail: str = "") -> str:
    """A ``run:`` step's value for ``words``: the shell reads the step first, so each word is
    shell-quoted (``shlex.quote``), then the whole is a YAML scalar (:func:`_scalar`). ``tail``
    is shell text of our own (``--date "$DATE"``) appended as it is."""
    return _scalar(shlex.join(words) + tail)


def _setup(indent: str, install: str) -> List[str]:
    """Checkout, Python, bake-plan and the repository's plugins: ``pip install INSTALL .``, so
    the plugins' dependency on bake-plan is met by the requirement ``install`` (a version, or a
    direct reference while bake-plan is on no index), shell-quoted."""
    return [
        f"{indent}- uses: {ACTIONS['checkout']}",
        f"{indent}- uses: {ACTIONS['python']}",
        f"{indent}  with:",
        f"{indent}    python-version: {_q(PYTHON)}",
        f"{indent}- name: install bake-plan and the plugins",
        f"{indent}  run: {_run(['pip', 'install', install, '.'])}",
    ]


def _login(indent: str) -> List[str]:
    return [
        f"{indent}- uses: {ACTIONS['login']}",
        f"{indent}  with:",
        f"{indent}    registry: ghcr.io",
        f"{indent}    username: ${{{{ github.actor }}}}",
        f"{indent}    password: ${{{{ secrets.GITHUB_TOKEN }}}}",
    ]


def render_workflow(entries: Sequence[dict], regenerate: Sequence[str], selection: Sequence[str],
                    name: str = "nightly", cron: str = "0 2 * * *", install: str = "bake-plan") -> str:
    """The workflow's YAML text.

    :param entries: :func:`bake.plan.matrix.jobs` (each with ``stage``, ``platform``, ``arch``,
        ``id``, ``needs``); at least one.
    :param regenerate: the ``bake-plan matrix …`` words that write this file (the plan job adds
        ``--check``).
    :param selection: words every ``publish`` gets besides ``--registry``/``--date``/``--sitrep``/
        ``--all-or-nothing``: the
        ``--target``\\ s, explicit ``--platform``\\ s, ``--not-secret``\\ s.
    :param install: the pip requirement every job installs bake-plan from, beside the
        repository's plugins (the configuration's ``install``, else
        :func:`bake.version.install_requirement`).
    :returns: UTF-8 text starting with :data:`HEADER`; the same input gives the same text.
    """
    by_id: Dict[str, dict] = {e["id"]: e for e in entries}
    command = printable(shlex.join(regenerate), keep="")  # a comment: one line, whatever it holds
    lines = [
        HEADER,
        "# Write it again when the family changes, from the repository's root:",
        f"#   {command}",
        "# The plan job fails while this file is stale (the same command with --check).",
        f"name: {_scalar(name)}",
        "on:",
        "  schedule:",
        f"    - cron: {_q(cron)}",
        "  workflow_dispatch: {}",
        "  workflow_call: {}  # other triggers: call this workflow from one of yours",
        "permissions:",
        "  contents: read",
        "  packages: write  # GITHUB_TOKEN pushes images and registry caches to ghcr.io",
        "jobs:",
        "  plan:",
        "    runs-on: ubuntu-24.04",
        "    outputs:",
        "      date: ${{ steps.plan.outputs.date }}",
        "      registry: ${{ steps.plan.outputs.registry }}",
        "    steps:",
        *_setup("      ", install),
        "      - name: this workflow matches the family",
        f"        run: {_run([*regenerate, '--check'])}",
        "      - id: plan",
        "        name: the nightly's date and registry",
        "        env:",
        "          OWNER: ${{ github.repository_owner }}",
        "        run: |",
        "          # One date for every job, even one that starts after midnight. Image names are",
        "          # lower case; a GitHub owner may have capitals (NVIDIA).",
        '          echo "date=$(date -u +%F)" >> "$GITHUB_OUTPUT"',
        '          echo "registry=ghcr.io/${OWNER,,}" >> "$GITHUB_OUTPUT"',
    ]
    first = True
    for entry in entries:
        stage, arch = entry["stage"], entry["arch"]
        needs = [job_id(by_id[n]["stage"], by_id[n]["arch"]) for n in entry["needs"]]
        reports = " ".join(artifact(by_id[n]["stage"], by_id[n]["arch"]) for n in entry["needs"])
        lines += [
            f"  {job_id(stage, arch)}:",
            f"    name: {_q(entry['id'])}",
            f"    needs: [{', '.join(['plan', *needs])}]",
            f"    runs-on: {RUNNERS.get(arch, EMULATED_ON)}",
            "    env:",
            f"      STAGE: {_q(stage)}",
            f"      PLATFORM: {_q(entry['platform'])}",
            f"      ARCH: {_q(arch)}",
            f"      SITREP: {_q(artifact(stage, arch))}",
            f"      NEEDS: {_q(reports)}  # the sitreps of the jobs it builds on",
            f"      EMULATE: {_q('false' if arch in RUNNERS else 'true')}",
            "      REGISTRY: ${{ needs.plan.outputs.registry }}",
            "      DATE: ${{ needs.plan.outputs.date }}",
        ]
        if not first:
            lines.append("    steps: *build")
            continue
        first = False
        lines += [
            "    steps: &build",
            *_setup("      ", install),
            "      - if: env.EMULATE == 'true'",
            f"        uses: {ACTIONS['qemu']}",
            "        with:",
            "          platforms: ${{ env.PLATFORM }}",
            "      - name: a builder that exports registry caches (the docker driver cannot)",
            f"        uses: {ACTIONS['buildx']}",
            *_login("      "),
            "      - if: env.NEEDS != ''",
            f"        uses: {ACTIONS['download']}",
            "        with:",
            "          pattern: sitrep-*-${{ env.ARCH }}",
            "          path: reports",
            "      - name: build and push",
            "        run: |",
            "          # The parents' meal kits come from the registry, pinned by digest from their sitreps.",
            "          reports=()",
            '          for need in $NEEDS; do reports+=(--parent-report "reports/$need/sitrep.json"); done',
            '          bake-plan build --target "$STAGE" --platform "$PLATFORM" --registry "$REGISTRY" \\',
            '            --date "$DATE" --push --from-registry "${reports[@]}" --sitrep-dir sitrep',
            "      - name: smoke tests",
            "        run: |",
            "          # The stage's image tests in the image just pushed; their outcomes join the sitrep.",
            '          bake-plan test --target "$STAGE" --platform "$PLATFORM" --registry "$REGISTRY" \\',
            '            --date "$DATE" --sitrep-dir sitrep',
            "      - name: keep the sitrep, tests included, for the parents' children and publish",
            "        if: ${{ !cancelled() }}",
            f"        uses: {ACTIONS['upload']}",
            "        with:",
            "          name: ${{ env.SITREP }}",
            "          path: sitrep",
        ]
    lines += [
        "  publish:",
        f"    needs: [{', '.join(['plan', *(job_id(e['stage'], e['arch']) for e in entries)])}]",
        "    # After every build job whatever its outcome: the sitreps' gate decides what is published.",
        "    if: ${{ !cancelled() && needs.plan.result == 'success' }}",
        "    runs-on: ubuntu-24.04",
        "    env:",
        "      REGISTRY: ${{ needs.plan.outputs.registry }}",
        "      DATE: ${{ needs.plan.outputs.date }}",
        "    steps:",
        *_setup("      ", install),
        f"      - uses: {ACTIONS['buildx']}",
        *_login("      "),
        "      - name: every job's sitrep, one directory per artifact",
        f"        uses: {ACTIONS['download']}",
        "        with:",
        "          pattern: sitrep-*",
        "          path: sitreps",
        "      - name: merge the per-arch images into multi-arch tags, gated on the sitreps",
        "        # Dated tags of the images built on every arch; floating tags (latest, mealkit) move only",
        "        # if every image and its chain built and passed its tests on every arch, else none.",
        "        run: " + _run(["bake-plan", "publish", *selection],
                              ' --registry "$REGISTRY" --date "$DATE" --sitrep sitreps --all-or-nothing'),
    ]
    return "\n".join(lines) + "\n"
