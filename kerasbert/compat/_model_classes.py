"""bert4keras's ``Transformer``: the model object ``build_transformer_model(return_keras_model=False)`` returns, and
the base a script subclasses to change one step of a model.

``build()`` reads top to bottom as in bert4keras: `Transformer.get_inputs`, then `Transformer.call`, which runs
``apply_embeddings``, ``apply_main_layers(x, index)`` for each layer and ``apply_final_layers``. A family's class
(`kerasbert.compat._model_classes_families`) runs those steps through its kerasbert architecture
(`kerasbert.modeling.architecture`: ``embed``, ``block``, ``final``) over the layers the architecture creates, so an
unchanged class builds kerasbert's model, layer for layer. A subclass that overrides a step builds its own layers
there with `Transformer.apply`, which creates a layer once by its prefixed name and reuses it after; its checkpoint
loads through ``variable_mapping`` (`kerasbert.compat._model_classes_weights`).

Example:
>>> from kerasbert.compat.models import BERT
>>> bert = BERT(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
...             hidden_act="gelu", max_position=64)
>>> bert.build()
>>> type(bert.model).__name__, [t.name for t in bert.inputs], sorted(bert.layers)[:2]
('TransformerModel', ['Input-Token', 'Input-Segment'], ['Attention-Mask', 'Embedding-Dropout'])
"""

from __future__ import annotations

import inspect
import os

import keras
import numpy as np

from kerasbert.compat import _model_classes_io as io
from kerasbert.errors import ModelError, fail

# the steps a subclass may override, with the parameters bert4keras calls them with (self first)
STEPS = {"get_inputs": (), "call": ("inputs",), "apply_embeddings": ("inputs",),
         "apply_main_layers": ("inputs", "index"), "apply_final_layers": ("inputs",),
         "compute_attention_bias": ("inputs",), "compute_position_bias": ("inputs",), "variable_mapping": (),
         "load_variable": ("checkpoint", "name"), "create_variable": ("name", "value")}


