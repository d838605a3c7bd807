"""Fast mode: random projections catch and localise wrong gradients, and pass correct ones."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import gradcheck
from gradcheck.engine.batch import point_bytes
from gradcheck.errors import UsageError
from gradcheck.evidence.fast import BlockFailed
from gradcheck.kinds.jacobian.mode import choose_mode, full_mode_bytes
from gradcheck.options import CheckOptions
from tests.conftest import details, fixture_module, fixture_target, notes


def _by_kind(report: gradcheck.Report, kind: str) -> list[gradcheck.CheckResult]:
    return [c for c in report.checks if c.check == kind]


def _block(result: gradcheck.CheckResult) -> BlockFailed:
    """The evidence of a failing block: its failing [start, stop) element ranges and more."""
    assert isinstance(result.evidence, BlockFailed)
    return result.evidence


def test_million_input_wrong_grad_fn_is_caught_and_localised() -> None:
    module = fixture_module("large_wrong_grad")
    report = gradcheck.check(module.f, *module.f_inputs, probes=1, kinds=frozenset({"fast"}))
    assert not report.ok
    (failure,) = _by_kind(report, "fast")
    assert failure.status == "fail" and failure.input == "x"
    assert failure.worst_index == (3,)
    assert _block(failure).elements == ((3, 4), (314_159, 314_160), (999_999, 1_000_000))
    assert any("--mode auto chose it" in note and "--max-memory" in note for note in notes(report))


def test_million_input_correct_grad_passes_in_a_few_evaluations() -> None:
    module = fixture_module("large_correct")
    report = gradcheck.check(module.f, *module.f_inputs, kinds=frozenset({"fast"}))
    assert report.ok
    (result,) = _by_kind(report, "fast")
    assert result.status == "pass"
    # x±t along each of the 8 directions, one backward pass each: no x±2t was needed.
    assert details(result)["probes"] == 8
    assert details(result)["evaluations"] == 16
    assert details(result)["backward_passes"] == 8
    assert "8 random projection(s) ran" in result.message and "--mode full" in result.message


def test_explicit_fast_mode_localises_one_wrong_element_of_a_small_input() -> None:
    f = fixture_module("large_wrong_grad").f
    x = np.linspace(-3.0, 3.0, 1000)
    x[700] = 25.0
    report = gradcheck.check(f, x, mode="fast", kinds=frozenset({"fast"}))
    (failure,) = _by_kind(report, "fast")
    assert failure.status == "fail"
    assert _block(failure).elements == ((700, 701),)
    assert "x[700]" in failure.message
    assert "fast mode (random projections) was used: --mode fast was asked for" in notes(report)


def test_fast_mode_finds_a_wrong_grad_fn_on_every_element() -> None:
    module = fixture_module("custom_gradient_wrong_values")
    report = gradcheck.check(module.softplus, *module.softplus_inputs, mode="fast",
                             kinds=frozenset({"fast"}))
    (failure,) = _by_kind(report, "fast")
    assert failure.status == "fail"
    assert failure.max_abs_err is not None and failure.max_abs_err > 0.1


def test_fast_mode_sees_a_cut_gradient_path() -> None:
    module = fixture_module("variable_from_input")
    report = gradcheck.check(module.f, *module.f_inputs, mode="fast")
    connected = _by_kind(report, "connected")
    assert [c.status for c in connected] == ["fail"]
    assert "autodiff returns None" in connected[0].message


def test_fast_mode_on_the_command_line(run_cli) -> None:
    result = run_cli(["check", fixture_target("custom_gradient_correct"), "--mode", "fast",
                      "--probes", "3", "--format", "json"])
    assert result.exit_code == 0
    import json

    report = json.loads(result.output)
    (fast,) = [c for c in report["checks"] if c["check"] == "fast"]
    assert fast["status"] == "pass" and fast["details"]["probes"] == 3


def test_auto_mode_chooses_by_memory_budget() -> None:
    module = fixture_module("dense_layer")
    program_like = gradcheck.check(module.f, *module.f_inputs, kinds=frozenset({"fast"}),
                                   mode="auto")
    assert not _by_kind(program_like, "fast")  # 300 inputs fit in 1GiB: full mode
    from gradcheck.engine.binding import prepare
    from gradcheck.load.inputs import Arguments, name_arguments

    named = name_arguments(module.f, Arguments(module.f_inputs, {}, "test"))
    program = prepare(module.f, named, "auto").program
    size = full_mode_bytes(program, [(300,)])
    needed = size.needed
    # Jacobian-sized float64 arrays (300 x 300, six of them) and one evaluation point.
    assert needed == 8 * 300 * 300 * 6 + point_bytes((300,), [(300,)])
    assert (size.input, size.inputs, size.outputs) == ("x", 300, 300)
    over = choose_mode(CheckOptions(max_memory=needed - 1), program, [(300,)]).reason
    assert "full mode on x (300 inputs x 300 outputs)" in over.words()
    assert choose_mode(CheckOptions(max_memory=needed - 1), program, [(300,)]).mode == "fast"
    assert choose_mode(CheckOptions(max_memory=needed), program, [(300,)]).mode == "full"
    # Asked for, full mode goes over the budget (which then sizes chunks), not over the machine.
    tight = CheckOptions(mode="full", max_memory=1 << 20)  # the smallest budget there is
    assert choose_mode(tight, program, [(300,)]).mode == "full"
    huge = [(10**7,)]
    with pytest.raises(UsageError, match=r"--mode full: full mode on x \(300 inputs x 1000000"):
        choose_mode(CheckOptions(mode="full"), program, huge)


@pytest.mark.parametrize("seed", [0, 1])
def test_fast_mode_has_no_false_alarm_on_a_dense_correct_function(seed: int) -> None:
    module = fixture_module("dense_layer")
    report = gradcheck.check(module.f, *module.f_inputs, mode="fast", seed=seed, probes=4)
    assert report.ok, [c.message for c in report.checks if c.failed]
    assert [c.status for c in _by_kind(report, "fast")] == ["pass"]


def test_auto_mode_also_weighs_the_time_of_full_mode() -> None:
    module = fixture_module("dense_layer")
    from gradcheck.engine.binding import prepare
    from gradcheck.load.inputs import Arguments, name_arguments

    big = np.zeros(10_000)
    named = name_arguments(module.f, Arguments((module.f_inputs[0],), {}, "test"))
    program = prepare(module.f, named, "auto").program
    # What the choice reads: the input's size.
    program = replace(program, slots=(replace(program.slots[0], shape=big.shape),))
    slow = choose_mode(CheckOptions(max_memory=1 << 40), program, [(1,)], call_seconds=0.01)
    assert slow.mode == "fast" and "evaluate f 20000 times, about 200 s" in slow.reason.words()
    quick = choose_mode(CheckOptions(max_memory=1 << 40), program, [(1,)], call_seconds=1e-4)
    assert quick.mode == "full"


def test_errors_on_one_percent_of_the_elements_are_narrowed_to_single_elements() -> None:
    import tensorflow as tf

    wrong = tf.constant(np.arange(10_000) % 100 == 37)

    @tf.custom_gradient
    def softplus(x):
        def grad_fn(upstream):
            return upstream * tf.where(wrong, 1.5 * tf.sigmoid(x), tf.sigmoid(x))

        return tf.math.softplus(x), grad_fn

    x = np.random.default_rng(0).normal(scale=3.0, size=10_000)
    report = gradcheck.check(softplus, x, mode="fast", kinds=frozenset({"fast"}))
    (failure,) = _by_kind(report, "fast")
    assert failure.status == "fail"
    # One failing probe decides; the others are not run.
    assert details(failure)["probes_run"] == 1 and _block(failure).failed_probes == (0,)
    elements = _block(failure).elements
    assert len(elements) == 4
    assert all(stop == start + 1 and start % 100 == 37 for start, stop in elements)


def test_a_kink_crossed_by_the_step_is_not_a_false_alarm() -> None:
    import tensorflow as tf

    x = np.random.default_rng(1).normal(size=5_000)
    # A tenth of the float64 step (about 6e-6) from ReLU's kink: x ± t crosses it, x ± t/16 not.
    x[1234] = 6e-7
    report = gradcheck.check(tf.nn.relu, x, mode="fast", kinds=frozenset({"fast"}))
    (result,) = _by_kind(report, "fast")
    assert result.status == "pass", result.message



def test_smaller_steps_tried_at_a_kink_do_not_hide_a_wrong_gradient() -> None:
    import tensorflow as tf

    bump = tf.one_hot(10, 5_000, dtype=tf.float64)

    @tf.custom_gradient
    def relu(x):
        def grad_fn(upstream):
            return upstream * (1.0 + bump) * tf.cast(x > 0, x.dtype)  # twice too large at 10

        return tf.nn.relu(x), grad_fn

    x = np.random.default_rng(1).normal(size=5_000)
    x[10] = 0.5
    x[1234] = 6e-7  # the kink that makes fast mode try smaller steps
    report = gradcheck.check(relu, x, mode="fast", kinds=frozenset({"fast"}))
    (failure,) = _by_kind(report, "fast")
    assert failure.status == "fail"
    assert _block(failure).elements == ((10, 11),)


def test_a_failing_block_reads_as_before_with_its_first_clause_as_headline() -> None:
    from gradcheck.evidence.fast import ProjectedCut
    from gradcheck.evidence.text import first_clause

    run = {"mode_reason": "--mode fast was asked for", "probes": 8, "probes_run": 1,
           "failed_probes": (0,), "evaluations": 40, "backward_passes": 2, "seed": 0,
           "tolerance": 1.5e-6, "full_mode_bytes": 3 << 30}
    block = gradcheck.CheckResult(
        "fast", "fail", evidence=BlockFailed(
            **run, autodiff=2.0, finite_difference=-2.0, allowed=1.5e-6,
            elements=((3, 4), (10, 14)), output="y", input="x", input_shape=(4, 5)))
    assert block.message == (
        "probe 1 of 8 failed (the later ones were not run): for y and x, ⟨Jᵀu, v⟩ from"
        " tape.gradient is 2 but central differences along v give -2 (allowed 1.5e-06); the"
        " gradient is wrong around x[0, 3], [2, 0]..[2, 3] (4 elements); 1 random projection(s)"
        " ran (seed 0); an error whose effect on ⟨u, J v⟩ stays below the tolerance (here about"
        " 1.5e-06) is missed, so errors in a few small elements can go unseen: --mode full"
        " checks every element (it needs about 3.0GiB of --max-memory)")
    assert block.headline == first_clause(block.message)
    assert details(block) == {**{k: v for k, v in run.items() if k in (
        "mode_reason", "probes", "probes_run", "failed_probes", "evaluations",
        "backward_passes")}, "elements": ((3, 4), (10, 14))}
    cut = gradcheck.CheckResult("connected", "fail", evidence=ProjectedCut(
        **run, elements=((0, 2),), output="y", input="x", input_shape=(2,)))
    assert cut.message == cut.headline == (
        "the gradient path from x to y is cut: autodiff returns None, but central differences"
        " along random directions show y depends on x (around [0]..[1] (2 elements))")


def test_a_nan_loss_is_one_skip_without_narrowing_down_its_slices() -> None:
    # A NaN loss fails every slice of every weight: bisecting them cost a Watch diagnosis of
    # a small RNN 30 s of calls of f, to report what the non-finite check already names;
    # each input's block is still told apart (one evaluation of f each).
    import tensorflow as tf

    calls: list[int] = []

    def loss(w, v):  # type: ignore[no-untyped-def]
        calls.append(1)
        return tf.reduce_sum(tf.math.log(w - 10.0)) + tf.reduce_sum(v * v)

    report = gradcheck.check(loss, np.ones(64), np.ones(8), mode="fast", compiled=False,
                             kinds=frozenset({"fast", "non-finite"}))
    fast = _by_kind(report, "fast")
    assert [(c.status, c.input) for c in fast] == [("skip", "w"), ("skip", "v")]
    assert all("f's output y is NaN" in c.message for c in fast)
    assert len(calls) < 80, len(calls)  # 252 when every slice was bisected


def test_a_gradient_inf_in_one_input_is_narrowed_to_that_input_at_the_ops_line() -> None:
    report = gradcheck.check(fixture_target("non_finite_gradient_inputs", "loss"),
                             mode="fast", compiled=False)
    [fast] = _by_kind(report, "fast")
    assert fast.status == "fail" and fast.input == "w"
    assert fast.location is not None and fast.location.line == 10
    assert "non-finite values from Sqrt" in fast.message
