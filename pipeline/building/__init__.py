"""Stage 2, build: one candidate image of a stack for one cloud, through Packer, recorded
in the catalog. ``imagectl build`` parses its options and calls
``imagectl.building.stage.build_image`` or ``dry_run``; Packer itself is behind
``imagectl.packer``. What a build made, as the catalog records it, is
``imagectl.building.records.BuiltImage`` (validation reads it back): this package's
``__init__`` imports nothing, so that reading it does not load the build's machinery
(Packer, the local disk builder)."""
