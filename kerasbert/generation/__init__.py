"""Text generation with a built language model: `kerasbert.generate` (`kerasbert.generation.generate`).

    cache     CachedModel: a built lm / unilm model run one new position per row over its cached keys and values
    search    beam search (greedy: one beam) and sampling over it, bert4keras's AutoRegressiveDecoder rules
    generate  generate(): checks the model, the inputs and the options, then batches the inputs through a search
"""
