"""Multi-node validation (``imagectl validate-image --nodes N``): N hosts of the shape in
the cloud's placement, each validated alone (one receipt per node, as ever), then the
collectives across them (playbooks/fabric.yml runs ``imagectl collectives`` on every node
at once), judged against the interconnect's floor, a failure attributed to a node or to
the fabric, and recorded as the fabric receipt the gate requires where the stack's
``validation.nodes`` > 1.

Files: measure.py (one collective run across some nodes: the playbook, the nodes' JSON),
judge.py (the nodes' measurements -> one run's verdict), attribution.py (node or fabric:
pure), receipt.py (the fabric receipt: what the catalog stores and the gate reads),
phase.py (the whole phase, pairs included, for a ValidationRun).
"""
