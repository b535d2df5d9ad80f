"""Stage 2, build: one candidate image of a stack for one cloud, through Packer, recorded
in the catalog. ``imagectl build`` parses its options and calls ``build_image`` or
``dry_run``; Packer itself is behind ``imagectl.packer``."""

from imagectl.building.stage import BuildOutcome, BuildRequest, DryRun, build_image, dry_run

__all__ = ["BuildOutcome", "BuildRequest", "DryRun", "build_image", "dry_run"]
