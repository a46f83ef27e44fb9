"""What a diagnosis says: findings, their culprit, their fix and its verification.

Plain records (no torch) shared by the doctor, the reports and the diff; a
:class:`~torchmem.model.capture.Capture` holds them in ``findings``. Importing them from
:mod:`torchmem.model.capture` works too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchmem.model._serde import Record
from torchmem.model.schema import NON_NEGATIVE, bounds

__all__ = ["CAUSES", "Culprit", "FixEdit", "Verification", "VERIFICATION_STATUSES", "Finding"]

#: Most entries of a finding's lists (evidence, alternatives, tried edits...).
_MANY = bounds(max_items=100_000)

#: Cause classes a finding can carry, in the order reports list them when bytes tie.
CAUSES: tuple[str, ...] = (
    "retained_graph",
    "hidden_state_chain",
    "backward_flags_graph",
    "eval_graph",
    "view_pins_storage",
    "reference_cycle",
    "growing_container",
    "grad_not_cleared",
    "untracked_growth",
    "fragmentation",
    "cache_thrash",
)


@dataclass(frozen=True)
class Culprit(Record):
    """What keeps the memory alive, as the user wrote it.

    Attributes:
        name: the expression as written, e.g. ``losses``, ``self.history``, ``cache['x']``.
        kind: ``local``, ``global``, ``attribute``, ``container``, ``closure``,
            ``hook``, ``cycle`` or ``unknown``.
        file: source file of the statement that keeps adding to it (None if unknown).
        line: 1-based line of that statement.
        code: the source text of that line, stripped.
        function: the function that holds the culprit (``<module>`` for globals).
        type: the Python type name of the culprit object, e.g. ``list``.
    """

    name: str
    kind: str = "unknown"
    file: str | None = None
    line: int | None = field(default=None, metadata=NON_NEGATIVE)
    code: str | None = None
    function: str | None = None
    type: str | None = None


@dataclass(frozen=True)
class FixEdit(Record):
    """A fix as an edit of one whole statement of the user's source.

    Attributes:
        file: the source file.
        first_line, last_line: 1-based lines the statement spans (multi-line included).
        original: those lines as they are in the file.
        replacement: the lines to put in their place (same indentation; the file parses).
        statement: the edited statement on one line, as the fix text shows it.
        change: what the edit does, e.g. ``store loss.item() instead of loss``.
    """

    file: str
    first_line: int = field(metadata=NON_NEGATIVE)
    last_line: int = field(metadata=NON_NEGATIVE)
    original: str
    replacement: str
    statement: str
    change: str = ""


#: What verifying a fix can conclude, in the order reports explain them.
VERIFICATION_STATUSES: tuple[str, ...] = ("verified", "not verified", "crashed", "not checked")


@dataclass(frozen=True)
class Verification(Record):
    """What re-running the script with the fix applied showed.

    Attributes:
        status: ``verified`` (the culprit no longer grows, same exit code), ``not verified``
            (the culprit still grows), ``crashed`` (the edited script ended differently:
            the fix is withdrawn) or ``not checked`` (``reason`` says why).
        reason: one sentence saying what was measured or why nothing was.
        device: the device whose growth is compared.
        bytes_per_step_before: growth per step of the original run (the growth verdict's
            number), None when unknown.
        bytes_per_step_after: growth per step of the edited run.
        exit_code_before, exit_code_after: the two runs' exit codes.
        steps_before, steps_after: steps each run made.
        seconds: wall time the re-runs took.
        tried: earlier edits that failed, one sentence each (e.g. ``.item()`` crashed).
    """

    status: str
    reason: str = ""
    device: str = "cpu"
    bytes_per_step_before: float | None = None
    bytes_per_step_after: float | None = None
    exit_code_before: int | None = None
    exit_code_after: int | None = None
    steps_before: int = field(default=0, metadata=NON_NEGATIVE)
    steps_after: int = field(default=0, metadata=NON_NEGATIVE)
    seconds: float = field(default=0.0, metadata=NON_NEGATIVE)
    tried: tuple[str, ...] = field(default=(), metadata=_MANY)


@dataclass(frozen=True)
class Finding(Record):
    """One diagnosed cause of memory growth or misuse, with its proof and its fix.

    Attributes:
        cause: one of :data:`CAUSES`.
        title: short human title, e.g. ``"retained autograd graph"``.
        device: the device whose memory is affected.
        bytes: bytes at stake at the end of the run (or at the failure).
        bytes_per_step: growth attributed to this cause, per step.
        culprit: what holds the memory, with file:line, if it could be named.
        evidence: sentences proving the diagnosis (counts, node types, shapes).
        data: the same evidence as numbers, for tools (e.g. ``{"items": 200,
            "graph_nodes": 800, "saved_bytes": 12345}``).
        fix: the change to make, specific to the code.
        confidence: ``"high"``, ``"medium"`` or ``"low"``.
        fix_kind: ``edit`` (``edit`` holds the change to one statement), ``advice`` (no
            edit is valid for what the culprit holds: the fix is a recommendation), or
            empty (captures written before fixes were edits).
        edit: the fix as an edit of the source, when ``fix_kind`` is ``edit``.
        alternatives: further valid edits, tried in order when ``edit`` crashes the script.
        verification: what re-running the script with ``edit`` applied showed, or None
            when it was not attempted.
    """

    cause: str
    title: str
    device: str = "cpu"
    bytes: int = field(default=0, metadata=NON_NEGATIVE)
    bytes_per_step: float = 0.0
    culprit: Culprit | None = None
    evidence: tuple[str, ...] = field(default=(), metadata=_MANY)
    data: dict[str, Any] = field(default_factory=dict, metadata=_MANY)
    fix: str = ""
    confidence: str = "high"
    fix_kind: str = ""
    edit: FixEdit | None = None
    alternatives: tuple[FixEdit, ...] = field(default=(), metadata=_MANY)
    verification: Verification | None = None
