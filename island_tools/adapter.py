"""Agent adapter: the referee between an agent's decision and ``iter_N/transforms.json``,
and the driver of the contract's refinement loop.

``write_decision`` (CLI: ``scripts/agent.py write``)
    A decision ``{"members": {...}, "converged"?: bool, "reason_summary"?: str,
    "final"?: bool}`` becomes ``iter_N/transforms.json`` only if it passes

    1. the contract's hard constraints: the full document is built and validated by
       ``schemas.parse_transforms`` (anchor not in members, no ``groups``/``objects``/
       ``deletes``, known members, finite numbers, ``delta_xyz`` three numbers, iter_1
       non-empty), and
    2. the magnitude policy of iteration N's phase (``policy.check_policy``: the contract's
       table of members per iteration and per-axis caps, ``policy.phase_for``, and its
       penetration exception). An empty decision is allowed from iteration 2 on (the loop
       counts empties).

    ``_island_meta`` is filled truthfully: ``model`` and ``generated_by`` name whoever
    decided (``solver`` / ``island_tools.solver``, or the external command);
    ``image_sha256`` is the sha256 of ``<group>/masked.png`` when it exists, else of
    ``iter_(N-1)/render_bev.png`` (the picture the decision was taken from; init_iter0 does
    the same for iter_0); ``mode`` ``island_iter``; a UTC timestamp.

    Convergence gate: ``converged: true`` is written only when N >= ``MIN_ITER``, an
    earlier iteration in 1..N-1 has a non-empty ``members`` (the contract's two
    conditions), and the review of the state the loop would stop on does not fail (issue
    24, one verdict): the decision moves no member - so that state is iter_(N-1)'s, already
    measured (the contract's converged decision has empty members) - and
    ``review.review_island`` of ``iter_(N-1)/geometry.json`` is ``pass`` or ``uncertain``.
    ``uncertain`` is honoured: a check that cannot be measured is not repaired by moving
    furniture (the scene pipeline's route says the same), and the report still says
    uncertain and what was not measured. Otherwise the flag is written as ``false`` with a
    warning naming the failing items, so a transforms.json never carries a converged flag
    the contract calls a violation, nor one on a state the review fails. A rejected
    decision writes nothing and raises ``TransformsError`` (exit 3) whose one line names
    the member, the cap and the phase.

``run_group`` (CLI: ``scripts/agent.py run``)
    The contract's loop pseudocode: ``init_iter0``; for N = 1..max_iter: decide (policy), write
    (above), ``iteration.iter_step`` in-process; stop on exit 4 and on any other failure; stop
    (exit 0, "no progress: ...") on a decision whose members all move less than
    ``frames.MOVE_TOL_M`` / ``MOVE_TOL_DEG`` (trivial: nothing is applied, so the next decision
    would face the same state; not the twitch of exit 4); from N >= ``MIN_ITER``: stop on an
    honoured ``converged`` or after ``EMPTY_STOP`` consecutive empty iterations (empties are
    counted from iteration 1); a decision with ``final: true`` ends the loop after its step.
    Then the last complete iteration's transforms.json is rewritten with ``"final": true`` and
    its island.blend copied atomically to ``<group>/island.blend``; a report of at most 80 words
    is returned and ``simple_refiner/run.json`` records everything (rewritten after each
    iteration, so a run that dies is visible as ``status: running``, one that fails as
    ``failed``).
    The verdict of every state - the progress line, each iteration's ``review`` in
    run.json, the final ``review`` and the report's sentence - is ``review.review_island``
    (the scene pipeline's ``verify.review_group``): pass / fail / uncertain, never a
    threshold list of this module's own; the measured figures ride along in ``figures``.

    Policies: ``solver`` (``island_tools.solver``) and ``command:<shell command>``: the
    command gets a JSON prompt on stdin (``command_prompt``) and prints its decision JSON on
    stdout. A timeout (the process group is killed), a non-zero exit or output that is not
    one JSON object is an ``AgentError`` (exit 9) for that iteration.

Exit codes (``RunReport.exit_code``): 0 ok; 3 decision rejected; 4 sanity (iter_step);
9 agent command failed (timeout, crash, junk output); 2/5/6/7/8 as iter_step/init_iter0;
1 internal error (the traceback is kept in run.json).

``MIN_ITER``, ``EMPTY_STOP``, ``Phase`` and ``phase_for`` are ``policy``'s (the contract's
numbers, which the solver shares); the loop, the MCP server and the add-on read them here.
"""
from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import review
from .config import Settings
from .errors import EXIT_INTERNAL, AgentError, IslandError, TransformsError, UsageError
from .files import atomic, locks, portable
from .files.jsonio import loads_strict, read_object
from .iteration import (
    REFINER_DIR,
    Group,
    RunJob,
    check_iteration_number,
    completed_iters,
    init_iter0,
    is_complete,
    iter_step,
    load_group,
    sha256_file,
    utc_now,
)
from .measure import frames
from .policy import EMPTY_STOP, MIN_ITER, Phase, Verdict, check_policy, phase_for
from .schemas import (
    FORBIDDEN_TRANSFORM_KEYS,
    island_meta,
    parse_transforms,
)

