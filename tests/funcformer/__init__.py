"""Tests of ``funcformer``: the model against its numpy reference, the tasks against their exact
solvers, and the operator-learning layer (training, checkpoints, runs, solvers)."""
