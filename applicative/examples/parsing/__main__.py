"""``python -m applicative.examples.parsing train | evaluate | plot`` (``cli``)."""

from applicative.examples.parsing.cli import main
from applicative.training.command import end_process

if __name__ == "__main__":
    end_process(main())
