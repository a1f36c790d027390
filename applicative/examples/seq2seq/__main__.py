"""``python -m applicative.examples.seq2seq train|evaluate|plot ...`` (``cli``)."""

from applicative.examples.seq2seq.cli import main
from applicative.training.command import end_process

if __name__ == "__main__":
    end_process(main())
