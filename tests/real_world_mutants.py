"""Mutants of a correct function: a tf.custom_gradient whose grad_fn returns its true VJP,
negated, zeroed, or with one Jacobian element bumped by 1e-4 of the block's largest |entry|.

Each mutant is written the way a user writes a custom gradient: the forward pass is f itself,
and grad_fn computes the VJP with its own tf.GradientTape (re-running f, so that the grad_fn
can be called any number of times, as gradcheck's persistent tape does), then returns one
tensor per input with that input's shape. Everything is dtype-generic (float32 or float64).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

KINDS = ("correct", "negated", "zeroed", "bumped")
BUMP = 1e-4


@dataclass(frozen=True)
class Bump:
    """J[output 0][out_index, in_index] of input `source` gets `delta` added."""

    source: int
    out_index: int
    in_index: int
    delta: float


def _dense(gradient: Any, like: tf.Tensor) -> tf.Tensor:
    if gradient is None:
        return tf.zeros_like(like)
    return tf.convert_to_tensor(gradient)


def true_vjp(f: Callable[..., Any], xs: Sequence[tf.Tensor], upstreams: Sequence[tf.Tensor],
             variables: Sequence[tf.Variable] = ()) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
    """uᵀJ for every input (and every variable f reads), from a fresh tape around f.

    f runs on copies of the inputs: TFP bijectors cache forward/inverse results by input
    tensor identity, so re-running f on the very tensors of the forward pass would return
    the cached value (computed outside this tape) and a None gradient."""
    copies = [tf.identity(x) for x in xs]
    with tf.GradientTape() as tape:
        tape.watch(copies)
        ys = tf.nest.flatten(f(*copies))
    sources = copies + list(variables)
    grads = tape.gradient(ys, sources, output_gradients=list(upstreams),
                          unconnected_gradients=tf.UnconnectedGradients.ZERO)
    dense = [_dense(g, s) for g, s in zip(grads, sources)]
    return dense[:len(copies)], dense[len(copies):]


def jacobian_block(f: Callable[..., Any], args: Sequence[np.ndarray], source: int) -> np.ndarray:
    """J of output 0 with respect to input `source` in float64, row by row, one tape per row
    (which works for every function here, tf.py_function included)."""
    values = [np.asarray(a, dtype=np.float64) for a in args]
    y0 = tf.nest.flatten(f(*[tf.constant(v) for v in values]))[0]
    rows = []
    for o in range(int(np.prod(y0.shape))):
        xs = [tf.constant(v) for v in values]  # fresh tensors: see true_vjp
        with tf.GradientTape() as tape:
            tape.watch(xs[source])
            y = tf.reshape(tf.nest.flatten(f(*xs))[0], [-1])[o]
        g = tape.gradient(y, xs[source], unconnected_gradients=tf.UnconnectedGradients.ZERO)
        rows.append(np.asarray(tf.convert_to_tensor(g)).reshape(-1))
    return np.asarray(rows)


def choose_bump(name: str, f: Callable[..., Any], args: Sequence[np.ndarray]) -> Bump:
    """A seeded element of the first input's block (output 0) that has any gradient at all."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for source, arg in enumerate(args):
        if not np.issubdtype(np.asarray(arg).dtype, np.floating):
            continue
        block = jacobian_block(f, args, source)
        scale = float(np.max(np.abs(block), initial=0.0))
        if scale > 0.0:
            out_index = int(rng.integers(block.shape[0]))
            in_index = int(rng.integers(block.shape[1]))
            return Bump(source, out_index, in_index, BUMP * scale)
    raise ValueError(f"{name}: no input has a nonzero gradient")


def mutate(f: Callable[..., Any], kind: str, bump: Bump | None = None) -> Callable[..., Any]:
    """f wrapped in a tf.custom_gradient whose grad_fn returns the VJP `kind`-mutated."""
    if kind not in KINDS:
        raise ValueError(f"unknown mutation {kind!r}")
    if kind == "bumped" and bump is None:
        raise ValueError("a bumped mutant needs a Bump")

    @tf.custom_gradient
    def mutant(*xs: tf.Tensor) -> Any:
        ys = f(*xs)

        def grad(*upstreams: tf.Tensor, variables: Sequence[tf.Variable] | None = None) -> Any:
            grads, variable_grads = true_vjp(f, xs, upstreams, variables or ())
            if kind == "negated":
                grads = [-g for g in grads]
            elif kind == "zeroed":
                grads = [tf.zeros_like(g) for g in grads]
            elif kind == "bumped" and bump is not None:
                g = grads[bump.source]
                u = tf.reshape(upstreams[0], [-1])[bump.out_index]
                size = int(np.prod(g.shape))
                hot = tf.one_hot(bump.in_index, size, dtype=g.dtype)
                grads[bump.source] = g + tf.reshape(tf.cast(bump.delta, g.dtype) * u * hot,
                                                    tf.shape(g))
            if variables:
                return grads, variable_grads
            return grads

        return ys, grad

    mutant.__name__ = f"{kind}_{getattr(f, '__name__', 'f')}"
    return mutant


