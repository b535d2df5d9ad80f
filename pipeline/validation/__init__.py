"""Validation runs of candidate images: launch, validate through Ansible, decide.

- ``decide.py``: receipts in, decision out (pure; the rules live here).
- ``classify.py`` + ``check_classes.yaml``: which checks are image-level vs hardware.
- ``receipts.py``: load a fetched receipt and bind it to the candidate.
- ``inventory.py``: host variables, and the documented inventory override (test mode).
- ``fanout.py``: ansible-runner over playbooks/validate.yml.
- ``run.py``: the orchestration (launch with zone fallback, retry host problems,
  terminate always).
- ``records.py``: the catalog side; ``progress.py``: live progress; ``signals.py``:
  SIGINT/SIGTERM handling.
"""