class Transformer:
    """bert4keras's model base: the sizes, the layers by name, and the steps ``build`` runs.

    Args:
        vocab_size: int. V (``len(keep_tokens)`` when given, plus ``len(compound_tokens)``).
        hidden_size: int. H.
        num_hidden_layers: int. L.
        num_attention_heads: int. A.
        intermediate_size: int. the feed-forward's inner width.
        hidden_act: str or list. the feed-forward's activation.
        dropout_rate: float. dropout after the embeddings and each sublayer (None: 0).
        attention_dropout_rate: float. dropout on the attention probabilities (None: 0).
        embedding_size: int. E where it differs from H.
        attention_head_size: int. the width of a head's values (None: H / A).
        attention_key_size: int. the width of a head's queries and keys (None: the head size).
        sequence_length: int. a fixed input length (None: any).
        keep_tokens: list of int. the vocabulary rows to keep from a checkpoint.
        compound_tokens: list. new rows after them, each the mean of the listed rows (or ``(ids, weights)``: their
            weighted mean), as a checkpoint loads.
        residual_attention_scores: bool. each attention adds the previous one's scores (RealFormer), for a subclass
            whose attention is `kerasbert.compat.layers.MultiHeadAttention`; kerasbert's own blocks refuse it.
        ignore_invalid_weights: bool. leave a weight whose name the checkpoint lacks at its initial value.
        autoresize_weights: bool. bert4keras resizes a checkpoint weight of another shape; kerasbert refuses that
            weight, naming it (resize it first with `kerasbert.compat.snippets.orthogonally_resize`).
        layers: dict. layers by name to reuse (two models sharing them).
        prefix: str. put before every layer name (two models in one graph).
        name: str. the Keras model's name.
        **kwargs: the rest of a config (``max_position_embeddings``, ``layer_norm_eps``, ...), and kerasbert's
            ``config`` (a `kerasbert.BertConfig` the sizes change) and ``dtype``.
    """

    kerasbert_family: str | None = None  # the kerasbert family whose architecture the steps run
    application = "encoder"  # the attention mask: "encoder", or LM_Mask's "lm", UniLM_Mask's "unilm"

    def __init__(self, vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
                 hidden_act, dropout_rate=None, attention_dropout_rate=None, embedding_size=None,
                 attention_head_size=None, attention_key_size=None, sequence_length=None, keep_tokens=None,
                 compound_tokens=None, residual_attention_scores=False, ignore_invalid_weights=False,
                 autoresize_weights=False, layers=None, prefix=None, name=None, **kwargs):
        if keep_tokens is not None:
            vocab_size = len(keep_tokens)
        if compound_tokens is not None:
            vocab_size += len(compound_tokens)
        self.vocab_size, self.hidden_size, self.num_hidden_layers = vocab_size, hidden_size, num_hidden_layers
        self.num_attention_heads, self.intermediate_size, self.hidden_act = num_attention_heads, intermediate_size, \
            hidden_act
        self.attention_head_size = attention_head_size or hidden_size // num_attention_heads
        self.attention_key_size = attention_key_size or self.attention_head_size
        self.dropout_rate, self.attention_dropout_rate = dropout_rate or 0, attention_dropout_rate or 0
        self.embedding_size = embedding_size or hidden_size
        self.sequence_length, self.keep_tokens, self.compound_tokens = sequence_length, keep_tokens, compound_tokens
        self.attention_bias = self.position_bias = self.attention_scores = None
        self.residual_attention_scores = residual_attention_scores
        self.ignore_invalid_weights, self.autoresize_weights = ignore_invalid_weights, autoresize_weights
        self.layers = {} if layers is None else layers
        self.prefix, self.name, self.built = prefix or "", name, False
        self.attention_caches, self.layer_norm_conds = {}, [None, None, "linear"]
        self.options = {"embedding_size": embedding_size, "attention_head_size": attention_head_size, **kwargs}
        self.verbose = kwargs.get("verbose", True)

    # ------------------------------------------------------------------------------------ building
    def build(self, attention_caches=None, layer_norm_cond=None, layer_norm_cond_hidden_size=None,
              layer_norm_cond_hidden_act=None, additional_input_layers=None, **kwargs) -> None:
        """Wire the model once: inputs, `call`, then ``self.model`` (a `kerasbert.modeling.backbone.TransformerModel`
        over ``self.inputs`` and ``self.outputs``).

        Args:
            attention_caches: dict. attention layer name -> ``[k_cache, v_cache]`` put before its keys and values.
            layer_norm_cond: a tensor ``[B, C]``: every norm is conditioned on it (conditional layer norm).
            layer_norm_cond_hidden_size: int. a Dense of this width first maps the condition (None: none).
            layer_norm_cond_hidden_act: str. that Dense's activation (None: linear).
            additional_input_layers: a tensor or list. inputs of the model besides its own (the condition's).
            **kwargs: the rest of a config, taken and left unused as bert4keras does.
        """
        if self.built:
            return
        check_overrides(self)
        inputs = self.get_inputs()
        self.set_inputs(inputs, additional_input_layers)
        self.attention_caches = attention_caches or {}
        self.layer_norm_conds = [layer_norm_cond, layer_norm_cond_hidden_size, layer_norm_cond_hidden_act or "linear"]
        self.set_outputs(self.call(inputs))
        self.model = self.keras_model()
        for layer in self.model.layers:
            if self.prefix and not layer.name.startswith(self.prefix):
                layer.name = self.prefix + layer.name  # a final layer or mask the architecture named unprefixed
            self.layers.setdefault(layer.name, layer)
        self.built = True

    def keras_model(self) -> keras.Model:
        """The Keras model over ``self.inputs`` and ``self.outputs``."""
        return keras.Model(self.inputs, self.output, name=self.name)

    def call(self, inputs):
        """The graph: ``apply_embeddings``, ``apply_main_layers`` for each layer, ``apply_final_layers``."""
        outputs = self.apply_embeddings(inputs)
        for index in range(self.num_hidden_layers):
            outputs = self.apply_main_layers(outputs, index)
        return self.apply_final_layers(outputs)

    def prefixed(self, name: str | None) -> str | None:
        """``name`` with the model's prefix."""
        return None if name is None else self.prefix + name

    def apply(self, inputs=None, layer=None, arguments=None, **kwargs):
        """Call the layer named ``kwargs["name"]`` (prefixed) on ``inputs``, creating it as ``layer(**kwargs)`` the
        first time; without ``inputs``, return the layer. A Dropout of rate 0 is skipped, a ``Lambda`` takes
        ``arguments`` as its own, any other layer as call arguments; an attention layer named in
        ``attention_caches`` reads the cached keys and values first."""
        if _is(layer, keras.layers.Dropout) and self.dropout_rate == 0:
            return inputs
        attention = _named(layer, "MultiHeadAttention")
        if attention and self.residual_attention_scores:
            kwargs["return_attention_scores"] = True
        arguments = dict(arguments or {})
        if _is(layer, keras.layers.Lambda):
            kwargs["arguments"], arguments = arguments, {}
        name = kwargs["name"] = self.prefixed(kwargs.get("name"))
        if name not in self.layers:
            created = layer(**kwargs)
            name = created.name
            self.layers[name] = created
        if inputs is None:
            return self.layers[name]
        if _named(type(self.layers[name]), "MultiHeadAttention"):
            return self._attend(name, inputs, arguments)
        return self.layers[name](inputs, **arguments)

    def _attend(self, name: str, inputs: list, arguments: dict):
        """An attention layer's call with its cached keys and values, and RealFormer's residual scores."""
        if name in self.attention_caches:
            k_cache, v_cache = self.attention_caches[name]
            concatenate = keras.layers.Concatenate(axis=1, name=f"{name}-Cached-Key")
            inputs = [inputs[0], concatenate([k_cache, inputs[1]]),
                      keras.layers.Concatenate(axis=1, name=f"{name}-Cached-Value")([v_cache, inputs[2]]), *inputs[3:]]
        if not self.residual_attention_scores:
            return self.layers[name](inputs, **arguments)
        if self.attention_scores is not None:
            if arguments.get("a_bias"):
                bias = keras.layers.Add(name=f"{name}-Attention-Bias")([inputs[3], self.attention_scores])
                inputs = [*inputs[:3], bias, *inputs[4:]]
            else:
                inputs = [*inputs[:3], self.attention_scores, *inputs[3:]]
            arguments["a_bias"] = True
        output, self.attention_scores = self.layers[name](inputs, **arguments)
        return output

    # ------------------------------------------------------------------------------------ the steps
    def get_inputs(self):
        raise NotImplementedError

    def apply_embeddings(self, inputs):
        raise NotImplementedError

    def apply_main_layers(self, inputs, index):
        raise NotImplementedError

    def apply_final_layers(self, inputs):
        raise NotImplementedError

    def compute_attention_bias(self, inputs=None):
        """The attention bias of every layer (None: padding keys alone, through the Keras mask)."""
        return self.attention_bias

    def compute_position_bias(self, inputs=None):
        """What every attention reads of the positions (None: none)."""
        return self.position_bias

    def set_inputs(self, inputs, additional_input_layers=None) -> None:
        """``self.inputs`` (a list, ``additional_input_layers`` after the model's own) and ``self.input``."""
        inputs = [] if inputs is None else list(inputs) if isinstance(inputs, list) else [inputs]
        if additional_input_layers is not None:
            extra = additional_input_layers
            inputs += list(extra) if isinstance(extra, list) else [extra]
        self.inputs = inputs
        self.input = inputs if len(inputs) > 1 else inputs[0]

    def set_outputs(self, outputs) -> None:
        """``self.outputs`` (a list) and ``self.output`` (the one output, or the list)."""
        outputs = list(outputs) if isinstance(outputs, list) else [outputs]
        self.outputs = outputs
        self.output = outputs if len(outputs) > 1 else outputs[0]

    @property
    def initializer(self):
        """A truncated normal of standard deviation 0.02, bert4keras's initializer of every new layer."""
        return keras.initializers.TruncatedNormal(stddev=0.02)

    def simplify(self, inputs: list):
        """``inputs`` without its Nones; the one left alone."""
        inputs = [i for i in inputs if i is not None]
        return inputs[0] if len(inputs) == 1 else inputs

    # ------------------------------------------------------------------------------------ checkpoints
    def load_embeddings(self, embeddings: np.ndarray) -> np.ndarray:
        """The checkpoint's vocabulary rows as the model has them: ``keep_tokens``' rows, then one row per
        compound token, the (weighted) mean of its rows."""
        embeddings = np.asarray(embeddings, dtype=keras.config.floatx())
        if self.keep_tokens is not None:
            embeddings = embeddings[np.asarray(self.keep_tokens)]
        if self.compound_tokens is not None:
            compound = []
            for item in self.compound_tokens:
                ids, weights = (item, [1] * len(item)) if isinstance(item, list) else item
                compound.append(np.average(embeddings[list(ids)], axis=0, weights=weights))
            embeddings = np.concatenate([embeddings, np.asarray(compound, embeddings.dtype).reshape(
                -1, *embeddings.shape[1:])], axis=0)
        return embeddings

    def load_variable(self, checkpoint, name: str) -> np.ndarray:
        """The checkpoint's variable ``name`` (a dict's entry, or a TF checkpoint's), as the model's layer holds it."""
        return io.read_variable(checkpoint, name)

    def create_variable(self, name: str, value: np.ndarray, dtype=None) -> tuple[str, np.ndarray]:
        """``(name, value)`` as the checkpoint stores it, in ``dtype`` (None: floatx)."""
        return name, np.asarray(value, dtype=dtype or keras.config.floatx())

    def variable_mapping(self) -> dict[str, list[str]]:
        """Layer name -> its checkpoint names, in the order of the layer's weights."""
        return {}

    def load_weights_from_checkpoint(self, checkpoint, mapping: dict | None = None) -> None:
        """Load ``checkpoint`` (a TF checkpoint's prefix or folder, or a dict of arrays) through ``mapping``
        (None: `variable_mapping`), with kerasbert's checks and per-variable log."""
        io.load(self, checkpoint, mapping)

    def save_weights_as_checkpoint(self, filename: str | os.PathLike, mapping: dict | None = None,
                                   dtype=None) -> None:
        """Write the weights ``mapping`` (None: `variable_mapping`) names as a TF checkpoint at ``filename``."""
        io.save(self, filename, mapping, dtype)


