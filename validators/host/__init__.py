"""Host facts (software, packages, services, files) and the kernel log, live or replayed."""
