"""A shortened run of ``applicative.examples.trees``: the Tree∘Vec transformer learns to compare
each leaf with the tree's dyadic mean, which the shape-blind plain-mean rule gets wrong.

Runs under the suite's jax_enable_x64 (see conftest.py), so it also checks that the
example works with 64-bit types enabled.
"""

import math

import jax
import numpy as np

from applicative.examples.trees import CLASSES, TEST_SHAPES, TRAIN_SHAPES, Config, baseline, sample, train, weights

CHANCE_LOSS = math.log(CLASSES)  # cross entropy of the uniform prediction


def test_targets_depend_on_the_shape() -> None:
    values, targets = (np.asarray(a) for a in sample(jax.random.PRNGKey(7), 512, TRAIN_SHAPES[1]))
    np.testing.assert_array_equal(weights(TRAIN_SHAPES[1]), [0.125, 0.125, 0.25, 0.5])
    np.testing.assert_array_equal(targets, values > values @ weights(TRAIN_SHAPES[1])[:, None])
    assert 0.85 < (baseline(values) == targets).mean() < 0.97  # the plain mean disagrees on some leaves


def test_tree_training_beats_the_plain_mean() -> None:
    # Two training shapes (3 and 4 leaves) and one never trained on (5 leaves, depth 4); compiling
    # is most of the time. Seeds 0-2: loss 0.03-0.04, accuracy 0.983-0.986 against baselines
    # 0.914-0.916, 0.88-0.91 where the baseline is wrong, 0.982-0.985 on the unseen shape.
    shapes = (*TRAIN_SHAPES[:2], TEST_SHAPES[-1])
    config = Config(batch=64, test_size=512, train_shapes=TRAIN_SHAPES[:2], test_shapes=shapes)
    result = train(600, seed=0, config=config, log=lambda _: None)
    assert result.final_loss < result.initial_loss
    assert result.final_loss < 0.15 * CHANCE_LOSS
    assert result.test_accuracy > result.baseline_accuracy + 0.05
    assert result.disputed_accuracy > 0.75  # the baseline scores 0 on these leaves, chance 0.5
    assert result.unseen_accuracy > 0.95
