"""imagectl: build, validate and promote GPU machine images."""

__version__ = "0.1.0"
