"""Fixtures for the Vulkan runtime tests: skip cleanly (with the probe's reason) where no Vulkan device is present."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def vk_backend():
    from iron.runtime.vulkan import VulkanBackend, probe

    reason = probe()
    if reason:
        pytest.skip(f"Vulkan unavailable: {reason}")
    be = VulkanBackend()
    yield be
    be.close()
