"""``python -m applicative.examples.digits train|evaluate|plot``: ``training.main``'s command line."""

import sys

from applicative.examples.digits.training import main

if __name__ == "__main__":
    sys.exit(main())
