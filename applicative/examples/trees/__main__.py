"""``python -m applicative.examples.trees {train,evaluate,plot}``: the trees example (``cli``)."""

from applicative.examples.trees.cli import main
from applicative.training.command import end_process

if __name__ == "__main__":
    end_process(main())
