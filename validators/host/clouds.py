"""The clouds as the validator knows them on a host, read from ``data/clouds.yaml``: how
each one's instance metadata names the booted image, and where its CLI keeps credentials.
Nothing here names a cloud; the data does (one entry per cloud imagectl registers)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from imagectl.core.errors import UserError
from imagectl.validators.catalogs import DATA, _load
from imagectl.validators.identity import Grammar


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Request(_Strict):
    method: str = "GET"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    header: str = ""  # a token's answer goes into the field requests under this header


class FieldSource(_Strict):
    url: str = ""
    file: str = ""
    format: str = ""  # "" (the body, stripped) | arm_image_reference


class Metadata(_Strict):
    token: Request | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    fields: dict[str, FieldSource]
    source: str


class CloudHints(_Strict):
    dmi_vendor: str
    metadata: Metadata
    credential_files: list[str] = Field(default_factory=list)
    credentials_source: str = ""
    identity: Grammar | None = None  # read by imagectl.validators.identity


class CloudsFile(_Strict):
    clouds: dict[str, CloudHints]
    other_credential_files: list[str] = Field(default_factory=list)


@lru_cache(maxsize=1)
def cloud_hints() -> CloudsFile:
    try:
        return CloudsFile.model_validate(_load("clouds.yaml"))
    except ValidationError as exc:
        raise UserError(f"{DATA / 'clouds.yaml'}: {exc.errors()[0]['msg']}") from exc


def credential_files() -> tuple[str, ...]:
    """Every credential file a home folder may hold: each cloud's CLI's, then the rest."""
    data = cloud_hints()
    found = [f for hints in data.clouds.values() for f in hints.credential_files]
    return tuple(dict.fromkeys([*found, *data.other_credential_files]))
