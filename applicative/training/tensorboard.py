"""A run's curves as TensorBoard events, beside history.csv, where ``tensorboardX`` is installed.

    write_events(directory, header, rows)   ``directory/tensorboard/events.out.tfevents.applicative``: the rows
                                            of history.csv (``checkpoints.write_history``) as scalars, anew
    available()                             whether ``tensorboardX`` is installed (optional: nothing needs it)

Each row (an epoch: its last step, the mean of its losses, its held-out error and each named metric) gives a
scalar a column at that step: ``loss``, ``held_out`` and ``metrics/NAME``, an empty cell none. The file is
written anew from the checkpoint's curve with each checkpoint, into a temporary file renamed over the old one,
so a run killed and resumed shows one curve, the checkpoint's, never the lost steps twice. Then
``tensorboard --logdir runs/`` shows every run below ``runs/``, as Keras's ``TensorBoard`` callback and
Lightning's default logger do. Only the events' wall times differ between two runs of the same curve.
"""

from __future__ import annotations

import functools
import importlib.util
import struct
import time
from collections.abc import Sequence
from pathlib import Path

from applicative.training.files import atomic_file

__all__ = ["EVENTS", "FOLDER", "available", "write_events"]

FOLDER = "tensorboard"
EVENTS = "events.out.tfevents.applicative"
"""The one events file of a run (TensorBoard reads any file whose name holds "tfevents")."""


@functools.cache
def available() -> bool:
    """Whether ``tensorboardX`` is installed (the events are written only then)."""
    return importlib.util.find_spec("tensorboardX") is not None


def write_events(directory: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """``directory/tensorboard/events.out.tfevents.applicative`` from history.csv's ``header`` (``epoch``,
    ``step``, ``loss``, ``held_out``, then the metrics' names) and ``rows`` (cells as written, "" where none),
    atomically; nothing where ``tensorboardX`` is not installed. The file is TensorBoard's: ``Event``
    protocol buffers (tensorboardX's), the first naming the format, each framed as a TFRecord (its length, the
    bytes, each with tensorboardX's masked CRC-32C)."""
    if not available():
        return
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.record_writer import masked_crc32c

    tags = ["loss", "held_out", *(f"metrics/{name}" for name in header[4:])]
    now = time.time()
    events = [Event(wall_time=now, file_version="brain.Event:2")]
    for row in rows:
        values = [Summary.Value(tag=t, simple_value=float(cell)) for t, cell in zip(tags, row[2:], strict=True) if cell]
        events.append(Event(wall_time=now, step=int(row[1]), summary=Summary(value=values)))
    folder = directory / FOLDER
    folder.mkdir(exist_ok=True)
    with atomic_file(folder / EVENTS) as file:
        for event in events:
            data = event.SerializeToString()
            length = struct.pack("<Q", len(data))
            file.write(length + struct.pack("<I", masked_crc32c(length)))
            file.write(data + struct.pack("<I", masked_crc32c(data)))
