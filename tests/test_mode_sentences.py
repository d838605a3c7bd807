"""The sentences of the jvp, compiled, nondeterminism, second-order and hessian findings, made
in render from their evidence (hand-built results, no TensorFlow): headline, whole message and
the JSON `details` each publishes."""

from __future__ import annotations

from gradcheck.evidence import Location
from gradcheck.evidence.causes import Words
from gradcheck.kinds.compiled.evidence import CompiledDiffers, CompiledNotFinite, XlaUnsupported
from gradcheck.kinds.jvp.evidence import ComparedForwardGap, ModesDisagree
from gradcheck.kinds.nondeterminism.evidence import ChangingState, Nondeterministic
from gradcheck.kinds.second_order.evidence import Asymmetric, SecondOrderOf
from gradcheck.render.json_format import check_dict
from gradcheck.report import Cause, CheckResult, Mistake


def test_a_jvp_disagreement_is_one_clause_with_its_numbers_published() -> None:
    result = CheckResult("jvp", "fail", evidence=ModesDisagree(1.5, 2.25, 1e-12, "x"))
    assert result.message == result.headline == (
        "forward mode (ForwardAccumulator) gives ⟨u, Jv⟩ = 1.5 but reverse mode (tape.gradient)"
        " gives ⟨Jᵀu, v⟩ = 2.25 for x: the two modes disagree, so a gradient (often a"
        " custom_gradient grad_fn) is inconsistent")
    assert check_dict(result)["details"] == {"forward": 1.5, "reverse": 2.25, "allowed": 1e-12}


def test_a_forward_mode_gap_heads_with_what_and_ends_with_the_fix() -> None:
    result = CheckResult("jvp", "skip", evidence=ComparedForwardGap("x", 1.0, 2.0, 0.5),
                         cause=Cause(Mistake.NO_FORWARD_RULE, facts=Words(
                             "TensorFlow has no forward-mode rule for LRN (why)",
                             "use reverse mode; or not")))
    assert result.headline == "no forward-mode verdict for x: TensorFlow has no forward-mode" \
                              " rule for LRN (why)"
    assert result.message == f"{result.headline}; use reverse mode; or not"
    assert check_dict(result)["details"] == {"forward": 1.0, "reverse": 2.0, "allowed": 0.5}


def test_compiled_findings_head_with_the_count_and_say_the_worst_element_after() -> None:
    differs = CheckResult("compiled", "fail", evidence=CompiledDiffers(
        "tf.function", "x", 2, 4, (1,), -1.59609, -0.524349, 400.38))
    assert differs.headline == ("the VJP for x under tf.function differs from the eager one in 2"
                                " of 4 elements")
    assert differs.message == (f"{differs.headline}; worst [1]: tf.function -1.59609, eager"
                               " -0.524349 (400× the allowed error)")
    not_finite = CheckResult("compiled", "fail", evidence=CompiledNotFinite(
        "XLA", "x", 1, 2, (1,), float("nan"), 0.0, jit=True))
    assert not_finite.message.endswith("where the eager one is; worst [1]: XLA nan, eager 0")
    assert check_dict(not_finite)["details"] == {"non_finite": True, "jit": True}
    xla = CheckResult("compiled", "skip", evidence=XlaUnsupported(
        ops="EagerPyFunc", op="EagerPyFunc", location=Location("f.py", 13)))
    assert xla.headline == "XLA cannot compile the VJP: no XLA kernel for EagerPyFunc"
    assert xla.message == f"{xla.headline}; the op: EagerPyFunc at f.py:13"
    assert check_dict(xla)["details"] == {}


def test_nondeterminism_names_what_changed_then_the_state_that_changes() -> None:
    result = CheckResult("nondeterminism", "fail", evidence=Nondeterministic(
        "noisy", state=ChangingState(False, "tf.random.normal", "f.py:7", others=2)),
        cause=Cause(Mistake.RANDOM, facts=Words("y differs by up to 1.2 at [0]")))
    assert result.headline == ("noisy returned different values on two calls with the same"
                               " inputs: y differs by up to 1.2 at [0]")
    assert result.message.startswith(f"{result.headline}; random ops (tf.random.*, dropout)")
    assert result.message.endswith("; the state that changes: a random op, tf.random.normal, at"
                                   " f.py:7 (and 2 more)")


def test_a_retold_first_order_finding_keeps_its_headline_and_details() -> None:
    first = CheckResult("jacobian", "fail", "autodiff and finite differences disagree; worst [0]",
                        input="x", output="dy/dx", details={"autodiff": [[1.0]]})
    told = CheckResult("hessian", "fail", input="x", output="dy/dx", details={"autodiff": [[1.0]]},
                       evidence=SecondOrderOf(first, told=True), cause=Cause(
                           Mistake.WRONG_VALUES, facts=Words("has wrong values",
                                                             "nest a gradient")))
    where = "dy/dx differentiated by nested tapes with respect to x, against central" \
            " differences of it: "
    assert told.headline == f"{where}autodiff and finite differences disagree"
    assert told.message == (f"{where}{first.message}; the gradient has wrong values; nest a"
                            " gradient")
    assert check_dict(told)["details"] == {"autodiff": [[1.0]]}


def test_an_asymmetric_hessian_publishes_its_largest_asymmetry_only() -> None:
    result = CheckResult("hessian", "fail", evidence=Asymmetric(
        2.0, "x[1]", "x[2]", 2.5, 0.5, 2, 9), cause=Cause(
            Mistake.ASYMMETRIC, facts=Words("is not symmetric", "nest a gradient")))
    assert "∂²/∂x[1]∂x[2] = 2.5 but ∂²/∂x[2]∂x[1] = 0.5, asymmetric in 2 of 9" in result.headline
    assert result.message == f"{result.headline}; nest a gradient"
    assert check_dict(result)["details"] == {"max_asymmetry": 2.0}
