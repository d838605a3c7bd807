"""Op types several forensics share: the ops that write into a resource variable."""

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
