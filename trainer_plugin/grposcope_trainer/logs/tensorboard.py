"""TensorBoard event files and log directories, through TensorBoard's own event reader.

`tensorboard.backend.event_processing.event_file_loader.EventFileLoader` reads the records of
one file incrementally (each `Load()` yields what was appended since the last) and migrates
old `simple_value` summaries to tensors; we take every scalar summary as a metric with the
event's step and wall time. A directory is one run: its event files (a restarted trainer adds
one, often in a new sub-directory such as transformers' `runs/<date>_<host>/`) are merged.

Hyperparameters: transformers' TensorBoard callback writes the TrainingArguments as JSON text
under the tag `args` (read with the plugin's own `hyperparams.hyperparameters`, as the callback
would send them); `SummaryWriter.add_hparams` writes an hparams session (its numbers and
strings are sent as they are). TensorBoard is an optional dependency: the `tensorboard` extra.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from grposcope_trainer.logs.data import LogData, LogFormatError

RELIST_S = 1.0  # how often a followed directory is searched for new event files

INSTALL_HINT = (
    "reading TensorBoard logs needs tensorboard: pip install 'grposcope-trainer[tensorboard]'"
)


def _loader_class() -> Any:
    try:
        from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    except ModuleNotFoundError as exc:
        raise LogFormatError(INSTALL_HINT) from exc
    return EventFileLoader


def is_event_file(path: Path) -> bool:
    return path.is_file() and "tfevents" in path.name


def event_files(path: Path) -> list[Path]:
    """The event files of a log directory (searched recursively) or the one file given."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*tfevents*") if p.is_file())


class TensorBoardTail:
    """Reads a log directory (or one event file) incrementally: `poll()` returns what was
    written since the previous call, new event files included. A file that shrank (rewritten)
    is read again from its start; the server keeps each (key, step) once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._loader_cls = _loader_class()
        self._loaders: dict[Path, Any] = {}
        self._files: list[Path] = []
        self._listed_at = -math.inf
        self._sizes: dict[Path, int] = {}
        self.hyperparameters: dict[str, Any] = {}
        self.config: dict[str, Any] = {}

    def poll(self) -> LogData:
        out = LogData("tensorboard")
        now = time.monotonic()
        if now - self._listed_at >= RELIST_S or not self._files:
            self._files = event_files(self.path) if self.path.exists() else []
            self._listed_at = now
        for file in self._files:
            try:
                size = file.stat().st_size
            except OSError:
                continue  # removed between listing and reading
            if file in self._loaders and size < self._sizes.get(file, 0):
                del self._loaders[file]  # rewritten in place: read it again
            self._sizes[file] = size
            if file not in self._loaders:
                self._loaders[file] = self._loader_cls(str(file))
            for event in self._loaders[file].Load():
                self._take(event, out)
        out.hyperparameters = dict(self.hyperparameters)
        out.config = dict(self.config)
        return out

    def _take(self, event: Any, out: LogData) -> None:
        if not event.HasField("summary"):
            return
        for value in event.summary.value:
            plugin = value.metadata.plugin_data.plugin_name
            if plugin == "hparams":
                self._hparams(value.metadata.plugin_data.content)
                continue
            if plugin == "text":
                self._text(value.tag, value)
                continue
            scalar = _scalar(value)
            if scalar is not None:
                out.add(float(event.step), value.tag, scalar)
                out.wall_times[int(event.step)] = float(event.wall_time)

    def _text(self, tag: str, value: Any) -> None:
        if tag.split("/")[0] != "args":
            return
        text = _tensor_text(value)
        try:
            args = json.loads(text) if text else None
        except json.JSONDecodeError:
            return
        if isinstance(args, dict):
            from grposcope_trainer.hyperparams import hyperparameters

            self.config.update({k: v for k, v in args.items() if _plain(v)})
            self.hyperparameters.update(hyperparameters(SimpleNamespace(**args)))

    def _hparams(self, content: bytes) -> None:
        try:
            from tensorboard.plugins.hparams import plugin_data_pb2
        except ModuleNotFoundError:
            return
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        if not data.HasField("session_start_info"):
            return
        for name, val in data.session_start_info.hparams.items():
            kind = val.WhichOneof("kind")
            if kind in ("number_value", "string_value", "bool_value"):
                got = getattr(val, kind)
                if kind != "number_value" or math.isfinite(got):
                    self.hyperparameters[name] = got


def read(path: Path, where: str) -> LogData:
    """A whole TensorBoard log; LogFormatError when it holds no scalar."""
    if not event_files(path):
        raise LogFormatError(f"{where} holds no TensorBoard event file (*tfevents*)")
    data = TensorBoardTail(path).poll()
    if not data.rows:
        raise LogFormatError(
            f"{where} holds no readable scalar summary (an empty, truncated or corrupt event file?)"
        )
    return data


def _scalar(value: Any) -> float | None:
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if not value.HasField("tensor"):
        return None
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(value.tensor)
    except (ValueError, TypeError):
        return None
    if array.size != 1 or array.dtype.kind not in "fiu":
        return None
    return float(array.reshape(-1)[0])


def _tensor_text(value: Any) -> str | None:
    tensor = value.tensor
    if tensor.string_val:
        raw = tensor.string_val[0]
        return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else str(raw)
    return None


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))
