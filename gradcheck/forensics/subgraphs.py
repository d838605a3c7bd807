"""Some tensors of a traced graph computed again from others: one function made, in
TensorFlow's C API, of just the graph's ops between the tensors fed and those fetched
(wrap_function's prune copies a large model's ops one by one in Python, seconds per call),
run once or kept for several runs."""

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


class Subgraph:
    """One function of just the graph's ops between `fed` and `fetches`, made once and run as
    often as asked (each run with other values for the fed tensors), then removed by `close`:
    an instantiated function keeps its kernels' buffers (on ResNet50 tens of MiB) until then,
    and making one costs more than a run (instantiating a large model's graph)."""

    def __init__(self, fed: Sequence[Any], fetches: Sequence[Any]) -> None:
        from tensorflow.python.client import pywrap_tf_session
        from tensorflow.python.eager import context

        self.fed, self.fetches = list(fed), list(fetches)
        self._ids = {id(t): k for k, t in enumerate(self.fed)}
        self._inner = [t for t in self.fetches if id(t) not in self._ids]
        self._name: str | None = None
        if not self._inner:
            return
        graph = self._inner[0].graph
        name = f"gradcheck_subgraph_{next(_NAMES)}"
        with graph._c_graph.get() as c_graph:  # noqa: SLF001 - no public way in
            function = pywrap_tf_session.TF_GraphToFunction_wrapper(
                c_graph, name, False, _c_body(self.fed, self._inner),
                [t._as_tf_output() for t in self.fed],  # noqa: SLF001
                [t._as_tf_output() for t in self._inner], [], [], [], None, "")  # noqa: SLF001
        runtime = context.context()
        runtime.add_c_function(function)
        pywrap_tf_session.TF_DeleteFunction(function)
        self._name = name

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        """The fetches' values (eager tensors), each fed tensor given its value in `values`."""
        from tensorflow.python.eager import context

        found: list[Any] = []
        if self._name is not None:
            with silenced_stderr_fd():
                found = list(context.context().call_function(
                    self._name.encode(), list(values), len(self._inner)))
        results = iter(found)
        return [values[self._ids[id(t)]] if id(t) in self._ids else next(results)
                for t in self.fetches]

    def close(self) -> None:
        from tensorflow.python.eager import context

        if self._name is not None:
            context.context().remove_function(self._name)
            self._name = None


def _c_body(fed: Sequence[Any], fetches: Sequence[Any]) -> list[Any]:
    """The C ops of the body: those the tf.Tensors among `fetches` need, and for an output
    imported in the C API alone (finite_flags.ImportedOutput), the ops its import made and
    those the graph's tensors it reads need."""
    made = [t for t in fetches if hasattr(t, "c_ops")]
    tensors = [t for t in fetches if not hasattr(t, "c_ops")] + [r for t in made for r in t.reads]
    imports = {id(t.c_ops): t.c_ops for t in made}
    return [op._c_op for op in _body(fed, tensors)] + [  # noqa: SLF001
        op for ops in imports.values() for op in ops]


def computed(fed: Sequence[Any], values: Sequence[Any], fetches: Sequence[Any]) -> list[Any]:
    """The fetches' values (eager tensors) with each tensor of `fed` given its value in
    `values`: the graph's inputs (its arguments and captures) and any tensor inside it; the
    function made for it removed after the run."""
    subgraph = Subgraph(fed, fetches)
    try:
        return subgraph(values)
    finally:
        subgraph.close()
