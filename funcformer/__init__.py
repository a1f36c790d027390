"""funcformer: the fast Chebyshev backend and the Poisson operator-learning task.

Built on ``applicative``; the Funcformer itself arrives with the Chebyshev
instance. Imports ``applicative``, never the reverse.
"""