DEFAULT_MAX_ITER = 20
DEFAULT_TIMEOUT_S = 120.0
DECISION_KEYS = ("members", "converged", "reason_summary", "final")
REPORT_MAX_WORDS = 80
REPORT_REVIEW_WORDS = 36   # the report's room kept for the review sentence (the verdict)
_RUN_LOCK = ".island_agent_run.lock"
_STDERR_TAIL = 300
MAX_AGENT_OUTPUT_BYTES = 4 << 20   # per stream: a decision is a few kB
EXIT_GRACE_S = 0.5                 # pipes drained this long after the command exits

Progress = Callable[[str], None]


# --------------------------------------------------------------------------- write
@dataclass
class WriteResult:
    path: Path
    doc: dict[str, Any]
    verdict: Verdict
    converged_requested: bool
    converged_honoured: bool
    warnings: list[str] = field(default_factory=list)
    review: dict[str, Any] | None = None   # the gate's review of iter_(N-1), when it ran


def decision_image(group: Group, n: int) -> Path:
    """The picture ``_island_meta.image_sha256`` hashes (see the module docstring)."""
    masked = group.root / "masked.png"
    return masked if masked.is_file() else group.iter_dir(n - 1) / "render_bev.png"


def _decision_doc(decision: Any, n: int, image_sha256: str, model: str, generated_by: str,
                    file: str) -> dict[str, Any]:
    if not isinstance(decision, dict):
        raise TransformsError(f"the decision must be a JSON object, got "
                              f"{type(decision).__name__}", file=file,
                              fix='send {"members": {...}, "converged": false, '
                                  '"reason_summary": "..."}')
    for key in decision:
        if key not in DECISION_KEYS and key not in FORBIDDEN_TRANSFORM_KEYS:
            raise TransformsError("unknown key in the decision (iter and _island_meta are "
                                  "filled by the adapter)", file=file, field=key,
                                  fix=f"send only {', '.join(DECISION_KEYS)}")
    doc: dict[str, Any] = {"iter": n}
    # Forbidden keys are passed through so parse_transforms rejects them with its message.
    doc.update({k: decision[k] for k in FORBIDDEN_TRANSFORM_KEYS if k in decision})
    if "members" in decision:
        doc["members"] = decision["members"]
    doc["converged"] = decision.get("converged", False)
    doc["final"] = decision.get("final", False)
    if "reason_summary" in decision:
        doc["reason_summary"] = decision["reason_summary"]
    doc["_island_meta"] = island_meta(n, image_sha256, model, generated_by)
    return doc


def earlier_nonempty(group: Group, n: int) -> list[int]:
    """Iterations K in 1..n-1 whose transforms.json has a non-empty ``members``."""
    out = []
    for k in range(1, n):
        path = group.iter_dir(k) / "transforms.json"
        if path.is_file():
            doc = read_object(path, TransformsError, "transforms.json",
                              f"rerun the group from init_iter0 (iter_{k} is corrupt)")
            if doc.get("members"):
                out.append(k)
    return out


