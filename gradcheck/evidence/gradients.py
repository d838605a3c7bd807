"""Evidence about an input's gradient itself: raised, missing, cut, at a kink; and about the
upstreams and layers that hide or lose gradients."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Location, internal


@dataclasses.dataclass(frozen=True)
class GradientRaised(Evidence):
    """Computing the gradient raised `error` (its last line); `dtype_mix`: a float32/float64
    mix-up."""

    error: str
    dtype_mix: bool = internal(False)
    # The op whose gradient, TensorFlow's own (no custom gradient of f's on the way), raised.
    tensorflow_op: str | None = None


@dataclasses.dataclass(frozen=True)
class NoGradient(Evidence):
    """Autodiff gives None and finite differences see no slope: f does not depend on the input
    here (diagnosis/graph_breaks.py looks for the op that gives no gradient)."""

    no_gradient: bool = True


@dataclasses.dataclass(frozen=True)
class Independent(NoGradient):
    """An argument the output does not depend on."""


@dataclasses.dataclass(frozen=True)
class UntrainedWeight(NoGradient):
    """A trainable weight that gets no gradient; `never_read`: f never reads it; `read_at`:
    where the user's code read it once, outside the training step (a layer's build)."""

    never_read: bool = internal(False)
    read_at: str | None = None


@dataclasses.dataclass(frozen=True)
class CutPath(Evidence):
    """Autodiff gives None, but finite differences show a slope up to `magnitude`; `origin`:
    where the output was computed, when outside TensorFlow (numpy, python)."""

    finite_difference: list[object] | None
    magnitude: float = internal(0.0)
    origin: str | None = internal()


@dataclasses.dataclass(frozen=True)
class KinkSite:
    """The op that has the kink (where two inputs tie, or at 0), at the user's line."""

    name: str
    tie: bool
    location: Location | None


@dataclasses.dataclass(frozen=True)
class Kink(Evidence):
    """f is not differentiable at the point: `count` elements, e.g. `index`, where autodiff
    gives `autodiff` and finite differences across the kink `across`."""

    count: int = internal(0)
    index: tuple[int, ...] = internal(())
    autodiff: float = internal(0.0)
    across: float = internal(0.0)
    site: KinkSite | None = internal()
    weight: bool = internal(False)  # the source is a trainable weight, not an argument


@dataclasses.dataclass(frozen=True)
class Jump(Evidence):
    """f itself is discontinuous at the point (`count` elements, e.g. `index`): finite
    differences across it grow as the step shrinks (`across`), autodiff gives one side's
    derivative (`autodiff`); `site`: the op whose branch cut or wrap the point sits on."""

    count: int = internal(0)
    index: tuple[int, ...] = internal(())
    autodiff: float = internal(0.0)
    across: float = internal(0.0)
    site: KinkSite | None = internal()


@dataclasses.dataclass(frozen=True)
class AllOnesUpstream(Evidence):
    """A supplied upstream of all ones (uᵀJ: column sums)."""


@dataclasses.dataclass(frozen=True)
class UnbuiltLayer(Evidence):
    """`function` never calls its layer `layer`: its weights do not exist, nor would train."""

    function: str = internal("")
    layer: str = internal("")


@dataclasses.dataclass(frozen=True)
class VariableInCall(Evidence):
    """The `call` of the Keras layer `layer` (of class `layer_class`) creates the tf.Variable(s)
    `variables` on every call: the variable a step trains is not the one the next call reads."""

    layer: str
    layer_class: str = internal("")
    variables: tuple[str, ...] = ()
    made: str | None = internal(None)  # the class of a layer call constructs every time
