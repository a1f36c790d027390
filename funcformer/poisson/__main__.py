"""``python -m funcformer.poisson {train,evaluate,plot}``: the Poisson demo (``funcformer.learning.cli``)."""

from applicative.training.command import end_process
from funcformer.learning.cli import main
from funcformer.poisson import PROBLEM

if __name__ == "__main__":
    end_process(main(PROBLEM))
