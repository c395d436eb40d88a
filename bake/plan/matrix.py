"""CI fan-out: one job per published stage and arch, in dependency waves.

Each job runs ``bake-plan build --target <stage> --platform <platform> --from-registry`` and so
builds on its parents' published meal kits, pinned by digest from their sitreps: every job's
parents are in earlier waves. Stages that publish no image (a wheel builder such as ``te``) are
built inside the job of the stage that uses them. The output is what GitHub Actions'
``strategy.matrix`` takes (``{"include": [...]}``).
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

    def published_deps(stage) -> List[str]:
        out: List[str] = []
        for dep in dependencies(stage):
            if dep in names:
                out.append(dep)
            else:  # built inside this job: look through it
                out.extend(d for d in published_deps(stages[dep]) if d not in out)
        return out

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
