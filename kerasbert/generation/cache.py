"""A built ``application="lm"`` or ``"unilm"`` model run one new position per row, over the keys and values of the
positions before it kept per layer: the next-token log-probabilities a search extends its sequences with.

`CachedModel.start` runs the sources once (the model's own ``[B, S, S]`` mask: UniLM's source both ways, or the
causal one) and keeps every layer's keys and values; `CachedModel.step` feeds one token per row and computes that
position alone. Both run the model's own layers through its architecture (`kerasbert.modeling.architecture`): its
embeddings (each row at its own position), each block over the kept keys and values, and its masked LM's logits.

Slots. Each layer keeps ``[N, A, S + T, d]`` keys and values (N rows, S the longest source, T the most target
tokens): a row's source fills slots ``0 .. len - 1`` (its padding slots up to S are never seen), and its
target token t lands in slot ``S + t``, the same slot for every row, while its position is the row's own,
``len + t``: the slot orders the cache, the position feeds the position table (BERT, ALBERT), NEZHA's distances
and RoFormer's rotation. Shapes stay fixed through a search. The prefill and the step are ``tf.function``s whose
signatures leave batch and length open, so each traces once per model; the step runs with XLA where
`kerasbert.perf.xla.xla_pays` (a GPU), which compiles it once for each search's shapes.
"""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
from keras import ops

from kerasbert.errors import ModelError, fail
from kerasbert.generation.state import LANGUAGE_MODEL_IO, Cache, DecoderIO, padded
from kerasbert.modeling import architecture, families
from kerasbert.modeling.blocks import visible
from kerasbert.modeling.masks import MASK_LAYERS, application_of
from kerasbert.perf.xla import xla_pays

ACTIVATIONS = ("softmax", "linear")  # the MLM outputs a decoder reads: probabilities, or logits


