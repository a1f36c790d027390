"""Tests run in float64 so that numpy references can be matched to 1e-12; with APPLICATIVE_EMULATE_TF32=1,
the CPU's float32 products are a GPU's (tests/applicative/tolerance.py)."""

import os

import jax

from tests.applicative.tolerance import EMULATE_TF32, emulate_tf32

jax.config.update("jax_enable_x64", True)
if os.environ.get(EMULATE_TF32) == "1":
    emulate_tf32()
