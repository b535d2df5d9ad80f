"""The core both sides stand on: the controller (``imagectl``) and the validator
(``imagectl.validators``) import these modules, and nothing here imports either side.

- ``errors``: ``UserError`` and its exit code, the one-paragraph bad-input contract;
- ``fsutil``: atomic writes and bounded reads;
- ``yamlfast``: the YAML loader (C loader when present) with line numbers in errors;
- ``boundedjson``: JSON readers with size and depth limits;
- ``versions``: version strings, parsed and compared;
- ``safetext``: inert text, what a host or an operator wrote made safe to render;
- ``output``: ``--json``, JSON on stdout and the rich console every command prints through;
- ``signals``: the saved-signal-handler type.

``tests/test_import_graph.py`` holds the boundary: ``imagectl.core`` imports only the
standard library, third-party packages and itself
(``test_the_core_imports_nothing_of_imagectl``).
"""
