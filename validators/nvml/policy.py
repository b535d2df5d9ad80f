"""What NVML's answers mean (``validators/data/nvml.yaml``): error codes, the calls an
architecture must answer, NVLink link states, the fabric health mask, and what MIG does to
a GPU's NVLinks per architecture."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.results import Action

DATA = Path(__file__).resolve().parent.parent / "data" / "nvml.yaml"


@dataclass(frozen=True)
class ErrorRule:
    name: str
    skip: bool
    action: Action
    source: str


@dataclass(frozen=True)
class MinArch:
    arch: int
    source: str


@dataclass(frozen=True)
class LinkState:
    name: str
    healthy: bool


@dataclass(frozen=True)
class HealthField:
    name: str
    shift: int
    width: int
    bad: dict[int, str]
    action: Action
    source: str

    def value(self, mask: int) -> int:
        return (mask >> self.shift) & self.width


@dataclass(frozen=True)
class MigNvlink:
    """With MIG enabled on a GPU of this architecture, are its NVLinks expected off?"""

    links_off: bool
    source: str


@dataclass(frozen=True)
class NvmlPolicy:
    errors: dict[str, ErrorRule]
    min_arch: dict[str, MinArch]
    peer_action: Action
    peer_source: str
    link_states: dict[int, LinkState]
    link_states_source: str
    fabric_fields: tuple[HealthField, ...]
    fabric_source: str
    mig_nvlink: dict[int, MigNvlink]
    mig_nvlink_default: MigNvlink

    def error(self, name: str) -> ErrorRule:
        return self.errors.get(name) or self.errors["default"]

    def mig_links(self, arch: int | None) -> MigNvlink:
        """What MIG does to the NVLinks of a GPU of architecture ``arch`` (nvml.h
        nvmlDeviceArchitecture_t; None: unknown, the default)."""
        if arch is None:
            return self.mig_nvlink_default
        return self.mig_nvlink.get(arch, self.mig_nvlink_default)


def _mig(v: dict[str, object]) -> MigNvlink:
    if v["links"] not in ("off", "on"):
        raise ValueError(f"mig_nvlink: links must be 'off' or 'on', not {v['links']!r}")
    return MigNvlink(v["links"] == "off", str(v["source"]))


def _rule(name: str, v: dict[str, object]) -> ErrorRule:
    skip = v["outcome"] == "skip"
    action = Action.NONE if skip else Action(v["action"])
    if not skip and action == Action.NONE:
        raise ValueError(f"errors.{name}: a failing NVML error needs an action other than NONE")
    return ErrorRule(name, skip, action, str(v["source"]))


@lru_cache(maxsize=1)
def nvml_policy() -> NvmlPolicy:
    try:
        doc = load_yaml(DATA.read_text(encoding="utf-8"))
        states = doc["nvlink_states"]
        fabric = doc["fabric_health"]
        return NvmlPolicy(
            errors={k: _rule(k, v) for k, v in doc["errors"].items()},
            min_arch={k: MinArch(int(v["arch"]), v["source"]) for k, v in doc["min_arch"].items()},
            peer_action=Action(doc["peer_unsupported"]["action"]),
            peer_source=doc["peer_unsupported"]["source"],
            link_states={
                int(k): LinkState(v["name"], bool(v["healthy"]))
                for k, v in states["values"].items()
            },
            link_states_source=states["source"],
            fabric_fields=tuple(
                HealthField(
                    name,
                    int(f["shift"]),
                    int(f["width"]),
                    {int(k): str(t) for k, t in f["bad"].items()},
                    Action(f["action"]),
                    f["source"],
                )
                for name, f in fabric["fields"].items()
            ),
            fabric_source=fabric["source"],
            mig_nvlink={int(k): _mig(v) for k, v in doc["mig_nvlink"]["arch"].items()},
            mig_nvlink_default=_mig(doc["mig_nvlink"]["default"]),
        )
    except Exception as exc:
        raise UserError(
            f"{DATA}: cannot load the validator's NVML rules: {exc}. Restore the file from "
            "the imagectl release."
        ) from exc
