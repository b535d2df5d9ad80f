"""Drift: how far the pinned stacks, the promoted images and the running fleet have moved.

One module per source of drift, each returning ``Finding``s (``findings.py``):

- ``upstream.py``: newer driver / fabric manager / NCCL / CUDA builds in NVIDIA's apt
  repository, and driver branches near or past end of life; ``debian.py`` does the same
  for the ``local`` stack against Debian's own archive. Both read package indexes through
  ``indexes.py`` (plain, gzip or xz; ``file://``, ``http(s)://``; HTTP-validator cache
  in ``http_cache.py``) and propose new pins (``proposals.py``, checked by the
  compatibility engine) that ``writeback.py`` writes into the stack file.
- ``replicas.py``: promoted images missing, failed or disagreeing across regions.
- ``fleet.py``: running instances grouped by image, and those not on the current image.
- ``hosts.py``: boot-check receipts whose facts differ from the image's manifest.

``report.py`` renders the findings as a table, JSON or Markdown (a GitHub issue body).
"""
