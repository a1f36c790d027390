"""The model of the CLRS graph tasks: encode, process, decode; the processor relational attention or max messages.

A sample is a ``Graph`` of its n nodes (its edges the task's input graph) and a vector on every pair of nodes.
Encoders: each node's inputs (its position, whether it is the source) and each pair's (the weight A_ij and
whether the edge runs, both ways) are linear maps to ``width`` and ``edge_width`` features. The processor is
one step, its weights shared by all its applications: an ``nn.RelationalAttention`` block (the default:
node i's update a softmax-weighted mean of its senders' messages), or with ``processor="max"`` a
message-passing step as the benchmark's baselines take (``MaxStep``: the largest message, feature by
feature), each with pre-norms and a node MLP, over every pair (``mask="all"``) or along the input graph's
edges only (``mask="edges"``, each node with itself); with ``triplets`` the max processor's pair update also
reads every third node k through the pairs (i, k) and (k, j) (``Triplets``). The recurrence:

    residual   x_{t+1} = x_t + P(x_t),           x_0 = enc(inputs)      (the default: the state sums the steps)
    injected   x_{t+1} = P(x_t + enc(inputs)),   x_0 = 0                 (each step's own)

(P the step, its node MLP included; the pairs' state likewise). The injected recurrence can settle on a
fixed point, so that more steps than in training leave the answer where it was: with ``step_rule="nodes"``
the steps grow with the graph, ``steps`` on ``train_nodes`` nodes (32 on the test set's 64 for 8 on 16),
where the residual one drifts (docs/graphs.md measures both, and where each setting helps). With an
``overrun`` each training graph runs more steps than ``steps_on``, as many as drawn for it (``Inputs.extra``),
so that the answer must hold at any step from ``steps_on`` on: the state learns to settle.

Decoders, by the kind of each output:

    node pointer    p_i(j) = softmax_j (W_a h_i . W_b h_j + w . e_ij)       (pi: i's parent is j)
    node mask       sigmoid(w . h_i)
    node mask_one   softmax_i (w . h_i)
    edge mask       sigmoid(w . [e_ij + e_ji])                               (symmetric: undirected)
    edge pointer    p_ij(k) = softmax_k (W_a e_ik . W_b e_kj)               (Floyd-Warshall's Pi)

The loss is the sum over the outputs of cross entropies (a bridge's and a tree edge's over the pairs the
benchmark counts). The processor is generic code on a ``Graph``; the heads read its coordinates
(``to_array``), as a task's readout does.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import Array

from applicative import Applicative, Dim, Graph, Vec, add, nn, record, to_array
from applicative.examples.graphs.clrs import ALGORITHMS, MASKED, Output, Sample
from applicative.stacked import stack
from applicative.training import Learner

__all__ = [
    "Config", "GraphModel", "Inputs", "MaxStep", "Targets", "Triplets", "batch_of", "init_model", "learner", "loss",
    "most_extra", "predict", "steps_on",
]  # fmt: skip


class NodeIn(Dim):
    """A node's inputs: its position, whether it is the source."""


class PairIn(Dim):
    """A pair's inputs: A_ij, whether i -> j is an edge, and the same for j -> i."""


class Model(Dim):
    """Node features."""


class Edge(Dim):
    """Pair features."""


class Key(Dim):
    """Query/key features of attention and of the pointer heads."""


class Hidden(Dim):
    """The MLPs' hidden features."""


class Triplet(Dim):
    """A triplet message's features (``Triplets``)."""


