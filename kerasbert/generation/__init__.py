"""Text generation with a built language model: `kerasbert.generate` (`kerasbert.generation.generate`).

    cache     CachedModel: a built lm / unilm model run one new position per row over its cached keys and values
    state     Cache and padded sources: a scorer's state between steps, NumPy or tensors, without Keras
    search    beam search (greedy: one beam) and sampling over it, bert4keras's AutoRegressiveDecoder rules
    graph_search  the same beam search as TensorFlow ops, for a SavedModel
    generate  generate(): checks the model, the inputs and the options, then batches the inputs through a search
"""
