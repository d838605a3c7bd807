"""Evidence about an input's gradient itself: raised, missing, cut, at a kink; and about the
upstreams and layers that hide or lose gradients."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Location, internal
from gradcheck.evidence.causes import kink_place, raised_clause, raised_without_fix, spectrum_of
from gradcheck.evidence.finding import Finding, stated_cause
from gradcheck.spelling import format_index

# How to step around TensorFlow's own gradient of an op where it raises.
_TENSORFLOW_GRADIENT_WORKAROUNDS = {
    "GatherNd": "index so that the result keeps a dimension (tf.gather_nd(x, [[i]])[0]) or use"
                " x[i] or tf.gather",
    "EagerPyFunc": "return only floating-point values from the tf.py_function (cast integers"
                   " outside it), or give it a tf.custom_gradient",
}
NO_GRADIENTS = "Keras reports 'No gradients provided for any variable' for such weights"


@dataclasses.dataclass(frozen=True)
class GradientRaised(Evidence):
    """Computing the gradient raised `error` (its last line); `dtype_mix`: a float32/float64
    mix-up."""

    error: str
    dtype_mix: bool = internal(False)
    # The op whose gradient, TensorFlow's own (no custom gradient of f's on the way), raised.
    tensorflow_op: str | None = None

    def clause(self, result: Finding) -> str:
        return raised_clause(self, result)

    def words(self, result: Finding) -> str:
        if self.tensorflow_op is not None:
            op = self.tensorflow_op
            where = f" at {result.location}" if result.location else ""
            workaround = _TENSORFLOW_GRADIENT_WORKAROUNDS.get(
                op, f"compute it without {op}, or wrap it in a tf.custom_gradient with the"
                    " gradient you know")
            return (f"TensorFlow's own gradient of {op}{where} raised {self.error} while"
                    f" computing the gradient of {result.output} with respect to"
                    f" {result.input}; f has no custom gradient there, so TensorFlow's"
                    f" registered gradient for {op} is at fault: {workaround}")
        said = raised_without_fix(self, result)
        if not self.dtype_mix or result.cause is None:
            return said
        return f"{said}; {result.cause.fix}"


@dataclasses.dataclass(frozen=True)
class NoGradient(Evidence):
    """Autodiff gives None and finite differences see no slope: f does not depend on the input
    here (diagnosis/graph_breaks.py looks for the op that gives no gradient)."""

    no_gradient: bool = True


@dataclasses.dataclass(frozen=True)
class Independent(NoGradient):
    """An argument the output does not depend on."""

    def words(self, result: Finding) -> str:
        y, x = result.output, result.input
        return (f"autodiff returns None for d{y}/d{x} and finite differences agree that {y}"
                f" does not depend on {x}")


@dataclasses.dataclass(frozen=True)
class UntrainedWeight(NoGradient):
    """A trainable weight that gets no gradient; `never_read`: f never reads it; `read_at`:
    where the user's code read it once, outside the training step (a layer's build)."""

    never_read: bool = internal(False)
    read_at: str | None = None
    dropped_at: str | None = None  # the step reads it here, into a result the loss never uses

    def words(self, result: Finding) -> str:
        if self.dropped_at:
            return (f"the trainable weight {result.input} is used at {self.dropped_at}, but what"
                    " that computes never reaches the loss: the layer's output is overwritten or"
                    " dropped (each layer called on the same input, only the last one's result"
                    " used), so it gets no gradient and never trains (Keras: 'Gradients do not"
                    " exist for variables'); feed it into what follows (output ="
                    " self.next_layer(output)), or remove the layer")
        why = ("f never reads it (an unused layer, or a head not on the path?)"
               if self.never_read
               else "its path may end in an integer cast, argmax or a Python branch")
        if self.read_at:
            return (f"the trainable weight {result.input} is never read while the loss is"
                    f" computed: its value was read once, outside the training step, at"
                    f" {self.read_at}, and the step uses that stale tensor, so it gets no"
                    " gradient and never trains; read the weight inside call() (the op that"
                    " uses it, where it is used)")
        y = result.output
        return (f"the trainable weight {result.input} gets no gradient from {y} (None), and"
                f" finite differences agree that {y} does not depend on it here, so it never"
                f" trains through {y} (Keras: 'No gradients provided'): {why}")


@dataclasses.dataclass(frozen=True)
class NotRecorded(NoGradient):
    """The step's own tape gave a weight no gradient, though the loss, recomputed by the
    step's loss_fn under a tape, depends on it: the tape never saw the forward pass.
    `step_at`: the user's line that handed the loss and tape to Watch."""

    step_at: str | None = None

    def words(self, result: Finding) -> str:
        at = f" at {self.step_at}" if self.step_at else ""
        return (f"the step{at} got no gradient for {result.input}, yet the loss depends on it"
                " (recomputed by loss_fn under a tape it has one): the tape did not record the"
                " forward pass that computed the loss it was handed, so the model ran before"
                " `with tf.GradientTape() as tape:` (or under tape.stop_recording()); call the"
                " model inside the tape's block")


@dataclasses.dataclass(frozen=True)
class CutPath(Evidence):
    """Autodiff gives None, but finite differences show a slope up to `magnitude`; `origin`:
    where the output was computed, when outside TensorFlow (numpy, python)."""

    finite_difference: list[object] | None
    magnitude: float = internal(0.0)
    origin: str | None = internal()

    def clause(self, result: Finding) -> str:
        x, y = result.input, result.output
        return (f"the gradient path from {x} to {y} is cut: autodiff returns None, but finite"
                f" differences show {y} depends on {x} (|dy/dx| up to {self.magnitude:.3g})")

    def words(self, result: Finding) -> str:
        said = self.clause(result)
        if self.origin is None:
            return said
        return (f"{said}; {result.output} is a {self.origin} value, computed outside"
                " TensorFlow")


