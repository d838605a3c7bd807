"""f and its VJP traced once as a tf.function graph, with the value of every intermediate
tensor at the point (all fetched at once, or, for a large model, one finiteness flag each and
the values fetched as they are read), and each backward op mapped to the forward op whose
gradient made it."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradcheck.engine.program import Program, flatten_outputs
from gradcheck.engine.runtime import silenced_stderr_fd, tensorflow
from gradcheck.evidence import Location
from gradcheck.forensics.finite_flags import finite_and_largest, finite_flags
from gradcheck.forensics.non_finite_summary import (
    NonFiniteSummary,
    read_summaries,
    summarisable,
)
from gradcheck.forensics.op_types import VARIABLE_WRITE_OPS
from gradcheck.forensics.site_lines import op_layer_line
from gradcheck.forensics.subgraphs import Subgraph, computed
from gradcheck.load.locations import innermost_user_frame
from gradcheck.user_code import installed_package, is_gradcheck_file, is_user_file


def not_finite(array: np.ndarray | None) -> bool:
    """Whether a float array holds a NaN or an infinity (never a bool one)."""
    if array is None or array.dtype == bool:
        return False
    return not bool(np.all(np.isfinite(array)))


@dataclass
class TracedValues:
    """One evaluation of the traced graph: every float/bool tensor's value by name (or, when
    they are fetched on demand, those read so far, and every float tensor's finiteness)."""

    ops: list[Any]
    values: dict[str, np.ndarray]
    # Ops at this index and after were made by tape.gradient (the backward pass).
    backward_start: int
    # Per backward op index: the forward op whose gradient function created it.
    forward_of: dict[int, Any] = field(default_factory=dict)
    outputs: list[tuple[str, str]] = field(default_factory=list)   # (leaf name, tensor name)
    gradients: list[tuple[str, str | None]] = field(default_factory=list)  # (source, tensor)
    seconds: float = 0.0
    index: dict[str, int] = field(default_factory=dict)  # op name -> position in `ops`
    # With second derivatives traced: ops at this index and after differentiate the gradient.
    second_start: int | None = None
    # The graph run again with some tensors' values replaced (by name), a fix tried on the
    # point without the user's code: whether f's outputs and gradients are all finite, and
    # then the largest magnitude of a gradient's element (None without one).
    rerun: Callable[[dict[str, np.ndarray]], tuple[bool, float | None]] | None = None
    # Fetched on demand: whether each float tensor is finite (by name), and the fetcher of
    # values not yet read (the graph run again up to them).
    finite: dict[str, bool] = field(default_factory=dict)
    fetch: Callable[[list[Any]], dict[str, np.ndarray]] | None = None
    # f's outputs' and gradients' non-finite elements described in the graph (by name), so
    # that they are not fetched.
    summaries: dict[str, NonFiniteSummary] = field(default_factory=dict)
    # Removes what the runs above keep instantiated (once the analysis is done with them).
    close: Callable[[], None] = lambda: None
    _readers: dict[str, list[Any]] | None = field(default=None, repr=False)

    def consumers(self, tensor: Any) -> list[Any]:
        """The ops of the traced graph that read a tensor, in graph order, once per input that
        reads it (as Tensor.consumers(), which would meet the ops finite_flags imported in
        TensorFlow's C API alone: its Python does not know them)."""
        if self._readers is None:
            self._readers = {}
            for op in self.ops:
                for each in op.inputs:
                    self._readers.setdefault(each.name, []).append(op)
        return self._readers.get(tensor.name, [])

    def value(self, tensor: Any) -> np.ndarray | None:
        if tensor.name not in self.values:
            self.prefetch([tensor])
        return self.values.get(tensor.name)

    def prefetch(self, tensors: Sequence[Any]) -> None:
        """The values of tensors about to be read, fetched together (one run of the graph)."""
        missing = {t.name: t for t in tensors if t.name not in self.values and _fetchable(t)}
        if missing and self.fetch is not None:
            self.values.update(self.fetch(list(missing.values())))

    def tensor(self, name: str) -> Any:
        """The graph tensor of a name ("op:0")."""
        op, _, k = name.rpartition(":")
        return self.ops[self.index[op]].outputs[int(k)]

    def bad(self, tensor: Any) -> bool:
        """Whether a tensor holds a NaN or an infinity (read from its flag when there is one)."""
        flag = self.finite.get(tensor.name)
        return not flag if flag is not None else not_finite(self.value(tensor))

    def is_backward(self, op: Any) -> bool:
        return self.index[op.name] >= self.backward_start

    def forward_op(self, op: Any) -> Any:
        """The forward op an op stands for: itself, or the op whose gradient created it (for
        an op of the second derivative, the forward op of the gradient op it differentiates)."""
        if op is None or not self.is_backward(op):
            return op
        forward = self.forward_of.get(self.index[op.name])
        # An op of a function's body (a while loop's) is not in the outer graph's index.
        while forward is not None and forward.name in self.index and self.is_backward(forward):
            forward = self.forward_of.get(self.index[forward.name])
        return forward

    def order(self, op: Any) -> int:
        """0 for a forward op, 1 for one of the gradient, 2 for one of its derivative."""
        if not self.is_backward(op):
            return 0
        return 2 if self.second_start is not None and self.index[op.name] >= \
            self.second_start else 1


