"""Tests run in float64 so that numpy references can be matched to 1e-12."""

import jax

jax.config.update("jax_enable_x64", True)
