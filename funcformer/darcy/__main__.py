"""``python -m funcformer.darcy {train,evaluate,plot}``: the Darcy task (``funcformer.learning.cli``)."""

from applicative.training.command import end_process
from funcformer.darcy import PROBLEM
from funcformer.learning.cli import main

if __name__ == "__main__":
    end_process(main(PROBLEM))
