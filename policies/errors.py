"""The one error `policies` raises.

Input: nothing. Output: `PolicyError`. Invariants: `policies` imports nothing from `subclassaot`, so the library's
`subclassaot.errors.PolicyError` derives this class (and `SubclassAOTError`); `except PolicyError` catches both.
"""

from __future__ import annotations


class PolicyError(ValueError):
    """A symbolic shape policy contradicts itself or the input it is applied to."""
