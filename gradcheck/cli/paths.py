"""Before a check runs: its output paths (-o, --save, --plot) must not be files the run reads
(the target's source, input and upstream files, the configuration) and must be writable."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gradcheck.errors import UsageError
from gradcheck.load.inputs import UPSTREAM_KEYWORDS, looks_like_file, split_keyword
from gradcheck.render.files import check_writable, real_target

if TYPE_CHECKING:
    from gradcheck.cli.command_options import CommandOptions

# What --plot DIR writes: OUTPUT-INPUT.png and OUTPUT-INPUT.json.
PLOT_SUFFIXES = (".png", ".json")


def _module_files(module_part: str, search_path: str) -> Iterator[str]:
    """The source a TARGET's module part names: a .py path, or a dotted module under --path."""
    if module_part.endswith(".py") or "/" in module_part or os.sep in module_part:
        yield module_part
        return
    base = Path(search_path, *module_part.split("."))
    yield str(base.with_suffix(".py"))
    yield str(base / "__init__.py")


def target_files(spec: str | None, search_path: str = ".") -> Iterator[str]:
    if spec and ":" in spec:
        yield from _module_files(spec.strip().rpartition(":")[0], search_path)


def value_files(specs: Iterable[str]) -> Iterator[str]:
    """The .npy/.npz files among -i/--upstream values (NAME=FILE included)."""
    for spec in specs:
        if spec in UPSTREAM_KEYWORDS:
            continue
        keyword = split_keyword(spec)
        value = keyword[1] if keyword is not None else spec
        if looks_like_file(value):
            yield value


def _same(one: Path, other: Path) -> bool:
    try:
        return one == other or (one.exists() and other.exists() and os.path.samefile(one, other))
    except OSError:
        return False


def _is_special(path: str) -> bool:
    """A device or FIFO (/dev/null), which any number of outputs may share."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def guard_outputs(reads: Sequence[tuple[str, str]], files: Sequence[tuple[str, str | None]],
                  plot_dir: tuple[str, str | None] = ("--plot", None),
                  plot_subfolders: bool = False) -> None:
    """Refuse (UsageError, exit 2) an output path that is a file the run reads, or that cannot
    be written. `reads`: (path, what it is); `files`: (flag, path or None)."""
    read = [(real_target(path), what) for path, what in reads]
    chosen = [(flag, path) for flag, path in files if path]
    for flag, path in chosen:
        for source, what in read:
            if _same(real_target(path), source):
                raise UsageError(f"{flag} {path!r} is {what}, which this run reads; write the"
                                 " output to another file")
    files_only = [real_target(path) for _, path in chosen if not _is_special(path)]
    if len(set(files_only)) < len(files_only):
        raise UsageError(" and ".join(flag for flag, _ in chosen) + " name the same file")
    flag, folder = plot_dir
    if folder:
        where = real_target(folder)
        for source, what in read:
            inside = source.parent == where or (plot_subfolders and source.is_relative_to(where))
            if inside and source.suffix in PLOT_SUFFIXES:
                raise UsageError(f"{flag} {folder!r} holds {what} {str(source)!r}, which this"
                                 " run reads and the pictures could replace; choose another"
                                 " folder")
        check_writable(folder, folder=True)
    for flag, path in chosen:
        check_writable(path, make_folders=flag == "--save")


def guard_single(target: str, options: CommandOptions) -> None:
    """Outputs that are files this check reads, or cannot be written: refused before it runs."""
    reads = [(path, "the target's source") for path in target_files(target, options.path)]
    reads += [(path, "the --inputs source")
              for path in target_files(options.inputs_attr, options.path)]
    reads += [(path, "an input file") for path in value_files(options.input_specs)]
    reads += [(path, "an upstream file") for path in value_files(options.upstream_specs)]
    guard_outputs(reads, [("-o", options.output.file), ("--save", options.save_file)],
                  ("--plot", options.plot_dir))


def guard_run(config: Any, selected: Any, output_file: str | None,
               plot_dir: str | None) -> None:
    """`run`'s outputs must not be the configuration or a file a selected check reads."""
    reads = [(str(config.source), "the configuration")]
    for check in selected:
        reads += [(path, f"the source of check {check.name!r}")
                  for path in (*target_files(check.load_target, check.path),
                               *target_files(check.inputs, check.path))]
        reads += [(path, f"a file check {check.name!r} reads")
                  for path in value_files((*check.input, *check.upstream))]
    guard_outputs(reads, [("-o", output_file)], ("--plot", plot_dir), plot_subfolders=True)


def guard_replay(snapshot: Path, output_file: str | None, model_spec: str | None,
                 loss_spec: str | None, path: str) -> None:
    """-o never names a file of the snapshot (its reports included), nor --model's or
    --loss's source."""
    from gradcheck.training.snapshot import DATA_FILES, MANIFEST, REPORT_JSON, REPORT_TEXT

    reads = [(str(snapshot / name), f"the snapshot's {name}")
             for name in (MANIFEST, *DATA_FILES, REPORT_JSON, REPORT_TEXT)]
    reads += [(file, "the source of --model or --loss")
              for spec in (model_spec, loss_spec) for file in target_files(spec, path)]
    guard_outputs(reads, [("-o", output_file)])
