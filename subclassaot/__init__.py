"""subclassaot: a typed toolkit for PyTorch tensor subclasses and a mutation-aware AOT compile pipeline.

The pipeline, data flowing one way (`api.py` is the only code that knows the order)::

    fn, args
     -> inputs      flatten the argument pytree; lift module state and captured tensors  pipeline/inputs.py
     -> fakify      policies -> fresh fake inputs with symbols                             pipeline/fakify.py, policies/
     -> desugar     subclasses -> plain dense leaves; aliased leaves -> synthetic bases     pipeline/desugar.py
     -> observe     eager's forward and backward probed on static fakes                   pipeline/backward_probe.py
                    (the eager record, eager/record.py, is checked against eager in tests/eager; the analysis
                    does not read it yet)
     -> analyze     one functionalized run: input mutations, output aliasing, refusals     pipeline/analyze.py,
                    (the eager-semantics rules it applies: pipeline/rules/)                pipeline/functional_run.py
     -> trace       make_fx + functionalization -> a purely functional graph               pipeline/trace.py
        (training: a joint forward+backward graph -> partition)                            pipeline/joint.py, partition.py
     -> backend     graph -> callable (eager, inductor, or yours)                          pipeline/backends.py
     -> runtime     guards -> unwrap -> graph -> epilogue -> outputs                       pipeline/guards.py, runtime/

Layers (tests/test_architecture.py): authoring < schemas < eager, runtime < pipeline < api < tools; errors, config
and torch_internals (the typed facade over torch's private APIs) below them all.

Two entry points share the pipeline: `subclassaot.compile(fn)` (we capture by tracing; no graph breaks) and
`torch.compile(fn, backend="subclassaot")` (Dynamo captures, with graph breaks; each captured graph goes through
the stages above; tools/dynamo_backend.py, registered as a `torch_dynamo_backends` entry point).

Authoring side: the checked flatten protocol (authoring/protocol.py), a base class for wrapper subclasses
(authoring/wrapper_tensor.py) and a conformance checker (tools/checker.py, `python -m subclassaot check
MODULE:FACTORY`).
"""

from __future__ import annotations

from subclassaot.api import CompiledFunction, CompiledModule, compile
from subclassaot.authoring.protocol import (
    TraceableWrapperSubclass,
    flatten_subclass,
    is_traceable_subclass,
    unflatten_subclass,
)
from subclassaot.authoring.wrapper_tensor import OuterMeta, WrapperTensor, implements
from subclassaot.errors import BackendError, PolicyError, ProtocolError, SubclassAOTError, UnsupportedError
from subclassaot.pipeline.backends import register_backend
from subclassaot.tools.checker import DEFAULT_RULES, CheckReport, RuleResult, Status, check_subclass
from subclassaot.tools.checker_rules import Rule, fail, skip
from subclassaot.tools.explain import CapturedExplanation, Explanation, explain

__all__ = [
    "CapturedExplanation",
    "DEFAULT_RULES",
    "Explanation",
    "explain",
    "CheckReport",
    "CompiledFunction",
    "CompiledModule",
    "OuterMeta",
    "Rule",
    "RuleResult",
    "Status",
    "WrapperTensor",
    "check_subclass",
    "compile",
    "fail",
    "implements",
    "register_backend",
    "skip",
    "BackendError",
    "PolicyError",
    "ProtocolError",
    "SubclassAOTError",
    "TraceableWrapperSubclass",
    "UnsupportedError",
    "flatten_subclass",
    "is_traceable_subclass",
    "unflatten_subclass",
]
