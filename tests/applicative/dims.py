"""Dimension tags shared by the tests."""

from applicative import Dim


class Seq(Dim):
    """A sequence position."""


class Model(Dim):
    """A model feature."""


class Hidden(Dim):
    """A hidden feature."""


class Out(Dim):
    """An output feature."""
