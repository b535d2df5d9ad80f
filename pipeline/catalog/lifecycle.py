"""The image lifecycle: states and the allowed transitions, as data in one place.

Every image row (one per cloud and region) is in exactly one state. ``TRANSITIONS`` below
is the only definition of which moves are legal; ``repository.set_state`` enforces it and
writes an event for every move. Pure Python: importing this module loads no SQLAlchemy.

=====================  ==============================================================
from                   allowed targets (why)
=====================  ==============================================================
built                  validating (validation started); deleted (build abandoned)
validating             validated (all receipts pass); blocked (a receipt failed or
                       asked for BLOCK_IMAGE); inconclusive (no usable verdict)
inconclusive           validating (retry); blocked (manual block); deleted
validated              promoting (promotion started); blocked (manual block);
                       deprecated (superseded without ever being promoted)
promoting              promoted (every target region switched); partially_promoted
                       (some switched); validated / inconclusive (no region switched:
                       back to the state the promotion started from)
partially_promoted     promoting (resume); rolled_back; deprecated
promoted               rolled_back (pointers moved back); deprecated (superseded)
rolled_back            deprecated; deleted
blocked                deleted
deprecated             deleted
deleted                (terminal)
=====================  ==============================================================

``FORCED_TRANSITIONS`` lists the moves that are legal only when forced with a reason
(recorded in the event): promoting an ``inconclusive`` or a ``blocked`` image.
"""

from __future__ import annotations

from enum import Enum

from imagectl.core.errors import UserError


class ImageState(str, Enum):
    BUILT = "built"
    VALIDATING = "validating"
    VALIDATED = "validated"
    BLOCKED = "blocked"
    INCONCLUSIVE = "inconclusive"
    PROMOTING = "promoting"
    PROMOTED = "promoted"
    PARTIALLY_PROMOTED = "partially_promoted"
    ROLLED_BACK = "rolled_back"
    DEPRECATED = "deprecated"
    DELETED = "deleted"

    def __str__(self) -> str:  # the word itself in tags, labels and messages
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


S = ImageState

TRANSITIONS: dict[ImageState, frozenset[ImageState]] = {
    S.BUILT: frozenset({S.VALIDATING, S.DELETED}),
    S.VALIDATING: frozenset({S.VALIDATED, S.BLOCKED, S.INCONCLUSIVE}),
    S.INCONCLUSIVE: frozenset({S.VALIDATING, S.BLOCKED, S.DELETED}),
    S.VALIDATED: frozenset({S.PROMOTING, S.BLOCKED, S.DEPRECATED}),
    S.PROMOTING: frozenset({S.PROMOTED, S.PARTIALLY_PROMOTED, S.VALIDATED, S.INCONCLUSIVE}),
    S.PARTIALLY_PROMOTED: frozenset({S.PROMOTING, S.ROLLED_BACK, S.DEPRECATED}),
    S.PROMOTED: frozenset({S.ROLLED_BACK, S.DEPRECATED}),
    S.ROLLED_BACK: frozenset({S.DEPRECATED, S.DELETED, S.BLOCKED}),  # BLOCKED: revoked
    S.BLOCKED: frozenset({S.DELETED}),
    S.DEPRECATED: frozenset({S.DELETED}),
    S.DELETED: frozenset(),
}

FORCED_TRANSITIONS: dict[ImageState, frozenset[ImageState]] = {
    S.INCONCLUSIVE: frozenset({S.PROMOTING}),
    S.BLOCKED: frozenset({S.PROMOTING}),  # `imagectl promote --force --reason` (promotion)
}

# Groupings used by `imagectl status` and by callers choosing images.
CANDIDATE_STATES = (S.BUILT, S.VALIDATING, S.VALIDATED)
LIVE_STATES = (S.PROMOTED, S.PARTIALLY_PROMOTED)


class IllegalTransition(UserError):
    """A state change the lifecycle table does not allow (exit 2)."""

    def __init__(self, image: str, current: ImageState, target: ImageState):
        self.image = image
        self.current = current
        self.target = target
        self.allowed = sorted(s.value for s in TRANSITIONS[current])
        allowed = ", ".join(self.allowed) or "none: it is a final state"
        super().__init__(
            f"image {image} cannot go from '{current.value}' to '{target.value}'; "
            f"allowed from '{current.value}': {allowed}",
            hint="See the transition table in imagectl/catalog/lifecycle.py",
        )


def parse_state(value: str | ImageState) -> ImageState:
    """The ``ImageState`` named ``value``; a clear UserError for an unknown name."""
    if isinstance(value, ImageState):
        return value
    try:
        return ImageState(value)
    except ValueError:
        names = ", ".join(s.value for s in ImageState)
        raise UserError(f"unknown image state '{value}'", hint=f"Use one of: {names}") from None


def check_transition(
    image: str, current: str | ImageState, target: str | ImageState, *, forced: bool = False
) -> ImageState:
    """Return the target state if ``current -> target`` is legal, else raise."""
    cur, tgt = parse_state(current), parse_state(target)
    if tgt in TRANSITIONS[cur]:
        return tgt
    if forced and tgt in FORCED_TRANSITIONS.get(cur, frozenset()):
        return tgt
    raise IllegalTransition(image, cur, tgt)