def op_location(op: Any) -> Location | None:
    """The user's line that created a graph op: the innermost user frame called from
    gradcheck's own code (not the test or script that called gradcheck)."""
    frames = list(op.traceback or ())
    ours = [i for i, frame in enumerate(frames) if is_gradcheck_file(frame.filename)]
    inner = frames[ours[-1] + 1:] if ours else frames
    return innermost_user_frame(f for f in inner if "__autograph_generated" not in f.filename) \
        or op_layer_line(op.name)


def library_of(op: Any) -> str | None:
    """The installed package other than TensorFlow whose code created a graph op (a
    tf.where inside TFP), or None when the user's own code called TensorFlow for it."""
    for frame in reversed(list(op.traceback or ())):
        if "__autograph_generated" in frame.filename:
            continue
        if is_user_file(frame.filename):
            return None
        package = installed_package(frame.filename)
        if package is not None and package not in ("tensorflow", "keras", "gradcheck"):
            return package
    return None


class _RecordingRegistry(dict[str, Any]):
    """TensorFlow's gradient registry, handing out gradient functions that note which
    forward op they differentiate and which graph ops they create."""

    def __init__(self, original: dict[str, Any], graph_ops: Callable[[], int],
                 records: list[tuple[Any, int, int]]) -> None:
        super().__init__(original)
        self.count, self.records = graph_ops, records

    def __getitem__(self, name: str) -> Any:
        entry = super().__getitem__(name)
        function = entry.get("type")
        if function is None:
            return entry

        def recorded(op: Any, *grads: Any) -> Any:
            start = self.count()
            try:
                return function(op, *grads)
            finally:
                self.records.append((op, start, self.count()))
        return {**entry, "type": recorded}


@contextlib.contextmanager
def _gradient_functions_recorded(graph: Any, records: list[tuple[Any, int, int]]
                                 ) -> Iterator[None]:
    try:
        from tensorflow.python.framework import ops as tf_ops
        registry = tf_ops._gradient_registry
        original = registry._registry
    except (ImportError, AttributeError):  # another TensorFlow: backward ops stay unmapped
        yield
        return
    recording = _RecordingRegistry(original, _op_counter(graph), records)
    registry._registry = recording
    try:
        yield
    finally:
        original.update(dict(recording.items()))  # custom gradients registered meanwhile
        registry._registry = original


def _op_counter(graph: Any) -> Callable[[], int]:
    """The number of the graph's ops (its get_operations()'s length), read in constant time:
    get_operations() copies the list of ops, and a gradient function is recorded with two
    counts (on ResNet50, a thousand gradient functions in a graph of thousands of ops)."""
    offset = len(graph.get_operations()) - graph.version  # version: the ops made so far
    return lambda: graph.version + offset


def _forward_finder(ops: Sequence[Any]) -> Callable[[Any], Any]:
    """The graph op a gradient function's stand-in op describes: the op of its outputs, else
    the op of its type with the same input tensors."""
    by_inputs: dict[tuple[str, tuple[int, ...]], Any] = {}
    for op in ops:
        by_inputs.setdefault((op.type, tuple(id(t) for t in op.inputs)), op)

    def forward(mock: Any) -> Any:
        for tensor in getattr(mock, "outputs", None) or ():
            if tensor is not None and hasattr(tensor, "op"):
                return tensor.op
        inputs = tuple(id(t) for t in getattr(mock, "inputs", None) or () if t is not None)
        return by_inputs.get((mock.type, inputs))
    return forward


