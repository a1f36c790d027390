"""Tests of ``applicative``: the protocols and their laws, the instances, the linear algebra and ``nn``,
against float64 numpy references and the recursive specifications of the structures."""
