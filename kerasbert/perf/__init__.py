"""Speed policy and kernels: oneDNN on CPUs, when XLA pays, and the fused GELU and dropout of training."""