def _fetchable(tensor: Any) -> bool:
    dtype = tensor.dtype
    return bool(dtype.is_floating or dtype.is_complex or dtype.is_bool)


@contextlib.contextmanager
def _unoptimized(tf: Any) -> Iterator[None]:
    """Grappler off while the graph is instantiated and run once: rewriting a large model's
    graph takes seconds (4 s of ResNet50's diagnosis), and every value is fetched as the
    kernels compute it anyway."""
    before = bool(tf.config.optimizer.get_experimental_options().get(
        "disable_meta_optimizer", False))
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": before})


def trace_values(program: Program, output_indices: Sequence[int] | None,
                 gradients: bool = True,
                 jit: bool = False, own_dtype: bool = False,
                 execute: bool = True, order: int = 1,
                 on_demand: bool = False) -> TracedValues | None:
    """f (and its VJP with all-ones upstreams) traced once and evaluated at the point with
    every intermediate tensor fetched (its arguments in the user's own dtype if asked, not
    the promoted one; not evaluated at all, no values, unless `execute`: f may write to
    variables); None when f cannot be traced. With `order` 2, the gradients are those of the
    sum of the VJP's elements (a Hessian times ones), through nested tapes. `on_demand`
    (without `jit`) fetches one finiteness flag per float tensor, and a value when it is read:
    memory and time that do not grow with every activation of a large model, and describes
    f's outputs and gradients in the graph. `output_indices` None: f's differentiable
    outputs."""
    tf = tensorflow()
    started = time.perf_counter()
    sources = [i for i, slot in enumerate(program.slots) if slot.differentiable]
    arguments = [i for i in sources if program.slots[i].argument
                 and not program.slots[i].is_variable]
    state: dict[str, Any] = {}
    flagged = on_demand and execute and not jit

    def body(*values: Any) -> list[Any]:
        graph = tf.compat.v1.get_default_graph()
        replacements = dict(zip(arguments, values))
        watched = [replacements.get(i, program.slots[i].value) for i in sources]
        records: list[tuple[Any, int, int]] = []
        second = tf.GradientTape() if order == 2 else contextlib.nullcontext()
        with second as outer:
            if outer is not None:
                outer.watch(list(values))
            with tf.GradientTape() as tape:
                for value in values:
                    tape.watch(value)
                leaves = flatten_outputs(program.call_converted(replacements))
            targets = [leaves[k] for k in (range(len(leaves)) if output_indices is None
                                           else output_indices)
                       if output_indices is not None or leaves[k].differentiable]
            state["start"] = len(graph.get_operations())
            grads: list[Any] = []
            if gradients:
                with _gradient_functions_recorded(graph, records):
                    grads = tape.gradient([t.tensor for t in targets], watched, output_gradients=[
                        tf.ones_like(t.tensor) for t in targets])
            if outer is not None:
                total = tf.add_n([tf.reduce_sum(g) for g in grads if g is not None])
        if outer is not None:
            state["second_start"] = len(graph.get_operations())
            with _gradient_functions_recorded(graph, records):
                grads = outer.gradient(total, watched)
        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        ops = graph.get_operations()
        fetched = [t for op in ops for t in op.outputs if _fetchable(t)]
        state.update(ops=ops, records=records, targets=targets, grads=grads,
                     volatile=_volatile(ops))
        if not flagged:
            state["fetched"] = fetched
            return fetched
        known = {id(t) for t in state["volatile"]}
        checked = [t for t in fetched if not t.dtype.is_bool and id(t) not in known
                   and t.op.type not in ("Const", "Placeholder")]
        kept = [*state["volatile"], *(t.tensor for t in targets)]
        described = [t for t in [*(leaf.tensor for leaf in targets), *grads]
                     if t is not None and summarisable(t)]
        same = _sharing_flags(checked)
        checked = [t for t in checked if t.name not in same]
        state.update(checked=checked, same=same, fetched=kept, described=described)
        return kept

    dtypes = [(program.slots[i].own_dtype if own_dtype else None) or program.slots[i].dtype
              for i in arguments]
    specs = [tf.TensorSpec(program.slots[i].shape, d) for i, d in zip(arguments, dtypes)]
    try:
        given = [tf.constant(program.value_of(i), d) for i, d in zip(arguments, dtypes)]
        concrete = tf.function(body, jit_compile=True, autograph=False).get_concrete_function(
            *specs) if jit else tf.compat.v1.wrap_function(body, specs)
        with silenced_stderr_fd(), _unoptimized(tf):
            results: Sequence[Any] = []
            if execute and flagged:
                # Run as a function made for this run and dropped after it (only the ops up
                # to the flags): the traced function, once called, would stay instantiated
                # with its kernels' buffers (on ResNet50 as large as the weights) for as
                # long as the graph is read.
                with concrete.graph.as_default():  # not the function's outputs: C API only
                    flags = finite_flags(state["checked"], state["described"])
                results = computed(list(concrete.graph.inputs),
                                   [*given, *concrete.captured_inputs], [*flags, *state["fetched"]])
            elif execute:
                results = concrete(*given)
    except Exception:  # f that cannot be traced (or compiled) has no graph to analyse
        return None
    if flagged:
        flags, described, *results = results
        finite = dict(zip((t.name for t in state["checked"]), np.asarray(flags).tolist()))
        finite.update((name, finite[source]) for name, source in state["same"].items())
        state["finite"] = finite
    traced = _collected(state, results, program, sources, time.perf_counter() - started)
    if execute and not jit:
        runs = _Runs(_Inputs(concrete, given, state["volatile"], traced.values), state)
        traced.rerun, traced.close = runs.rerun, runs.close
        if flagged:
            traced.finite = state["finite"]
            traced.fetch = runs.fetch
            traced.summaries = read_summaries(state["described"], described)
    return traced


