"""Weights in and out: checkpoint formats as name tables from the model's layers to the file's variables."""
