"""Judge each observed tf.custom_gradient on its own, and name the mistake in words."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from gradcheck.report import CheckResult, Kind, Report, Status
from gradcheck.tf.instrument import Site

FIX_HINT = (
    "a grad_fn receives the upstream u and must return uᵀJ with its input's shape, e.g."
    " tf.linalg.matvec(J, upstream, transpose_a=True)"
)


def _close(a: np.ndarray, b: np.ndarray, scale: float, rtol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= rtol * scale + 1e-9))


def value_diagnosis(autodiff: np.ndarray, fd: np.ndarray, out_size: int, n_outputs: int,
                    output: str) -> str:
    """What a wrong-valued grad_fn does, from its Jacobian block next to the true one."""
    a = np.asarray(autodiff, dtype=np.float64).reshape(out_size, -1)
    f = np.asarray(fd, dtype=np.float64).reshape(out_size, -1)
    scale = float(np.max(np.abs(f), initial=0.0)) + 1e-12
    if np.any(a) and not np.any(f):
        return ("returns a nonzero gradient where the forward is locally constant (finite"
                " differences are zero): a straight-through estimator? If deliberate, declare"
                " it with --surrogate")
    if not np.any(a) and np.any(f):
        if n_outputs > 1:
            return (f"ignores the upstream of {output}: that output's contribution"
                    " u_kᵀJ_k is missing from the sum")
        return "returns zeros although the output depends on this input"
    if _close(a, -f, scale):
        return "has the wrong sign: it returns -uᵀJ"
    norm = float(np.sum(f * f))
    if norm > 0:
        factor = float(np.sum(a * f)) / norm
        if not np.isclose(factor, 1.0, rtol=1e-3) and _close(a, factor * f, scale):
            return f"is off by a constant factor of {factor:.4g}"
    if a.shape[0] == a.shape[1] > 1 and _close(a, f.T, scale):
        return "uses J where Jᵀ is needed (it returns J·u instead of uᵀJ): transpose it"
    if a.shape[0] > 1 and np.allclose(a, a[0]) and not _close(a, f, scale):
        return ("gives every output element the same gradient row: it sums the upstream"
                " (e.g. over the batch axis, tf.reduce_sum(upstream)) or ignores it, instead"
                " of weighting each output's row by its own upstream element")
    return "returns wrong values"


@dataclass(frozen=True)
class ShapeMistake:
    """What a wrong-shaped grad_fn returned, and the fix when one follows from it."""

    what: str
    fix: str = FIX_HINT


def shape_diagnosis(grad: np.ndarray, upstream: np.ndarray, jacobian: np.ndarray | None,
                    in_shape: tuple[int, ...], out_shape: tuple[int, ...],
                    rtol: float = 1e-6) -> ShapeMistake:
    """Name the usual wrong-shape mistakes: J, J * u, unsummed rows, Jᵀ, a scalar; `jacobian`
    is the true one (to within rtol of its scale), or None when unknown."""
    shape = tuple(grad.shape)
    if shape == out_shape + in_shape:
        if jacobian is not None:
            scale = float(np.max(np.abs(jacobian), initial=0.0)) + 1e-12
            if _close(grad, jacobian, scale, rtol):
                return ShapeMistake("returned the full Jacobian J")
            try:
                if _close(grad, jacobian * upstream, scale * float(np.max(np.abs(upstream))),
                          rtol):
                    return ShapeMistake("returned J * upstream (the Jacobian scaled by u,"
                                        " not contracted with it)")
            except ValueError:
                pass
            if len(in_shape) == 1 and in_shape == out_shape and _close(
                    grad, jacobian.T * upstream, scale * float(np.max(np.abs(upstream))), rtol):
                return ShapeMistake(
                    "returned Jᵀ * upstream: the transposed Jacobian (entry [j, i] = ∂yᵢ/∂xⱼ)"
                    " multiplied elementwise by the upstream u instead of contracted with it",
                    "summed over its last axis it is uᵀJ: return tf.linalg.matvec(that matrix,"
                    " upstream), i.e. tf.reduce_sum(matrix * upstream, axis=-1)")
            expanded = upstream.reshape(out_shape + (1,) * len(in_shape))
            if _close(grad, expanded * jacobian, scale * float(np.max(np.abs(upstream))),
                      rtol):
                return ShapeMistake(
                    "scaled the Jacobian's rows by u but did not sum over the outputs",
                    "summed over the output axes it is uᵀJ: tf.reduce_sum(rows, axis=0)")
        return ShapeMistake("returned a Jacobian-shaped tensor (the full J or J * upstream)")
    if shape == in_shape + out_shape and in_shape != out_shape:
        return ShapeMistake("returned a transposed-Jacobian-shaped tensor")
    if shape == () and in_shape != ():
        return ShapeMistake("returned a scalar (a summed result)")
    if shape == out_shape:
        return ShapeMistake("returned a tensor shaped like the output, not like the input")
    return ShapeMistake(f"returned shape {shape}")


def site_label(site: Site) -> str:
    line = site.definition.rpartition(":")[2] if site.definition else ""
    return f"custom_gradient {site.name}" + (f" (line {line})" if line else "")


def violation_results(site: Site) -> list[CheckResult]:
    return [
        CheckResult(Kind.CUSTOM_GRADIENT, Status.FAIL, f"{site_label(site)}: {v.message}",
                    location=site.grad_fn_location or site.definition)
        for v in site.violations
    ]


def variable_results(site: Site) -> list[CheckResult]:
    """tf.Variables created on every call of the site, in grad_fn or in the forward."""
    label = site_label(site)
    found = [CheckResult(
        Kind.CUSTOM_GRADIENT, Status.FAIL,
        f"{label}: grad_fn creates a tf.Variable on every call: the vectorised"
        " tape.jacobian (experimental_use_pfor=True, the default) then returns None without"
        " a word (or raises, on a persistent tape) while tape.gradient works, and a"
        " tf.function refuses to create it after its first call; use tf.constant (or any"
        " tensor) for fixed values inside grad_fn", location=location)
        for location in site.grad_fn_variables]
    found += [CheckResult(
        Kind.GRAPH_BREAK, Status.WARN,
        f"{label} creates a tf.Variable in its forward pass: a tf.Variable copies its"
        " initial value, so built from the inputs outside a custom_gradient this line cuts the"
        " gradient path (tape.gradient returns None; here grad_fn alone carries the gradient),"
        " and a tf.function refuses to create variables on every call; build the output from"
        " tensors (tf.stack, tf.concat) instead", location=location)
        for location in site.forward_variables]
    return found


def translate(site: Site, report: Report,
              shape_evidence: Callable[[CheckResult], ShapeMistake | None]
              ) -> list[CheckResult]:
    """Re-label the findings of a check run on the site alone: its name, its grad_fn line."""
    label = site_label(site)
    location = site.grad_fn_location or site.definition
    n_outputs = sum(1 for o in report.outputs if o.differentiable)
    sizes = {o.name: int(np.prod(o.shape)) for o in report.outputs}
    results = []
    for result in report.checks:
        if result.status not in ("fail", "error"):
            continue
        if result.check == Kind.GRAD_SHAPE:
            mistake = shape_evidence(result) or ShapeMistake("returned the wrong shape")
            shapes = result.details
            message = (f"{label}: grad_fn returns shape"
                       f" {tuple(shapes.get('gradient_shape', ()))} for input {result.input} of"
                       f" shape {tuple(shapes.get('input_shape', ()))}: it {mistake.what};"
                       f" {mistake.fix}")
            results.append(replace(result, message=message, location=location))
        elif result.check == Kind.JACOBIAN and result.details.get("autodiff") is not None:
            what = value_diagnosis(np.asarray(result.details["autodiff"]),
                                   np.asarray(result.details["finite_difference"]),
                                   sizes.get(result.output or "", 1), n_outputs,
                                   result.output or "y")
            results.append(replace(
                result, check=Kind.CUSTOM_GRADIENT,
                message=f"{label}: grad_fn {what} for input {result.input}"
                        f" ({result.message})", location=location))
        elif result.check == Kind.CONNECTED:
            results.append(replace(
                result, check=Kind.CUSTOM_GRADIENT,
                message=f"{label}: grad_fn returns None for input {result.input}, but finite"
                        f" differences show {result.output} depends on it", location=location))
        elif result.check in ("jacobian", "custom-gradient", "fast"):
            # A grad_fn that raised is located at its raise; the rest at grad_fn's return.
            results.append(replace(result, check=Kind.CUSTOM_GRADIENT,
                                   message=f"{label}: {result.message}",
                                   location=result.location or location))
    if not results and not site.violations:
        results.append(CheckResult(
            Kind.CUSTOM_GRADIENT, Status.PASS,
            f"{label}: grad_fn returns uᵀJ, checked on its own against finite differences",
            location=site.definition))
    return results


def merge_shape_findings(core: Sequence[CheckResult],
                         site_results: Sequence[CheckResult]) -> list[CheckResult]:
    """Site-level grad-shape findings replace the core's anonymous ones."""
    if not any(r.check == Kind.GRAD_SHAPE and r.status == Status.FAIL for r in site_results):
        return list(core)
    return [r for r in core if r.check != Kind.GRAD_SHAPE]

