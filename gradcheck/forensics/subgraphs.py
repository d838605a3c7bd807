"""Some tensors of a traced graph computed again from others: one function made, in
TensorFlow's C API, of just the graph's ops between the tensors fed and those fetched
(wrap_function's prune copies a large model's ops one by one in Python, seconds per call)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from gradcheck.engine.runtime import silenced_stderr_fd

_NAMES = itertools.count()


def _body(fed: Sequence[Any], fetches: Sequence[Any]) -> list[Any]:
    """The ops the fetches need, in graph order, cut at the fed tensors."""
    fed_ids = {id(t) for t in fed}
    needed: dict[int, Any] = {}
    stack = [t.op for t in fetches if id(t) not in fed_ids]
    while stack:
        op = stack.pop()
        if id(op) in needed:
            continue
        needed[id(op)] = op
        stack += [t.op for t in op.inputs if id(t) not in fed_ids]
        stack += list(op.control_inputs)
    return [op for op in fetches[0].graph.get_operations() if id(op) in needed] if fetches \
        else []


def computed(fed: Sequence[Any], values: Sequence[Any], fetches: Sequence[Any]) -> list[Any]:
    """The fetches' values (eager tensors) with each tensor of `fed` given its value in
    `values`: the graph's inputs (its arguments and captures) and any tensor inside it."""
    from tensorflow.python.client import pywrap_tf_session
    from tensorflow.python.eager import context

    ids = {id(t): k for k, t in enumerate(fed)}
    inner = [t for t in fetches if id(t) not in ids]
    found: list[Any] = []
    if inner:
        graph = inner[0].graph
        name = f"gradcheck_subgraph_{next(_NAMES)}"
        with graph._c_graph.get() as c_graph:  # noqa: SLF001 - no public way in
            function = pywrap_tf_session.TF_GraphToFunction_wrapper(
                c_graph, name, False, [op._c_op for op in _body(fed, inner)],  # noqa: SLF001
                [t._as_tf_output() for t in fed],  # noqa: SLF001
                [t._as_tf_output() for t in inner], [], [], [], None, "")  # noqa: SLF001
        runtime = context.context()
        runtime.add_c_function(function)
        pywrap_tf_session.TF_DeleteFunction(function)
        try:
            with silenced_stderr_fd():
                found = list(runtime.call_function(name.encode(), list(values), len(inner)))
        finally:
            runtime.remove_function(name)
    results = iter(found)
    return [values[ids[id(t)]] if id(t) in ids else next(results) for t in fetches]
