"""Where the tasks' datasets are cached (their files: ``applicative.training.store``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache"]


def default_cache() -> Path:
    """Where datasets are cached: $FUNCFORMER_CACHE, else ~/.cache/funcformer."""
    return Path(os.environ.get("FUNCFORMER_CACHE", Path.home() / ".cache" / "funcformer"))