def write_decision(group_dir: str | os.PathLike[str], n: int, decision: Any, *,
                   model: str, generated_by: str) -> WriteResult:
    """Validate ``decision`` for iteration n and write ``iter_N/transforms.json`` atomically.

    Raises TransformsError (exit 3) and writes nothing when a rule fails; UsageError (2)
    when iteration n-1 is not complete or n was already stepped.
    """
    group = load_group(group_dir)
    check_iteration_number(group, n)
    iter_dir = group.iter_dir(n)
    if is_complete(iter_dir):
        raise UsageError(f"iter_{n} was already stepped; its transforms.json is history",
                         file=str(iter_dir),
                         fix=f"write iter_{completed_iters(group)[-1] + 1}")
    path = iter_dir / "transforms.json"
    prev_dir = group.iter_dir(n - 1)
    prev_geometry = read_object(prev_dir / "geometry.json", UsageError, "geometry.json",
                                f"rerun iter_step.py --iter {n - 1}")
    doc = _decision_doc(decision, n, sha256_file(decision_image(group, n)), model,
                          generated_by, str(path))
    transforms = parse_transforms(doc, str(path), n, group.metadata)
    verdict = check_policy(transforms, n, len(group.metadata.refined_members), prev_geometry,
                           str(path))
    warnings = list(transforms.warnings)
    requested = transforms.converged
    honoured = False
    gate_review = None
    if requested:
        if n < MIN_ITER:
            warnings.append(f"converged ignored: iter {n} < MIN_ITER={MIN_ITER}")
        elif not earlier_nonempty(group, n):
            warnings.append("converged ignored: no earlier iteration moved a member")
        elif verdict.moved:
            warnings.append("converged ignored: the decision moves members, so the state "
                            "it would stop on is not reviewed yet; send converged with empty "
                            "members once the review does not fail")
        else:
            gate_review = review.review_island(group, prev_geometry)
            if review.verdict(gate_review) == "fail":
                warnings.append(f"converged ignored: the state of iter_{n - 1} fails its "
                                f"review: {review.sentence(gate_review, 40)}")
            else:
                honoured = True
        doc["converged"] = honoured
    atomic.make_dir(iter_dir, exist_ok=True)
    atomic.write_json(path, doc)
    return WriteResult(path, doc, verdict, requested, honoured, warnings, gate_review)


def read_decision_text(text: str, source: str) -> Any:
    """Parse an agent's decision JSON (strict: no NaN, no duplicate keys)."""
    try:
        return loads_strict(text)
    except json.JSONDecodeError as exc:
        raise TransformsError(f"decision is not valid JSON (line {exc.lineno} column "
                              f"{exc.colno}: {exc.msg})", file=source,
                              fix="send one JSON object") from exc
    except ValueError as exc:
        raise TransformsError(f"decision is not valid JSON ({exc})", file=source,
                              fix="send one JSON object") from exc


# --------------------------------------------------------------------------- policies
class Policy(Protocol):
    spec: str
    model: str
    generated_by: str

    def decide(self, group: Group, n: int, phase: Phase, max_iter: int) -> Any: ...


class SolverPolicy:
    """The built-in deterministic solver (``island_tools.solver``)."""

    spec = "solver"

    def __init__(self, model: str | None, generated_by: str | None,
                 budget_s: float | None = None) -> None:
        self.model = model or "solver"
        self.generated_by = generated_by or "island_tools.solver"
        self.budget_s = budget_s   # None: solver.DECISION_BUDGET_S
        self._solver: Any = None

    def decide(self, group: Group, n: int, phase: Phase, max_iter: int) -> dict[str, Any]:
        if self._solver is None:  # the mesh cache exists only once init_iter0 has run
            from .solver import Solver

            self._solver = (Solver.for_group(group) if self.budget_s is None
                            else Solver.for_group(group, self.budget_s))
        decision = self._solver.decide_from_disk(group, n, phase)
        # what the solver gave up to keep the hard constraints is a finding the review
        # carries (review.infeasible_of), not part of the decision the contract checks
        given_up = decision.pop("given_up", [])
        path = group.root / REFINER_DIR / review.INFEASIBLE_FILE
        if given_up:
            atomic.write_json(path, {"reason": self._solver.infeasible_reason(given_up),
                                     "given_up": given_up, "iter": n})
        elif path.is_file():
            atomic.remove_file(path)
        return decision


