"""The report: frozen dataclasses shared by the core, the API and the renderers."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from gradcheck.errors import ExitCode
from gradcheck.evidence import Evidence, Location, public_fields
from gradcheck.evidence.causes import Facts, Mistake, WhatAndFix, plain_words
from gradcheck.evidence.explain import Explanation
from gradcheck.evidence.notes import Note
from gradcheck.evidence.text import first_clause
from gradcheck.spelling import Spelled

VERSION = "0.1.0"


class Status(Spelled):
    """A check's verdict."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    ERROR = "error"


class Kind(Spelled):
    """What was checked (the contract's check names)."""

    JACOBIAN = "jacobian"
    VJP = "vjp"
    GRAD_SHAPE = "grad-shape"
    CONNECTED = "connected"
    GRAPH_BREAK = "graph-break"
    CUSTOM_GRADIENT = "custom-gradient"
    UPSTREAM = "upstream"
    KINK = "kink"
    NONDETERMINISM = "nondeterminism"
    FAST = "fast"
    JVP = "jvp"
    COMPILED = "compiled"
    SECOND_ORDER = "second-order"
    HESSIAN = "hessian"
    NON_FINITE = "non-finite"
    HEALTH = "health"
    PRECISION = "precision"
    STRATEGY = "strategy"
    AGAINST = "against"
    ACCUMULATION = "accumulation"


FAILING_STATUSES = frozenset({Status.FAIL, Status.ERROR})
# Worst first: used to sort rows and to pick a summary status.
STATUS_RANK = {Status.ERROR: 0, Status.FAIL: 1, Status.WARN: 2, Status.SKIP: 3, Status.PASS: 4}


class Relation(Spelled):
    """How an attributed cause explains a finding."""

    LIKELY_CAUSE = "likely-cause"
    # f's mismatch comes from a custom gradient the user declared a surrogate (--surrogate).
    EXPECTED_SURROGATE = "expected-surrogate"
    # The finding is the declared surrogate itself: a warning, not a failure.
    DECLARED_SURROGATE = "declared-surrogate"
    # The gradient path is cut (diagnosis/graph_breaks.py): the cause says what cuts it.
    CUT_PATH = "cut-path"
    # Non-finite values from an op (diagnosis/non_finite.py) explain the finding.
    NON_FINITE = "non-finite"
    # TensorFlow's own gradient of an op is wrong at f's values (forensics/wrong_gradients.py).
    TENSORFLOW_GRADIENT = "tensorflow-gradient"
    # A Keras layer's call creates the variable anew on every call (checks/weights.py).
    CREATED_IN_CALL = "created-in-call"


@dataclasses.dataclass(frozen=True)
class Attribution:
    """What explains a finding (set by the diagnosis instead of appending to its message):
    `cause` names the culprit; `surrogate` names the --surrogate a user declared; `earlier`
    is what already explained the finding before this (told first)."""

    relation: Relation
    cause: Cause | None = None
    surrogate: str | None = None
    earlier: Attribution | None = None

    def words(self) -> str:
        """What explains the finding, as the clauses that follow its words (what explained it
        earlier first)."""
        said = self._own_words()
        return said if self.earlier is None else f"{self.earlier.words()}; {said}"

    def _own_words(self) -> str:
        cause, relation = self.cause, self.relation
        culprit = cause.culprit if cause is not None and cause.culprit else "a custom gradient"
        if relation == Relation.DECLARED_SURROGATE:
            return (f"declared a deliberate surrogate gradient (--surrogate {self.surrogate}),"
                    " so not a failure")
        if relation == Relation.EXPECTED_SURROGATE:
            return f"expected: {culprit} is a declared surrogate"
        at = f" at {cause.location}" if cause is not None and cause.location else ""
        if relation == Relation.TENSORFLOW_GRADIENT and cause is not None:
            return f"likely cause: {cause.what}{at}; workaround: {cause.fix}"
        if relation == Relation.CREATED_IN_CALL and cause is not None:
            return f"likely cause: {cause.what}{at}; fix: {cause.fix}"
        if relation == Relation.CUT_PATH and cause is not None:
            return f"likely cause: {cause.what}{at}"
        if relation == Relation.NON_FINITE and cause is not None:
            return (f"likely cause: non-finite values from {culprit}{at} (see the non-finite"
                    " check)")
        where = f" (grad_fn at {cause.location})" if cause is not None and cause.location else ""
        return f"likely cause: {culprit}{where}"


