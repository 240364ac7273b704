"""Check one island-loop run against the contract, from the artifacts it left on disk.

The loop's own report is not trusted: everything here is read from
``<group>/simple_refiner/iter_N/`` and the promoted ``<group>/island.blend``. A run breaks the
contract (the group goes to ``islands_failed``) when:

* no refinement iteration completed (only iter_0), or the iterations are not contiguous;
* ``iter_1/transforms.json`` has empty ``members`` (the iter_1 rule);
* an iteration says ``converged: true`` before MIN_ITER = 5, or without an earlier iteration
  in [1, N-1] that moved a member (the convergence gate);
* the last iteration is not marked ``final: true``, or an earlier one is;
* more iterations than ``max_iter`` completed;
* ``iter_0/island.blend`` and the final ``island.blend`` are byte-identical (a no-op refiner);
* the final iteration's ``island.blend`` was not promoted to ``<group>/island.blend``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import IslandError
from ..files.jsonio import read_object
from ..iteration import REFINER_DIR, is_complete, same_bytes
from ..policy import MIN_ITER
from ..schemas import load_metadata, load_transforms


@dataclass
class LoopCheck:
    ok: bool
    reason: str | None
    final_iter: int | None
    nonempty_iters: list[int] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "final_iter": self.final_iter,
                "nonempty_iters": self.nonempty_iters}


def _complete_iters(refiner: Path) -> list[int]:
    if not refiner.is_dir():
        return []
    out = []
    for child in refiner.iterdir():
        if child.name.startswith("iter_") and child.name[5:].isdigit() and is_complete(child):
            out.append(int(child.name[5:]))
    return sorted(out)


def _iteration_row(iter_dir: Path, n: int, moved: int, converged: bool, final: bool
                   ) -> dict[str, Any]:
    row: dict[str, Any] = {"iter": n, "members_moved": moved, "converged": converged,
                           "final": final}
    geometry = iter_dir / "geometry.json"
    if geometry.is_file():
        try:
            group = read_object(geometry, IslandError, "geometry.json", "").get("group", {})
        except IslandError:
            group = {}
        spacing = group.get("spacing") or {}
        row.update(facing_error_max_deg=group.get("facing_error_max_deg"),
                   facing_error_mean_deg=group.get("facing_error_mean_deg"),
                   clearance_violations=group.get("clearance_violations"),
                   penetration_pairs=group.get("penetration_pairs"),
                   spacing=spacing.get("max_deviation_m", spacing.get("ring_gap_cv")))
    return row


def check_loop(group_dir: Path, max_iter: int) -> LoopCheck:
    refiner = group_dir / REFINER_DIR
    done = _complete_iters(refiner)
    if not done or done[0] != 0:
        return LoopCheck(False, f"{REFINER_DIR}/iter_0 is missing or incomplete", None)
    final = done[-1]
    if done != list(range(final + 1)):
        gaps = sorted(set(range(final + 1)) - set(done))
        return LoopCheck(False, f"iterations are not contiguous (missing iter_{gaps[0]})",
                         final)
    if final == 0:
        return LoopCheck(False, "no refinement iteration completed (iter_0 only)", 0)
    try:
        # The iter_1 rule first: the strict parser below would only call it a schema error.
        first = read_object(refiner / "iter_1" / "transforms.json", IslandError,
                            "transforms.json", "rerun the group")
        if not first.get("members"):
            return LoopCheck(False, "iter_1 rule: iter_1/transforms.json has empty members",
                             final, [], [])
        metadata = load_metadata(group_dir / "metadata.json")
        docs = [load_transforms(refiner / f"iter_{n}" / "transforms.json", n, metadata)
                for n in range(1, final + 1)]
    except IslandError as exc:
        return LoopCheck(False, f"unreadable loop artifact: {exc.one_line()}", final)
    nonempty = [t.iter for t in docs if t.members]
    rows = [_iteration_row(refiner / "iter_0", 0, 0, False, False)]
    rows += [_iteration_row(refiner / f"iter_{t.iter}", t.iter, len(t.members), t.converged,
                            t.final) for t in docs]

    def broken(reason: str) -> LoopCheck:
        return LoopCheck(False, reason, final, nonempty, rows)

    for t in docs:
        if not t.converged:
            continue
        if t.iter < MIN_ITER:
            return broken(f"convergence gate: converged at iter_{t.iter} < MIN_ITER {MIN_ITER}")
        if not any(k < t.iter for k in nonempty):
            return broken(f"convergence gate: converged at iter_{t.iter} without a non-empty "
                          "earlier iteration")
    early = [t.iter for t in docs[:-1] if t.final]
    if early:
        return broken(f"iter_{early[0]} is marked final but iter_{final} followed it")
    if not docs[-1].final:
        return broken(f"the last iteration iter_{final} is not marked final")
    if final > max_iter:
        return broken(f"{final} iterations exceed max_iter {max_iter}")
    last = refiner / f"iter_{final}" / "island.blend"
    if same_bytes(refiner / "iter_0" / "island.blend", last):
        return broken(f"iter_0 and iter_{final} island.blend are byte-identical (no-op refiner)")
    promoted = group_dir / "island.blend"
    if not promoted.is_file() or not same_bytes(promoted, last):
        return broken(f"iter_{final}/island.blend was not promoted to island.blend")
    return LoopCheck(True, None, final, nonempty, rows)
