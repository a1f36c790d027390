"""Runnable examples: ``python -m applicative.examples.<name>``."""

__all__: list[str] = []
