"""Op types several forensics share: the ops that write into a resource variable, and the
decompositions whose values may coincide."""

import numpy as np

# A whole variable assigned or updated in place.
WHOLE_VARIABLE_WRITES = frozenset({"AssignVariableOp", "AssignAddVariableOp",
                                   "AssignSubVariableOp"})
# Part of a variable written: `v[:2, :2].assign(...)`, `v.scatter_nd_update(...)`, ...
PARTIAL_VARIABLE_WRITES = frozenset({
    "ResourceStridedSliceAssign", "ResourceScatterUpdate", "ResourceScatterAdd",
    "ResourceScatterSub", "ResourceScatterMul", "ResourceScatterDiv", "ResourceScatterMin",
    "ResourceScatterMax", "ResourceScatterNdUpdate", "ResourceScatterNdAdd",
    "ResourceScatterNdSub", "ResourceScatterNdMin", "ResourceScatterNdMax"})
VARIABLE_WRITE_OPS = WHOLE_VARIABLE_WRITES | PARTIAL_VARIABLE_WRITES
# Writes that replace what they write over (the others combine with it).
OVERWRITING_WRITES = frozenset({"AssignVariableOp", "ResourceStridedSliceAssign",
                                "ResourceScatterUpdate", "ResourceScatterNdUpdate"})

# Decompositions with values that may coincide (their gradient through the vectors divides by
# the values' differences): op -> (the output holding the values, those holding the vectors).
SPECTRAL = {"Svd": (0, (1, 2)), "SelfAdjointEigV2": (0, (1,))}


def spectral_gap(values: np.ndarray) -> float | None:
    """The smallest gap between two of a decomposition's values (along the last axis),
    relative to their scale; None for fewer than two."""
    if np.ndim(values) < 1 or np.shape(values)[-1] < 2:
        return None
    ordered = np.sort(np.asarray(values, dtype=np.float64), axis=-1)
    return float(np.min(np.diff(ordered, axis=-1))) / max(1.0, float(np.max(np.abs(ordered))))
