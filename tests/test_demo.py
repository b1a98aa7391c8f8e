"""`python -m subclassaot demo` runs end to end and every check in it passes."""

from __future__ import annotations

import pytest

from subclassaot.__main__ import main


def test_demo_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--calls", "20"]) == 0
    out = capsys.readouterr().out
    assert "17 passed, 0 failed, 1 skipped" in out or "0 failed" in out
    assert "explain(add_then_view): inference" in out
    for name in ("add_then_view", "scale_in_place", "shifted_loss"):
        assert f"{name}: parity with eager: PASS" in out
        assert f"{name}: median per call over 20 calls" in out
    assert "float8:" in out
    assert "demo: all checks passed" in out
