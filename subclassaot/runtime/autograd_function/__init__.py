"""Stage `runtime` (training): the forward and backward graphs inside one autograd.Function.

Input: the `RuntimePlan`, the compiled forward and backward callables and the `BackwardPlan`.
Output: a `GraphCall` for `runtime.make_runner` (`training_call`): it runs the forward graph through the Function so
that autograd sees user-level tensors (subclass outputs wrapped inside the Function, subclass gradients rebuilt from
dense ones); `engine_node_apply`, the Function's backward as autograd's engine calls it.
Invariants: autograd happens above subclass desugaring; saved values are what the partitioned forward returns after
its GraphOutputs (tensors through save_for_backward, symbolic ints on ctx); a saved primal the epilogue is about to
mutate is copied first. See Note [Training Through A Joint Graph].

Modules, each a concept: step.py (what a compile's Function reads per call, decided once), function.py (the
autograd.Function), apply.py (its application per call), plain.py (plain steps), outputs.py (the outputs it returns),
tangents.py (the tangents its backward receives), saved_checks.py and backward_checks.py (what its backward checks
as eager's does).
"""

from subclassaot.runtime.autograd_function.apply import engine_node_apply, training_call

__all__ = ["engine_node_apply", "training_call"]
