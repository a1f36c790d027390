"""``applicative.training.fit``, the loop every model trains through, on models small enough to check by hand:
SGD written out in numpy (the epoch order, the dropped partial batch), an uninterrupted run against a resumed
one, the seconds of several sessions, the per-epoch line and the held-out errors, and the refusals."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import signal
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tensorboardX.proto import event_pb2

from applicative.training import Arrays, Learner, State, fit, loop, restore, values_relative_l2
from applicative.training.loop import _killed_after

Params = dict[str, jax.Array]
INPUTS = np.random.default_rng(9).normal(size=(10, 2, 2))


def tracking(seed: int = 7) -> Learner[Params]:
    """A scalar p pulled towards each minibatch's mean input: loss (p - mean)^2 / 2."""

    def loss(params: Params, a: jax.Array, u: jax.Array) -> jax.Array:
        return 0.5 * (params["p"] - jnp.mean(a)) ** 2

    return Learner(lambda seed: {"p": jnp.zeros(())}, loss, lambda params, a: jnp.full(len(a), params["p"]))


def run(directory: Path, batch: int = 3, **changes: Any) -> State[Params]:
    settings: dict[str, Any] = {
        "description": json.dumps({"model": "mean"}), "steps": 15, "seed": 7, "progress": False, "log": False,
    }  # fmt: skip
    return fit(tracking(), optax.sgd(0.5), Arrays(INPUTS, INPUTS, batch), directory, **{**settings, **changes})


def test_each_epoch_is_visited_in_its_own_order_also_after_a_resume(tmp_path: Path) -> None:
    """Epoch e visits the samples in the order default_rng((seed, e)).permutation, the last partial batch
    (10 = 3 x 3 + 1) dropped: p against the same SGD written out in numpy, after a run stopped in epoch 2
    (step 7) and resumed to step 15 (five epochs). Each step pulls p halfway to its batch's mean, so the order
    shows; the resumed run's parameters and losses are the uninterrupted run's, bit for bit."""
    expected, losses = 0.0, []
    for epoch in range(5):
        order = np.random.default_rng((7, epoch)).permutation(10)
        for step in range(3):
            mean = INPUTS[order[3 * step : 3 * step + 3]].mean()
            losses.append(0.5 * (expected - mean) ** 2)
            expected -= 0.5 * (expected - mean)
    straight = run(tmp_path / "straight")
    with _killed_after(7):
        run(tmp_path / "resumed")
    resumed = run(tmp_path / "resumed", resume=True)
    for state in (straight, resumed):
        np.testing.assert_allclose(float(state.model["p"]), expected, rtol=1e-6)
        np.testing.assert_allclose(state.losses, losses, rtol=1e-5, atol=1e-7)
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])


def test_the_seconds_add_up_over_the_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run stopped after its second epoch's checkpoint (a clock that advances a second a reading), then
    resumed under a clock that stands still: the resumed run's seconds are the checkpoint's, not zero."""
    clock = iter(range(1000))
    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: float(next(clock))))
    with _killed_after(7):
        run(tmp_path)
    with np.load(tmp_path / "checkpoint.npz") as stored:
        first = (int(stored["step"]), float(stored["seconds"]))
    assert first[0] == 6
    assert first[1] > 0
    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: 5000.0))
    assert run(tmp_path, resume=True).seconds == first[1]


def test_a_line_an_epoch_and_the_held_out_error_every_k_epochs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``log``, one line an epoch: its number, its mean loss, its seconds; ``validate`` every second epoch
    and at the last, its values kept in the checkpoint (``held_out``) and printed."""
    calls: list[float] = []

    def validate(params: Params) -> float:
        calls.append(float(params["p"]))
        return abs(float(params["p"]) - float(INPUTS.mean()))

    state = run(tmp_path, log=True, validate=validate, validate_every=2)
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == [f"epoch {e}/5" for e in range(1, 6)]
    losses = state.losses
    for e, line in enumerate(lines):
        assert f"loss {np.mean(losses[3 * e : 3 * e + 3]):.4e}, " in line
        assert line.split(", ")[1].endswith(" s")
    assert [("held-out" in line) for line in lines] == [False, True, False, True, True]
    assert [e for e, _ in state.held_out] == [2, 4, 5]
    assert len(calls) == 3
    assert lines[-1].endswith(f"held-out error {state.held_out[-1][1]:.4e}")
    stored = np.load(tmp_path / "checkpoint.npz")
    np.testing.assert_array_equal(stored["held_out"], np.asarray(state.held_out))
    # Without log, nothing is printed, and the held-out errors are the same, kept in the checkpoint.
    quiet = run(tmp_path / "quiet", log=False, validate=validate, validate_every=2)
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert quiet.held_out == state.held_out
    stored = np.load(tmp_path / "quiet" / "checkpoint.npz")
    np.testing.assert_array_equal(stored["held_out"], np.asarray(quiet.held_out))


