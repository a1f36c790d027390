"""``python -m applicative.examples.trees {train,evaluate,plot}``: the trees example (``cli``)."""

import sys

from applicative.examples.trees.cli import main

if __name__ == "__main__":
    sys.exit(main())
