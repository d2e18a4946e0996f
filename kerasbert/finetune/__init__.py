"""Fine-tuning: tasks, ``train``/``evaluate``/``predict``, run folders, optimizers, several devices, metrics and
plots."""