# Ops whose output holds exactly the elements of their first input: finite when it is.
_SAME_ELEMENTS = frozenset({"Identity", "Snapshot", "Reshape", "Squeeze", "ExpandDims",
                            "StopGradient", "PreventGradient", "EnsureShape"})


def _sharing_flags(checked: Sequence[Any]) -> dict[str, str]:
    """The tensors of `checked` (in graph order) whose finiteness is that of another of them
    (a reshape's, a squeeze's: a third of ResNet50's): by name, the one whose flag they take,
    so that the graph computes fewer flags."""
    names = {t.name for t in checked}
    same: dict[str, str] = {}
    for tensor in checked:
        op = tensor.op
        if op.type in _SAME_ELEMENTS and len(op.outputs) == 1 and op.inputs and (
                op.inputs[0].name in names and op.inputs[0].dtype == tensor.dtype):
            source = op.inputs[0].name
            same[tensor.name] = same.get(source, source)
    return same


# Ops whose outputs differ from run to run: fed back when the graph runs again.
_RANDOM = re.compile(r"Random|Multinomial|TruncatedNormal|Shuffle")


def _volatile(ops: Sequence[Any]) -> list[Any]:
    """The float tensors a second run would compute differently: random ops' outputs and reads
    of the variables the graph assigns (a seed generator's state, a batch norm's statistics)."""
    assigned = {id(op.inputs[0]) for op in ops if op.type in VARIABLE_WRITE_OPS and op.inputs}
    return [t for op in ops if _RANDOM.search(op.type) or (
        op.type == "ReadVariableOp" and id(op.inputs[0]) in assigned)
        for t in op.outputs if _fetchable(t)]


@dataclass
class _Inputs:
    """What runs the traced graph again: its inputs (arguments, then captures) with their
    values, and the volatile tensors fed their first run's values."""

    concrete: Any
    given: list[Any]
    volatile: list[Any]
    values: dict[str, np.ndarray]

    def fed(self, feeds: dict[str, np.ndarray]) -> tuple[list[Any], list[Any]]:
        """The tensors fed and their values, `feeds` (by name) replacing any of them."""
        tf = tensorflow()
        graph = self.concrete.graph
        inputs = list(graph.inputs)
        values = [*self.given, *self.concrete.captured_inputs]
        for k, tensor in enumerate(inputs):
            if tensor.name in feeds:
                values[k] = tf.constant(feeds[tensor.name], tensor.dtype)
        known = {t.name for t in inputs}
        inside = [t for t in self.volatile if t.name not in feeds] + [
            graph.get_tensor_by_name(name) for name in feeds if name not in known]
        return inputs + inside, values + [
            tf.constant(feeds[t.name] if t.name in feeds else self.values[t.name], t.dtype)
            for t in inside]


