"""The one check for every path that decides what imagectl trusts.

A path decides trust when what it holds (or names) is believed without further proof: a
trust file of attestation keys, the state folder's ``settings.toml`` (it names the trust
file), a revocation list and the versions kept of it, a signing key, a folder written into a
``.pth`` file (every module in it is imported as the validator's own). Whoever can change
such a path, or any folder above it, decides what is trusted. ``refusal(path, what)``
says why ``path`` cannot be trusted, or None when it can:

- every part of it, symlinks resolved, and every folder above it up to ``/`` (for a
  symlink, the folders above the link too) belongs to this user or root, and
- none of them is writable by its group or by others, except a folder with the sticky bit
  (as ``/tmp`` is: others cannot replace or rename what they do not own in it).

This is ssh's StrictModes rule for ``authorized_keys`` applied to the whole path. The
offline installer ships this file beside ``install.py`` and loads it only after every
file of the bundle has been checked, so it is standard library only and its syntax is
Python 3.7's.
"""

import os
import stat

MODE_OTHERS = 0o022  # group- or world-writable


def _why(exc):
    return str(getattr(exc, "strerror", None) or exc)


def _chain(path):
    """``path`` and every folder above it, nearest first."""
    out = [path]
    while True:
        parent = os.path.dirname(out[-1])
        if parent == out[-1]:
            return out
        out.append(parent)


def refusal(path, what, owners=None):
    """Why the ``what`` at ``path`` cannot be trusted (one paragraph naming the file and
    the fix), or None when it can. A path that does not exist is refused too."""
    owners = set(owners) if owners is not None else {os.geteuid(), 0}
    shown_path = os.fspath(path)
    absolute = os.path.abspath(shown_path)
    try:
        target = os.path.realpath(absolute)
        os.stat(target)
    except OSError as exc:
        return f"cannot read the {what} {shown_path}: {_why(exc)}"
    items = [(p, "") for p in _chain(target)]
    if target != absolute:  # a symlink somewhere: the link's own folders decide too
        seen = set(_chain(target))
        items += [(p, " of the link") for p in _chain(os.path.dirname(absolute)) if p not in seen]
    for item, link in items:
        try:
            st = os.stat(item)
        except OSError as exc:
            return f"cannot read the {what} {shown_path}: {_why(exc)}"
        mode = stat.S_IMODE(st.st_mode)
        folder = stat.S_ISDIR(st.st_mode)
        sticky = folder and item != target and mode & stat.S_ISVTX
        if st.st_uid in owners and not (mode & MODE_OTHERS and not sticky):
            continue
        kind = ("the folder" if folder else "the file") + link
        shown = f"{item} ({kind} of {shown_path})" if item != shown_path else item
        if st.st_uid not in owners:
            why = f"owned by uid {st.st_uid}, not this user or root"
            fix = f"chown {item} to this user or root"
        else:
            why = f"writable by others (mode {mode:04o})"
            fix = f"chmod go-w {item}"
        return (
            f"the {what} {shown_path} is refused: {shown} is {why}; whoever can change it "
            f"decides what imagectl trusts. Fix: {fix} (or move the {what} where only you and "
            "root can write)"
        )
    return None
