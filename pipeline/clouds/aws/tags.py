"""EC2 tags on the wire (``[{"Key": ..., "Value": ...}]``) <-> a plain dict."""

from __future__ import annotations


def tag_dict(raw: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw or []}


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]
