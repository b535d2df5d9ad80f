"""imagectl's own thin layer over the ``packer`` binary.

One module per job: ``binary`` finds packer and checks its version, ``templates``
stages a template folder for the binary at hand (Packer 1.6.6 knows no plugin blocks),
``command`` builds the command lines, ``machine_readable`` parses ``-machine-readable``
output into events, ``runner`` streams a run with a timeout and clean cancellation,
``manifest`` reads the manifest post-processor's artifacts, and ``build`` ties them to
a resolved stack (``run_build``).
"""

from __future__ import annotations

from imagectl.packer.binary import MIN_VERSION, PackerBinary, find_packer
from imagectl.packer.machine_readable import PackerEvent, parse_line
from imagectl.packer.manifest import Artifact, read_manifest
from imagectl.packer.runner import PackerCancelled, PackerFailed, PackerRun, PackerTimeout, run

__all__ = [
    "MIN_VERSION",
    "Artifact",
    "PackerBinary",
    "PackerCancelled",
    "PackerEvent",
    "PackerFailed",
    "PackerRun",
    "PackerTimeout",
    "find_packer",
    "parse_line",
    "read_manifest",
    "run",
]
