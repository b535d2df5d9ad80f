"""The NVML layer: replay implements pynvml's surface, capture walks the same call list,
and the checks make no call outside it."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest
from validator_support import SNAPSHOTS, expect_file

from imagectl.validators.checks import specs_for
from imagectl.validators.context import NamedCalls
from imagectl.validators.expectations import from_file
from imagectl.validators.nvml import LiveNvml, ReplayNvml, error_name, field_value
from imagectl.validators.nvml.calls import BY_NAME, SESSION_CALLS
from imagectl.validators.nvml.capture import capture_nvml
from imagectl.validators.runner import run_checks
from imagectl.validators.session import Options, build_context
from imagectl.validators.snapshot import load_snapshot


def _snap(name: str = "healthy/h100-sxm-8x.json") -> dict[str, Any]:
    return load_snapshot(SNAPSHOTS / name)


def test_checks_only_make_calls_from_the_call_list() -> None:
    """What a snapshot captures is exactly what the checks read."""
    for name, base in (
        ("healthy/h100-sxm-8x.json", "h100-sxm-8x"),
        ("healthy/l4-1x.json", "l4-1x"),
    ):
        replay = ReplayNvml(_snap(name)["nvml"])
        ctx = build_context(Options(expect=from_file(expect_file(base)), snapshot=_snap(name)))
        ctx.nvml = NamedCalls(replay)
        run_checks(specs_for("boot"), ctx)
        made = set(replay.calls)
        assert made - set(BY_NAME) - set(SESSION_CALLS) == set()
        assert "nvmlDeviceGetRemappedRows" in made and "nvmlDeviceGetFieldValues" in made


@pytest.mark.parametrize(
    "name", ["healthy/h100-sxm-8x.json", "healthy/a100-sxm-80gb-8x.json", "healthy/l4-1x.json"]
)
def test_capture_of_a_replay_reproduces_the_snapshot(name: str) -> None:
    """Capture walks the call list; on a replayed host it yields the same values back,
    except a deprecated fallback (``Call.fallback_for``) that is no longer called where
    the newer function answered (older snapshots recorded both)."""
    snap = _snap(name)
    captured = capture_nvml(ReplayNvml(snap["nvml"]))
    common = snap["nvml"].get("common", {})
    fallbacks = {c.name: c.fallback_for for c in BY_NAME.values() if c.fallback_for}
    for i, device in enumerate(snap["nvml"]["devices"]):
        full = {**common, **device}
        for old, new in fallbacks.items():
            if full.get(new) != {"$error": "FUNCTION_NOT_FOUND"}:
                full.pop(old, None)
        assert captured["devices"][i] == full
    assert captured["system"] == snap["nvml"]["system"]


def test_replay_raises_pynvml_error_classes() -> None:
    nvml = ReplayNvml(_snap("faults/h100-sxm-8x--inforom-corrupt.json")["nvml"])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(6)
    with pytest.raises(pynvml.NVMLError_CorruptedInforom):
        nvml.nvmlDeviceValidateInforom(h)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        nvml.nvmlDeviceGetBoardId(h)  # not in the snapshot: a function the driver lacks
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(8)
    mem = nvml.nvmlDeviceGetMemoryInfo(h)
    assert isinstance(mem, pynvml.c_nvmlMemory_t) and mem.total == 81559 * 2**20
    assert nvml.nvmlDeviceGetPciInfo_v3(h).busId == "00000000:BA:00.0"
    assert field_value(nvml, h, pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) == 0
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    nvml.nvmlDeviceGetGpuFabricInfoV(h, info)
    assert info.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    # older binding name resolves to the same recorded value
    assert nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h) == 0x1


def test_replay_init_errors() -> None:
    nvml = ReplayNvml(_snap("faults/h100-sxm-8x--driver-library-mismatch.json")["nvml"])
    with pytest.raises(pynvml.NVMLError_LibRmVersionMismatch):
        nvml.nvmlInit()


def test_live_backend_without_a_driver_raises_library_not_found() -> None:
    """This machine has no libnvidia-ml.so.1: the real pynvml says so, by class."""
    import ctypes.util

    if ctypes.util.find_library("nvidia-ml"):
        pytest.skip("an NVIDIA driver is installed on this machine")
    with pytest.raises(pynvml.NVMLError_LibraryNotFound) as exc:
        LiveNvml().nvmlInit()
    assert error_name(exc.value) == "LIBRARY_NOT_FOUND"
    snap = capture_nvml(LiveNvml())
    assert snap == {"init": {"error": "LIBRARY_NOT_FOUND"}, "system": {}, "devices": []}


def test_live_backend_resolves_versioned_names() -> None:
    live = LiveNvml()
    assert live.nvmlDeviceGetPciInfo_v3 is not None
    fn = live.nvmlDeviceGetCurrentClocksEventReasons
    assert callable(fn)
    with pytest.raises(AttributeError):
        live.nvmlDeviceGetNoSuchThing  # noqa: B018


@pytest.mark.parametrize("name", ["nvmlDeviceGetSramEccErrorStatus", "nvmlDeviceGetGpuFabricInfoV"])
def test_a_versioned_structure_without_its_version_is_refused_as_nvml_does(name: str) -> None:
    """nvml.h: the caller sets ``version`` in a versioned structure, and NVML refuses one it
    does not take with ARGUMENT_VERSION_MISMATCH (driver 580.159.04 on a real H200 did so
    for nvmlDeviceGetSramEccErrorStatus, 2026-11-28). The replay refuses a structure whose
    version is not the one nvml.h names, as strictly."""
    from imagectl.validators.nvml.calls import new_struct

    recorded = {
        "nvmlDeviceGetSramEccErrorStatus": {"bThresholdExceeded": 0, "aggregateUncParity": 0},
        "nvmlDeviceGetGpuFabricInfoV": {"state": 3, "status": 0, "cliqueId": 1, "healthMask": 0},
    }
    nvml = ReplayNvml({"system": {"nvmlDeviceGetCount": 1}, "devices": [recorded]})
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    bare = getattr(pynvml, BY_NAME[name].struct or "")()
    bare.version = 0
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        getattr(nvml, name)(handle, bare)
    assert getattr(nvml, name)(handle, new_struct(name)) == pynvml.NVML_SUCCESS


def test_live_structure_calls_pass_a_pointer_as_nvml_h_declares(monkeypatch) -> None:
    """nvml.h declares ``nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t,
    nvmlGpuFabricInfoV_t *)``. The stand-in below is the C side of that declaration: it
    reads the version through the pointer and writes the fields back, as libnvidia-ml does.
    nvidia-ml-py's wrapper hands ctypes the structure itself (by value), which crashed a
    real H200 host (driver 580.159.04, SIGSEGV in capture) and here cannot even be passed;
    the live backend passes a pointer."""
    import ctypes

    from imagectl.validators.nvml.calls import new_struct

    seen: list[int] = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    def libnvidia_ml(handle: int | None, ptr: int | None) -> int:
        info = ctypes.cast(ptr, ctypes.POINTER(pynvml.c_nvmlGpuFabricInfo_v2_t)).contents
        seen.append(info.version)
        if info.version != pynvml.nvmlGpuFabricInfo_v2:
            return int(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        info.state, info.cliqueId, info.healthMask = 3, 7, 0
        return int(pynvml.NVML_SUCCESS)

    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", lambda name: libnvidia_ml)
    with pytest.raises(ctypes.ArgumentError):  # nvidia-ml-py's own: the structure by value
        pynvml.nvmlDeviceGetGpuFabricInfoV(None, new_struct("nvmlDeviceGetGpuFabricInfoV"))
    info = new_struct("nvmlDeviceGetGpuFabricInfoV")
    assert LiveNvml().nvmlDeviceGetGpuFabricInfoV(None, info) == pynvml.NVML_SUCCESS
    assert (info.state, info.cliqueId) == (3, 7) and seen == [pynvml.nvmlGpuFabricInfo_v2]
    fill_calls = [c.name for c in BY_NAME.values() if c.kind == "fill"]
    for name in fill_calls:  # every structure-filling call goes the same way
        assert LiveNvml().__getattr__(name).__qualname__ == "_by_reference.<locals>.fill", name
