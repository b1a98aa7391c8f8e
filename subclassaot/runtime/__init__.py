"""The per-call path: the plan a compile leaves (plan.py), the call itself (call.py: guards -> unwrap -> graph ->
epilogue -> wrap), the autograd.Function of training entries (autograd_function/) and the outputs' rebuild
(regenerate.py). Compile-time objects (fake tensors, ShapeEnv, graphs it does not run) never reach it."""