def test_a_resume_given_other_settings_of_fit_than_the_runs_is_refused_naming_each(tmp_path: Path) -> None:
    """The description equal, fit's own settings that decide the run stored in its checkpoint and compared: its
    seed, its batch, its training set (a SHA-256 of the arrays); the run's own go on, and further than its steps
    (its schedule is its optimiser's)."""
    with _killed_after(4):
        run(tmp_path)
    with np.load(tmp_path / "checkpoint.npz") as saved:
        stored = json.loads(str(saved["fit"]))
    both = hashlib.sha256(np.concatenate([INPUTS.ravel()] * 2).tobytes()).hexdigest()  # inputs, then targets
    assert stored == {"seed": 7, "block": 1, "batch": 3, "training set": both}
    other = INPUTS.copy()
    other[0, 0, 0] += 1e-9
    for changes, named in [
        ({"seed": 8}, "seed: 7 in the run, 8 given"),
        ({"batch": 2}, "batch: 3 in the run, 2 given"),
    ]:
        with pytest.raises(ValueError, match=f"trained with other settings of fit \\(settings differ: {named}\\)"):
            run(tmp_path, resume=True, **changes)
    with pytest.raises(ValueError, match="settings differ: training set: "):
        fit(tracking(), optax.sgd(0.5), Arrays(other, INPUTS, 3), tmp_path, description=json.dumps({"model": "mean"}),
            steps=15, seed=7, progress=False, log=False, resume=True)  # fmt: skip
    assert run(tmp_path, resume=True).step == 15
    assert run(tmp_path, resume=True, steps=18).step == 18


def test_a_budget_in_seconds_stops_at_an_epochs_end_and_a_resume_goes_on(tmp_path: Path) -> None:
    """``seconds=0``: the call ends after the first epoch (3 steps), checkpointed there; each resumed call adds
    one epoch, and the fifth ends the run as one uninterrupted run ends it."""
    first = run(tmp_path / "budget", seconds=0.0)
    assert (first.step, len(first.losses)) == (3, 3)
    with np.load(tmp_path / "budget" / "checkpoint.npz") as stored:
        assert int(stored["step"]) == 3
    for step in (6, 9, 12, 15):
        assert run(tmp_path / "budget", seconds=0.0, resume=True).step == step
    straight = run(tmp_path / "straight")
    assert run(tmp_path / "budget", resume=True).losses == straight.losses


def _keras_stops_after(errors: list[float], patience: int, min_delta: float) -> int | None:
    """The epoch after which Keras's EarlyStopping (monitor a loss, mode "min") stops, written out: the epochs
    since the last improvement (an error below the best by more than min_delta) reach ``patience``."""
    best, wait = float("inf"), 0
    for epoch, error in enumerate(errors, 1):
        if error < best - min_delta:
            best, wait = error, 0
        else:
            wait += 1
            if wait >= patience:
                return epoch
    return None


@pytest.mark.parametrize(("patience", "min_delta"), [(2, 0.05), (3, 0.0), (1, 0.6)])
def test_early_stopping_ends_where_keras_would_and_a_resume_stays_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], patience: int, min_delta: float
) -> None:
    """Held-out errors 5, 4, 4.5, 3.99, 4.2, 4.1, 3.0, ... (one an epoch of 3 steps): the run ends, checkpointed,
    after the epoch Keras's rule names, saying so; resumed, it stays ended (no step, no held-out call); its
    steps are the uninterrupted run's first ones."""
    errors = [5.0, 4.0, 4.5, 3.99, 4.2, 4.1, 3.0, 3.5, 3.6, 3.7]
    calls = iter(errors)
    stops = _keras_stops_after(errors, patience, min_delta)
    assert stops is not None
    state = run(tmp_path, steps=30, log=True, validate=lambda params: next(calls), patience=patience,
                min_delta=min_delta)  # fmt: skip
    assert (state.step, [e for e, _ in state.held_out]) == (3 * stops, list(range(1, stops + 1)))
    with np.load(tmp_path / "checkpoint.npz") as stored:
        assert int(stored["step"]) == 3 * stops
    assert f"stopped early after epoch {stops}: {patience} held-out errors" in capsys.readouterr().out

    def never(params: Params) -> float:
        raise AssertionError("a run stopped early was validated again")

    again = run(tmp_path, steps=30, resume=True, validate=never, patience=patience, min_delta=min_delta)
    assert (again.step, again.losses, again.held_out) == (state.step, state.losses, state.held_out)
    assert state.losses == run(tmp_path / "straight", steps=30).losses[: 3 * stops]


