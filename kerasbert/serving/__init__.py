"""Serving: export a fine-tuned run as a TensorFlow SavedModel that answers raw text (`export`), use such an export
(`exported`), and the tokenizer that runs inside its graph with kerasbert's ids (`graph_text`), so the model serves
where kerasbert is not installed."""