@dataclasses.dataclass(frozen=True)
class Config:
    """The model's size and processing, and the optimiser's settings (with the algorithm, the steps and the
    seed, a run's description)."""

    width: int = 64
    edge_width: int = 32
    key_width: int = 32
    hidden: int = 64
    steps: int = 8  # the processor's steps on a graph of train_nodes nodes
    step_rule: Literal["fixed", "nodes"] = "fixed"  # "nodes": ceil(steps * n / train_nodes) on n nodes
    mask: Literal["all", "edges"] = "all"
    processor: Literal["attention", "max"] = "attention"  # relational attention, or messages' maximum (MaxStep)
    recurrence: Literal["residual", "injected"] = "residual"  # the state summed over the steps, or each step's own
    sizes: tuple[int, ...] = ()  # (): CLRS-30's training set; else minibatches drawn afresh, each of one size
    positions: Literal["index", "random"] = "index"  # training graphs' positions: i / n, or sorted uniform draws
    densities: Literal["task", "varied"] = "task"  # drawn graphs' edge probability: the task's, or clrs.varied's
    overrun: float = 0.0  # training graphs run steps_on(n) + k steps, k uniform in 0..overrun * steps_on(n)
    triplets: int = 0  # with processor="max": the features of each pair's triplet messages (Triplets; 0: none)
    batch: int = 16
    learning_rate: float = 1e-3
    decay: Literal["none", "cosine"] = "none"  # the learning rate constant, or cosine-decayed to 0 over the steps
    train_samples: int = 1000  # CLRS-30's training set: the first 1000 graphs of 16 nodes of seed 1 (an epoch's)
    train_nodes: int = 16
    test_nodes: int = 64
    test_samples: int = 32  # CLRS-30's test set: 32 graphs of 64 nodes of seed 3
    held_out: int = 32  # its validation set: 32 graphs of 16 nodes of seed 2

    def __post_init__(self) -> None:  # sizes as JSON gives them (a list) held as a tuple, each checked
        object.__setattr__(self, "sizes", tuple(int(n) for n in self.sizes))
        if any(not 1 <= n <= self.train_nodes for n in self.sizes):
            raise ValueError(f"Config: sizes {list(self.sizes)} must lie between 1 and train_nodes {self.train_nodes}")
        if self.densities != "task" and not self.sizes:
            raise ValueError(f"Config: densities {self.densities!r} draws graphs afresh: it needs sizes")
        if not self.overrun >= 0:
            raise ValueError(f"Config: overrun {self.overrun} must be at least 0")
        if self.triplets < 0 or (self.triplets and self.processor != "max"):
            raise ValueError(f"Config: triplets {self.triplets} must be 0, or at least 1 with processor 'max'")


def _vec(n: int, tag: type[Dim]) -> Vec[Any, Array]:
    return Vec.from_array(np.zeros(n, np.float32), tag)


@record
class GraphModel:
    """Encoders, the shared processor, the decoders' maps (``Head``s, one an output)."""

    node_in: nn.Linear[Any, Any]
    pair_in: nn.Linear[Any, Any]
    norm: nn.LayerNorm[Any]
    pair_norm: nn.LayerNorm[Any]
    processor: nn.RelationalAttention[Any, Any, Any, Any] | MaxStep
    mlp: nn.MLP[Any, Any]
    out_norm: nn.LayerNorm[Any]
    out_pair_norm: nn.LayerNorm[Any]
    heads: tuple[Head, ...]


