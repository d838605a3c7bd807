"""A check command's flags (jacobian, vjp, check, hessian), read once from click's values."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gradcheck.cli.formats import OutputOptions
from gradcheck.options import OPTIONS

if TYPE_CHECKING:
    from gradcheck.pipeline import TargetRequest


@dataclass(frozen=True)
class CommandOptions:
    """What a check command was told: how to call the TARGET (the input flags), the check
    options' values for options_from to validate, --explain, the artifacts and the output."""

    output: OutputOptions
    path: str
    input_specs: tuple[str, ...]
    shapes: tuple[str, ...]
    inputs_attr: str | None
    upstream_specs: tuple[str, ...]  # none for jacobian and hessian, which have no --upstream
    instrument: bool
    against: str | None
    explain: bool | None  # None: the command decides (--explain/--no-explain not given)
    plot_dir: str | None
    save_file: str | None
    # Every option of gradcheck.options' table that the command has, by click's parameter
    # name, as given: options_from validates them (and takes the check options among them).
    values: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_click(cls, values: Mapping[str, Any]) -> CommandOptions:
        """From click's keyword arguments of a check command."""
        return cls(
            output=OutputOptions.from_click(values), path=values["path"],
            input_specs=tuple(values["input_specs"]), shapes=tuple(values["shapes"]),
            inputs_attr=values["inputs_attr"],
            upstream_specs=tuple(values.get("upstream_specs", ())),
            instrument=values["instrument"], against=values["against"],
            explain=values.get("explain"), plot_dir=values["plot_dir"],
            save_file=values["save_file"],
            values=MappingProxyType({spec.parameter: values[spec.parameter] for spec in OPTIONS
                                     if spec.parameter in values}),
        )

    def request(self, target: str) -> TargetRequest:
        """How the worker is to load TARGET and call it."""
        from gradcheck.pipeline import TargetRequest

        return TargetRequest(
            target=target, path=self.path, input_specs=self.input_specs, shapes=self.shapes,
            inputs_attr=self.inputs_attr, upstream_specs=self.upstream_specs,
            instrument=self.instrument)
