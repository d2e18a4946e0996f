"""Where every weight of the bert4keras-named graph is stored: its Google name and its Hugging Face name.

One row per (layer, weight); ``Transformer-{i}-...`` rows stand for every encoder layer ``i``. A tuple of names
is concatenated on the last axis: kerasbert's attention keeps Q, K and V in one kernel, both formats store three.
Google stores kernels ``[in, out]`` (except ``cls/seq_relationship/output_weights``), Hugging Face stores every
linear weight ``[out, in]``: each format's `kerasbert.weights.table.Format` says which names it transposes.

Example:
>>> GOOGLE_NAMES[("Transformer-{i}-FeedForward-Norm", "gamma")].format(i=3)
'bert/encoder/layer_3/output/LayerNorm/gamma'
>>> HF_NAMES[("Transformer-{i}-FeedForward-Norm", "gamma")].format(i=3)
'bert.encoder.layer.3.output.LayerNorm.weight'
"""

from __future__ import annotations

_G, _H = "bert/encoder/layer_{i}", "bert.encoder.layer.{i}"
_QKV = ("query", "key", "value")
_BLOCK = {  # Transformer-{i}-<layer>, weight -> (Google path after layer_{i}/, HF path after layer.{i}.)
    ("MultiHeadSelfAttention", "output_kernel"): ("attention/output/dense/kernel", "attention.output.dense.weight"),
    ("MultiHeadSelfAttention", "output_bias"): ("attention/output/dense/bias", "attention.output.dense.bias"),
    ("MultiHeadSelfAttention-Norm", "gamma"): ("attention/output/LayerNorm/gamma", "attention.output.LayerNorm.weight"),
    ("MultiHeadSelfAttention-Norm", "beta"): ("attention/output/LayerNorm/beta", "attention.output.LayerNorm.bias"),
    ("FeedForward", "intermediate_kernel"): ("intermediate/dense/kernel", "intermediate.dense.weight"),
    ("FeedForward", "intermediate_bias"): ("intermediate/dense/bias", "intermediate.dense.bias"),
    ("FeedForward", "output_kernel"): ("output/dense/kernel", "output.dense.weight"),
    ("FeedForward", "output_bias"): ("output/dense/bias", "output.dense.bias"),
    ("FeedForward-Norm", "gamma"): ("output/LayerNorm/gamma", "output.LayerNorm.weight"),
    ("FeedForward-Norm", "beta"): ("output/LayerNorm/beta", "output.LayerNorm.bias"),
}
NAMES: dict[tuple[str, str], tuple] = {  # (layer, weight) -> (Google name(s) or None, HF name(s))
    ("Embedding-Token", "embeddings"): ("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight"),
    ("Embedding-Segment", "embeddings"): ("bert/embeddings/token_type_embeddings",
                                          "bert.embeddings.token_type_embeddings.weight"),
    ("Embedding-Position", "embeddings"): ("bert/embeddings/position_embeddings",
                                           "bert.embeddings.position_embeddings.weight"),
    ("Embedding-Norm", "gamma"): ("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight"),
    ("Embedding-Norm", "beta"): ("bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias"),
    ("Transformer-{i}-MultiHeadSelfAttention", "qkv_kernel"): (
        tuple(f"{_G}/attention/self/{p}/kernel" for p in _QKV), tuple(f"{_H}.attention.self.{p}.weight" for p in _QKV)),
    ("Transformer-{i}-MultiHeadSelfAttention", "qkv_bias"): (
        tuple(f"{_G}/attention/self/{p}/bias" for p in _QKV), tuple(f"{_H}.attention.self.{p}.bias" for p in _QKV)),
    **{(f"Transformer-{{i}}-{layer}", weight): (f"{_G}/{google}", f"{_H}.{hf}")
       for (layer, weight), (google, hf) in _BLOCK.items()},
    ("Pooler-Dense", "kernel"): ("bert/pooler/dense/kernel", "bert.pooler.dense.weight"),
    ("Pooler-Dense", "bias"): ("bert/pooler/dense/bias", "bert.pooler.dense.bias"),
    ("NSP-Proba", "kernel"): ("cls/seq_relationship/output_weights", "cls.seq_relationship.weight"),
    ("NSP-Proba", "bias"): ("cls/seq_relationship/output_bias", "cls.seq_relationship.bias"),
    ("MLM-Dense", "kernel"): ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    ("MLM-Dense", "bias"): ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
    ("MLM-Norm", "gamma"): ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    ("MLM-Norm", "beta"): ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias"),
    ("MLM-Bias", "bias"): ("cls/predictions/output_bias", "cls.predictions.bias"),
    # a fine-tuned BertForSequenceClassification / BertForTokenClassification head; Google's release has none
    ("CLS-Dense", "kernel"): (None, "classifier.weight"),
    ("CLS-Dense", "bias"): (None, "classifier.bias"),
    ("Tagging-Dense", "kernel"): (None, "classifier.weight"),
    ("Tagging-Dense", "bias"): (None, "classifier.bias"),
}
GOOGLE_NAMES = {key: google for key, (google, _) in NAMES.items() if google is not None}
HF_NAMES = {key: hf for key, (_, hf) in NAMES.items()}

# Layers a converted checkpoint may lack: the pre-training heads and a fine-tuned classifier. The embeddings and
# every encoder block are required.
OPTIONAL_LAYERS = frozenset({"Pooler-Dense", "NSP-Proba", "MLM-Dense", "MLM-Norm", "MLM-Bias", "CLS-Dense",
                             "Tagging-Dense"})


def variable_shapes(vocab: int, hidden: int, intermediate: int, positions: int, segments: int) -> dict:
    """The shape of each (layer, weight) of the bert4keras-named graph, in kerasbert's layout (kernels
    ``[in, out]``, Q/K/V fused), from the config's sizes; the classifier heads, whose size no config gives, are
    left out.

    Example:
    >>> variable_shapes(128, 32, 64, 512, 2)[("Transformer-{i}-MultiHeadSelfAttention", "qkv_kernel")]
    (32, 96)
    """
    h = hidden
    shapes = {("Embedding-Token", "embeddings"): (vocab, h), ("Embedding-Segment", "embeddings"): (segments, h),
              ("Embedding-Position", "embeddings"): (positions, h),
              ("Transformer-{i}-MultiHeadSelfAttention", "qkv_kernel"): (h, 3 * h),
              ("Transformer-{i}-MultiHeadSelfAttention", "qkv_bias"): (3 * h,),
              ("Transformer-{i}-MultiHeadSelfAttention", "output_kernel"): (h, h),
              ("Transformer-{i}-FeedForward", "intermediate_kernel"): (h, intermediate),
              ("Transformer-{i}-FeedForward", "intermediate_bias"): (intermediate,),
              ("Transformer-{i}-FeedForward", "output_kernel"): (intermediate, h),
              ("Pooler-Dense", "kernel"): (h, h), ("NSP-Proba", "kernel"): (h, 2), ("NSP-Proba", "bias"): (2,),
              ("MLM-Dense", "kernel"): (h, h), ("MLM-Bias", "bias"): (vocab,)}
    return {key: shapes.get(key, (h,)) for key in NAMES if key[0] not in ("CLS-Dense", "Tagging-Dense")}