class LM_Mask:  # noqa: N801 (bert4keras's name)
    """Causal attention (a language model): each position sees itself and those before it."""

    application = "lm"


class UniLM_Mask:  # noqa: N801 (bert4keras's name)
    """UniLM's attention (sequence to sequence): the source (segment 0) both ways, the target causally."""

    application = "unilm"


def extend_with_language_model(BaseModel: type) -> type:  # noqa: N803 (bert4keras's argument)
    """``BaseModel`` under `LM_Mask`, its MLM output on (bert4keras's ``application="lm"``)."""
    return _extended(BaseModel, LM_Mask, "LanguageModel")


def extend_with_unified_language_model(BaseModel: type) -> type:  # noqa: N803 (bert4keras's argument)
    """``BaseModel`` under `UniLM_Mask`, its MLM output on (bert4keras's ``application="unilm"``)."""
    return _extended(BaseModel, UniLM_Mask, "UnifiedLanguageModel")


def _extended(base: type, mask: type, name: str) -> type:
    def __init__(self, *args, **kwargs):
        base.__init__(self, *args, **kwargs)
        self.with_mlm = getattr(self, "with_mlm", False) or True

    return type(name, (mask, base), {"__init__": __init__, "__module__": base.__module__})


def _is(layer, cls: type) -> bool:
    return isinstance(layer, type) and issubclass(layer, cls)


def _named(layer, name: str) -> bool:
    """Whether ``layer`` is a class of that name or derives from one (bert4keras's and kerasbert's alike)."""
    return isinstance(layer, type) and any(base.__name__ == name for base in layer.__mro__)


def check_overrides(model: Transformer) -> None:
    """A ModelError naming the first step a subclass overrides with parameters bert4keras does not call it with."""
    for step, parameters in STEPS.items():
        method = getattr(type(model), step, None)
        if method is None or method is getattr(Transformer, step, None):
            continue
        signature = inspect.signature(method)
        try:
            signature.bind(None, *parameters)
        except TypeError:
            expected = f"({', '.join(('self', *parameters))})"
            raise fail(ModelError, f"{type(model).__name__}.{step}", f"the parameters {expected}",
                       f"{step}{signature}", "bert4keras calls it so; keep its parameters") from None


__all__ = ["LM_Mask", "Transformer", "UniLM_Mask", "extend_with_language_model", "extend_with_unified_language_model"]
