"""Which fragment dtypes the Vulkan runtime multiplies as cooperative matrices (runtime/vulkan_props.py): the
configurations ``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` lists, the features, the structs the device is
created with, and ``IRON_VULKAN_COOPMAT``. No device needed (what a real one reports: test_coopmat_gpu.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from iron.runtime import vulkan_props as vp
from iron.runtime.vulkan_device import coopmat_mode

F16, F32, BF16, SUBGROUP, WORKGROUP = 0, 1, vp.BF16_COMPONENT, 3, 2


def _feats(coop=True, vmm=True, bf16=(1, 1)):
    bf = None if bf16 is None else SimpleNamespace(shaderBFloat16Type=bf16[0], shaderBFloat16CooperativeMatrix=bf16[1])
    return SimpleNamespace(coop=SimpleNamespace(cooperativeMatrix=int(coop)),
                           f12=SimpleNamespace(vulkanMemoryModel=int(vmm)), bf16=bf)


def _config(a=F16, m=16, n=16, k=16, c=F32, sat=0, scope=SUBGROUP):
    return (m, n, k, a, a, c, c, sat, scope)


# what NVIDIA's driver lists (abridged): 16x16x16 and 16x8x16 in f16 -> f16/f32, bf16 -> f32, int8
NVIDIA = [_config(F16, c=F16), _config(F16), _config(F16, n=8), _config(BF16), _config(3, k=32, c=5)]


@pytest.mark.parametrize("configs, feats, api, want", [
    (NVIDIA, _feats(), vp.API_1_3, {"f16", "bf16"}),
    (NVIDIA, _feats(bf16=None), vp.API_1_3, {"f16"}),  # no VK_KHR_shader_bfloat16
    (NVIDIA, _feats(bf16=(1, 0)), vp.API_1_3, {"f16"}),  # bfloat16 type without bfloat16 matrices
    (NVIDIA, _feats(coop=False), vp.API_1_3, set()),
    (NVIDIA, _feats(vmm=False), vp.API_1_3, set()),  # the extension needs the Vulkan memory model
    (NVIDIA, _feats(), vp.API_1_2, set()),  # and SPIR-V 1.6
    ([_config(F16, n=8), _config(F16, c=F16)], _feats(), vp.API_1_3, set()),  # no 16x16x16 with f32 C
    ([_config(F16, sat=1)], _feats(), vp.API_1_3, set()),
    ([_config(F16, scope=WORKGROUP)], _feats(), vp.API_1_3, set()),
    ([_config(BF16)], _feats(), vp.API_1_3, {"bf16"}),
    ([], _feats(), vp.API_1_3, set()),
])
def test_coopmat_dtypes(configs, feats, api, want):
    assert vp.coopmat_dtypes(configs, feats, api) == frozenset(want)


def test_coopmat_dtypes_without_the_extension():
    feats = SimpleNamespace(coop=None, f12=SimpleNamespace(vulkanMemoryModel=1), bf16=None)
    assert vp.coopmat_dtypes(NVIDIA, feats, vp.API_1_3) == frozenset()


@pytest.mark.parametrize("value, mode", [(None, "auto"), ("1", "auto"), ("0", "off"), ("emulate", "emulate"),
                                         (" Emulate ", "emulate"), ("yes", "auto")])
def test_coopmat_mode(monkeypatch, value, mode):
    if value is None:
        monkeypatch.delenv("IRON_VULKAN_COOPMAT", raising=False)
    else:
        monkeypatch.setenv("IRON_VULKAN_COOPMAT", value)
    assert coopmat_mode() == mode


@pytest.fixture(scope="module")
def vkffi():
    try:
        import vulkan
        from vulkan import ffi
    except Exception as e:  # no package or no loader
        pytest.skip(f"the vulkan package does not load here: {type(e).__name__}")
    return vulkan, ffi


def test_bf16_feature_struct_layout(vkffi):
    """VkPhysicalDeviceShaderBfloat16FeaturesKHR in raw memory: sType, pNext, then the three VkBool32."""
    vk, ffi = vkffi
    head = ffi.new("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*")
    s = vp._Bf16Features(ffi, head, {"shaderBFloat16Type": 1, "shaderBFloat16CooperativeMatrix": 1})
    base = ffi.cast("VkBaseOutStructure*", s.pointer)
    assert base.sType == 1000141000 and ffi.cast("void*", base.pNext) == ffi.cast("void*", head)
    assert (s.shaderBFloat16Type, s.shaderBFloat16DotProduct, s.shaderBFloat16CooperativeMatrix) == (1, 0, 1)
    words = ffi.cast("uint32_t*", s.pointer)
    assert [words[i] for i in (4, 5, 6)] == [1, 0, 1]  # offsets 16, 20, 24 on a 64-bit host


def test_coopmat_chain(vkffi):
    vk, ffi = vkffi
    head = ffi.new("VkPhysicalDeviceVulkan12Features*")
    assert vp.coopmat_chain(vk, ffi, head, frozenset()) == (head, [], [])
    new, keep, exts = vp.coopmat_chain(vk, ffi, head, frozenset({"f16"}))
    assert exts == [vp.COOPMAT] and new.cooperativeMatrix == 1 and ffi.cast("void*", new.pNext) == ffi.cast(
        "void*", head)
    new, keep, exts = vp.coopmat_chain(vk, ffi, head, frozenset({"f16", "bf16"}))
    assert exts == [vp.COOPMAT, vp.BF16] and len(keep) == 2
    first = ffi.cast("VkBaseOutStructure*", new)
    assert first.sType == vp.BF16_STYPE
    coop = ffi.cast("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*", first.pNext)
    assert coop.sType == vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
    assert coop.cooperativeMatrix == 1 and ffi.cast("void*", coop.pNext) == ffi.cast("void*", head)
