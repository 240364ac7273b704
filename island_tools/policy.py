"""The contract's magnitude policy and loop numbers: the one source the adapter (which checks
a decision), the solver (which plans within it) and the scene's contract check take them from.

Iteration N's phase (``phase_for``), counting members with a non-zero delta:

=========  =========  ==================================  =================  =====
phase      iters      members per iteration               max abs delta_xyz  yaw
=========  =========  ==================================  =================  =====
pattern    1-3        >= 3 (all of them if fewer than 3)  1.0 m per axis     free
member     4-10       1-3                                 0.3 m per axis     free
micro      11+        exactly 1                           0.05 m per axis    free
exception  any        exactly 1, penetrating in N-1       2.0 m per axis     free
=========  =========  ==================================  =================  =====

The exception (the contract's "+-1.0+ m" row, capped here at ``EXCEPTION_CAP_M`` = 2.0 m:
enough to pull a chair out from under the widest fixture table and round it to the far side,
small enough that a typo of metres for centimetres is still refused) applies to a decision
that moves exactly one member which ``iter_(N-1)/geometry.json`` shows penetrating
(``penetrating_members``): a listed mesh penetration (> 5 mm) or ``clearance_m`` <
``PENETRATION_CLEARANCE_M``. An empty decision is allowed from iteration 2 on (the loop
counts empties). ``check_policy`` refuses a decision that breaks the table with one line
naming the member, the cap and the phase (exit 3).

The loop: ``converged`` counts from ``MIN_ITER`` on; ``EMPTY_STOP`` consecutive empty
iterations (from ``MIN_ITER`` on) end it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import TransformsError
from .measure import frames
from .schemas import Transforms

MIN_ITER = 5
EMPTY_STOP = 3
EXCEPTION_CAP_M = 2.0
PENETRATION_CLEARANCE_M = -0.005


@dataclass(frozen=True)
class Phase:
    name: str                   # "pattern" | "member" | "micro"
    iters: str                  # "1-3" | "4-10" | "11+"
    cap_m: float                # max |delta_xyz| component
    min_members: int            # members with a non-zero delta, when any moves
    max_members: int | None     # None: no upper bound

    @property
    def label(self) -> str:
        return f"{self.name} phase (iter {self.iters})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "iters": self.iters, "max_abs_delta_xyz_m": self.cap_m,
                "members_min": self.min_members, "members_max": self.max_members,
                "max_abs_delta_yaw_deg": None,
                "exception": {"members": 1, "max_abs_delta_xyz_m": EXCEPTION_CAP_M,
                              "only_for": "a member that iter_(N-1)/geometry.json shows "
                                          "penetrating (a listed penetration > 5 mm, or "
                                          f"clearance_m < {PENETRATION_CLEARANCE_M})"}}


def phase_for(n: int, group_size: int) -> Phase:
    """The magnitude policy of iteration ``n`` for a group of ``group_size`` members."""
    if n <= 3:
        return Phase("pattern", "1-3", 1.0, min(3, group_size), None)
    if n <= 10:
        return Phase("member", "4-10", 0.3, 1, 3)
    return Phase("micro", "11+", 0.05, 1, 1)


def penetrating_members(geometry: Mapping[str, Any]) -> set[str]:
    """Members geometry.json shows penetrating (the exception's precondition)."""
    out = set()
    for name, m in (geometry.get("members") or {}).items():
        clearance = m.get("clearance_m")
        if m.get("penetrations") or (clearance is not None
                                     and clearance < PENETRATION_CLEARANCE_M):
            out.add(name)
    return out


@dataclass(frozen=True)
class Verdict:
    phase: Phase
    moved: tuple[str, ...]
    exception: bool


def check_policy(transforms: Transforms, n: int, group_size: int,
                 prev_geometry: Mapping[str, Any], file: str) -> Verdict:
    """Raise TransformsError (exit 3) unless the deltas obey iteration n's magnitude policy."""
    phase = phase_for(n, group_size)
    moved = tuple(name for name, d in sorted(transforms.members.items()) if not d.trivial)
    if n == 1 and not moved:
        raise TransformsError("iter_1 needs at least one per-member delta above "
                              f"{frames.MOVE_TOL_TEXT}", file=file,
                              field="members", fix="commit real moves, or at least two "
                                                   "+-0.01 m verification moves")
    if not moved:
        return Verdict(phase, moved, False)
    listed = ", ".join(moved)
    exception = len(moved) == 1 and moved[0] in penetrating_members(prev_geometry)
    if not exception:
        k = len(moved)
        if k < phase.min_members:
            still = sorted(set(transforms.members) - set(moved))
            raise TransformsError(
                f"{phase.label} must move at least {phase.min_members} members per "
                f"iteration (the contract's magnitude policy), got {k} ({listed})"
                + (f"; {', '.join(still)} move(s) less than {frames.MOVE_TOL_TEXT}, which "
                   "does not count" if still else ""), file=file, field="members",
                fix=f"plan one coordinated multi-member action; a single member may move "
                    f"alone only if iter_{n - 1}/geometry.json shows it penetrating")
        if phase.max_members is not None and k > phase.max_members:
            allowed = ("exactly 1 member" if phase.max_members == 1
                       else f"1 to {phase.max_members} members")
            raise TransformsError(f"{phase.label} moves {allowed} per iteration, got {k} "
                                  f"({listed})", file=file, field="members",
                                  fix="keep the worst member(s); the others wait for the "
                                      "next iteration")
    cap = EXCEPTION_CAP_M if exception else phase.cap_m
    rule = "the penetration exception" if exception else phase.label
    for name in moved:
        for axis, value in zip("xyz", transforms.members[name].delta_xyz):
            if abs(value) > cap:
                raise TransformsError(
                    f"{rule} caps each delta_xyz component at {cap} m, but |{axis}| of "
                    f"'{name}' is {abs(value):.3f} m", file=file,
                    field=f"members.{name}.delta_xyz",
                    fix="split the move over several iterations (yaw is uncapped)")
    return Verdict(phase, moved, exception)