@dataclass(frozen=True)
class Outcome:
    """What gradcheck.check said about one (case, dtype, mutation)."""

    case: str
    mode: str  # float64, float32 (the default dtype="auto") or float32-strict
    kind: str
    findings: tuple[tuple[str, str, str | None, str], ...]  # (check, status, input, message)
    exception: str | None
    seconds: float
    checked_in: tuple[str, ...] = ()  # the dtypes gradcheck checked the inputs in
    notes: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Any check with status fail or error (or an exception): what a mutant must get."""
        return self.exception is not None or any(s in ("fail", "error")
                                                 for _, s, _, _ in self.findings)

    def describe(self) -> str:
        if self.exception is not None:
            return f"{self.case} [{self.mode}, {self.kind}]: raised {self.exception}"
        bad = [f"{check} {status} ({source}): {message}"
               for check, status, source, message in self.findings if status in ("fail", "error")]
        return f"{self.case} [{self.mode}, {self.kind}]: " + ("; ".join(bad) or "ok")


def run_one(name: str, f: Callable[..., Any], args: Sequence[np.ndarray], mode: str,
            kind: str, bump: Bump | None = None, **options: Any) -> Outcome:
    """gradcheck.check on f (kind "plain") or its mutant at args, never raising; `mode`
    labels the outcome, `options` go to gradcheck.check."""
    import time

    import gradcheck

    target = f if kind == "plain" else mutate(f, kind, bump)
    start = time.perf_counter()
    try:
        report = gradcheck.check(target, *args, **options)
    except Exception as exc:  # a crash is a finding of this suite, not of the test runner
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Outcome(name, mode, kind, (), f"{type(exc).__name__}: {text[:300]}",
                       time.perf_counter() - start)
    findings = tuple((str(getattr(c.check, "value", c.check)),
                      str(getattr(c.status, "value", c.status)), c.input, c.message)
                     for c in report.checks)
    return Outcome(name, mode, kind, findings, None, time.perf_counter() - start,
                   tuple(i.dtype for i in report.inputs if i.differentiable),
                   tuple(str(note) for note in report.notes))


# mode -> (argument dtype, gradcheck.check options): float32 arguments with the default
# dtype="auto" (promoted to float64 when f accepts it), or checked in float32 itself.
MODES: dict[str, tuple[str, dict[str, Any]]] = {
    "float64": ("float64", {}),
    "float32": ("float32", {}),
    "float32-strict": ("float32", {"dtype": "float32"}),
}


class Runner:
    """gradcheck outcomes per (case, mode, kind), each computed once, on first use."""

    def __init__(self, progress: Callable[[Outcome], None] | None = None,
                 lean: bool = False) -> None:
        self.outcomes: dict[tuple[str, str, str], Outcome] = {}
        self.bumps: dict[tuple[str, str], Bump] = {}
        self.progress = progress
        # The test suite's runs skip the compiled check (two thirds of a small function's
        # check: the XLA compilation) where it repeats other work: for float32 arguments that
        # gradcheck promotes to float64 it is float64's check again, and a negated, zeroed or
        # bumped VJP must be caught by the Jacobian and VJP checks.
        self.lean = lean

    def bump(self, case: Any, mode: str) -> Bump:
        key = (case.name, mode)
        if key not in self.bumps:
            self.bumps[key] = choose_bump(case.name, case.f, case.arguments(MODES[mode][0]))
        return self.bumps[key]

    def get(self, case: Any, mode: str, kind: str) -> Outcome:
        """kind is "plain" (f as written) or one of KINDS (f in a custom_gradient)."""
        key = (case.name, mode, kind)
        if key not in self.outcomes:
            dtype, options = MODES[mode]
            if self.lean and (kind in ("negated", "zeroed", "bumped") or (
                    dtype == "float32" and "dtype" not in options and "float64" in case.dtypes)):
                options = {**options, "compiled": False}
            bump = self.bump(case, mode) if kind == "bumped" else None
            outcome = run_one(case.name, case.f, case.arguments(dtype), mode, kind, bump,
                              **options)
            self.outcomes[key] = outcome
            if self.progress is not None:
                self.progress(outcome)
        return self.outcomes[key]


def failing(outcome: Outcome) -> set[tuple[str, str | None]]:
    """(check, input) of every fail or error."""
    return {(check, source) for check, status, source, _ in outcome.findings
            if status in ("fail", "error")}


def expected_defects(case: Any, outcome: Outcome) -> set[tuple[str, str]]:
    """The (check, input) failures a recorded library defect makes in this outcome: entries
    (check, input) always, (check, input, "float64") only when checked in float64,
    (check, input, "float64-arguments") only when the arguments themselves are float64 (a
    check gradcheck reruns in the arguments' own dtype when its float64 promotion decides it)."""
    return _applying(getattr(case, "defect", ()), outcome)


def _applying(entries: Any, outcome: Outcome) -> set[tuple[str, str]]:
    return {(entry[0], entry[1]) for entry in entries
            if len(entry) == 2 or entry[2] in outcome.checked_in
            or (entry[2] == "float64-arguments" and outcome.mode == "float64")}


def defect_failures(outcome: Outcome, case: Any) -> set[tuple[str, str]]:
    """`failing`, less the failures the case's defect makes on some runs only."""
    return failing(outcome) - _applying(getattr(case, "defect_on_some_runs", ()), outcome)


def false_alarm(case: Any, outcome: Outcome) -> bool:
    """A correct function judged wrong: any fail/error beyond its recorded library defect
    (or the defect not reported as recorded). Crashes are counted apart."""
    if outcome.exception is not None:
        return False
    return defect_failures(outcome, case) != expected_defects(case, outcome)


FD_CHECKS = frozenset({"jacobian", "vjp", "fast"})


def caught_by_differences(outcome: Outcome) -> bool:
    """Caught by a finite-difference check (not only by forward vs reverse mode)."""
    return any(check in FD_CHECKS and status == "fail"
               for check, status, _, _ in outcome.findings)
