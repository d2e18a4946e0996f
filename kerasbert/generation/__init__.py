"""Text generation with a built language model: `kerasbert.generate` (`kerasbert.generation.generate`).

    cache     CachedModel: a built lm / unilm model run one new position per row over its cached keys and values
    seq2seq_cache  CachedEncoderDecoder: a built T5 encoded once, its decoder run one new position per row over
              its cached self- and cross-attention keys and values
    state     Cache (ContextCache) and padded sources: a scorer's state between steps, NumPy or tensors, without Keras
    rules     the search rules, once (bert4keras's AutoRegressiveDecoder's): the beam step over NumPy or TensorFlow ops,
              the end rule, the sampling candidates
    search    beam search (greedy: one beam) and sampling over it, in NumPy
    graph_search  the same beam step as TensorFlow ops, for a SavedModel
    generate  generate(): checks the model, the inputs and the options, then batches the inputs through a search
"""