@record
class MaxStep:
    """The max processor's step: each pair's message m_ij = relu(R x_i + S x_j + E e_ij) (of ``Hidden`` width), node
    i's new vector O max_j m_ij (the largest message of each feature over its senders j: every node, or its
    in-neighbours and itself with ``mask="edges"``), each pair's e_ij + W m_ij: the relational attention's pair
    update, with a maximum in place of its softmax-weighted mean; with ``triplets``, plus theirs (``Triplets``)."""

    receiver: nn.Linear[Any, Any]
    sender: nn.Linear[Any, Any]
    edge: nn.Linear[Any, Any]
    node_out: nn.Linear[Any, Any]
    edge_out: nn.Linear[Any, Any]
    triplets: Triplets | None = None

    def __call__(
        self, x: Graph[Applicative[Any, Array]], e: Graph[Any], mask: Graph[Graph[Array]] | None
    ) -> tuple[Graph[Applicative[Any, Array]], Applicative[Any, Any]]:
        """(the nodes' new vectors, the pairs' new vectors): the messages as generic code on the pairs (the
        relational attention's, ``nn.pair_messages``), their maximum on coordinates (a masked row maximum,
        which no structure's operation gives)."""
        messages = nn.pair_messages(self.receiver, self.sender, self.edge, x, e)
        grid = to_array(messages)  # (n, n, hidden): row i holds i's messages from each j
        keep = jnp.ones(grid.shape[:2], bool) if mask is None else to_array(mask) > 0
        largest = jnp.max(jnp.where(keep[..., None], grid, -jnp.inf), axis=1)
        y = x.with_elements(jax.vmap(lambda v: self.node_out(Vec.from_array(v, Hidden)))(largest))
        e_next = add(e, messages.fmap(lambda row: row.fmap(self.edge_out)))
        if self.triplets is None:
            return y, e_next
        through = self.triplets(to_array(x), to_array(e))
        return y, add(e_next, x.pairs(jax.vmap(jax.vmap(lambda v: Vec.from_array(v, Edge)))(through)))

    @staticmethod
    def init(
        key: Array, width: Vec[Any, Array], edge: Vec[Any, Array], hidden: Vec[Any, Array], triplets: int = 0
    ) -> MaxStep:
        keys = jax.random.split(key, 6)
        return MaxStep(
            nn.Linear.init(keys[0], width, hidden), nn.Linear.init(keys[1], width, hidden),
            nn.Linear.init(keys[2], edge, hidden), nn.Linear.init(keys[3], hidden, width),
            nn.Linear.init(keys[4], hidden, edge),
            Triplets.init(keys[5], width, edge, _vec(triplets, Triplet)) if triplets else None,
        )  # fmt: skip


@record
class Triplets:
    """Triplet messages (Ibarz et al. 2022's Triplet-GMPNN): each pair's update reads every third node k,
    t_ijk = A x_i + B x_j + C x_k + D e_ij + E e_ik + F e_kj, and takes O max_k t_ijk (the largest of each
    feature), so that a pair can combine the two pairs through k, as Floyd-Warshall's d_ij = min_k d_ik + d_kj
    and a minimax path (an edge is in a minimum spanning tree where no path of lighter edges joins its ends)
    do; node vectors alone cannot carry what every pair needs. On coordinates: (n, n, n, triplets) a graph."""

    maps: tuple[nn.Linear[Any, Any], ...]  # A, B, C from nodes; D, E, F from pairs
    out: nn.Linear[Any, Any]

    def __call__(self, x: Array, e: Array) -> Array:
        """O max_k t_ijk, (n, n, edge_width), of the nodes' (n, width) and the pairs' (n, n, edge_width) vectors."""
        a, b, c = (_apply(m, x, Model) for m in self.maps[:3])
        d, f, g = (_apply(m, e, Edge) for m in self.maps[3:])
        t = a[:, None, None] + b[None, :, None] + c[None, None, :] + d[:, :, None] + f[:, None, :]
        t = t + jnp.swapaxes(g, 0, 1)[None]  # e_kj at [i, j, k]
        return _apply(self.out, jnp.max(t, axis=2), Triplet)

    @staticmethod
    def init(key: Array, width: Vec[Any, Array], edge: Vec[Any, Array], triplet: Vec[Any, Array]) -> Triplets:
        keys = jax.random.split(key, 7)
        maps = tuple(nn.Linear.init(k, width if i < 3 else edge, triplet) for i, k in enumerate(keys[:6]))
        return Triplets(maps, nn.Linear.init(keys[6], triplet, edge))


@record
class Head:
    """One output's decoder: two maps to keys (a pointer's two ends: of nodes, or of pairs for an edge
    pointer) and a read of the node and of the pair features."""

    first: nn.Linear[Any, Any]
    second: nn.Linear[Any, Any]
    node: nn.Linear[Any, Any]
    pair: nn.Linear[Any, Any]


