"""DCGM's tables, read once: run levels per profile, the DCGM_FR_* codes (generated from
DCGM's sources, ``data/dcgm_errors.yaml``) and how each becomes our outcome and action
(``data/dcgm.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from imagectl.core.errors import UserError
from imagectl.core.yamlfast import loads as load_yaml
from imagectl.validators.results import Action, Outcome

DATA = Path(__file__).resolve().parent.parent / "data"


@dataclass(frozen=True)
class Route:
    """What a DCGM finding means for us: outcome, action and the rule's source."""

    outcome: Outcome
    action: Action
    source: str


@dataclass(frozen=True)
class Code:
    number: int
    name: str
    severity: str
    category: str
    message: str
    suggestion: str


@dataclass(frozen=True)
class Level:
    profile: str
    level: int
    timeout_s: float
    source: str


def _load(name: str) -> Any:
    path = DATA / name
    try:
        return load_yaml(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise UserError(f"cannot load the DCGM table: {exc}", where=str(path)) from exc


def _route(entry: dict[str, object]) -> Route:
    return Route(Outcome(entry["outcome"]), Action(entry["action"]), str(entry["source"]))


@dataclass(frozen=True)
class Tables:
    levels: dict[str, Level]
    dcgmi_paths: tuple[str, ...]
    codes: dict[int, Code]
    codes_source: str
    severities: dict[str, Route]
    next_steps: dict[str, Route]
    overrides: dict[str, Route]
    fail_without_code: Route
    run_failures: dict[str, Route]
    skus: dict[str, dict[str, Any]]
    titles: dict[str, str]
    exit_codes: dict[int, str]
    runtime_errors: dict[int, tuple[str, Route]]

    def code(self, number: int) -> Code:
        """The DCGM_FR_* entry; a number DCGM 4.4.1 does not define is UNKNOWN severity."""
        return self.codes.get(
            number,
            Code(number, f"DCGM_FR_<{number}>", "UNKNOWN", "NONE", "", ""),
        )

    def route(self, code: Code) -> Route:
        """Overrides by name, then the code's next step (dcgm_errors.h ``*_NEXT``), then
        its severity (an empty, "N/A" or unlisted next step)."""
        if code.name in self.overrides:
            return self.overrides[code.name]
        step = self.next_steps.get(code.suggestion.strip())
        if step is not None:
            return Route(
                step.outcome,
                step.action,
                f"{code.name} ({code.number}) next step '{code.suggestion.strip()}' "
                f"({self.codes_source.replace('dcgm_errors.c dcgmErrorMeta', 'dcgm_errors.h')}); "
                f"{step.source}",
            )
        sev = self.severities.get(code.severity, self.severities["UNKNOWN"])
        return Route(
            sev.outcome,
            sev.action,
            f"{code.name} ({code.number}): DCGM severity {code.severity}, category "
            f"{code.category} ({self.codes_source}); {sev.source}",
        )

    def title(self, test: str) -> str:
        return self.titles.get(test, f"DCGM test {test}")

    def threshold(self, device_id: str | None, test: str) -> dict[str, object] | None:
        if not device_id:
            return None
        sku = self.skus.get(device_id.lower())
        found: dict[str, Any] | None = (sku or {}).get("thresholds", {}).get(test)
        return found


@lru_cache(maxsize=1)
def tables() -> Tables:
    doc = _load("dcgm.yaml")
    errors = _load("dcgm_errors.yaml")
    codes = {
        int(n): Code(
            int(n),
            e["name"],
            e["severity"],
            e["category"],
            e.get("message", ""),
            e.get("suggestion", ""),
        )
        for n, e in errors["codes"].items()
    }
    return Tables(
        levels={
            p: Level(p, int(v["level"]), float(v["timeout_s"]), v["source"])
            for p, v in doc["levels"].items()
        },
        dcgmi_paths=tuple(doc["dcgmi_paths"]),
        codes=codes,
        codes_source=errors["source"].split(" (commit")[0] + " dcgm_errors.c dcgmErrorMeta",
        severities={k: _route(v) for k, v in doc["severities"].items()},
        next_steps={str(e["text"]).strip(): _route(e) for e in doc["next_steps"]},
        overrides={k: _route(v) for k, v in doc["overrides"].items()},
        fail_without_code=_route(doc["fail_without_code"]),
        run_failures={k: _route(v) for k, v in doc["run_failures"].items()},
        skus={str(k).lower(): v for k, v in doc["skus"].items()},
        titles=dict(doc["tests"]),
        exit_codes={int(k): str(v) for k, v in doc["exit_codes"].items()},
        runtime_errors={
            int(k): (str(v["name"]), _route(v)) for k, v in doc["runtime_errors"].items()
        },
    )
