"""What the examples share: the optimiser."""

from __future__ import annotations

import optax


def adamw(
    steps: int, learning_rate: float, warmup: int, clip: float, weight_decay: float
) -> optax.GradientTransformation:
    """AdamW on a warmup + cosine schedule; clipping tames the large gradients of the first steps."""
    schedule = optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=learning_rate,
        warmup_steps=min(warmup, steps // 10),  # a shortened run keeps most of its steps
        decay_steps=steps,
        end_value=learning_rate / 100,
    )
    return optax.chain(optax.clip_by_global_norm(clip), optax.adamw(schedule, weight_decay=weight_decay))
