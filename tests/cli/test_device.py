"""`iron device`: every backend with its status, the device details where it runs, and Metal's caveat."""

from __future__ import annotations

from click.testing import CliRunner

from iron.cli.main import cli
from iron.runtime import BACKENDS, unavailable_reason


def test_every_backend_is_listed_with_why_a_missing_one_is_missing():
    r = CliRunner().invoke(cli, ["device"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    for name in BACKENDS:
        assert f"│ {name} " in r.output, f"{name} missing from iron device"
        reason = unavailable_reason(name)
        if reason is not None:
            assert " ".join(f"unavailable: {reason}".split())[:60] in text
    assert "not verified on Apple hardware by this project's CI" in text
    if unavailable_reason("msl-cpu") is None:
        assert "CPU model of Metal" in text and "simd_width: 32" in text
    if unavailable_reason("vulkan") is None:
        assert "api_version: 1." in text