class CommandPolicy:
    """An external agent: a shell command reading a JSON prompt, printing a decision."""

    def __init__(self, command: str, timeout_s: float, model: str | None,
                 generated_by: str | None) -> None:
        self.command = command
        self.spec = f"command:{command}"
        self.timeout_s = timeout_s
        self.model = model or "external"
        self.generated_by = generated_by or f"command: {command}"

    def decide(self, group: Group, n: int, phase: Phase, max_iter: int) -> Any:
        prompt = json.dumps(command_prompt(group, n, phase, max_iter), indent=2)
        where = f"agent command `{self.command}` at iter {n}"
        code, out, err = run_bounded(self.command, group.root, prompt, self.timeout_s, where)
        if code != 0:
            tail = " ".join((err or "").strip().splitlines()[-1:])[-_STDERR_TAIL:]
            raise AgentError(f"{where} exited {code}" + (f": {tail}" if tail else ""),
                             fix="run the command by hand with the prompt on stdin")
        try:
            decision = loads_strict(out)
        except ValueError:
            first = " ".join(out.split())[:80]
            raise AgentError(f"{where} printed no JSON decision (stdout starts {first!r})",
                             fix="print exactly one JSON object on stdout, logs on stderr"
                             ) from None
        if not isinstance(decision, dict):
            raise AgentError(f"{where} printed JSON {type(decision).__name__}, not an object",
                             fix='print {"members": {...}, "converged": false, '
                                 '"reason_summary": "..."}')
        return decision


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill_pipe_holders(inodes: set[int]) -> list[int]:
    """SIGKILL every other process of ours that still holds one of the agent's pipes (a
    child that called setsid() left the command's process group but kept its stdout).
    Linux ``/proc``; elsewhere a no-op. Returns the pids killed."""
    targets = {f"pipe:[{ino}]" for ino in inodes}
    me, uid = os.getpid(), os.getuid()
    killed: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return killed
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            fds = os.listdir(f"/proc/{entry}/fd")
            held = any(os.readlink(f"/proc/{entry}/fd/{fd}") in targets for fd in fds)
        except OSError:
            continue
        if held:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
    return killed


