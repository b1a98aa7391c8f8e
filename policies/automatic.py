"""Automatic dynamic: a dim is static until a second, different size is seen at the same source path.

Input: observations `(source path, sizes)`, one per tensor node (outer and inner) per compile. Output: which dims of
a path are dynamic. Invariants: a dim never goes back from dynamic to static; the state is keyed by source path
(`args[0]`, `args[0].values`), so inner tensors are tracked on their own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

# Note [Automatic Dynamic State]
# The state belongs to the caller (one per compiled function) and lives as long as it. `fakify_inputs` calls
# `observe` once per tensor node on every compile (the first compile and every recompile after a guard failure),
# then asks `dynamic_dims`; the caller does not observe on ordinary calls. That is PyTorch's rule: the first compile
# sees one size (static), a guard failure on a new size recompiles, and the recompile sees the change (dynamic).
# A rank change makes every dim of that path dynamic. The object takes its own lock, so concurrent compiles may share
# it; observing and querying are each atomic, and a compile that wants both atomically (it does not need to) would
# lock around them itself.


class AutomaticDynamicState:
    """Sizes seen per source path; a dim whose size changed is dynamic from then on. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int | None, ...]] = {}  # path -> size per dim; None: changed (dynamic)

    def observe(self, path: str, sizes: Sequence[int]) -> None:
        """Record the sizes seen at `path`; a dim that differs from an earlier observation becomes dynamic."""
        new = tuple(int(s) for s in sizes)
        with self._lock:
            old = self._seen.get(path)
            if old is None:
                self._seen[path] = new
            elif len(old) != len(new):
                self._seen[path] = (None,) * len(new)
            else:
                self._seen[path] = tuple(o if o == n else None for o, n in zip(old, new, strict=True))

    def dynamic_dims(self, path: str) -> frozenset[int]:
        """The dims of `path` that have been seen with two different sizes (empty for an unseen path)."""
        with self._lock:
            seen = self._seen.get(path, ())
        return frozenset(d for d, s in enumerate(seen) if s is None)

    def is_dynamic(self, path: str, dim: int) -> bool:
        return dim in self.dynamic_dims(path)

    def paths(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._seen)

    def __repr__(self) -> str:
        with self._lock:
            items = ", ".join(
                f"{p}: ({', '.join('*' if s is None else str(s) for s in v)})" for p, v in self._seen.items()
            )
        return f"AutomaticDynamicState({items})"
