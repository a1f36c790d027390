"""``python -m funcformer.poisson {train,evaluate,plot}``: the Poisson demo (``funcformer.learning.cli``)."""

import sys

from funcformer.learning.cli import main
from funcformer.poisson import PROBLEM

if __name__ == "__main__":
    sys.exit(main(PROBLEM))
