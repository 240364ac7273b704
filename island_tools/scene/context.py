"""What every stage of the scene pipeline works on: the run's options and a small context.

A stage is a function ``stage(ctx, ...)`` over a :class:`StageContext`: the scene's paths, the
run's options, the injected Blender work (``run_job``) and island loop (``run_group``), the
progress printer, and - inside a session - the run's ``state.json``, ledger, relation graph
and run id. The director (``island_tools.scene.pipeline.ScenePipeline``) is a StageContext;
the batch's tasks build one each.
"""
from __future__ import annotations

import copy
import math
import os
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from ..config import Settings
from ..errors import UsageError
from ..iteration import RunJob
from .ledger import Ledger
from .paths import ScenePaths
from .relation_graph import RelationGraph
from .state import SceneState

RunGroup = Callable[..., Any]
Progress = Callable[[str], None]
JobSlots = Callable[[int], RunJob]   # slot -> run_job of its own (a warm worker per slot)


@dataclass(frozen=True)
class RunOptions:
    policy: str = "solver"
    max_iter: int = 20
    max_rounds: int = 3
    min_delta: float = 0.01
    timeout_s: float = 120.0
    restart: bool = False
    settings: Settings = field(default_factory=Settings)
    # Groups refined side by side (each on its own warm worker); None = one per core.
    # Only with a ``job_slots`` factory (else sequential). Outputs do not depend on it.
    workers: int | None = None
    # --strict: a refused unit refuses the whole scene (exit 23, nothing written) instead
    # of costing its own group only (exit 24, partial).
    strict: bool = False
    # Groups ``propose`` marked uncertain (``validate.uncertain_proposals``). Default: a group
    # whose doubt is only about objects it does not hold, or about members it holds
    # (``doubt.hold_doubted_members``: those are kept where they stand), is refined for its
    # other members (every doubtful object stays where it stands, as fixed context); any
    # other is left as the input holds it and reported like a refused group.
    # --include-uncertain refines every uncertain group with all its members;
    # --leave-uncertain leaves every one (the behaviour before issue 32). A group refined
    # with its doubt open never reports pass.
    include_uncertain: bool = False
    leave_uncertain: bool = False

    @property
    def uncertain_mode(self) -> str:
        return ("include" if self.include_uncertain else
                "leave" if self.leave_uncertain else "held")

    def check(self) -> None:
        if self.max_iter < 1:
            raise UsageError(f"--max-iter must be >= 1, got {self.max_iter}")
        if self.max_rounds < 1:
            raise UsageError(f"--max-rounds must be >= 1, got {self.max_rounds}")
        if not math.isfinite(self.min_delta) or self.min_delta < 0:
            raise UsageError(f"--min-delta must be a finite number >= 0, got {self.min_delta}")
        if self.include_uncertain and self.leave_uncertain:
            raise UsageError("--include-uncertain and --leave-uncertain contradict each other",
                             field="--leave-uncertain", fix="pass at most one of them")
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers must be >= 1, got {self.workers}")
        if not self.timeout_s > 0:
            raise UsageError(f"--timeout-s must be > 0, got {self.timeout_s}")
        if self.policy != "solver" and not (self.policy.startswith("command:")
                                            and self.policy[8:].strip()):
            raise UsageError(f"unknown policy {self.policy!r}", field="--policy",
                             fix="use 'solver' or 'command:<shell command>'")

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("restart")
        out.pop("workers")   # how fast, not what: resuming with another count is the same run
        return out


class StageContext:
    """The paths, options, injected work and run bookkeeping a stage function needs."""

    def __init__(self, scene_dir: str | os.PathLike[str], options: RunOptions, run_job: RunJob,
                 run_group: RunGroup | None = None, progress: Progress | None = None,
                 job_slots: JobSlots | None = None) -> None:
        options.check()
        self.paths = ScenePaths(scene_dir)
        self.options = options
        self.run_job = run_job
        self.job_slots = job_slots
        self._run_group = run_group
        self.progress = progress
        self.state: SceneState | None = None
        self.ledger: Ledger | None = None
        self.graph: RelationGraph | None = None
        self.run_id = ""
        self.exit_code = 0
        self.input_sha_before = ""
        self.stage_seconds: dict[str, float] = {}

    def group_workers(self, groups: int) -> int:
        """How many groups to refine side by side: 1 without a ``job_slots`` factory."""
        if self.job_slots is None or groups < 2:
            return 1
        wanted = self.options.workers or os.cpu_count() or 1
        return max(1, min(wanted, groups))

    def run_jobs_side_by_side(self, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each job on its own slot (``job_slots``), all at once; the results in order.
        Only Blender work runs in the threads (no bookkeeping). A failure is raised once
        every job is back, the first in order; Ctrl-C / SIGTERM in the waiting thread
        is raised at once (the threads are daemons, like ``refine``'s)."""
        if len(specs) < 2 or self.job_slots is None:
            return [self.run_job(spec) for spec in specs]
        slots = self.job_slots
        results: list[Any] = [None] * len(specs)
        errors: list[BaseException | None] = [None] * len(specs)

        def work(i: int) -> None:
            try:
                results[i] = slots(i)(specs[i])
            except BaseException as exc:  # noqa: BLE001 - raised by the caller below
                errors[i] = exc

        threads = [threading.Thread(target=work, args=(i,), name=f"jobs-{i}", daemon=True)
                   for i in range(len(specs))]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
        for exc in errors:
            if exc is not None:
                raise exc
        return results

    def with_run_job(self, run_job: RunJob) -> StageContext:
        """The same context (state, ledger, paths shared) with another ``run_job``."""
        view = copy.copy(self)
        view.run_job = run_job
        return view

    def say(self, msg: str) -> None:
        if self.progress:
            self.progress(f"[refine_scene] {msg}")

    def time(self, stage: str, seconds: float) -> None:
        self.stage_seconds[stage] = round(self.stage_seconds.get(stage, 0.0) + seconds, 4)
        self.scene_state.add_seconds(stage, seconds)

    @property
    def run_ledger(self) -> Ledger:
        if self.ledger is None:
            raise UsageError("stage functions run inside ScenePipeline.session()")
        return self.ledger

    @property
    def scene_state(self) -> SceneState:
        if self.state is None:
            raise UsageError("stage functions run inside ScenePipeline.session()")
        return self.state

    @property
    def relation_graph(self) -> RelationGraph:
        if self.graph is None:
            raise UsageError("stage functions run inside ScenePipeline.session()")
        return self.graph

    def run_group_fn(self) -> RunGroup:
        if self._run_group is None:
            from ..adapter import run_group
            self._run_group = run_group
        return self._run_group
