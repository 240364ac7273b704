"""Stage 3, refine: the rounds of every flagged group, each with its contract check and score
gate; verify and unknown resolution (``verify_stage``) between rounds.

Gate (``group_gate``): a completed group's accepted round, verification and island are on
disk and agree; a failed group has its round_0. A group left unfinished by a dead run is
reset from ``rounds/round_0`` (its later rounds moved to ``rounds.bak.<UTC>/``) and redone.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..errors import EXIT_FILESYSTEM, EXIT_INTERNAL, FilesystemError, IslandError
from ..files import atomic
from ..files.jsonio import read_object
from ..iteration import REFINER_DIR, sha256_file
from ..measure import frames
from . import contract, verify
from .context import StageContext
from .errors import EXIT_GROUPS_FAILED, IntegrityError
from .group_files import load_poses, poses_doc, write_forward_axes
from .ledger import utc_now
from .paths import stamp, unique_path
from .state import (
    GROUP_COMPLETED,
    GROUP_FAILED,
    GROUP_PENDING,
    GROUP_RUNNING,
    outcome_on_disk,
)
from .verify_stage import geometry_context, resolve_unknowns, route, verify_group


def refine(ctx: StageContext) -> None:
    state = ctx.scene_state
    flagged = state.doc["groups_needing_island"]
    if not flagged:
        state.trace("refine:skipped:no_flagged_group")
        return
    workers = ctx.group_workers(len(flagged))
    if workers > 1:
        refine_side_by_side(ctx, list(flagged), workers)
    else:
        for gid in flagged:
            refine_group(ctx, gid)
    for stage in ("refine", "verify", "resolve_unknowns"):
        if stage in state.doc["stages"] or stage == "refine":
            state.stage_finished(stage, 0.0)


def refine_side_by_side(ctx: StageContext, gids: list[str], workers: int) -> None:
    """``refine_group`` for several groups at once, one thread and one warm worker each.

    Groups are independent in this stage (each island carries its own fixed context from
    validation), so the only shared things are the run's bookkeeping - ``state.json``, the
    ledger, the progress printer - and those are touched under one lock, which a thread
    holds for everything it does except waiting on Blender: its ``run_job`` releases the
    lock for the job's duration. Bookkeeping is therefore as serial as in a sequential run
    (the same writes, in an interleaved order); only the Blender work overlaps. An
    exception that is not a group's own failure (Ctrl-C, SIGTERM) stops the others from
    taking new groups and is raised here once they are back."""
    assert ctx.job_slots is not None
    lock = threading.Lock()
    todo = list(gids)
    stop: list[BaseException] = []
    ctx.say(f"refining {len(gids)} group(s), {workers} side by side")

    def worker(slot: int) -> None:
        job = ctx.job_slots(slot)  # type: ignore[misc]

        def unlocked(spec: dict[str, Any]) -> dict[str, Any]:
            lock.release()
            try:
                return job(spec)
            finally:
                lock.acquire()
                if stop:   # the run is stopping: this group goes no further
                    raise _Stopped()

        view = ctx.with_run_job(unlocked)
        with lock:
            while todo and not stop:
                gid = todo.pop(0)
                try:
                    refine_group(view, gid)
                except _Stopped:
                    return
                except BaseException as exc:  # noqa: BLE001 - handed to the caller below
                    stop.append(exc)

    threads = [threading.Thread(target=worker, args=(slot,), name=f"refine-{slot}",
                                daemon=True) for slot in range(workers)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException as exc:
        stop.append(exc)
        lock.acquire()   # never released: no thread touches the run's bookkeeping again
        raise
    if stop:
        raise stop[0]


class _Stopped(BaseException):
    """Unwinds a side-by-side group when the run stops (not a failure of the group)."""


def group_gate(ctx: StageContext, gid: str, terminal: str) -> bool:
    return outcome_on_disk(ctx.paths.group(gid), ctx.scene_state.group(gid), terminal)


def reset_group(ctx: StageContext, gid: str) -> None:
    gp = ctx.paths.group(gid)
    leftovers = [c for c in (gp.rounds.iterdir() if gp.rounds.is_dir() else [])
                 if c.name != "round_0"] + [p for p in (gp.verification, gp.island_done)
                                            if p.exists()]
    backup = None
    if leftovers:
        backup = unique_path(gp.root / f"rounds.bak.{stamp()}")
        atomic.make_dir(backup)
        for item in leftovers:
            atomic.replace(item, backup / item.name)
    round0 = gp.round(0)
    atomic.copy_file(round0 / "island.blend", gp.island)
    atomic.copy_file(round0 / "metadata.json", gp.metadata)
    atomic.copy_file(round0 / "target_spec.json", gp.target_spec)
    write_forward_axes(gp)
    ctx.scene_state.forget_terminal(gid)
    where = f"; earlier rounds moved to {backup.name}/" if backup else ""
    ctx.run_ledger.group_event(ctx.run_id, gid, "reset", GROUP_PENDING,
                               f"unfinished by an earlier run: redone from round_0{where}")
    ctx.say(f"{gid}: unfinished by an earlier run, redone from round_0{where}")


def refine_group(ctx: StageContext, gid: str) -> None:
    state, gp = ctx.scene_state, ctx.paths.group(gid)
    terminal = state.terminal(gid)
    if terminal and group_gate(ctx, gid, terminal):
        state.trace(f"refine:{gid}:skipped:{terminal}")
        ctx.run_ledger.group_event(ctx.run_id, gid, "skipped", terminal, "terminal in an "
                                   "earlier run")
        return
    g = state.group(gid)
    if terminal or g["status"] != GROUP_PENDING or gp.rounds.is_dir() and any(
            c.name != "round_0" for c in gp.rounds.iterdir()):
        reset_group(ctx, gid)
    g.update(status=GROUP_RUNNING, rounds=[], unknowns=[], accepted_round=0,
             verification=None, current_round=0)
    g.pop("failure_reason", None)
    state.save()
    ctx.run_ledger.group_event(ctx.run_id, gid, "started", GROUP_RUNNING,
                               f"policy {ctx.options.policy}")
    try:
        rounds(ctx, gid)
    except FilesystemError:   # no failure of the group: the run stops, a rerun redoes it
        raise
    except IslandError as exc:
        group_failed(ctx, gid, g.get("current_round", 0), f"{type(exc).__name__} "
                     f"(exit {exc.exit_code}): {exc.one_line()}", type(exc).__name__,
                     exc.exit_code)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        msg = " ".join(f"internal: {type(exc).__name__}: {exc}".split())
        group_failed(ctx, gid, g.get("current_round", 0), msg, type(exc).__name__,
                     EXIT_INTERNAL)


def group_failed(ctx: StageContext, gid: str, round_: int, reason: str, kind: str, code: int
                 ) -> None:
    g = ctx.scene_state.group(gid)
    accepted = int(g.get("accepted_round", 0))
    gp = ctx.paths.group(gid)
    if gp.round_done(accepted):
        atomic.copy_file(gp.round(accepted) / "island.blend", gp.island)
    ctx.run_ledger.failure(ctx.run_id, gid, f"refine:round_{round_}", kind, code, reason)
    ctx.run_ledger.group_event(ctx.run_id, gid, "failed", GROUP_FAILED, reason)
    ctx.scene_state.mark_failed(gid, f"round {round_}: {reason}")
    ctx.scene_state.trace(f"refine:{gid}:failed")
    ctx.say(f"{gid}: FAILED in round {round_}: {reason}")


def rounds(ctx: StageContext, gid: str) -> None:
    state, gp, ledger, opts = ctx.scene_state, ctx.paths.group(gid), ctx.run_ledger, ctx.options
    g = state.group(gid)
    accepted = 0
    for k in range(1, opts.max_rounds + 1):
        g["current_round"] = k
        kind = "refine"
        if k > 1:
            open_unknowns = [u for u in g["unknowns"] if u["status"] == "open"]
            if open_unknowns:
                resolve_unknowns(ctx, gid, open_unknowns, k)
            else:
                kind = "repair"
        state.trace(f"{kind}:{gid}:round_{k}")
        ledger.group_event(ctx.run_id, gid, "round_started", GROUP_RUNNING,
                           f"round {k} ({kind})")
        ctx.say(f"{gid}: round {k} ({kind}) with policy {opts.policy}")
        t0 = time.perf_counter()
        report = ctx.run_group_fn()(
            gp.root, opts.policy, opts.settings, ctx.run_job, max_iter=opts.max_iter,
            progress=(lambda msg: ctx.say(f"{gid}: {msg}")) if ctx.progress else None,
            timeout_s=opts.timeout_s, reuse_meshes=True)
        ctx.time("refine", time.perf_counter() - t0)
        if getattr(report, "exit_code", 0) == EXIT_FILESYSTEM:   # a full or read-only disk
            errors = list(getattr(report, "errors", []) or [])
            raise FilesystemError(f"group '{gid}', round {k}: "
                                  f"{errors[-1] if errors else report.stop_reason}")
        check = contract.check_loop(gp.root, opts.max_iter)
        for row in check.iterations:
            ledger.iteration(ctx.run_id, gid, k, row)
        record: dict[str, Any] = {
            "round": k, "kind": kind, "policy": opts.policy,
            "final_iter": getattr(report, "final_iter", None),
            "stop_reason": getattr(report, "stop_reason", None),
            "report": getattr(report, "report_text", None),
            "report_ok": getattr(report, "ok", None),
            "report_errors": list(getattr(report, "errors", []) or []),
            "contract": check.to_dict()}
        if not check.ok:
            record["decision"] = "rejected: contract"
            write_round(ctx, gid, k, record, island=False)
            g["rounds"].append(record)
            ledger.decision(ctx.run_id, gid, k, "rollback", reason=f"contract: "
                            f"{check.reason}")
            group_failed(ctx, gid, k, f"contract: {check.reason}", "ContractViolation",
                         EXIT_GROUPS_FAILED)
            return
        accepted = score_gate(ctx, gid, k, accepted, record)
        g["rounds"].append(record)
        g["accepted_round"] = accepted
        state.save()
        review = verify_group(ctx, gid, k, accepted)
        if route(ctx, gid, k, review) != "continue":
            break
    v = g["verification"]
    ledger.group_event(ctx.run_id, gid, "completed", GROUP_COMPLETED,
                       f"accepted round {accepted}; verdict {v['verdict']}: "
                       f"{v['pass']}/{v['total']} reviews pass, {v['fail']} fail, "
                       f"{v['uncertain']} uncertain")
    state.mark_completed(gid)
    state.trace(f"refine:{gid}:completed")
    ctx.say(f"{gid}: completed (accepted round {accepted}, verdict {v['verdict']}, "
            f"{v['pass']}/{v['total']} reviews pass)")
    for line in v.get("not_measured") or []:
        ctx.say(f"{gid}: UNCERTAIN {line}")


def score_gate(ctx: StageContext, gid: str, k: int, accepted: int, record: dict[str, Any]) -> int:
    """Keep round k only if it lowers the violation score by >= min_delta."""
    gp, opts = ctx.paths.group(gid), ctx.options
    final = record["contract"]["final_iter"]
    state_doc = read_object(gp.root / REFINER_DIR / f"iter_{final}" / "current_state.json",
                            IntegrityError, "current_state.json", "rerun the group")
    new_poses = {n: frames.as_matrix(e["matrix_4x4"]) for n, e in state_doc["poses"].items()}
    prev_poses = load_poses(gp.round(accepted) / "poses.json")
    geo, spec, _, _ = geometry_context(ctx, gid)
    geo_before, geo_after = geo.compute(prev_poses, spec, 0), geo.compute(new_poses, spec, final)
    before = verify.violation_score(geo_before, spec)
    after = verify.violation_score(geo_after, spec)
    g = ctx.scene_state.group(gid)
    if k == 1:
        g["baseline_score"] = before
    # hard constraints first (issue 25): a round that takes a member out of a wall, a unit
    # or another member is kept even when the soft score rises (an infeasible spec), and
    # one that puts a member into one is never kept for a better soft score
    hard_before, hard_after = verify.hard_violations(geo_before), verify.hard_violations(geo_after)
    improved = (hard_after < hard_before
                or (hard_after == hard_before and before - after >= opts.min_delta))
    record.update(score_before=before, score_after=after, min_delta=opts.min_delta,
                  hard_before=hard_before, hard_after=hard_after)
    if improved:
        record["decision"] = "accept"
        write_round(ctx, gid, k, record, island=True, poses=new_poses)
        ctx.run_ledger.decision(ctx.run_id, gid, k, "accept", before, after, opts.min_delta,
                                f"violation score {before:.4f} -> {after:.4f}")
        g["accepted_score"] = after
        ctx.say(f"{gid}: round {k} accepted: score {before:.4f} -> {after:.4f}")
        return k
    record["decision"] = f"rollback: keep round {accepted}"
    atomic.copy_file(gp.round(accepted) / "island.blend", gp.island)
    write_round(ctx, gid, k, record, island=False)
    ctx.run_ledger.decision(ctx.run_id, gid, k, "rollback", before, after, opts.min_delta,
                            f"score {before:.4f} -> {after:.4f} improves by less than "
                            f"{opts.min_delta}; round {accepted} kept")
    g["accepted_score"] = before
    ctx.say(f"{gid}: round {k} rolled back: score {before:.4f} -> {after:.4f} "
            f"(min delta {opts.min_delta}); round {accepted} kept")
    return accepted


def write_round(ctx: StageContext, gid: str, k: int, record: dict[str, Any], island: bool,
                poses: Mapping[str, np.ndarray] | None = None) -> None:
    gp = ctx.paths.group(gid)
    rdir = gp.round(k)
    if rdir.exists():
        atomic.remove_tree(rdir, ignore_errors=False)
    atomic.make_dir(rdir, parents=True)
    if island:
        atomic.link_or_copy(gp.island, rdir / "island.blend")
        assert poses is not None
        atomic.write_json(rdir / "poses.json", poses_doc(poses))
        record["island_sha256"] = sha256_file(rdir / "island.blend")
    atomic.write_json(rdir / "result.json", {**record, "run_id": ctx.run_id,
                                             "at_utc": utc_now()})

