"""Runnable examples: ``python -m applicative.examples.<name>``."""