class ReportViews(Protocol):
    """How a report shows itself (gradcheck.render.display, a layer above, which the package
    root installs: report never imports render)."""

    def text(self, report: Report) -> str: ...

    def html(self, report: Report) -> str: ...

    def plot(self, report: Report) -> Any: ...

    def show(self, report: Report) -> None: ...


_installed: list[ReportViews] = []


def install_views(views: ReportViews) -> None:
    """Called once by gradcheck/__init__.py."""
    _installed[:] = [views]


def _views() -> ReportViews:
    if not _installed:
        raise RuntimeError("gradcheck.report's views are installed by importing gradcheck")
    return _installed[0]


def _words(result: CheckResult) -> str:
    """A finding's whole message: its evidence's words, then what it is attributed to."""
    assert result.evidence is not None
    said = result.evidence.words(result)
    return said if result.attributed_to is None else f"{said}; {result.attributed_to.words()}"


class _Message:
    """CheckResult.message: a hand-built result's text, or its evidence's sentence made when
    first read (a stale text passed along by dataclasses.replace is never kept)."""

    def __get__(self, result: CheckResult | None, owner: type | None = None) -> str:
        if result is None:
            return ""  # the field's default
        if result.evidence is None:
            return str(result.__dict__.get("_given_message", ""))
        if "_message" not in result.__dict__:  # made once, when first read
            result.__dict__["_message"] = _words(result)
        return str(result.__dict__["_message"])

    def __set__(self, result: CheckResult, text: str) -> None:
        result.__dict__["_given_message"] = text


