"""``python -m applicative.examples.seq2seq train|evaluate|plot ...`` (``cli``)."""

from applicative.examples.seq2seq.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
