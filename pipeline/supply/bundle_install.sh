#!/bin/sh
# Install the imagectl validator from this bundle, offline, into a new virtual environment:
#   sh install.sh --prefix DIR [--python PYTHON] [--host-site-packages]
# --python picks the interpreter (default python3); install.py (standard library only)
# checks the Python, every file's sha256 (and that nothing else is here), and installs
# with no package index.
set -eu
here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
python=python3
n=$#
while [ "$n" -gt 0 ]; do
  arg=$1
  shift
  n=$((n - 1))
  case $arg in
    --python)
      [ "$n" -gt 0 ] || { echo "error: --python needs an interpreter" >&2; exit 2; }
      python=$1
      shift
      n=$((n - 1))
      ;;
    --python=*) python=${arg#--python=} ;;
    *) set -- "$@" "$arg" ;;
  esac
done
if ! command -v "$python" >/dev/null 2>&1; then
  echo "error: no Python interpreter '$python' on this host: pass --python /path/to/python3" >&2
  exit 2
fi
# -I: neither this folder, the working directory, PYTHON* variables nor the user's site
# are on sys.path (nothing planted in the bundle is imported); -S: no site hooks
exec "$python" -I -S "$here/install.py" "$@"