def run_bounded(command: str, cwd: Path, prompt: str, timeout_s: float, where: str
                ) -> tuple[int, str, str]:
    """Run an agent command in its own session with the prompt on stdin; (exit code, stdout,
    stderr). Bounded whatever the command does: at most ``MAX_AGENT_OUTPUT_BYTES`` of each
    stream are read (more is "output too large"), the whole run takes at most ``timeout_s``,
    and once the command itself has exited its pipes are drained for ``EXIT_GRACE_S`` only,
    so a child that keeps them open (a daemonised helper) cannot hold the loop. On every
    way out the command's process group is killed, and so is any process of ours still
    holding its pipes (a ``setsid`` child). AgentError (exit 9) otherwise."""
    if not hasattr(os, "killpg"):   # Windows: no process group to bound the command with
        raise AgentError(portable.refuse("an agent command", "bounding it needs POSIX "
                                         "process groups (os.killpg)"),
                         fix="use --policy solver, or run agent commands on Linux or macOS")
    proc = subprocess.Popen(command, shell=True, cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def feed(pipe: Any = proc.stdin) -> None:
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            pipe.write(prompt.encode("utf-8"))
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            pipe.close()

    threading.Thread(target=feed, daemon=True).start()
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    inodes = {os.fstat(fd).st_ino for fd in (out_fd, err_fd)}
    streams = {out_fd: bytearray(), err_fd: bytearray()}
    selector = selectors.DefaultSelector()
    for fd in streams:
        selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    exited_at: float | None = None
    try:
        while selector.get_map():
            now = time.monotonic()
            if now > deadline:
                raise AgentError(f"{where} timed out after {timeout_s:g} s and was killed",
                                 fix="make the agent answer faster or raise --timeout")
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > EXIT_GRACE_S:
                break       # the command is done; whoever still holds its pipes is ignored
            for key, _ in selector.select(timeout=0.05):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                buf = streams[key.fd]
                buf += chunk
                if len(buf) > MAX_AGENT_OUTPUT_BYTES:
                    name = "stdout" if key.fd == out_fd else "stderr"
                    raise AgentError(f"{where}: output too large (more than "
                                     f"{MAX_AGENT_OUTPUT_BYTES // (1 << 20)} MiB on {name}); "
                                     "the command was killed",
                                     fix="print one JSON decision on stdout, a few log lines "
                                         "on stderr")
    finally:
        selector.close()
        _kill_group(proc.pid)
        _kill_pipe_holders(inodes)
        for pipe in (proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=EXIT_GRACE_S)
    code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    return (code, streams[out_fd].decode("utf-8", "replace"),
            streams[err_fd].decode("utf-8", "replace"))


def command_prompt(group: Group, n: int, phase: Phase, max_iter: int) -> dict[str, Any]:
    """What an external agent gets on stdin for iteration n (absolute paths; ``review``:
    the one review of iter_(N-1), what a converged decision is gated on)."""
    prev = group.iter_dir(n - 1)
    geometry = read_object(prev / "geometry.json", UsageError, "geometry.json",
                           f"rerun iter_step.py --iter {n - 1}")
    return {
        "task": "Decide the member deltas of one refinement iteration of this island "
                "(canonical frame: anchor at the origin, metres, degrees).",
        "group_dir": str(group.root), "iter": n, "min_iter": MIN_ITER, "max_iter": max_iter,
        "phase": phase.to_dict(), "anchor_id": group.metadata.anchor_id,
        "members": list(group.metadata.refined_members),
        "files": {
            "render_persp": str(prev / "render_persp.png"),
            "render_bev": str(prev / "render_bev.png"),
            "render_bev_annotated": str(prev / "render_bev_annotated.png"),
            "geometry": str(prev / "geometry.json"),
            "previous_transforms": str(prev / "transforms.json"),
            "target_spec": str(group.root / "target_spec.json"),
            "metadata": str(group.root / "metadata.json"),
        },
        "review": review.compact(review.review_island(group, geometry)),
        "answer": 'Print ONE JSON object on stdout: {"members": {"<name>": {"delta_xyz": '
                  '[dx, dy, dz], "delta_yaw_deg": deg}}, "converged": false, '
                  '"reason_summary": "<one sentence>"}. Never the anchor; per-member yaw '
                  'targets, never one delta for all; empty members = no move.',
    }


def make_policy(spec: str, timeout_s: float = DEFAULT_TIMEOUT_S, model: str | None = None,
                generated_by: str | None = None, budget_s: float | None = None) -> Policy:
    """``budget_s``: the built-in solver's decision budget (``Settings.decision_budget_s``;
    None: ``solver.DECISION_BUDGET_S``)."""
    if spec == "solver":
        return SolverPolicy(model, generated_by, budget_s)
    if spec.startswith("command:") and spec[len("command:"):].strip():
        if not timeout_s > 0:
            raise UsageError(f"--timeout must be > 0 seconds, got {timeout_s}",
                             fix="pass e.g. --timeout 120")
        return CommandPolicy(spec[len("command:"):].strip(), timeout_s, model, generated_by)
    raise UsageError(f"unknown policy {spec!r}", field="--policy",
                     fix="use 'solver' or 'command:<shell command>'")


# --------------------------------------------------------------------------- review
def report_sentence(spec: Mapping[str, Any], rev: Mapping[str, Any],
                    max_words: int | None = None) -> str:
    """The report's sentence on the final state vs target_spec: the review's verdict and
    what decided it (``review.sentence``), then the figures when they fit."""
    head = (f"Against target_spec ({spec.get('pattern')}, {spec.get('facing')}, clearance "
            f"{spec.get('clearance_m')} m):")
    budget = None if max_words is None else max_words - len(head.split())
    text = f"{head} {review.sentence(rev, budget)}"
    f = rev.get("figures") or {}
    facing, spacing = f.get("facing_error_max_deg"), f.get("spacing")
    clearance = f.get("clearance_error_max_m")
    parts = [f"facing max {facing:.1f} deg" if facing is not None else "facing n/a",
             f"clearance error max {clearance:.3f} m" if clearance is not None
             else "clearance n/a",
             f"{f.get('penetration_pairs') or 0} penetrations, "
             f"{f.get('obstacle_penetrations') or 0} in obstacles",
             ("ring gap CV " if f.get("spacing_kind") == "ring_gap_cv" else "spacing deviation ")
             + (f"{spacing:.3f}" if spacing is not None else "n/a")]
    more = f" Figures: {', '.join(parts)}."
    if max_words is None or len((text + more).split()) <= max_words:
        text += more
    return text


def _ranges(iters: list[int]) -> str:
    out: list[str] = []
    for n in iters:
        if out and out[-1].split("-")[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{n}"
        else:
            out.append(str(n))
    return ", ".join(out) or "none"


def report_text(final_iter: int | None, stop_reason: str, nonempty: list[int],
                spec: Mapping[str, Any], rev: Mapping[str, Any] | None) -> str:
    """The contract's closing report (at most REPORT_MAX_WORDS words); ``rev`` is the
    final state's ``review.review_island``."""
    head = (f"Final iter_{final_iter}" if final_iter else "No refined iteration")
    tail = f" Non-empty iterations: {_ranges(nonempty)}."
    if rev is not None and final_iter:
        # the verdict always survives: a long stop reason (an error message) is cut first
        room = REPORT_MAX_WORDS - REPORT_REVIEW_WORDS - len(f"{head}; stop:{tail}".split())
        stop_words = stop_reason.split()
        if len(stop_words) > room:
            stop_reason = " ".join(stop_words[:max(room - 1, 1)]) + " (cut)"
    text = f"{head}; stop: {stop_reason}.{tail}"
    if rev is not None and final_iter:
        text += " " + report_sentence(spec, rev, REPORT_MAX_WORDS - len(text.split()))
    words = text.split()
    if len(words) > REPORT_MAX_WORDS:  # a long error message in stop_reason
        text = " ".join(words[:REPORT_MAX_WORDS - 1]) + " ..."
    return text


# --------------------------------------------------------------------------- run
@dataclass
class RunReport:
    final_iter: int | None
    stop_reason: str
    nonempty_iters: list[int]
    report_text: str
    ok: bool
    errors: list[str]
    exit_code: int = 0
    run_json: Path | None = None
    review: dict[str, Any] | None = None   # the final state's review (review.compact)


@contextlib.contextmanager
def _run_lock(root: Path) -> Iterator[None]:
    """One agent run per group (iter_step's own lock is per step, not per run)."""
    fd = atomic.open_beneath(root / _RUN_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not locks.lock_fd(fd, blocking=False):
            raise UsageError("another agent run is active on this group", file=str(root),
                             fix="wait for it to finish")
        yield
    finally:
        os.close(fd)


class _RunLog:
    """simple_refiner/run.json, rewritten atomically after every iteration."""

    def __init__(self, group: Group, policy: Policy, settings: Settings, max_iter: int,
                 started: str) -> None:
        self.path = group.refiner / "run.json"
        self.doc: dict[str, Any] = {
            "version": 1, "group_dir": str(group.root), "policy": policy.spec,
            "model": policy.model, "generated_by": policy.generated_by,
            "settings": {**asdict(settings), "samples": settings.render_samples},
            "min_iter": MIN_ITER, "max_iter": max_iter,
            "status": "running", "started_utc": started, "finished_utc": None,
            "stop_reason": None, "final_iter": None, "exit_code": None, "ok": None,
            "nonempty_iters": [], "promoted": None, "iterations": [], "errors": [],
            "review": None, "report": None}

    def add(self, entry: dict[str, Any]) -> None:
        self.doc["iterations"].append(entry)
        self.save()

    def save(self) -> None:
        atomic.write_json(self.path, self.doc)


def _finalize(group: Group, n: int) -> None:
    """Contract steps 4 and 5: mark iter_n final, promote its island.blend."""
    path = group.iter_dir(n) / "transforms.json"
    doc = read_object(path, TransformsError, "transforms.json", "rerun the group")
    doc["final"] = True
    atomic.write_json(path, doc)
    atomic.link_or_copy(group.iter_dir(n) / "island.blend", group.root / "island.blend")


def promote_final(group_dir: str | os.PathLike[str], n: int | None = None) -> int:
    """Contract steps 4 and 5 for a loop driven from outside ``run_group`` (an MCP client,
    an artist): mark the last complete iteration final and promote its island.blend.
    ``n``, when given, must be that iteration. Returns it; UsageError (2) otherwise."""
    group = load_group(group_dir)
    done = completed_iters(group)
    last = done[-1] if done else 0
    if last < 1:
        raise UsageError("no refined iteration to promote (only iter_0 or none)",
                         file=str(group.refiner), fix="step iter 1 first")
    if n is not None and n != last:
        raise UsageError(f"iter_{n} is not the last complete iteration (iter_{last} is)",
                         file=str(group.refiner), fix=f"promote iter {last}")
    _finalize(group, last)
    return last


def run_group(group_dir: str | os.PathLike[str], policy: str, settings: Settings,
              run_job: RunJob, max_iter: int = DEFAULT_MAX_ITER, progress: Progress | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S, model: str | None = None,
              generated_by: str | None = None, reuse_meshes: bool = False) -> RunReport:
    """Drive one group through the contract's loop with ``policy`` (see the module docstring).
    ``reuse_meshes``: as ``init_iter0``'s.

    Raises UsageError only for bad arguments (policy, max_iter, timeout). Every failure of
    the group itself - unreadable inputs, another run active, init_iter0, any iteration -
    is returned as a RunReport with ``ok`` False and the failure's exit code.
    """
    if max_iter < 1:
        raise UsageError(f"--max-iter must be >= 1, got {max_iter}", fix="pass e.g. 20")
    pol = make_policy(policy, timeout_s, model, generated_by, settings.decision_budget_s)
    with contextlib.ExitStack() as stack:
        started = utc_now()
        try:
            group = load_group(group_dir)
            stack.enter_context(_run_lock(group.root))
            init_iter0(group.root, settings, run_job, progress, reuse_meshes=reuse_meshes)
        except IslandError as exc:
            stop = f"init_iter0 failed (exit {exc.exit_code})"
            return RunReport(None, stop, [], report_text(None, stop, [], {}, None), False,
                             [exc.one_line()], exc.exit_code, None)
        log = _RunLog(group, pol, settings, max_iter, started)
        log.save()
        return _loop(group, pol, settings, run_job, max_iter, progress, log)


def _loop(group: Group, pol: Policy, settings: Settings, run_job: RunJob, max_iter: int,
          progress: Progress | None, log: _RunLog) -> RunReport:
    size = len(group.metadata.refined_members)
    inputs = review.review_inputs(group)
    nonempty: list[int] = []
    errors: list[str] = []
    consecutive_empty = 0
    final = 0
    exit_code = 0
    stop = f"max_iter ({max_iter}) reached"
    for n in range(1, max_iter + 1):
        phase = phase_for(n, size)
        entry: dict[str, Any] = {"iter": n, "phase": phase.name}
        stage = "decide"
        t0 = time.perf_counter()
        try:
            decision = pol.decide(group, n, phase, max_iter)
            stage = "write"
            written = write_decision(group.root, n, decision, model=pol.model,
                                     generated_by=pol.generated_by)
            entry.update(members=sorted(written.doc["members"]),
                         moved=list(written.verdict.moved),
                         exception=written.verdict.exception,
                         converged_requested=written.converged_requested,
                         converged_honoured=written.converged_honoured,
                         final_requested=bool(written.doc.get("final")),
                         reason_summary=written.doc.get("reason_summary"),
                         warnings=written.warnings)
            stage = "step"
            t1 = time.perf_counter()
            result = iter_step(group.root, n, settings, run_job, progress)
        except Exception as exc:  # noqa: BLE001 - every failure stops the run, recorded
            code = exc.exit_code if isinstance(exc, IslandError) else EXIT_INTERNAL
            message = (exc.one_line() if isinstance(exc, IslandError)
                       else " ".join(f"internal: {type(exc).__name__}: {exc}".split()))
            entry["error"] = {"stage": stage, "exit_code": code, "message": message}
            if not isinstance(exc, IslandError):
                entry["error"]["traceback"] = traceback.format_exc()
            entry["seconds"] = round(time.perf_counter() - t0, 3)
            log.add(entry)
            errors.append(f"iter {n} ({stage}): {message}")
            exit_code = code
            stop = {"decide": "agent failed", "write": "decision rejected",
                    "step": "iter_step failed"}[stage] + f" at iter {n} (exit {code})"
            break   # no progress line: the caller prints the failure, once
        final = n
        members = written.doc["members"]
        consecutive_empty = 0 if members else consecutive_empty + 1
        if members:
            nonempty.append(n)
        rev = review.review_island(inputs, result.geometry)
        entry.update(seconds={"decide_write": round(t1 - t0, 3),
                              "step": round(time.perf_counter() - t1, 3)},
                     review=review.compact(rev))
        log.doc["nonempty_iters"] = nonempty
        log.add(entry)
        _say(progress, f"[agent] iter {n}/{max_iter} {phase.name}: {len(written.verdict.moved)} "
                       f"member(s) moved; {review.status(rev)}")
        if written.doc.get("final"):
            stop = f"agent marked iter {n} final"
            break
        if n >= MIN_ITER and written.converged_honoured:
            stop = f"converged at iter {n}"
            break
        if members and not written.verdict.moved:
            # Every delta is within the movement tolerance: nothing was applied, the state
            # is iter_(N-1)'s, and the next decision would be taken from it again.
            stop = no_progress_reason(n)
            entry["no_progress"] = True
            log.save()
            break
        if n >= MIN_ITER and consecutive_empty >= EMPTY_STOP:
            stop = f"{consecutive_empty} consecutive empty iterations at iter {n}"
            break
    final_review = None
    if final >= 1:
        _finalize(group, final)
        log.doc["promoted"] = f"{REFINER_DIR}/iter_{final}/island.blend -> island.blend"
        geometry = read_object(group.iter_dir(final) / "geometry.json", UsageError,
                               "geometry.json", "rerun the group")
        final_review = review.review_island(inputs, geometry)
        log.doc["review"] = {"iter": final, **review.compact(final_review),
                             "review_results": final_review["review_results"]}
    text = report_text(final or None, stop, nonempty, group.target_spec.to_dict(), final_review)
    log.doc.update(status="completed" if exit_code == 0 else "failed", finished_utc=utc_now(),
                   stop_reason=stop, final_iter=final or None, exit_code=exit_code,
                   ok=exit_code == 0, errors=errors, report=text)
    log.save()
    return RunReport(final or None, stop, nonempty, text, exit_code == 0, errors, exit_code,
                     log.path, review.compact(final_review) if final_review else None)


def no_progress_reason(n: int) -> str:
    """The stop reason of a decision (iteration n) whose members all move less than the
    movement tolerance (``frames.MOVE_TOL_M`` / ``MOVE_TOL_DEG``)."""
    return f"no progress: the agent's moves are below {frames.MOVE_TOL_TEXT} (iter {n})"


def moves_nothing(members: Mapping[str, Any]) -> bool:
    """True for a non-empty ``members`` of a written transforms.json whose every delta is
    trivial (within the movement tolerance, whole-turn yaws included)."""
    return bool(members) and all(
        frames.delta_is_trivial(d.get("delta_xyz") or (0.0, 0.0, 0.0),
                                d.get("delta_yaw_deg") or 0.0)
        for d in members.values())


def _say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)
