"""Data-parallel training: a tiny run on 2 CPU devices (``--xla_force_host_platform_device_count=2``) splits
each minibatch over them and matches the same run on 1 device to float32 rounding.

Both runs are subprocesses on the CPU (``JAX_PLATFORMS=cpu``, float32 as the CLI trains), so the comparison
does not depend on the accelerator, nor on this process's device count or x64 setting.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = """
import json, sys
import jax
import numpy as np
from funcformer.model import ModelConfig
from applicative.training.steps import data_parallel
from funcformer.learning import steps
from funcformer.poisson import PROBLEM
from funcformer.poisson import DataConfig, sources
from funcformer.learning import RunConfig, train

out = sys.argv[1]
tiny = ModelConfig(channels=2, heads=1, head_channels=1, hidden_channels=2, layers=1)
run = RunConfig.of(PROBLEM, model=tiny, steps=6, batch=4, train_size=16, checkpoint_every=2, warmup=0)
initial = steps.funcformer_learner(tiny).init(run.seed)
state = train(run, out + "/run", progress=False)
fields = sources(DataConfig(), 9, 4).astype(np.float32)
split, _ = data_parallel(run.batch)
try:
    train(RunConfig.of(PROBLEM, model=tiny, steps=6, batch=3, train_size=16), out + "/odd", progress=False)
    refused = ""
except ValueError as error:
    refused = str(error)
json.dump({
    "devices": jax.device_count(),
    "losses": state.losses,
    "predictions": np.asarray(jax.vmap(state.model)(fields)).tolist(),
    "initial": np.asarray(jax.vmap(initial)(fields)).tolist(),
    "replicated": all(leaf.sharding.is_fully_replicated for leaf in jax.tree_util.tree_leaves(state.model)),
    "model_devices": len(jax.tree_util.tree_leaves(state.model)[0].sharding.device_set),
    "shards": [[rows.start, rows.stop] for rows, *_ in split.addressable_devices_indices_map((4, 16, 16)).values()],
    "refused": refused,
}, sys.stdout)
"""


def _start(devices: int, directory: Path) -> subprocess.Popen[str]:
    directory.mkdir()
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        # XLA's defaults, not the suite's (tests/compiling.py): the tolerances below are float32 rounding as
        # users' programs compile
        "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
        "FUNCFORMER_CACHE": str(directory.parent / "cache"),
    }
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(directory)],
        env=env,
        cwd=Path(__file__).parents[2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(process: subprocess.Popen[str]) -> dict[str, object]:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    result: dict[str, object] = json.loads(out)
    return result


@pytest.mark.slow  # two training processes, 30 s (as the runs of tests/funcformer/test_processes.py)
def test_training_on_two_devices_matches_one_device(tmp_path: Path) -> None:
    processes = [_start(1, tmp_path / "one"), _start(2, tmp_path / "two")]
    one, two = (_result(process) for process in processes)
    assert (one["devices"], two["devices"]) == (1, 2)
    # the minibatch is split, rows 0-1 and 2-3; the model is replicated on both devices
    assert one["shards"] == [[None, None]]
    assert two["shards"] == [[0, 2], [2, 4]]
    assert two["replicated"]
    assert two["model_devices"] == 2
    losses_one, losses_two = np.array(one["losses"]), np.array(two["losses"])
    assert len(losses_one) == 6
    assert losses_one[-1] < losses_one[0]
    # equal to float32 rounding (the mean and the gradients are summed in another order, and Adam carries
    # the difference on): measured up to 4.9e-7 relative, 4 float32 ulps, on one machine, 7.6e-8 on another;
    # a minibatch not reduced over the devices would differ from the second step on by the loss's own change
    np.testing.assert_allclose(losses_two, losses_one, rtol=2e-6, atol=0)
    # the trained models agree as functions to float32 rounding, measured against what the 6 steps changed:
    # 8.6e-7 of it (5.8e-6 where the outputs moved by 6.7) on one machine, 1.7e-6 of the largest output, and
    # 2.0e-7 of the largest output on another. Not every
    # weight does: the key bias, whose gradient is zero in exact arithmetic (the softmax cancels it), moves
    # by Adam's normalised rounding noise (5e-4 here) and changes nothing
    a, b, initial = (np.array(run[key]) for run, key in ((one, "predictions"), (two, "predictions"), (one, "initial")))
    np.testing.assert_array_equal(np.array(two["initial"]), initial)  # the same start on both
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a - initial).max())
    assert one["refused"] == ""  # any batch splits over one device
    assert two["refused"] == (
        "batch = 3 does not split over the 2 cpu devices: use a multiple of 2, "
        "or fewer devices (e.g. CUDA_VISIBLE_DEVICES)"
    )
    assert not (tmp_path / "two" / "odd").exists()  # refused before anything is written