class CachedModel:
    """A built ``"lm"`` or ``"unilm"`` `TransformerModel` as a next-token scorer over a cache of keys and values.

    ``start(sources, max_length)`` runs the sources and gives each row's next-token log-probabilities;
    ``step(cache, tokens)`` feeds one token a row and gives the next ones. In ``"unilm"`` the fed tokens are
    segment 1 (the target), in ``"lm"`` segment 0, as bert4keras's examples feed them. Log-probabilities are
    ``log_softmax`` of the MLM logits in float32 (a softmax model's ``MLM-Activation`` is not run: its log would
    lose the small probabilities).

    Args:
        model: TransformerModel. built with ``application="lm"`` or ``"unilm"`` (any family but ELECTRA), its
            MLM output a softmax or linear (``with_mlm="linear"``).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> lm = CachedModel(build_transformer_model("tiny", application="unilm", verbose=False))
    >>> cache, logp = lm.start([[2, 7, 9, 3], [2, 5, 3]], max_length=4)
    >>> cache, logp = lm.step(cache, np.array([11, 12]))
    >>> logp.shape, cache.written, tuple(cache.keys[0].shape)
    ((2, 128), 1, (2, 2, 8, 16))
    """

    def __init__(self, model: keras.Model):
        self.encoder = architecture.of(model)
        self.family, self.config = self.encoder.family, self.encoder.config
        if hasattr(self.encoder, "cross_keys_values"):  # an encoder-decoder's decoder reads its encoder's output
            raise fail(ModelError, "model", "a language model or UniLM (one stack) for CachedModel",
                       f"the encoder-decoder model={self.family.name!r}",
                       "generate with kerasbert.generate, which runs it through CachedEncoderDecoder")
        application = application_of(model)
        check_generative(self.family.name, application)
        self.application = application
        self.segment = 1 if application == "unilm" else 0
        self.has_segments = self.encoder.segments
        self._check_activation()
        self._prefill, self._step, self._reordered_step = self._compile(xla_pays(model))

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def max_length(self) -> int | None:
        """The most positions the model embeds (P, P² hierarchical); None for NEZHA's and RoFormer's."""
        return self.encoder.max_length

    @property
    def cache_shape(self) -> dict[str, int | None]:
        """What sizes a search's cache (`kerasbert.generation.state.cache_bytes`), as an export records it:
        ``layers`` (each with its keys and values), ``hidden_size`` (heads x head size) and ``max_length``."""
        return {"layers": self.config.num_hidden_layers, "hidden_size": self.config.hidden_size,
                "max_length": self.max_length}

    @staticmethod
    def cache_positions(longest: int, max_length: int) -> int:
        """The positions a row's cache holds: the longest source's and the targets'."""
        return longest + max_length

    def start(self, sources: list[list[int]], max_length: int) -> tuple[Cache, np.ndarray]:
        """Run ``sources`` (ragged token ids, segment 0), keeping room for ``max_length`` target tokens a row.

        Returns:
            the cache and ``[B, V]`` log-probabilities of each row's first target token.
        """
        token_ids, lengths = padded(sources)
        # padded with the id the model masks (RoBERTa's <pad> is 1): UniLM's sources see one another both ways
        token_ids[np.arange(token_ids.shape[1]) >= lengths[:, None]] = families.pad_id(self.family, self.config)
        keys, values, logp = self._prefill(_int32(token_ids), _int32(lengths), _int32(max_length))
        cache = Cache(tuple(keys), tuple(values), _int32(lengths), int(token_ids.shape[1]))
        return cache, ops.convert_to_numpy(logp)

    def step(self, cache: Cache, tokens: np.ndarray, parents: np.ndarray | None = None) -> tuple[Cache, np.ndarray]:
        """Feed ``tokens`` ``[N]``, one a row (after reordering the rows by ``parents``, ``[N]`` indices into the
        cache's rows, when given: beam search), and give the ``[N, V]`` log-probabilities of the token after it."""
        cache.check_room("CachedModel.step")
        arguments = (cache.keys, cache.values, _int32(tokens), cache.lengths, _int32(cache.source_width),
                     _int32(cache.written))
        if parents is None:
            keys, values, logp = self._step(*arguments)
        else:
            keys, values, logp = self._reordered_step(*arguments, _int32(parents))
        cache = dataclasses.replace(cache, keys=tuple(keys), values=tuple(values), written=cache.written + 1)
        return cache, ops.convert_to_numpy(logp)

    def functions(self) -> tuple:
        """The prefill and the step that reorders its rows first (``parents``), as ``tf.function``s without XLA:
        the graphs an export converts (`kerasbert.serving.portable_decoder`) and a SavedModel searches
        (`kerasbert.generation.graph_search`); `io` names what they take and give."""
        prefill, _, reordered_step = self._compile(jit=False)
        return prefill, reordered_step

    @property
    def io(self) -> DecoderIO:
        """The inputs and outputs of `functions`, by name: the sources' keys and values and the search's state."""
        return LANGUAGE_MODEL_IO

    # ---------------------------------------------------------------------------------------- the graphs
    def _compile(self, jit: bool) -> tuple:
        """The prefill, the step and the step that reorders its rows first, each one ``tf.function`` for every
        batch and length (None dimensions: one trace each), the steps with XLA where ``jit``; the plain functions
        on another Keras backend."""
        if keras.config.backend() != "tensorflow":
            return self._prefill_graph, self._step_graph, self._step_graph
        import tensorflow as tf

        cfg = self.config
        dtype = keras.dtype_policies.get(self.encoder.dtype).compute_dtype  # the keys' and values' dtype
        cached = tf.TensorSpec((None, cfg.num_attention_heads, None, cfg.head_size), dtype)
        layers, ints, scalar = cfg.num_hidden_layers, tf.TensorSpec((None,), "int32"), tf.TensorSpec((), "int32")
        step = [(cached,) * layers, (cached,) * layers, ints, ints, scalar, scalar]
        return (tf.function(self._prefill_graph, input_signature=[tf.TensorSpec((None, None), "int32"), ints, scalar]),
                tf.function(self._step_graph, input_signature=step, jit_compile=jit),
                tf.function(self._step_graph, input_signature=[*step, ints], jit_compile=jit))

    def _prefill_graph(self, token_ids, lengths, max_length):
        segment_ids = ops.zeros_like(token_ids)
        mask = self.encoder.layers[MASK_LAYERS[self.application]]([token_ids, segment_ids])  # (batch, seq, seq)
        x = self.encoder.embed(token_ids, segment_ids if self.has_segments else None)
        positions, keys, values = self.encoder.positions(x), [], []

        def keep(k, v):  # the sources attend to themselves; their keys and values get room for T targets
            keys.append(ops.pad(k, ((0, 0), (0, 0), (0, max_length), (0, 0))))  # (batch, heads, seq + T, d)
            values.append(ops.pad(v, ((0, 0), (0, 0), (0, max_length), (0, 0))))
            return k, v

        for i in range(self.config.num_hidden_layers):
            x = self.encoder.block(i, x, visible(mask), positions, cache=keep)
        last = ops.take_along_axis(x, (lengths - 1)[:, None, None], axis=1)[:, 0]  # (batch, H): each row's last
        return keys, values, self._log_probs(last)

    def _step_graph(self, keys, values, tokens, lengths, source_width, written, parents=None):
        if parents is not None:  # beam search: each row continues the beam it was chosen from
            keys, values = [ops.take(k, parents, axis=0) for k in keys], [ops.take(v, parents, axis=0) for v in values]
        slot, slots = source_width + written, ops.arange(ops.shape(keys[0])[2])[None]  # (1, S + T)
        seen = ops.logical_or(slots < lengths[:, None], ops.logical_and(slots >= source_width, slots <= slot))
        positions = (lengths + written)[:, None]  # (rows, 1): the row's own position
        segments = ops.full_like(positions, self.segment) if self.has_segments else None
        x = self.encoder.embed(tokens[:, None], segments, positions=positions)  # (rows, 1, H)
        key_positions = ops.where(slots < source_width, slots, lengths[:, None] + slots - source_width)
        at = self.encoder.positions_at(positions, key_positions)
        here = (slots == slot)[:, None, :, None]  # (1, 1, S + T, 1): this step's slot
        new_keys, new_values = [], []
        for i in range(self.config.num_hidden_layers):
            def write(k, v, i=i):
                new_keys.append(ops.where(here, k, keys[i]))
                new_values.append(ops.where(here, v, values[i]))
                return new_keys[-1], new_values[-1]

            x = self.encoder.block(i, x, seen[:, None, None, :], at, cache=write)
        return new_keys, new_values, self._log_probs(x[:, 0])

    def _log_probs(self, x):
        """The masked LM's logits at ``x`` ``[N, H]`` as ``[N, V]`` float32 log-probabilities."""
        return ops.log_softmax(ops.cast(self.encoder.logits(x), "float32"), axis=-1)

    def _check_activation(self) -> None:
        layer = self.encoder.logits_activation
        activation = keras.activations.serialize(layer.activation)
        if activation not in ACTIVATIONS:
            raise fail(ModelError, layer.name, "a softmax or linear output (next-token probabilities or logits)",
                       repr(activation), "build with with_mlm=True or with_mlm='linear'")


def check_generative(family: str, application: str) -> None:
    """A ModelError unless a model of ``family`` and ``application`` gives next-token scores: ``"lm"`` or
    ``"unilm"``, and not ELECTRA.

    Example:
    >>> check_generative("bert", "encoder")
    Traceback (most recent call last):
    ...
    kerasbert.errors.ModelError: model.application: expected "lm" or "unilm" to generate, found 'encoder'. \
build the model with build_transformer_model(..., application="unilm") (sequence to sequence) or "lm"
    """
    if family == "electra":
        raise fail(ModelError, "model", "a BERT, ALBERT, NEZHA or RoFormer language model to generate", "an ELECTRA",
                   "ELECTRA's discriminator has no next-token output")
    if application not in ("lm", "unilm"):
        raise fail(ModelError, "model.application", '"lm" or "unilm" to generate', repr(application),
                   'build the model with build_transformer_model(..., application="unilm") (sequence to sequence) '
                   'or "lm"')


def _int32(value):
    """``value`` as an int32 tensor: a step's scalars are tensors, so that a new value is no new trace."""
    return ops.convert_to_tensor(np.asarray(value, dtype="int32"))
