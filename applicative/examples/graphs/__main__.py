"""``python -m applicative.examples.graphs {train,evaluate,plot,answer}``: the CLRS graph tasks (``cli``)."""

from applicative.examples.graphs.cli import main
from applicative.training.command import end_process

if __name__ == "__main__":
    end_process(main())
