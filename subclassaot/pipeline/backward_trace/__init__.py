"""Stage `trace` (training), the backward: the joint graph traced and partitioned into a forward and a backward
graph (joint.py traces it), or the program's own backward error, deferred or refused by what eager's backward does
(Note [Backward Errors Are Deferred], Note [Probing Eager's Backward]).

Input: the call, `FlatInputs`, `DenseLayout`, `Analysis`, the inference `TracedGraph` (its GraphOutputs), dense
fakes, fake mode.
Output: `BackwardGraph`: the forward graph `(primals...) -> (GraphOutputs..., saved...)` and the backward graph
`(saved..., tangents...) -> (grads per user tensor input (dense)..., backward-mutated inputs...)`, or the program's
own backward error; `BackwardVariant`: a backward retraced for tangents of another structure (Note [Tangent
Retrace]); `backward_plan`: the runtime's `BackwardPlan` of a `BackwardGraph`.
Invariants: see Note [Training Through A Joint Graph] (joint.py); both graphs are purely functional.

Modules, each a concept: joint_backward.py (`trace_backward`), graph.py (the graph, traced and partitioned),
deferred.py (the program's backward error deferred or refused), input_values.py (errors through written inputs' new
values), leaves_and_views.py (refusals around leaves and views), variants.py (retraced backwards, the plan).
"""

from subclassaot.pipeline.backward_trace.graph import BackwardGraph
from subclassaot.pipeline.backward_trace.joint_backward import trace_backward
from subclassaot.pipeline.backward_trace.variants import BackwardVariant, backward_plan

__all__ = ["BackwardGraph", "BackwardVariant", "backward_plan", "trace_backward"]
