"""A built encoder-decoder (T5) run one new decoder position per row, over the decoder's self-attention keys and
values kept per layer and the cross-attention keys and values of the encoder's output computed once: the
next-token log-probabilities a search extends its sequences with, as `kerasbert.generation.cache.CachedModel`
gives them for a language model, with the same ``start`` / ``step`` interface.

`CachedEncoderDecoder.start` runs the encoder once on the padded sources (their padding hidden from the
cross-attention, as the whole model hides it), projects each decoder block's cross-attention keys and values of its
output, and runs the decoder on its start token at position 0: id 0 (bert4keras's ``start_id=0`` for T5), or the id
`CachedEncoderDecoder.starting_with` gives (T5 PEGASUS starts with ``[CLS]``); `CachedEncoderDecoder.step` feeds one
token a row at the next position. Both run the model's own layers through its architecture
(`kerasbert.modeling.architecture`): its embedding, each decoder block over the kept keys and values
(`kerasbert.modeling.t5.T5.block` with ``cache`` and a ``context`` of kept keys), the position bias at the new
query's position (`T5.positions_at`) and its output logits (`T5.logits`).

Masks, as the whole model's graph: id 0 is padding, so a decoder slot holding id 0 is hidden as a key, except slot
0, the start token, which every query sees (`kerasbert.modeling.t5_layers.first_kept`); another start id is no
padding, seen as any token is. Slots: the decoder keeps ``[N, A, 1 + T, d]`` keys and values a layer, the start in
slot 0 and target token t in slot 1 + t; the cross-attention ``[N, A, S, d]``. The prefill and the step are
``tf.function``s with open batch and length, each traced once per model; the step runs with XLA where
`kerasbert.perf.xla.xla_pays` (a GPU).
"""

from __future__ import annotations

import copy
import dataclasses

import keras
import numpy as np
from keras import ops

from kerasbert.errors import ModelError, fail
from kerasbert.generation.cache import _int32
from kerasbert.generation.state import ContextCache, DecoderIO, padded
from kerasbert.modeling import architecture
from kerasbert.modeling.t5 import Context
from kerasbert.perf.xla import xla_pays

ENCODER_DECODER_STATE = ("keys", "values", "context_keys", "context_values", "seen")  # the prefill's, in order
START_ID = 0  # T5's decoder starts with id 0 (its padding id), as bert4keras's T5 examples decode


