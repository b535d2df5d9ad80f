#!/bin/sh
# Remove what a build leaves in an image that must not ship, in one run (the hygiene
# role; a booted build under emulation pays seconds per Ansible module, a shell script
# none). Prints one line per thing it removed or reset, nothing when the image is
# already clean: the role reports "changed" exactly then.
#
#   clean-image.sh [--user=NAME]... [--] [PATH]...
#
# --user=NAME   a user the build logged in as: its ~/.ssh/authorized_keys goes (the home
#               folder from the user database; a user it lacks is skipped). The user sudo
#               ran this for ($SUDO_USER, a cloud build's login user) is always one.
# PATH          a file or folder to remove (temporary credentials, build leftovers).
#
# Also removed: SSH host keys (/etc/ssh/ssh_host_*: the first boot makes new ones),
# apt's downloaded packages (only those: apt rebuilds pkgcache.bin on every use), users'
# shell histories under /home; cloud-init's state (`cloud-init clean --logs --seed`,
# when cloud-init is installed and has state); /etc/machine-id is emptied (0444, root:
# the first boot makes a new one, systemd's machine-id(5) "first boot" semantics).
set -eu

users="${SUDO_USER:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --user=*) users="$users ${1#--user=}"; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done

# rm --verbose names what it removed (GNU coreutils: "removed 'PATH'").
remove() { rm --recursive --force --verbose -- "$@"; }

for path in "$@"; do remove "$path"; done
find /etc/ssh -maxdepth 1 -type f -name 'ssh_host_*' -exec rm --force --verbose -- {} +
for dir in /var/cache/apt/archives /var/cache/apt/archives/partial; do
  [ -d "$dir" ] && find "$dir" -maxdepth 1 -type f -name '*.deb' -exec rm --force --verbose -- {} +
done
[ -d /home ] && find /home -maxdepth 2 -type f \( -name .bash_history -o -name .python_history \) \
  -exec rm --force --verbose -- {} +
for user in $users; do
  home=$(getent passwd "$user" | cut -d: -f6) || continue
  [ -n "$home" ] && remove "$home/.ssh/authorized_keys"
done

if [ -x /usr/bin/cloud-init ]; then
  state=$(find /var/lib/cloud /var/log -maxdepth 1 \
    \( -name instance -o -name 'cloud-init*.log' -o -name seed \) -print 2>/dev/null || true)
  if [ -n "$state" ]; then
    cloud-init clean --logs --seed >/dev/null
    echo "cloud-init clean --logs --seed"
  fi
fi

id=/etc/machine-id
if [ -s "$id" ] || [ ! -f "$id" ] || [ "$(stat -c '%a %U %G' "$id")" != "444 root root" ]; then
  : > "$id"
  chown root:root "$id"
  chmod 0444 "$id"
  echo "emptied $id"
fi
