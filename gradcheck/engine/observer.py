"""What each tf.custom_gradient was seen doing while a check ran (its calls, the grad_fn
contract slips, the tf.Variables it creates), recorded by engine/instrument.py."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gradcheck.evidence import Location
from gradcheck.evidence.causes import ContractSlip
from gradcheck.forensics.site_lines import source_location
from gradcheck.spelling import Spelled
from gradcheck.targets.generic_wrappers import wrapped_forward, wrapper_variant
from gradcheck.user_code import is_installed, is_library


class Slip(Spelled):
    """Which part of the grad_fn contract a violation breaks."""

    COUNT = "count"
    VARIABLES = "variables"
    VARIABLE_COUNT = "variable-count"
    DTYPE = "dtype"
    KEYWORDS = "keywords"


@dataclass
class Violation:
    """A broken grad_fn contract seen while TensorFlow computed a gradient: which part
    (`kind`), and the facts of it (`slip`)."""

    kind: Slip
    slip: ContractSlip
    input_index: int | None = None
    location: Location | None = None  # where it was seen, when not at grad_fn (a call's line)


@dataclass
class Site:
    """One function decorated with tf.custom_gradient."""

    name: str
    forward: Callable[..., Any]
    definition: Location | None
    grad_fn_location: Location | None = None
    # A library's wrapper with one user gradient function per input: each input's own line.
    input_grad_locations: dict[str, Location] = field(default_factory=dict)
    grad_fn_accepts_variables: bool = False
    # Concrete arguments of the first eager calls: what the per-site value check replays.
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    parameter_names: list[str] = field(default_factory=list)
    # The function as TensorFlow decorated it: what the per-site check differentiates.
    decorated: Callable[..., Any] | None = None
    # Where tf.Variables are created on each call: in the forward, or inside grad_fn.
    forward_variables: list[Location | None] = field(default_factory=list)
    grad_fn_variables: list[Location | None] = field(default_factory=list)
    # Which positional arguments f's sources flow into (seen under a tape), once one was seen.
    differentiated: set[int] | None = None
    key: Any = None
    # What tells apart functions named by one user function (see wrapper_variant).
    variant: tuple[Any, ...] = ()
    # The line of the first call that passed keyword arguments.
    keyword_call: Location | None = None
    # f called it only inside a tf.function: its calls were recorded by an eager replay.
    graph_only: bool = False
    # Its grad_fn ran in a gradient of f (not only while gradcheck replayed the site alone):
    # only then can it explain f's gradient.
    grad_fn_ran: bool = False

    def add_violation(self, violation: Violation) -> None:
        if all((v.kind, v.slip) != (violation.kind, violation.slip) for v in self.violations):
            self.violations.append(violation)


@dataclass
class Observer:
    sites: list[Site] = field(default_factory=list)
    # While gradcheck replays a site on its own, which arguments it differentiates is its own.
    replaying: bool = False
    # False: custom gradients run untouched inside the block (--no-instrument).
    enabled: bool = True
    # While f runs under gradcheck's ForwardAccumulator: a grad_fn that runs then gives a JVP
    # (TensorFlow transposes its VJP), not f's reverse-mode gradient.
    forward: bool = False

    def reverse_gradient(self) -> bool:
        """Whether a grad_fn running now runs in f's own reverse-mode gradient."""
        return not (self.replaying or self.forward)

    def site_for(self, f: Callable[..., Any]) -> Site | None:
        """The site of a decorated function (one per definition), None for TensorFlow's own."""
        user = site_function(f)
        code = getattr(user, "__code__", None)
        if code is not None and is_library(code.co_filename):
            return None
        key = code if code is not None else f
        variant = wrapper_variant(f)
        site = next((s for s in self.sites if s.key is key and s.variant == variant), None)
        if site is None:
            site = Site(getattr(user, "__name__", "custom_gradient"), f, source_location(user),
                        parameter_names=_parameter_names(user), key=key, variant=variant)
            self.sites.append(site)
        return site


@dataclass(frozen=True)
class Checkpoint:
    """How much each site had recorded at one moment (see rollback)."""

    sizes: dict[int, tuple[int, int]]


# The observers in force, innermost last (it gets the calls).
ACTIVE: list[Observer] = []


def checkpoint() -> Checkpoint:
    sites = ACTIVE[-1].sites if ACTIVE else []
    return Checkpoint({id(site): (len(site.calls), len(site.violations)) for site in sites})


def rollback(mark: Checkpoint) -> None:
    """Forget what the sites recorded since the checkpoint: calls that gradcheck made in a
    dtype it then gave up (the per-site checks replay the recorded calls)."""
    for site in ACTIVE[-1].sites if ACTIVE else []:
        calls, violations = mark.sizes.get(id(site), (0, 0))
        del site.calls[calls:]
        del site.violations[violations:]


def violations_since(mark: Checkpoint, kind: Slip) -> list[Violation]:
    return [violation for site in (ACTIVE[-1].sites if ACTIVE else [])
            for violation in site.violations[mark.sizes.get(id(site), (0, 0))[1]:]
            if violation.kind == kind]


def _parameter_names(function: Callable[..., Any]) -> list[str]:
    try:
        return list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return []


def installed(site: Site) -> bool:
    """Whether the site is defined in an installed package (a library such as larq or TFP)."""
    filename = getattr(site.key, "co_filename", None)
    return filename is not None and is_installed(filename)


def defines(site: Site, function: Callable[..., Any]) -> bool:
    """Whether `function` is the site itself (f is a custom gradient)."""
    code = getattr(site_function(function), "__code__", None)
    return code is not None and code is site.key


def site_function(f: Callable[..., Any]) -> Callable[..., Any]:
    """The user's function a custom gradient's site is named and keyed by: f unwrapped, or
    the function a generic wrapper f calls (one site per decorated function)."""
    return wrapped_forward(f) or inspect.unwrap(f)


@contextlib.contextmanager
def _flagged(name: str) -> Iterator[None]:
    """The active observer's flag `name` set for the duration of the block."""
    observer = ACTIVE[-1] if ACTIVE else None
    if observer is None:
        yield
        return
    previous = getattr(observer, name)
    setattr(observer, name, True)
    try:
        yield
    finally:
        setattr(observer, name, previous)


def replaying() -> contextlib.AbstractContextManager[None]:
    """gradcheck calls a site on its own: which arguments it differentiates is not f's."""
    return _flagged("replaying")


def forward_mode() -> contextlib.AbstractContextManager[None]:
    """gradcheck runs f under a ForwardAccumulator: grad_fns run then give JVPs."""
    return _flagged("forward")
