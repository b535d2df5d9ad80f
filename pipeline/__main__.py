"""``python -m imagectl``: the command line (the validator re-runs itself this way under
its toolkit venv's interpreter, ``imagectl.validators.toolkit_venv``)."""

from imagectl.cli.common import entrypoint

if __name__ == "__main__":
    entrypoint()