class Inputs(NamedTuple):
    """The inputs of a batch of samples of one size: their graphs (a stack of ``Graph``), node inputs (B, n, 2),
    pair inputs (B, n, n, 4), and each graph's processor steps beyond ``steps_on`` (B,) (0 but in training with
    an ``overrun``)."""

    graphs: Graph[Any]
    nodes: Array
    pairs: Array
    extra: Array


Targets = dict[str, Array]
"""A batch's outputs, by name: (B, n) or (B, n, n) float32 (pointers as node indices)."""


def init_model(key: Array, config: Config, outputs: Sequence[Output]) -> GraphModel:
    keys = jax.random.split(key, 6 + len(outputs))
    width, edge, k, hidden = (_vec(config.width, Model), _vec(config.edge_width, Edge), _vec(config.key_width, Key),
                              _vec(config.hidden, Hidden))  # fmt: skip
    one = _vec(1, Key)
    heads = tuple(
        Head(
            nn.Linear.init(jax.random.fold_in(keys[6 + o], 0), width if out.location == "node" else edge, k),
            nn.Linear.init(jax.random.fold_in(keys[6 + o], 1), width if out.location == "node" else edge, k),
            nn.Linear.init(jax.random.fold_in(keys[6 + o], 2), width, one),
            nn.Linear.init(jax.random.fold_in(keys[6 + o], 3), edge, one),
        )
        for o, out in enumerate(outputs)
    )
    return GraphModel(
        nn.Linear.init(keys[0], _vec(2, NodeIn), width),
        nn.Linear.init(keys[1], _vec(4, PairIn), edge),
        nn.LayerNorm.init(width),
        nn.LayerNorm.init(edge),
        nn.RelationalAttention.init(keys[2], width, edge, k, hidden)
        if config.processor == "attention"
        else MaxStep.init(keys[2], width, edge, hidden, config.triplets),
        nn.MLP.init(keys[3], width, hidden),
        nn.LayerNorm.init(width),
        nn.LayerNorm.init(edge),
        heads,
    )


