"""``python -m funcformer.fno_darcy generate --out DIR``: the FNO paper's Darcy data, made once into DIR
(``funcformer.fno_darcy.generate``; docs/fno_darcy.md). Run again, it finishes what a killed run left."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from funcformer.fno_darcy import SHARD_SIZE, generate
from funcformer.fno_darcy.data import LOW, NODES
from funcformer.learning._files import RunInUse


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's); the exit status (1 on a refused request)."""
    parser = argparse.ArgumentParser(prog="python -m funcformer.fno_darcy", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate", help="make (or finish making) the training and test sets in DIR")
    make.add_argument("--out", required=True, help="the dataset's directory (created if need be)")
    make.add_argument("--train", type=int, default=1000, help="training samples (default 1000)")
    make.add_argument("--test", type=int, default=200, help="test samples (default 200)")
    make.add_argument("--s", type=int, default=NODES, help=f"grid points per axis (default {NODES})")
    make.add_argument("--low", type=float, default=LOW, help=f"the coefficient where g < 0 (default {LOW:g})")
    make.add_argument("--workers", type=int, default=None, help="processes (default: every core)")
    make.add_argument("--shard-size", type=int, default=SHARD_SIZE, help=f"samples per shard (default {SHARD_SIZE})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        made = generate(
            args.out, args.train, args.test, args.s, low=args.low, workers=args.workers, shard_size=args.shard_size
        )
    except (ValueError, TypeError, FileNotFoundError, RunInUse) as error:
        print(f"{parser.prog} {args.command}: error: {error}", file=sys.stderr)
        return 1
    print(f"{args.out}: {made} samples made in {time.perf_counter() - start:.1f} s, {args.train + args.test} in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