class _Runs:
    """The graph run again, up to the values read (`fetch`) or to whether a fix made every
    output and gradient finite (`rerun`). The first run that fetches values also computes the
    fix's two scalars, and its function is kept until `close` (or a run it cannot serve): a fix
    tried after the values around the first op were read runs it again instead of
    instantiating the graph once more (on ResNet50, most of a run's cost)."""

    def __init__(self, inputs: _Inputs, state: dict[str, Any]) -> None:
        self.inputs, self.state = inputs, state
        self._summary: list[Any] = []  # whether all finite, the largest |gradient|
        self._kept: Any = None  # a Subgraph fetching some values and the summary
        self._failed: set[str] = set()

    def summary(self) -> list[Any]:
        if not self._summary:
            with self.inputs.concrete.graph.as_default():
                self._summary.extend(finite_and_largest(
                    [leaf.tensor for leaf in self.state["targets"]],
                    [g for g in self.state["grads"] if g is not None]))
        return self._summary

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()
            self._kept = None

    def fetch(self, tensors: list[Any]) -> dict[str, np.ndarray]:
        """Tensors' values, computed together by one run of the graph up to them (a constant's
        read from the graph); a tensor that cannot be computed again is left out, once."""
        from tensorflow.python.framework import tensor_util

        found = {t.name: tensor_util.MakeNdarray(t.op.get_attr("value")) for t in tensors
                 if t.op.type == "Const"}
        run = [t for t in tensors if t.name not in found and t.name not in self._failed]
        if not run:
            return found
        fed, values = self.inputs.fed({})
        given = {t.name: v for t, v in zip(fed, values)}
        found.update((t.name, np.asarray(given[t.name])) for t in run if t.name in given)
        run = [t for t in run if t.name not in given]
        if not run:
            return found
        try:
            results = self._kept_run(fed, values, run) if self._kept is None else None
            if results is None:
                results = self._once(fed, values, run)
        except Exception:  # noqa: BLE001 - an op that will not run again has no value
            self._failed.update(t.name for t in run)
            return found
        found.update((t.name, np.asarray(v)) for t, v in zip(run, results))
        return found

    def rerun(self, feeds: dict[str, np.ndarray]) -> tuple[bool, float | None]:
        """The graph run again with tensors (by name) fed new values, random ones as they
        first were: whether its outputs and gradients are all finite, and then the largest
        magnitude of a gradient's element (two scalars: the gradients stay in the graph)."""
        summary = self.summary()
        fed, values = self.inputs.fed(feeds)
        kept = self._kept
        if kept is not None and [t.name for t in kept.fed] == [t.name for t in fed]:
            with _unoptimized(tensorflow()):
                results = kept(values)[-len(summary):]
        else:
            results = self._once(fed, values, summary)
        finite, largest = (np.asarray(v) for v in results)
        return bool(finite), float(largest) if finite and largest > -np.inf else None

    def _kept_run(self, fed: list[Any], values: list[Any], run: list[Any]) -> list[Any] | None:
        """The values of `run` from a function that also computes the fix's summary, kept;
        None (nothing kept) when that function cannot be made or run."""
        try:
            with _unoptimized(tensorflow()):
                self._kept = Subgraph(fed, [*run, *self.summary()])
                return list(self._kept(values)[:len(run)])
        except Exception:  # noqa: BLE001 - then a run of just the values, as without it
            self.close()
            return None

    def _once(self, fed: list[Any], values: list[Any], fetches: list[Any]) -> list[Any]:
        """A run the kept function cannot serve: it is removed first (one instantiated at a
        time), and this run's function after it."""
        self.close()
        with _unoptimized(tensorflow()):
            return computed(fed, values, fetches)


def _collected(state: dict[str, Any], results: Sequence[Any], program: Program,
               sources: Sequence[int], seconds: float) -> TracedValues:
    ops = state["ops"]
    # np.asarray shares the tensor's buffer (as_array's .numpy() would copy every value).
    traced = TracedValues(ops, {t.name: np.asarray(v) for t, v in zip(state["fetched"], results)},
                          state["start"], seconds=seconds,
                          index={op.name: i for i, op in enumerate(ops)},
                          second_start=state.get("second_start"))
    forward_of = _forward_finder(ops[:state.get("second_start") or state["start"]])
    # Innermost first: a gradient function called inside another's records before it.
    for mock, start, end in sorted(state["records"], key=lambda r: r[2] - r[1], reverse=True):
        forward = forward_of(mock)
        for i in range(start, end):
            traced.forward_of[i] = forward
    traced.outputs = [(leaf.name, leaf.tensor.name) for leaf in state["targets"]]
    traced.gradients = [(program.slots[i].name, None if g is None else g.name)
                        for i, g in zip(sources, state["grads"])]
    return traced
