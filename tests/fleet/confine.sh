#!/bin/bash
# Run a command under part of a unit's confinement, without systemd (for tests, as root,
# inside `unshare --mount [--net]`): confine.sh CAPS RW[:RW...] -- COMMAND...
#   ProtectSystem=strict   every mount but /proc, /sys, /dev and the RW folders read-only
#   ReadWritePaths=RW...   those folders writable
#   PrivateTmp=yes         a private, empty /tmp and /var/tmp
#   NoNewPrivileges=yes and CapabilityBoundingSet=CAPS (setpriv: "+syslog,+sys_admin"; "")
# $CONFINE_KEEP (folders, colon-separated): the installation the command runs from (on a
# node /opt/imagectl; in a test the checkout and its venv, which may sit under /tmp), seen
# read-only through the private /tmp as the unit sees /opt.
# Device ACLs, system call filters and the Protect*/Restrict* kernel settings need systemd
# itself; systemd-analyze security judges those from the unit file.
set -euo pipefail
caps=$1
IFS=: read -r -a rw <<<"$2"
shift 3
IFS=: read -r -a ro <<<"${CONFINE_KEEP:-}"
mount -t tmpfs -o mode=0700 tmpfs /mnt
for i in "${!ro[@]}"; do
  mkdir -p "/mnt/r$i"
  mount --bind "${ro[$i]}" "/mnt/r$i"
done
for i in "${!rw[@]}"; do
  mkdir -p "/mnt/h$i"
  mount --bind "${rw[$i]}" "/mnt/h$i"
done
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /var/tmp
for i in "${!ro[@]}"; do
  mkdir -p "${ro[$i]}"
  mount --bind "/mnt/r$i" "${ro[$i]}"
done
for i in "${!rw[@]}"; do
  mkdir -p "${rw[$i]}"
  mount --bind "/mnt/h$i" "${rw[$i]}"
done
keep=" /tmp /var/tmp /mnt ${rw[*]} "
awk '{print $2}' /proc/self/mounts | sort -u | while read -r mp; do
  case "$mp" in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
  case "$keep" in *" $mp "*) continue ;; esac
  mount -o remount,bind,ro "$mp" 2>/dev/null || true
done
exec setpriv --no-new-privs --bounding-set "-all${caps:+,$caps}" --inh-caps=-all -- "$@"
