"""``python -m applicative.examples.digits train|evaluate|plot``: ``training.main``'s command line."""

from applicative.examples.digits.training import main
from applicative.training.command import end_process

if __name__ == "__main__":
    end_process(main())