@dataclasses.dataclass(frozen=True)
class KinkSite:
    """The op that has the kink (where two inputs tie, or at 0), at the user's line."""

    name: str
    tie: bool
    location: Location | None


def _element(result: Finding, index: tuple[int, ...], output_rank: int) -> str:
    """A Jacobian element as the output's element with respect to the input's: y[1] with
    respect to x[0] (a scalar's index left out)."""
    output, source = index[:output_rank], index[output_rank:]
    return (f"{result.output}{format_index(output) if output else ''} with respect to"
            f" {result.input}{format_index(source) if source else ''}")


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
    output_rank: int = internal(0)  # `index` is the output's index, then the input's

    def clause(self, result: Finding) -> str:
        return (f"{result.output} is not differentiable in {result.input} at this point"
                f" ({self.count} element(s), e.g."
                f" {_element(result, self.index, self.output_rank)}): autodiff"
                f" gives {self.autodiff:.6g}, finite differences across the kink"
                f" {self.across:.6g}")

    def words(self, result: Finding) -> str:
        site = self.site
        at = (f"; the kink: {site.name} {kink_place(site.tie, site.name)} at {site.location}"
              if site else "")
        if self.weight:  # a weight's point is where training is, not the user's choice
            return (f"{self.clause(result)}{at}; harmless for training: autodiff gives one"
                    " side's derivative, as every optimiser step uses it; only finite"
                    " differences, whose step crosses the kink, cannot judge this element")
        return f"{self.clause(result)}{at}; move the point away from the kink"


@dataclasses.dataclass(frozen=True)
class Jump(Evidence):
    """f itself is discontinuous at the point (`count` elements, e.g. `index`): finite
    differences across it grow as the step shrinks (`across`), autodiff gives one side's
    derivative (`autodiff`); `site`: the op whose branch cut or wrap the point sits on (or the
    comparison whose tie switches a branch)."""

    count: int = internal(0)
    index: tuple[int, ...] = internal(())
    autodiff: float = internal(0.0)
    across: float = internal(0.0)
    site: KinkSite | None = internal()
    output_rank: int = internal(0)  # `index` is the output's index, then the input's

    def clause(self, result: Finding) -> str:
        return (f"{result.output} is discontinuous in {result.input} at this point"
                f" ({self.count} element(s), e.g."
                f" {_element(result, self.index, self.output_rank)}): finite"
                f" differences across the jump give {self.across:.6g}, which grows as the"
                f" step shrinks; autodiff gives one side's derivative, {self.autodiff:.6g}")

    def words(self, result: Finding) -> str:
        site = self.site
        cut = (f"{kink_place(True, site.name)}: the vectors of a repeated value are not unique,"
               " so they jump as the point moves" if site and spectrum_of(site.name)
               else "its operands tie, so a tf.where on it switches branch" if site and site.tie
               else "where it wraps" if site and site.name.startswith("FloorMod")
               else "its branch cut")
        at = (f"; the discontinuity: {site.name} at {site.location}, {cut}" if site
              else "; e.g. a branch cut (angle, atan2, log or sqrt of a complex number across"
              " the negative real axis) or a wrap (floormod)")
        return (f"{self.clause(result)}{at}; the gradient is right on either side: move the"
                " point off the discontinuity")


@dataclasses.dataclass(frozen=True)
class AllOnesUpstream(Evidence):
    """A supplied upstream of all ones (uᵀJ: column sums)."""

    def clause(self, result: Finding) -> str:
        return (f"the upstream for {result.output} is all ones: uᵀJ is then the column sums"
                " of J, which hides transposed or mixed-up rows")

    def words(self, result: Finding) -> str:
        return f"{self.clause(result)}; a random upstream (the default) catches them"


@dataclasses.dataclass(frozen=True)
class UnbuiltLayer(Evidence):
    """`function` never calls its layer `layer`: its weights do not exist, nor would train."""

    function: str = internal("")
    layer: str = internal("")

    def clause(self, result: Finding) -> str:
        return (f"{self.function} never calls its layer {self.layer}, so the layer has no"
                f" weights yet and none of them would ever train ({NO_GRADIENTS})")

    def words(self, result: Finding) -> str:
        return (f"{self.clause(result)}; an unused layer, or a head not on the path to the"
                " output?")


@dataclasses.dataclass(frozen=True)
class VariableInCall(Evidence):
    """The `call` of the Keras layer `layer` (of class `layer_class`) creates the tf.Variable(s)
    `variables` on every call: the variable a step trains is not the one the next call reads."""

    layer: str
    layer_class: str = internal("")
    variables: tuple[str, ...] = ()
    made: str | None = internal(None)  # the class of a layer call constructs every time

    def clause(self, result: Finding) -> str:
        made = f" {self.made} layer, and with it new tf.Variables" if self.made else (
            " tf.Variable")
        return (f"layer {self.layer} ({self.layer_class}) creates a new{made}"
                f" ({', '.join(self.variables)}) every time it is called")

    def words(self, result: Finding) -> str:
        cause = stated_cause(result)
        return f"{cause.what}; fix: {cause.fix}"
