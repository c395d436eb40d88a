"""A family's nightly as a complete GitHub Actions workflow: one job per published stage and
arch, each ``needs:`` the jobs whose images it builds on, then one publish job.

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

import json
import shlex
from typing import Dict, List, Mapping, Sequence

from bake.owned import MARK
from bake.plan.names import target_name

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


def _q(value: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(value)


def _setup(indent: str) -> List[str]:
    """Checkout, Python, bake-plan and the repository's plugins (``pip install .``)."""
    return [
        f"{indent}- uses: {ACTIONS['checkout']}",
        f"{indent}- uses: {ACTIONS['python']}",
        f"{indent}  with:",
        f"{indent}    python-version: {_q(PYTHON)}",
        f"{indent}- name: install bake-plan and the plugins",
        f"{indent}  run: pip install .",
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
                    name: str = "nightly", cron: str = "0 2 * * *") -> str:
    """The workflow's YAML text.

    :param entries: :func:`bake.plan.matrix.jobs` (each with ``stage``, ``platform``, ``arch``,
        ``id``, ``needs``); at least one.
    :param regenerate: the ``bake-plan matrix …`` words that write this file (the plan job adds
        ``--check``).
    :param selection: words every ``publish`` gets besides ``--registry``/``--date``: the
        ``--target``\\ s, explicit ``--platform``\\ s, ``--not-secret``\\ s.
    :returns: UTF-8 text starting with :data:`HEADER`; the same input gives the same text.
    """
    by_id: Dict[str, dict] = {e["id"]: e for e in entries}
    command = shlex.join(regenerate)
    lines = [
        HEADER,
        "# Write it again when the family changes, from the repository's root:",
        f"#   {command}",
        "# The plan job fails while this file is stale (the same command with --check).",
        f"name: {name}",
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
        *_setup("      "),
        "      - name: this workflow matches the family",
        f"        run: {shlex.join([*regenerate, '--check'])}",
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
            *_setup("      "),
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
            "      - if: always()",
            f"        uses: {ACTIONS['upload']}",
            "        with:",
            "          name: ${{ env.SITREP }}",
            "          path: sitrep",
        ]
    publish = shlex.join(["bake-plan", "publish", *selection])
    lines += [
        "  publish:",
        f"    needs: [{', '.join(['plan', *(job_id(e['stage'], e['arch']) for e in entries)])}]",
        "    runs-on: ubuntu-24.04",
        "    env:",
        "      REGISTRY: ${{ needs.plan.outputs.registry }}",
        "      DATE: ${{ needs.plan.outputs.date }}",
        "    steps:",
        *_setup("      "),
        f"      - uses: {ACTIONS['buildx']}",
        *_login("      "),
        "      - name: merge the per-arch images into multi-arch tags",
        "        # Creates nothing and exits 1 if any per-arch image is missing.",
        f'        run: {publish} --registry "$REGISTRY" --date "$DATE"',
    ]
    return "\n".join(lines) + "\n"
