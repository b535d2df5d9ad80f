"""The validator's host-side commands: ``imagectl validate``, ``snapshot``, ``collectives``
and ``verify-node``, run on a GPU host or a fleet node.

They live with the validator and import only it and ``imagectl.core``
(``tests/test_import_graph.py``); the controller's ``imagectl`` group registers them by
module name (``imagectl.cli.COMMANDS``) and hands in what only it knows (the workspace,
a stack's expectations, shell completion) through ``controller.ControllerHooks``.
"""
