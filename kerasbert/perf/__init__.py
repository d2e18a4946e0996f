"""Speed policy and faster forms: oneDNN on CPUs, when XLA pays, and the speed variants of the layers' steps,
chosen by machine kind in one place (`kerasbert.perf.variants`)."""
