"""The scene pipeline (contract: stage3-scene-refinement), pure Python.

validate -> rebuild_islands -> refine -> verify (unknowns / repair rounds, score gate) ->
merge_back -> finalize -> eval, run as a workflow director over artifacts on disk
(``docs/SCENE_PIPELINE.md``). Blender work is injected as ``run_job(job) -> dict`` and the
island loop as ``run_group(...)`` (``island_tools.adapter``), so nothing here imports bpy.

Modules: ``relation_graph`` (inputs/relation_graph.json), ``validate`` (measure groups, infer
target specs), ``verify`` (review items, unknowns, violation score), ``contract`` (a loop
run checked from its artifacts), ``state`` (state.json), ``ledger`` (ledger.sqlite),
``metrics`` (metrics.json), ``pipeline`` (the director), ``report`` (tables).
"""
