"""``python -m applicative.examples.parsing train | evaluate | plot`` (``cli``)."""

import sys

from applicative.examples.parsing.cli import main

if __name__ == "__main__":
    sys.exit(main())