class CachedEncoderDecoder:
    """A whole built T5 (``model="t5"``, ``"t5.1.1"``, ``"mt5.1.1"``) as a next-token scorer over a cache.

    ``start(sources, max_length)`` encodes the sources and gives each row's first target token's
    log-probabilities; ``step(cache, tokens, parents)`` feeds one token a row and gives the next ones.
    Log-probabilities are ``log_softmax`` of the output logits in float32.

    Args:
        model: TransformerModel. a whole encoder-decoder (not its ``_encoder`` or ``_decoder`` alone).

    Example:
    >>> from kerasbert import build_transformer_model
    >>> config = {"vocab_size": 40, "hidden_size": 12, "num_hidden_layers": 2, "num_attention_heads": 3,
    ...           "attention_head_size": 4, "intermediate_size": 20, "hidden_act": ["gelu", "linear"],
    ...           "relative_attention_num_buckets": 32}
    >>> t5 = CachedEncoderDecoder(build_transformer_model(config=config, model="t5.1.1", verbose=False))
    >>> cache, logp = t5.start([[5, 7, 9, 1], [6, 1]], max_length=4)
    >>> cache, logp = t5.step(cache, np.array([11, 12]))
    >>> logp.shape, cache.written, tuple(cache.keys[0].shape), tuple(cache.context_keys[0].shape)
    ((2, 40), 1, (2, 3, 5, 4), (2, 3, 4, 4))
    """

    def __init__(self, model: keras.Model):
        self.t5 = architecture.of(model)
        self.family, self.config = self.t5.family, self.t5.config
        if self.family.part:
            whole = self.family.name.rpartition("_")[0]
            raise fail(ModelError, "model", "a whole encoder-decoder (its encoder and decoder) to generate",
                       f"model={self.family.name!r}, its {self.family.part} alone",
                       f"build it with build_transformer_model(..., model={whole!r})")
        self._prefill, self._step, self._reordered_step = self._compile(xla_pays(model))
        self.start_id = START_ID

    def starting_with(self, start_id: int) -> CachedEncoderDecoder:
        """This decoder, its compiled graphs shared, with ``start_id`` as each row's first decoder token (bert4keras's
        ``AutoRegressiveDecoder(start_id=...)``; T5 PEGASUS's is ``[CLS]``, its target's first id in training).

        Example:
        >>> from kerasbert import build_transformer_model
        >>> sizes = dict(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16)
        >>> whole = build_transformer_model(config=dict(vocab_size=30, relative_attention_num_buckets=8,
        ...                                             hidden_act="relu", **sizes), model="t5", verbose=False)
        >>> pegasus = CachedEncoderDecoder(whole).starting_with(2)
        >>> _, logp = pegasus.start([[5, 7, 1]], max_length=3)
        >>> pegasus.start_id, logp.shape
        (2, (1, 30))
        """
        started = copy.copy(self)
        started.start_id = int(start_id)
        return started

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def max_length(self) -> None:
        """None: T5's relative position buckets take any length."""
        return None

    @property
    def cache_shape(self) -> dict[str, int | None]:
        """What sizes a search's cache (`kerasbert.generation.state.cache_bytes`): ``layers`` (each with its
        self- and cross-attention keys and values), ``hidden_size`` (heads x head size, T5's ``A·d``) and
        ``max_length``."""
        return {"layers": self.config.num_hidden_layers, "hidden_size": self.config.num_attention_heads *
                self.config.head_size, "max_length": None}

    @staticmethod
    def cache_positions(longest: int, max_length: int) -> int:
        """The positions a row's cache holds: the source's (cross-attention), the start token and the targets."""
        return longest + 1 + max_length

    def start(self, sources: list[list[int]], max_length: int) -> tuple[ContextCache, np.ndarray]:
        """Encode ``sources`` (ragged token ids), keeping room for ``max_length`` target tokens a row.

        Returns:
            the cache and ``[B, V]`` log-probabilities of each row's first target token.
        """
        token_ids, lengths = padded(sources)
        keys, values, context_keys, context_values, seen, logp = self._prefill(
            _int32(token_ids), _int32(lengths), _int32(max_length), _int32(self.start_id))
        cache = ContextCache(tuple(keys), tuple(values), _int32(lengths), 1, 0, tuple(context_keys),
                             tuple(context_values), seen)
        return cache, ops.convert_to_numpy(logp)

    def step(self, cache: ContextCache, tokens: np.ndarray,
             parents: np.ndarray | None = None) -> tuple[ContextCache, np.ndarray]:
        """Feed ``tokens`` ``[N]``, one a row (after reordering the rows by ``parents``, ``[N]`` indices into the
        cache's rows, when given: beam search), and give the ``[N, V]`` log-probabilities of the token after it."""
        cache.check_room("CachedEncoderDecoder.step")
        arguments = (cache.keys, cache.values, cache.context_keys, cache.context_values, cache.seen, _int32(tokens),
                     cache.lengths, _int32(cache.written))
        if parents is None:
            keys, values, seen, logp = self._step(*arguments)
        else:
            keys, values, seen, logp = self._reordered_step(*arguments, _int32(parents))
        cache = dataclasses.replace(cache, keys=tuple(keys), values=tuple(values), seen=seen,
                                    written=cache.written + 1)
        return cache, ops.convert_to_numpy(logp)

    def functions(self) -> tuple:
        """The prefill and the step that reorders its rows first, as ``tf.function``s without XLA, which `io`
        names: what an export converts or searches in its graph, as `CachedModel.functions`."""
        prefill, _, reordered_step = self._compile(jit=False)
        return prefill, reordered_step

    @property
    def io(self) -> DecoderIO:
        """The inputs and outputs of `functions`, by name: the cross-attention's keys and values stay as the
        prefill gives them; the start id is a constant."""
        return DecoderIO(prefill=("token_ids", "lengths", "max_length", "start_id"), state=ENCODER_DECODER_STATE,
                         step=(*ENCODER_DECODER_STATE, "tokens", "lengths", "written", "parents"),
                         carried=("keys", "values", "seen"), source_width=1, constants={"start_id": self.start_id})

    # ---------------------------------------------------------------------------------------- the graphs
    def _compile(self, jit: bool) -> tuple:
        """The prefill, the step and the step that reorders its rows first, each one ``tf.function`` for every
        batch and length, the steps with XLA where ``jit``; the plain functions on another Keras backend."""
        if keras.config.backend() != "tensorflow":
            return self._prefill_graph, self._step_graph, self._step_graph
        import tensorflow as tf

        cfg = self.config
        dtype = keras.dtype_policies.get(self.t5.dtype).compute_dtype  # the keys' and values' dtype
        kept = (tf.TensorSpec((None, cfg.num_attention_heads, None, cfg.head_size), dtype),) * cfg.num_hidden_layers
        ints, scalar = tf.TensorSpec((None,), "int32"), tf.TensorSpec((), "int32")
        step = [kept, kept, kept, kept, tf.TensorSpec((None, None), "bool"), ints, ints, scalar]
        prefill = [tf.TensorSpec((None, None), "int32"), ints, scalar, scalar]
        return (tf.function(self._prefill_graph, input_signature=prefill),
                tf.function(self._step_graph, input_signature=step, jit_compile=jit),
                tf.function(self._step_graph, input_signature=[*step, ints], jit_compile=jit))

    def _prefill_graph(self, token_ids, lengths, max_length, start_id=START_ID):
        cfg = self.config
        source = ops.arange(ops.shape(token_ids)[1])[None] < lengths[:, None]  # (batch, S): the real tokens
        context_keys, context_values = self.t5.cross_keys_values(self.t5.encode(token_ids, None, source))
        rows = ops.shape(token_ids)[0]
        empty = ops.zeros((rows, cfg.num_attention_heads, 1 + max_length, cfg.head_size), context_keys[0].dtype)
        layers = cfg.num_hidden_layers
        keys, values, seen, logp = self._decode([empty] * layers, [empty] * layers, context_keys, context_values,
                                                ops.zeros((rows, 1 + max_length), "bool"),
                                                ops.full((rows,), start_id, "int32"), lengths, 0)
        return keys, values, context_keys, context_values, seen, logp

    def _step_graph(self, keys, values, context_keys, context_values, seen, tokens, lengths, written, parents=None):
        if parents is not None:  # beam search: each row continues the beam it was chosen from
            keys, values = [ops.take(k, parents, axis=0) for k in keys], [ops.take(v, parents, axis=0) for v in values]
            seen = ops.take(seen, parents, axis=0)
            # a parent is a beam of the same input: its source, cross keys and values are the row's own already
        return self._decode(keys, values, context_keys, context_values, seen, tokens, lengths, written + 1)

    def _decode(self, keys, values, context_keys, context_values, seen, tokens, lengths, position):
        """The decoder at ``position`` (every row's): ``tokens`` ``[N]`` written into slot ``position``, each block
        over the slots up to it that hold a token (not id 0, but for the start) and the source's real tokens."""
        slots = ops.arange(ops.shape(keys[0])[2])  # (1 + T,)
        here = slots == position
        shown = ops.logical_or(tokens[:, None] != 0, position == 0) if self.t5.options.decoder_padding else (
            ops.ones_like(tokens[:, None], "bool"))  # transformers' T5 (T5Options) hides no id-0 key
        seen = ops.where(here[None], shown, seen)  # (N, 1 + T)
        mask = ops.logical_and(seen, (slots <= position)[None])[:, None, None, :]  # (N, 1, 1, 1 + T)
        query = ops.reshape(ops.convert_to_tensor(position, "int32"), (1,))
        source = ops.arange(ops.shape(context_keys[0])[2])  # (S,)
        context = Context(None, self.t5.positions_at(query, source), source[None] < lengths[:, None])
        bias = self.t5.positions_at(query, slots)  # (A, 1, 1 + T)
        x = self.t5.embed(tokens[:, None])  # (N, 1, H)
        write_here, new_keys, new_values = here[None, None, :, None], [], []
        for i in range(self.config.num_hidden_layers):
            def write(k, v, i=i):
                new_keys.append(ops.where(write_here, k, keys[i]))
                new_values.append(ops.where(write_here, v, values[i]))
                return new_keys[-1], new_values[-1]

            layer_context = dataclasses.replace(context, keys=context_keys[i], values=context_values[i])
            x = self.t5.block(i, x, mask, bias, cache=write, context=layer_context)
        return new_keys, new_values, seen, ops.log_softmax(ops.cast(self.t5.logits(x[:, 0]), "float32"), axis=-1)

