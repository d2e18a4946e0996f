"""Speed policy and faster forms: oneDNN on CPUs, when XLA pays, and the speed variants of the layers' steps, reached
through one call per kernel (`kerasbert.perf.kernels`) and chosen in one table (`kerasbert.perf.variants`)."""