@dataclasses.dataclass(frozen=True)
class Cause:
    """Why a check failed, as data (its words are said by its facts when read, never stored or
    parsed back).

    `mistake` names what is wrong (Mistake.WRONG_SIGN, FULL_JACOBIAN, VARIABLE_IN_GRAD_FN,
    STOP_GRADIENT...), `culprit` the code responsible ("custom_gradient f (line 4)"),
    `location` its place in the user's source, `facts` what the words are made of (the
    factor, the op, the mode...; None when the mistake alone says it).
    """

    mistake: Mistake
    culprit: str | None = None
    location: Location | None = None
    facts: Facts | None = None

    @property
    def what(self) -> str:
        """What is wrong, in words (its facts', or its mistake's alone)."""
        return self._words()[0]

    @property
    def fix(self) -> str | None:
        """What to do about it, when that follows from the cause."""
        return self._words()[1]

    def _words(self) -> WhatAndFix:
        if self.facts is None:
            return plain_words(self.mistake)
        return self.facts.words(self.mistake)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One finding. The core gives `evidence` (and the diagnosis `attributed_to`), and
    `message` is made from them (the evidence's words, then the attribution's) when first read;
    a hand-built result (renderer tests, plugins) may give `message` itself."""

    check: Kind
    status: Status
    message: str = _Message()  # type: ignore[assignment]
    input: str | None = None
    output: str | None = None
    location: Location | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_index: tuple[int, ...] | None = None
    # The largest error / allowed ratio: the number that decided the verdict (> 1 fails).
    excess: float | None = None
    cause: Cause | None = None
    # JSON's `details` for API users (a CheckResult has the JSON fields): the evidence's public
    # fields, or what a hand-built result gives. Nothing in gradcheck reads it.
    details: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    evidence: Evidence | None = dataclasses.field(default=None, compare=False)
    attributed_to: Attribution | None = None

    def __post_init__(self) -> None:
        # Spelled as in JSON or as the enums; unknown spellings raise ValueError.
        object.__setattr__(self, "check", Kind(self.check))
        object.__setattr__(self, "status", Status(self.status))
        if self.evidence is not None and not self.details:
            object.__setattr__(self, "details", public_fields(self.evidence))

    @property
    def headline(self) -> str:
        """What the finding is, in one clause (the message without its attribution)."""
        if self.evidence is None:
            return first_clause(self.message)
        return self.evidence.clause(self)

    @property
    def failed(self) -> bool:
        return self.status in FAILING_STATUSES


@dataclasses.dataclass(frozen=True)
class Block:
    """The numbers behind one (output, input) Jacobian block, kept when asked for (pictures,
    --save): NumPy arrays of shape output + input (upstream: output; vjp: input)."""

    output: str
    input: str
    autodiff: Any
    finite_difference: Any
    error_estimate: Any
    # Per element: atol + rtol·|J| + the finite-difference error allowance; None at kinks.
    allowed: Any
    upstream: Any
    vjp: Any = None


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    differentiable: bool = True
    kind: str = "argument"  # or "variable": a trainable variable f reads

    @property
    def checked_shape(self) -> tuple[int, ...]:
        """The shape of gradcheck's arrays for it: a complex tensor is checked as its (real,
        imaginary) parts, on a last axis of 2."""
        return (*self.shape, 2) if self.dtype.startswith("complex") else tuple(self.shape)


@dataclasses.dataclass(frozen=True)
class Report:
    """What one check of a target found: its inputs and outputs, every finding (`checks`),
    notes on how it was checked, the explanation of tape.gradient and the kept blocks."""

    target: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    checks: tuple[CheckResult, ...]
    # Typed notes (gradcheck.evidence.notes); a hand-built report may give their text.
    notes: tuple[Note | str, ...] = ()
    explain: Explanation | None = None
    blocks: tuple[Block, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(result.failed for result in self.checks)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.ok else ExitCode.CHECK_FAILED

    def sorted_checks(self) -> tuple[CheckResult, ...]:
        """Checks worst status first, keeping the original order among equals."""
        return tuple(sorted(self.checks, key=lambda result: STATUS_RANK[result.status]))

    def count(self, status: str) -> int:
        return sum(1 for result in self.checks if result.status == status)

    def __str__(self) -> str:
        """The table as text, as `gradcheck check` prints it, laid out for the terminal's
        width (160 columns off a terminal)."""
        return str(_views().text(self))

    def _repr_html_(self) -> str:
        """The table as HTML (Jupyter): failing rows highlighted, small blocks as matrices."""
        return str(_views().html(self))

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's terminal shows the text table too."""
        printer.text(str(self))

    def plot(self) -> Any:
        """The pictures of the kept Jacobian blocks (check with keep_blocks=True); shown inline
        in Jupyter."""
        return _views().plot(self)

    def show(self) -> None:
        """Display the table and, when blocks were kept, the pictures (Jupyter), or print the
        table (elsewhere)."""
        _views().show(self)


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """One configured check: its report, or the error that stopped it."""

    name: str
    target: str
    report: Report | None
    exit_code: ExitCode
    seconds: float = 0.0
    error: str | None = None
    user_traceback: str | None = None
    # The phase a crash or time-out happened in ("the vectorised tape.jacobian of y ...").
    phase: str | None = None

    @property
    def status(self) -> Status:
        """pass, warn, fail or error (an error: no report, exit code 2 or 3)."""
        if self.report is None:
            return Status.ERROR
        if not self.report.ok:
            return Status.FAIL
        return Status.WARN if self.report.count(Status.WARN) else Status.PASS


@dataclasses.dataclass(frozen=True)
class RunResult:
    outcomes: tuple[CheckOutcome, ...]
    # What the run took from the command's start (TensorFlow's start-up and the workers'
    # included), when measured; the outcomes' seconds are the checks' own.
    wall_seconds: float | None = None

    @property
    def exit_code(self) -> ExitCode:
        """The highest code of any check: 3 beats 2 beats 1 beats 0."""
        return max((o.exit_code for o in self.outcomes), default=ExitCode.OK)

    @property
    def ok(self) -> bool:
        return self.exit_code == ExitCode.OK

    def sorted_outcomes(self) -> tuple[CheckOutcome, ...]:
        """Worst first (error, fail, warn, pass), keeping the configured order among equals."""
        return tuple(sorted(self.outcomes, key=lambda o: STATUS_RANK[o.status]))

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)
