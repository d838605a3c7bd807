"""A point on a discontinuity of f (a branch cut, a wrap) is named as one, at the op's line,
not as finite differences too noisy (fixtures/branch_cuts.py: users' reports)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcheck
from gradcheck.evidence.gradients import Jump
from gradcheck.report import Kind, Status
from tests.conftest import fixture_module

# function, (op, line) of the discontinuity (written with tf.where: the comparison that ties,
# y = 0 on the negative x axis)
CASES = [("fn", ("Atan", 11)), ("angle_loss", ("Angle", 23)),
         ("wrapped_angle_error", ("FloorMod", 31)), ("atan2", ("GreaterEqual", 43)),
         ("spherical_angles", ("Atan2", 58)), ("complex_sqrt", ("Sqrt", 68)),
         ("log_phase", ("Log", 77))]


def _cast(value: object, dtype: type) -> object:
    array = np.asarray(value)
    return array if np.iscomplexobj(array) else array.astype(dtype)


@pytest.mark.parametrize(("name", "site"), CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_point_on_a_branch_cut_is_a_discontinuity(name: str, site: tuple[str, int],
                                                    dtype: type) -> None:
    module = fixture_module("branch_cuts")
    inputs = [_cast(v, dtype) for v in getattr(module, f"{name}_inputs")]
    report = gradcheck.check(getattr(module, name), *inputs, compiled=False)
    if name == "wrapped_angle_error" and dtype == np.float32:
        # rounded to float32, a1 - a2 + pi misses 2 pi by 9e-8: smaller steps stay off the wrap
        assert report.ok and all(c.status == Status.PASS for c in report.checks)
        return
    jumps = [c for c in report.checks if isinstance(c.evidence, Jump)]
    assert jumps and all(c.check == Kind.KINK and c.status == Status.WARN for c in jumps)
    assert report.ok  # the gradient is right on either side
    assert not [c for c in report.checks if c.check == Kind.JACOBIAN and c.status != Status.PASS]
    assert jumps[0].evidence.site.name == site[0]
    assert jumps[0].location is not None and jumps[0].location.line == site[1]
    assert "discontinuous" in str(report)


def test_a_kink_is_still_a_kink_not_a_jump() -> None:
    import tensorflow as tf

    report = gradcheck.check(tf.nn.relu, np.array([0.0, 1.0]), compiled=False)
    kinds = [type(c.evidence).__name__ for c in report.checks if c.check == Kind.KINK]
    assert kinds == ["Kink"]
