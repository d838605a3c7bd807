"""Sentences of the health check."""

from __future__ import annotations

from gradcheck.evidence.health import GradientHealth
from gradcheck.render.sentences.dispatch import sentence
from gradcheck.report import CheckResult


@sentence.register
def _health(evidence: GradientHealth, result: CheckResult) -> str:
    figures = (f"gradient norm {evidence.last_norm:.3g} at the last of {evidence.steps} recorded"
               f" step(s), median {evidence.median_norm:.3g}")
    if evidence.state == "exploding":
        return (f"{result.input}'s gradient is exploding: {figures}, {evidence.growth:.3g} times"
                " its earlier median; clip it (clipnorm= on the optimizer), lower the learning"
                " rate, or normalise the layer's input")
    if evidence.state == "dead":
        return (f"{result.input} is dead: {evidence.zero_fraction:.0%} of its gradient elements"
                f" are exactly 0 in every recorded step ({figures}): ReLU units that never"
                " fire (its own, or those feeding it); use LeakyReLU/ELU, a smaller learning rate,"
                " or another initialiser")
    if evidence.state == "vanishing":
        return (f"{result.input}'s gradient is vanishing: {figures}, below"
                f" {evidence.median_norm / max(evidence.largest_norm, 1e-300):.1e} of the"
                f" largest weight's ({evidence.largest_norm:.3g}); it barely trains: residual"
                " connections, normalisation or another activation let the gradient through")
    return f"{result.input}'s gradient is healthy ({figures})"
