"""The kernels of a compiled function, counted from its optimised HLO (``jax.jit(f).lower(...).compile().as_text()``).

On a GPU every kernel is a launch and a trip through memory, so a formulation that compiles to more
fusions, copies or transposes than another pays for each, whatever the arithmetic. bench/transformer.py
``--hlo`` prints these counts for the generic and the hand-written encoder on the backend that runs it;
tests/applicative/test_encoder_hlo.py compares them on the CPU.
"""

from __future__ import annotations

import re
from collections import Counter

NOT_KERNELS = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast"})
"""Top-level instructions that run no kernel: they name, group or reinterpret buffers."""

_OPCODE = re.compile(r"=\s.*?\s([a-z][a-z0-9_\-]*)\(")
"""An instruction's opcode: the first lowercase name before a parenthesis after the ``=`` (a shape, even a
tuple's, has none; layouts' tiles and memory spaces are upper case)."""


def entry_opcodes(hlo: str) -> list[str]:
    """The opcodes of the instructions of the entry computation of an HLO module's text, in order."""
    start = hlo.index("\nENTRY")
    body = hlo[hlo.index("{\n", start) + 2 : hlo.index("\n}", start)]
    return [m.group(1) for line in body.splitlines() if (m := _OPCODE.search(line))]


def kernels(hlo: str) -> Counter[str]:
    """The kernels of a compiled function, by opcode: every top-level instruction of the entry computation of
    its optimised HLO but those that run none (``NOT_KERNELS``: parameters, constants, tuples, their
    elements, bitcasts). A fusion counts once however much it fuses (a matmul inside one, as newer CPU
    backends emit them, is that fusion); a ``dot``, ``custom-call`` (a library matmul), ``copy``,
    ``transpose``, ``reduce`` and the like once each. Instructions of called computations are not counted:
    a ``while`` (a ``lax.map`` over chunks) counts once, not once per iteration."""
    return Counter(op for op in entry_opcodes(hlo) if op not in NOT_KERNELS)