def steps_on(config: Config, n: int) -> int:
    """The processor's steps on a graph of ``n`` nodes: ``steps``, or with ``step_rule="nodes"`` as many as
    ``steps`` on ``train_nodes``, in proportion (rounded up)."""
    return config.steps if config.step_rule == "fixed" else -(-config.steps * n // config.train_nodes)


def most_extra(config: Config, n: int) -> int:
    """The most steps beyond ``steps_on`` a training graph of ``n`` nodes runs: ``overrun`` times them, rounded
    down. Trained so, the answer must hold after any number of steps from ``steps_on`` on, and the state learns
    to settle (as Bansal et al. 2022 train recurrent networks that read their inputs at each step with random
    step counts)."""
    return int(config.overrun * steps_on(config, n))


def batch_of(
    samples: Sequence[Sample], name: str, rng: np.random.RandomState | None = None, extra: np.ndarray | None = None
) -> tuple[Inputs, Targets]:
    """The batch of these samples (of one size) for the task ``name``: its inputs and targets. Each node's
    position is i / n, or with ``rng`` the i-th smallest of n uniform draws (Ibarz et al.'s randomised
    positions: what a graph's order means, never its size); each graph's steps beyond ``steps_on`` are
    ``extra`` (0 if None)."""
    n = samples[0].adjacency.shape[0]
    graphs, nodes, pairs = [], [], []
    for s in samples:
        adj = (s.adjacency != 0).astype(np.float32)
        graphs.append(Graph.from_adjacency(adj, np.zeros(n, np.float32), capacity=n, edge_capacity=n * n))
        source = np.zeros(n, np.float32)
        if s.source >= 0:
            source[s.source] = 1.0
        position = np.arange(n) / n if rng is None else np.sort(rng.uniform(size=n))
        nodes.append(np.stack([position, source], -1))
        a = s.adjacency.astype(np.float32)
        pairs.append(np.stack([a, adj, a.T, adj.T], -1))
    targets = {o.name: jnp.asarray(np.stack([s.outputs[o.name] for s in samples]).astype(np.float32))
               for o in ALGORITHMS[name].outputs}  # fmt: skip
    more = np.zeros(len(samples), np.int32) if extra is None else np.asarray(extra, np.int32)
    inputs = Inputs(stack(graphs), jnp.asarray(np.stack(nodes), jnp.float32), jnp.asarray(np.stack(pairs), jnp.float32),
                    jnp.asarray(more))  # fmt: skip
    return inputs, targets


def _process(
    model: GraphModel,
    config: Config,
    g: Graph[Any],
    nodes: Array,
    pairs: Array,
    extra: Array | int = 0,
    longest: int | None = None,
) -> tuple[Array, Array]:
    """The processor's node (n, width) and pair (n, n, edge_width) features of one graph: ``steps_on`` + ``extra``
    shared steps of the ``recurrence`` (a loop of ``longest`` steps, by default ``steps_on``: those past
    ``steps_on`` + ``extra`` leave the state as it is), the state carried as arrays and rebuilt on the graph each
    step."""
    x0 = to_array(g.with_elements(jax.vmap(lambda v: model.node_in(Vec.from_array(v, NodeIn)))(nodes)))
    e0 = to_array(g.pairs(jax.vmap(jax.vmap(lambda v: model.pair_in(Vec.from_array(v, PairIn))))(pairs)))
    mask = g.mask(1) if config.mask == "edges" else None

    def nodes_of(x_arr: Array) -> Graph[Vec[Model, Array]]:
        return g.with_elements(jax.vmap(lambda v: Vec.from_array(v, Model))(x_arr))

    def step(t: Array, state: tuple[Array, Array]) -> tuple[Array, Array]:
        if longest == steps:
            return one_step(state)
        kept: tuple[Array, Array] = jax.lax.cond(t < steps + extra, one_step, lambda s: s, state)
        return kept

    def one_step(state: tuple[Array, Array]) -> tuple[Array, Array]:
        x_arr, e_arr = state
        if config.recurrence == "injected":  # the step reads the inputs' encoding beside the state
            x_arr, e_arr = x_arr + x0, e_arr + e0
        e = g.pairs(jax.vmap(jax.vmap(lambda v: Vec.from_array(v, Edge)))(e_arr))
        e_in = e.fmap(lambda row: row.fmap(model.pair_norm))
        y, e_next = model.processor(nodes_of(x_arr).fmap(model.norm), e_in, mask)
        if config.recurrence == "injected":  # the new state is the step's output alone: no sum over the steps
            x_arr, e_arr = to_array(y), to_array(e_next) - to_array(e_in)
        else:
            x_arr, e_arr = x_arr + to_array(y), to_array(e_next)
        x_arr = x_arr + to_array(nodes_of(x_arr).fmap(lambda v: model.mlp(model.norm(v))))
        return x_arr, e_arr

    steps = steps_on(config, nodes.shape[0])
    longest = steps if longest is None else longest
    if config.recurrence == "residual":
        out: tuple[Array, Array] = jax.lax.fori_loop(0, longest, step, (x0, e0))
        return out
    x, e_step = jax.lax.fori_loop(0, longest, step, (jnp.zeros_like(x0), jnp.zeros_like(e0)))
    return x, e0 + e_step


def logits(
    model: GraphModel, config: Config, name: str, g: Graph[Any], nodes: Array, pairs: Array, extra: Array, longest: int
) -> dict[str, Array]:
    """Each output's logits for one graph, after ``_process``: a node pointer (n, n), a mask (n,), a mask_one
    (n,), an edge mask (n, n), an edge pointer (n, n, n)."""
    h, e = _process(model, config, g, nodes, pairs, extra, longest)
    h = _apply(model.out_norm, h, Model)
    e = _apply(model.out_pair_norm, e, Edge)
    scale = 1.0 / np.sqrt(config.key_width)
    out = {}
    for head, output in zip(model.heads, ALGORITHMS[name].outputs, strict=True):
        if output.location == "node" and output.kind == "pointer":
            a, b = _apply(head.first, h, Model), _apply(head.second, h, Model)
            out[output.name] = scale * (a @ b.T) + _apply(head.pair, e, Edge)[..., 0]
        elif output.location == "node":
            out[output.name] = _apply(head.node, h, Model)[:, 0]
        elif output.kind == "mask":
            read = _apply(head.pair, e, Edge)[..., 0]
            out[output.name] = read + read.T
        else:
            a, b = _apply(head.first, e, Edge), _apply(head.second, e, Edge)
            out[output.name] = scale * jnp.einsum("ikh,kjh->ijk", a, b)
    return out


def _apply(linear: Callable[[Vec[Any, Array]], Any], x: Array, tag: type[Dim]) -> Array:
    """``linear`` (or a norm) on the last axis of ``x``, its elements Vecs of ``tag`` (a readout on coordinates)."""
    flat = x.reshape(-1, x.shape[-1])
    out = jax.vmap(lambda v: to_array(linear(Vec.from_array(v, tag))))(flat)
    return out.reshape(*x.shape[:-1], -1)


def _batch_logits(model: GraphModel, config: Config, name: str, inputs: Inputs, longest: int) -> dict[str, Array]:
    """``logits`` of each graph of the batch in a loop of ``longest`` steps (a graph's extra steps past it unrun)."""
    return jax.vmap(lambda g, n, p, k: logits(model, config, name, g, n, p, k, longest))(*inputs)


def loss(model: GraphModel, config: Config, name: str, inputs: Inputs, targets: Targets) -> Array:
    """The sum over the outputs of their cross entropies, averaged over the batch (each graph after its own
    steps: ``inputs.extra``)."""
    size = inputs.nodes.shape[1]
    out = _batch_logits(model, config, name, inputs, steps_on(config, size) + most_extra(config, size))
    total = jnp.zeros(())
    for output in ALGORITHMS[name].outputs:
        z, t = out[output.name], targets[output.name]
        if output.kind == "pointer":
            total += jnp.mean(optax.softmax_cross_entropy_with_integer_labels(z, t.astype(jnp.int32)))
        elif output.kind == "mask_one":
            total += jnp.mean(optax.softmax_cross_entropy(z, t))
        else:
            keep = t != MASKED
            per = optax.sigmoid_binary_cross_entropy(z, jnp.where(keep, t, 0.0))
            total += jnp.sum(jnp.where(keep, per, 0.0)) / jnp.maximum(jnp.sum(keep), 1)
    return total


def predict(model: GraphModel, config: Config, name: str, inputs: Inputs) -> Targets:
    """The predicted outputs of a batch, each graph after ``steps_on`` steps: pointers as node indices, masks as
    0/1, a mask_one as one-hot."""
    out = _batch_logits(model, config, name, inputs, steps_on(config, inputs.nodes.shape[1]))
    predicted = {}
    for output in ALGORITHMS[name].outputs:
        z = out[output.name]
        if output.kind == "pointer":
            predicted[output.name] = jnp.argmax(z, -1)
        elif output.kind == "mask_one":
            predicted[output.name] = jax.nn.one_hot(jnp.argmax(z, -1), z.shape[-1])
        else:
            predicted[output.name] = (z > 0).astype(jnp.float32)
    return predicted


@functools.lru_cache(maxsize=16)
def learner(config: Config, name: str) -> Learner[GraphModel, Inputs, Targets, Targets]:
    """The model as ``applicative.training.fit`` trains it on the task ``name``."""
    outputs = ALGORITHMS[name].outputs

    def init(seed: int) -> GraphModel:
        return init_model(jax.random.PRNGKey(seed), config, outputs)

    def learn(model: GraphModel, inputs: Inputs, targets: Targets) -> Array:
        return loss(model, config, name, inputs, targets)

    def guess(model: GraphModel, inputs: Inputs) -> Targets:
        return predict(model, config, name, inputs)

    return Learner(init, learn, guess)
