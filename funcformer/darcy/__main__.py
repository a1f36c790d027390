"""``python -m funcformer.darcy {train,evaluate,plot}``: the Darcy task (``funcformer.learning.cli``)."""

import sys

from funcformer.darcy import PROBLEM
from funcformer.learning.cli import main

if __name__ == "__main__":
    sys.exit(main(PROBLEM))
