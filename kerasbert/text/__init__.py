"""Text to features: the tokenizer, tag schemes, file readers and the encoding pipeline (no TensorFlow needed
for the first three)."""
