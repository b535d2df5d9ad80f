"""What a promotion returns and the callback it reports progress to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from imagectl.core.errors import EXIT_FAILED, EXIT_OK

Progress = Callable[[str, str, str], None]  # (region, step, detail)


@dataclass
class RegionResult:
    region: str
    state: str  # done | failed | not_attempted (a resume's --regions did not name it)
    replica_id: str | None = None
    error: str | None = None
    seconds: float = 0.0
    resumed: bool = False


@dataclass
class PromotionResult:
    stack: str
    cloud: str
    image_id: str  # the cloud id of the promoted (source) image
    image_pk: int
    state: str  # promoted | partially_promoted | failed | already_promoted | dry_run
    promotion_id: int | None = None
    regions: dict[str, RegionResult] = field(default_factory=dict)
    pointer_flipped: bool = False
    previous_pointers: dict[str, str | None] = field(default_factory=dict)
    forced: bool = False
    overridden: list[str] = field(default_factory=list)
    deprecated: list[str] = field(default_factory=list)
    retention_skipped: list[str] = field(default_factory=list)
    resume_command: str | None = None
    resumed: bool = False
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        if self.state in ("promoted", "already_promoted", "dry_run"):
            return EXIT_OK
        return EXIT_FAILED

    def to_dict(self) -> dict[str, object]:

        return asdict(self)


class RegionFailed(Exception):
    def __init__(self, step: str, message: str, *, new_token: bool = False):
        self.step = step
        self.new_token = new_token
        super().__init__(message)
