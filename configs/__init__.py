"""Bundled BERT configs (presets), installed as kerasbert.configs."""
