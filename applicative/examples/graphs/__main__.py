"""``python -m applicative.examples.graphs {train,evaluate,plot,answer}``: the CLRS graph tasks (``cli``)."""

import sys

from applicative.examples.graphs.cli import main

if __name__ == "__main__":
    sys.exit(main())
