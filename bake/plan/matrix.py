"""CI fan-out: one job per published stage and arch, in dependency waves.

Each job runs ``bake-plan build --target <stage> --platform <platform> --from-registry`` and so
builds on its parents' published meal kits, pinned by digest from their sitreps: every job's
parents are in earlier waves. Stages that publish no image (a wheel builder such as ``te``) are
built inside the job of the stage that uses them. The output is what GitHub Actions'
``strategy.matrix`` takes (``{"include": [...]}``); :mod:`bake.plan.workflow` writes them as the
jobs of a whole workflow.
"""

from __future__ import annotations

from typing import Dict, List

from bake.plan.compose import Composition, dependencies, output_target
from bake.plan.names import arch_of


def jobs(composition: Composition) -> List[dict]:
    """Matrix entries, wave by wave, each: ``stage``, ``platform``, ``arch``, ``wave`` (0 for
    roots), ``needs`` (``"<stage>/<arch>"`` of the jobs whose images it builds on) and ``id``
    (``"<stage>/<arch>"``)."""
    stages = composition.stages
    published = [s for s in composition.chain if s.image is not None]
    names = {s.name for s in published}

    looked_through: Dict[str, List[str]] = {}

    def published_deps(stage) -> List[str]:
        # The published stages a job builds on: its published dependencies, and through each
        # unpublished one (built inside this job) that one's. Worked out with an explicit stack
        # and remembered, so a chain of thousands of unpublished stages neither recurses nor
        # walks the same ancestors again for every descendant.
        stack = [stage.name]
        while stack:
            name = stack[-1]
            if name in looked_through:  # reached twice (a diamond): done already
                stack.pop()
                continue
            deps = dependencies(stages[name])
            todo = [d for d in deps if d not in names and d not in looked_through]
            if todo:
                stack.extend(todo)
                continue
            out: List[str] = []
            for dep in deps:
                if dep in names:
                    out.append(dep)
                else:  # built inside this job: look through it
                    out.extend(d for d in looked_through[dep] if d not in out)
            looked_through[name] = out
            stack.pop()
        return looked_through[stage.name]

    wave: Dict[str, int] = {}
    for stage in composition.chain:  # dependency order: parents first
        if stage.name in names:
            wave[stage.name] = 1 + max((wave[d] for d in published_deps(stage)), default=-1)

    entries = []
    for stage in sorted(published, key=lambda s: (wave[s.name], composition.chain.index(s))):
        for platform in composition.plan["target"][output_target(stage)]["platforms"]:
            arch = arch_of(platform)
            entries.append({
                "id": f"{stage.name}/{arch}",
                "stage": stage.name,
                "platform": platform,
                "arch": arch,
                "wave": wave[stage.name],
                "needs": [f"{d}/{arch}" for d in published_deps(stage)],
            })
    return entries
