"""``iron inspect --backend vulkan --resources`` (runtime/vulkan_stats.py): a device without
VK_KHR_pipeline_executable_properties (lavapipe) is refused in one line; the query's count-then-fill protocol, sType
setting and value formats are checked against a fake driver made of cffi callbacks; a device that offers the
extension (NVIDIA's driver) reports statistics for a real kernel, in a fresh process (the context must be created
with IRON_VULKAN_STATS=1)."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from iron.cli.main import cli
from iron.cli.vulkan_resources import format_rows
from iron.runtime import vulkan_stats as vs


def _offers(vk_backend) -> bool:
    return vs.EXTENSION in vk_backend.context().extensions


def test_a_device_without_the_extension_is_refused_in_one_line(vk_backend):
    if _offers(vk_backend):
        pytest.skip("this Vulkan device offers pipeline statistics (see the test below)")
    result = CliRunner().invoke(cli, ["inspect", "iron.std.rope:rope", "--backend", "vulkan", "--resources",
                                      "--dtype", "bf16", "-D", "INTERLEAVED=0", "-D", "VEC=8", "-D", "HPT=1"])
    assert result.exit_code == 1
    assert f"does not offer {vs.EXTENSION}" in result.output and "Traceback" not in result.output


def test_arch_and_sass_are_cuda_only_with_vulkan_resources():
    for extra in (["--arch", "sm_90"], ["--sass"]):
        result = CliRunner().invoke(cli, ["inspect", "iron.std.rope:rope", "--backend", "vulkan", "--resources",
                                          *extra])
        assert result.exit_code == 2 and "CUDA's" in result.output


def test_a_device_that_offers_it_reports_statistics(vk_backend):
    """In a fresh process: the rope kernel's pipeline at 128 threads has one executable with statistics."""
    if not _offers(vk_backend):
        pytest.skip(f"{vk_backend.info()['name']} does not offer {vs.EXTENSION}")
    r = subprocess.run([sys.executable, "-m", "iron.cli.main", "inspect", "iron.std.rope:rope", "--backend", "vulkan",
                        "--resources", "--group", "128", "--dtype", "bf16", "-D", "INTERLEAVED=0", "-D", "VEC=8",
                        "-D", "HPT=1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "// pipeline statistics of rope [T=bf16, INTERLEAVED=0, VEC=8, HPT=1]" in r.stdout
    assert "groups of 128" in r.stdout and len(r.stdout.splitlines()) >= 3


def _fake_driver(ffi, vk, executables: list[tuple[str, int, list[tuple[str, int, object]]]], seen: list):
    """cffi callbacks answering vkGetPipelineExecutable{Properties,Statistics}KHR from ``executables``: (name,
    subgroup size, [(statistic, format, value)]); ``seen`` gets every sType the caller left on the array."""

    @ffi.callback("VkResult(VkDevice, VkPipelineInfoKHR*, uint32_t*, VkPipelineExecutablePropertiesKHR*)")
    def props(device, info, count, items):
        if items == ffi.NULL:
            count[0] = len(executables)
            return 0
        for i, (name, width, _) in enumerate(executables[:count[0]]):
            seen.append(items[i].sType)
            items[i].name = name.encode()
            items[i].description = f"the {name} stage".encode()
            items[i].subgroupSize = width
        return 0

    @ffi.callback("VkResult(VkDevice, VkPipelineExecutableInfoKHR*, uint32_t*, VkPipelineExecutableStatisticKHR*)")
    def stats(device, info, count, items):
        rows = executables[info.executableIndex][2]
        if items == ffi.NULL:
            count[0] = len(rows)
            return 0
        for i, (name, fmt, value) in enumerate(rows[:count[0]]):
            seen.append(items[i].sType)
            items[i].name = name.encode()
            items[i].description = f"what {name} is".encode()
            items[i].format = fmt
            setattr(items[i].value, vs._FORMATS[fmt], value)
        return 0

    return props, stats


def test_query_reads_every_format_and_sets_each_elements_stype(monkeypatch):
    import vulkan as vk

    ffi = vk.ffi
    seen: list = []
    table = [("Compute Shader", 32, [("Register Count", 2, 36), ("Spilled", 0, 1), ("Occupancy", 3, 0.75),
                                     ("Delta", 1, -4)])]
    props, stats = _fake_driver(ffi, vk, table, seen)
    monkeypatch.setattr(vs, "_procs", lambda ctx: (props, stats))
    ctx = SimpleNamespace(vk=vk, ffi=ffi, device=ffi.cast("VkDevice", 0), phys=SimpleNamespace(name="fake"))
    (ex,) = vs.query(ctx, ffi.cast("VkPipeline", 0))
    assert (ex.name, ex.description, ex.subgroup_size) == ("Compute Shader", "the Compute Shader stage", 32)
    assert [(s.name, s.value) for s in ex.statistics] == [("Register Count", 36), ("Spilled", True),
                                                          ("Occupancy", 0.75), ("Delta", -4)]
    assert ex.statistics[0].description == "what Register Count is"
    assert set(seen) == {vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR,
                         vk.VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR}
    lines = format_rows([("statistic", "value", "description"), *[(s.name, str(s.value), s.description)
                                                                   for s in ex.statistics]])
    assert lines[1].startswith("Register Count") and lines[1].split()[2] == "36"