def test_the_best_checkpoint_is_the_state_of_the_lowest_held_out_error_also_after_a_kill(tmp_path: Path) -> None:
    """``keep_best``: held-out errors 3, 1, 2, 0.5, 0.7 (epochs of 3 steps): best.npz holds the state after
    epoch 4, step 12, the parameters of a run of 12 steps; killed at step 7 and resumed, the run writes the
    same best.npz, bit for bit. history.csv: an epoch a row, its last step, the mean of its losses, its
    held-out error."""
    errors = [3.0, 1.0, 2.0, 0.5, 0.7]

    def scripted() -> Any:
        calls = iter(errors)
        return lambda params: next(calls)

    state = run(tmp_path / "straight", validate=scripted(), keep_best=True)
    best = restore(tmp_path / "straight", tracking(), optax.sgd(0.5), 7, best=True)
    twelve = run(tmp_path / "twelve", steps=12)
    assert (best.step, best.held_out, best.losses) == (12, state.held_out[:4], twelve.losses)
    assert float(best.model["p"]) == float(twelve.model["p"])
    with _killed_after(7):
        run(tmp_path / "killed", validate=scripted(), keep_best=True)
    resumed_errors = iter(errors[2:])  # the resumed session validates epochs 3, 4 and 5
    run(tmp_path / "killed", resume=True, validate=lambda params: next(resumed_errors), keep_best=True)
    with np.load(tmp_path / "straight" / "best.npz") as a, np.load(tmp_path / "killed" / "best.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for name in a.files:
            if name != "seconds":
                np.testing.assert_array_equal(a[name], b[name])
    rows = list(csv.DictReader((tmp_path / "straight" / "history.csv").read_text().splitlines()))
    assert [int(row["epoch"]) for row in rows] == [1, 2, 3, 4, 5]
    assert [int(row["step"]) for row in rows] == [3, 6, 9, 12, 15]
    np.testing.assert_array_equal([float(row["loss"]) for row in rows], np.mean(np.reshape(state.losses, (5, 3)), 1))
    assert [float(row["held_out"]) for row in rows] == errors


def test_named_held_out_metrics_are_each_kept_and_the_first_is_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``validate`` giving {"error": e, "accuracy": a}: each validation's line names both; ``State.metrics`` holds
    both curves, ``held_out`` the first (which early stopping watches); history.csv a column each; a killed and
    resumed run the same curves, read back from the checkpoint. Names that change are refused by name."""
    errors, accuracies = [3.0, 1.0, 2.0, 2.5, 0.7], [0.1, 0.5, 0.4, 0.3, 0.9]

    def scripted(first: int = 0) -> Any:
        epochs = iter(range(first, 5))
        return lambda params: {"error": errors[e := next(epochs)], "accuracy": accuracies[e]}

    state = run(tmp_path / "straight", log=True, validate=scripted())
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch ")]
    assert lines[1].endswith("held-out error 1.0000e+00, accuracy 5.0000e-01")
    assert state.held_out == list(enumerate(errors, 1))
    assert state.metrics == {"error": list(enumerate(errors, 1)), "accuracy": list(enumerate(accuracies, 1))}
    rows = list(csv.DictReader((tmp_path / "straight" / "history.csv").read_text().splitlines()))
    assert [float(row["accuracy"]) for row in rows] == accuracies
    with _killed_after(7):
        run(tmp_path / "killed", validate=scripted())
    resumed = run(tmp_path / "killed", resume=True, validate=scripted(2))
    assert (resumed.held_out, resumed.metrics) == (state.held_out, state.metrics)
    early = run(tmp_path / "early", steps=30, validate=scripted(), patience=2)
    assert early.step == 12  # the error, not the accuracy: no improvement at epochs 3 and 4
    names = iter([{"error": 1.0}, {"loss": 1.0}])
    with pytest.raises(ValueError, match=re.escape("gave the metrics ['loss'] at epoch 2, where it gave ['error']")):
        run(tmp_path / "renamed", validate=lambda params: next(names))


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit, masked as TFRecords mask it."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def scalars(run_directory: Path) -> list[tuple[str, int, float]]:
    """The (tag, step, value) of each scalar of a run's TensorBoard events, read as TensorBoard reads them:
    TFRecords (a little-endian uint64 length and its masked CRC-32C, the bytes and theirs), the first naming
    the format, each an ``Event`` protocol buffer."""
    data, at, events = (run_directory / "tensorboard" / "events.out.tfevents.applicative").read_bytes(), 0, []
    while at < len(data):
        length, length_crc = struct.unpack("<QI", data[at : at + 12])
        record = data[at + 12 : at + 12 + length]
        (record_crc,) = struct.unpack("<I", data[at + 12 + length : at + 16 + length])
        assert (length_crc, record_crc) == (crc32c(data[at : at + 8]), crc32c(record))
        events.append(event_pb2.Event.FromString(record))
        at += 16 + length
    assert events[0].file_version == "brain.Event:2"
    return [(v.tag, int(event.step), float(v.simple_value)) for event in events for v in event.summary.value]


def test_the_curve_is_written_as_tensorboard_events_also_after_a_kill(tmp_path: Path) -> None:
    """Where tensorboardX is installed (the suite installs it), each checkpoint writes the run's curve as
    TensorBoard events: ``loss`` (an epoch's mean) at its last step, ``held_out`` and ``metrics/NAME`` where
    validated; a killed and resumed run holds the same scalars, once each."""
    errors, accuracies = [3.0, 1.0, 2.0, 2.5, 0.7], [0.1, 0.5, 0.4, 0.3, 0.9]

    def scripted(first: int = 0) -> Any:
        epochs = iter(range(first, 5))
        return lambda params: {"error": errors[e := next(epochs)], "accuracy": accuracies[e]}

    state = run(tmp_path / "straight", validate=scripted())
    means = np.mean(np.reshape(state.losses, (5, 3)), 1)
    steps = [3, 6, 9, 12, 15]
    def curve(values: Any) -> list[tuple[int, float]]:  # as TensorBoard holds them: float32
        return list(zip(steps, np.asarray(values, np.float32).tolist(), strict=True))

    expected = {"loss": curve(means), "held_out": curve(errors), "metrics/error": curve(errors),
                "metrics/accuracy": curve(accuracies)}  # fmt: skip
    written = scalars(tmp_path / "straight")
    assert {tag: [(step, value) for t, step, value in written if t == tag] for tag in expected} == expected
    assert len(written) == 20
    with _killed_after(7):
        run(tmp_path / "killed", validate=scripted())
    run(tmp_path / "killed", resume=True, validate=scripted(2))
    assert scalars(tmp_path / "killed") == written
    assert os.listdir(tmp_path / "killed" / "tensorboard") == ["events.out.tfevents.applicative"]


def test_early_stopping_and_the_best_need_a_held_out_error(tmp_path: Path) -> None:
    refused: list[tuple[dict[str, Any], str]] = [
        ({"patience": 2}, "patience and keep_best watch the held-out error: pass validate"),
        ({"keep_best": True}, "patience and keep_best watch the held-out error: pass validate"),
        ({"patience": 0, "validate": lambda params: 0.0}, "patience = 0 must be positive"),
        ({"patience": 1, "min_delta": -0.1, "validate": lambda params: 0.0}, "min_delta = -0.1 at least 0"),
    ]
    for changes, words in refused:
        with pytest.raises(ValueError, match=re.escape(words)):
            run(tmp_path, **changes)
    assert not tmp_path.joinpath("config.json").exists()
    run(tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(f"no checkpoint at {tmp_path / 'best.npz'}")):
        restore(tmp_path, tracking(), optax.sgd(0.5), 7, best=True)


def test_sigterm_checkpoints_at_a_blocks_end_and_a_resume_goes_on_bit_for_bit(tmp_path: Path) -> None:
    """SIGTERM (sent here from the held-out hook at the end of epoch 2, as a cluster's preemption would send it
    at any time): the loop stops after that block, step 6, checkpointed there although the interval is 100
    steps, and raises Preempted; the process survives (the handler is the loop's, restored after it). The
    resumed run ends as the uninterrupted one, bit for bit."""
    before = signal.getsignal(signal.SIGTERM)
    epochs = iter(range(1, 6))

    def preempt_in_epoch_2(params: Params) -> float:
        if next(epochs) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return 0.0

    with pytest.raises(loop.Preempted, match=f"after step 6, checkpointed there in {re.escape(str(tmp_path))}"):
        run(tmp_path, checkpoint_every=100, log=True, validate=preempt_in_epoch_2)
    assert signal.getsignal(signal.SIGTERM) == before
    with np.load(tmp_path / "checkpoint.npz") as stored:
        assert (int(stored["step"]), len(stored["losses"])) == (6, 6)
    resumed = run(tmp_path, resume=True, checkpoint_every=100)
    straight = run(tmp_path / "straight")
    assert resumed.losses == straight.losses
    assert float(resumed.model["p"]) == float(straight.model["p"])


def test_a_model_learns_through_the_loop(tmp_path: Path) -> None:
    """A line u = 2a + 1 fitted by Adam on the relative L2 loss: the loss falls to the noise."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=(24, 5, 5))
    u = 2.0 * a + 1.0 + 0.01 * rng.normal(size=a.shape)

    def loss(p: Params, a: jax.Array, u: jax.Array) -> jax.Array:
        return jnp.mean(values_relative_l2(p["w"] * a + p["b"], u))

    line = Learner(lambda seed: {"w": jnp.zeros(()), "b": jnp.ones(())}, loss, lambda p, a: p["w"] * a + p["b"])
    state = fit(line, optax.adam(0.1), Arrays(a, u, 8), tmp_path, description="{}", steps=60, progress=False, log=False)
    assert np.mean(state.losses[-3:]) < 0.05 * np.mean(state.losses[:3])
    np.testing.assert_allclose([float(state.model["w"]), float(state.model["b"])], [2.0, 1.0], atol=0.05)


def test_blocks_of_steps_in_one_call_are_the_steps_one_by_one(tmp_path: Path) -> None:
    """Blocks of up to 2 steps a call (ending at every epoch's end and checkpoint: blocks of 2 and 1 here,
    3 steps an epoch, a checkpoint every 2 steps) give the step-by-step run's losses and parameters to
    rounding (XLA may sum in another order inside its loop); interrupted inside an epoch and resumed, the
    blocked run repeats itself bit for bit; a NaN inside a block is reported at its own step,
    after the last checkpoint before it (the sample 4 is NaN: the first step whose minibatch holds it)."""
    single = run(tmp_path / "single", checkpoint_every=2)
    blocks = run(tmp_path / "blocks", checkpoint_every=2, block=2)
    with _killed_after(5):
        run(tmp_path / "resumed", checkpoint_every=2, block=2)
    resumed = run(tmp_path / "resumed", checkpoint_every=2, block=2, resume=True)
    np.testing.assert_allclose(blocks.losses, single.losses, rtol=1e-12)
    np.testing.assert_allclose(float(blocks.model["p"]), float(single.model["p"]), rtol=1e-12)
    assert resumed.losses == blocks.losses
    assert float(resumed.model["p"]) == float(blocks.model["p"])
    poisoned = INPUTS.copy()
    poisoned[4] = np.nan
    first = next(s for s in range(15) if 4 in np.random.default_rng((7, s // 3)).permutation(10)[3 * (s % 3) :][:3])
    message = f"loss is nan at step {first}; stopped. The last good checkpoint (step {first // 2 * 2})"
    for block in (1, 2):
        with pytest.raises(loop.TrainingDiverged, match=re.escape(message)):
            fit(tracking(), optax.sgd(0.5), Arrays(poisoned, poisoned, 3), tmp_path / f"nan{block}", description="{}",
                steps=15, seed=7, checkpoint_every=2, block=block, progress=False, log=False)  # fmt: skip


def test_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"fit: batch = 11 must be between 1 and the 10 training samples"):
        run(tmp_path / "a", batch=11)
    with pytest.raises(ValueError, match=r"fit: 10 inputs but 9 targets"):
        Arrays(INPUTS, INPUTS[:9], 2)
    with pytest.raises(ValueError, match=r"block = 0 must be positive"):
        run(tmp_path / "a", block=0)
    run(tmp_path / "c", steps=3)
    with pytest.raises(FileExistsError, match=re.escape("a run: resume it (--resume; fit's resume=True)")):
        run(tmp_path / "c", steps=3)
    other = json.dumps({"model": "mean", "width": 2})
    differ = "settings differ: width: none in the run, 2 given"
    with pytest.raises(ValueError, match=re.escape(f"config.json holds a different run ({differ})")):
        run(tmp_path / "c", steps=3, description=other, resume=True)
    spaced = json.dumps({"model": "mean"}, indent=4)  # the same settings, another text: resumed
    assert run(tmp_path / "c", steps=3, description=spaced, resume=True).step == 3
    (tmp_path / "c" / "config.json").write_text(other)
    written = f"checkpoint.npz was written by a different run configuration ({differ})"
    with pytest.raises(ValueError, match=re.escape(written)):
        run(tmp_path / "c", steps=3, description=other, resume=True)
