"""The health check's finding: one trainable weight's gradient over the last steps of a
training run (what gradcheck.Watch recorded with health=True), and its words."""

from __future__ import annotations

import dataclasses

from gradcheck.evidence import Evidence, Finding


@dataclasses.dataclass(frozen=True)
class GradientHealth(Evidence):
    """`state`: healthy, vanishing (its norm below `VANISHING` of the largest weight's),
    exploding (its last norm `growth` times its median over the steps before), or dead (at
    least `DEAD` of its elements exactly 0 in every recorded step: units that never fire)."""

    state: str
    steps: int
    last_norm: float
    median_norm: float
    largest_norm: float
    zero_fraction: float
    growth: float

    def words(self, result: Finding) -> str:
        figures = (f"gradient norm {self.last_norm:.3g} at the last of {self.steps} recorded"
                   f" step(s), median {self.median_norm:.3g}")
        if self.state == "exploding":
            return (f"{result.input}'s gradient is exploding: {figures}, {self.growth:.3g}"
                    " times its earlier median; clip it (clipnorm= on the optimizer), lower the"
                    " learning rate, or normalise the layer's input")
        if self.state == "dead":
            return (f"{result.input} is dead: {self.zero_fraction:.0%} of its gradient elements"
                    f" are exactly 0 in every recorded step ({figures}): ReLU units that never"
                    " fire (its own, or those feeding it); use LeakyReLU/ELU, a smaller learning"
                    " rate, or another initialiser")
        if self.state == "vanishing":
            return (f"{result.input}'s gradient is vanishing: {figures}, below"
                    f" {self.median_norm / max(self.largest_norm, 1e-300):.1e} of the"
                    f" largest weight's ({self.largest_norm:.3g}); it barely trains: residual"
                    " connections, normalisation or another activation let the gradient"
                    " through")
        return f"{result.input}'s gradient is healthy ({figures})"
