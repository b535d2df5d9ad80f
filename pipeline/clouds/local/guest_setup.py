"""Files written into the base root file system: what makes a debootstrap tree a VM.

Each entry says why it is there (measured under TCG on a 2-core machine, see
shared/reference/testing-without-cloud-or-gpu.md): DHCP through systemd-networkd,
QEMU's user-mode DNS, an ed25519 host key generated at first boot (none baked in),
no initramfs rebuilds in the guest, no apt timers, and a per-boot SSH key handed in by
QEMU's fw_cfg for the validation boot (the image carries no key of its own after the
hygiene role).
"""

from __future__ import annotations

# Path inside the guest of the per-boot key (fw_cfg name opt/imagectl/authorized_keys).
FW_CFG_KEY_NAME = "opt/imagectl/authorized_keys"
# The instance's logins, as a cloud's guest agent would create them from the cloud's own
# metadata (AWS: the key pair for the AMI's default user; GCP: metadata ssh-keys USER:KEY;
# Azure: osProfile.adminUsername + ssh.publicKeys): one "USER KEY" line each. The local
# cloud and the emulated clouds hand it in with -fw_cfg; on a real cloud it is absent.
FW_CFG_LOGIN_NAME = "opt/imagectl/login"
# The image a VM booted from, for `imagectl verify-node` (validators/host/metadata.py).
FW_CFG_IMAGE_ID_NAME = "opt/imagectl/image_id"
# Present: the host takes this boot's hand-over on the virtio-serial port HANDOVER_PORT
# and may save the booted VM there (imagectl.clouds.local.saved_boot); see
# imagectl-handover. A virtio-serial port, as qemu-guest-agent's channel, not a second
# 16550 UART: an emulated UART's transmitter can stall for good across a pause and save
# (its THRE interrupt lost; firecracker-microvm/firecracker PR #5730,
# oxidecomputer/propolis issue #391), and here it did (the guest's ttyS1 sent its "ready"
# and never its "done": a 10-minute hang).
FW_CFG_HANDOVER_NAME = "opt/imagectl/handover"
HANDOVER_PORT = "org.imagectl.handover"  # the guest's /dev/virtio-ports/<name>
HANDOVER_READY = "imagectl-handover-ready"
HANDOVER_DONE = "imagectl-handover-done"
RUNTIME_KEYS = "/run/imagectl/authorized_keys.%u"
# Present when this boot generated the SSH host key (an image that carries one has none).
HOSTKEY_MADE = "/run/imagectl/ssh-host-key-made-at-boot"

BLACKLIST = (
    "kvm",
    "kvm_amd",
    "kvm_intel",
    "sr_mod",
    "cdrom",
    "sg",
    "ata_piix",
    "floppy",
    "aesni_intel",
    "ghash_clmulni_intel",
    "polyval_clmulni",
    "sha1_ssse3",
    "sha256_ssse3",
    "sha512_ssse3",
    "crc32_pclmul",
    "powernow_k8",
    "acpi_cpufreq",
    "pcspkr",
    "serio_raw",
    "joydev",
    "psmouse",
    "i2c_piix4",
    "bochs",
    "drm",
)

FILES: dict[str, str] = {
    # QEMU user networking: DHCP on the virtio NIC; the resolver is slirp's. The catch-all
    # sorts last (99-): networkd applies the first file that matches a link, and a NIC that
    # the kernel command line's ip= configures (systemd-network-generator's 90-<nic>.network,
    # an emulated cloud's private network) must keep its static address.
    "etc/systemd/network/99-imagectl-dhcp.network": (
        "[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n"
    ),
    "etc/resolv.conf": "nameserver 10.0.2.3\n",
    "etc/hostname": "imagectl-local\n",
    "etc/hosts": "127.0.0.1 localhost\n127.0.1.1 imagectl-local\n",
    "etc/fstab": "/dev/vda / ext4 rw,errors=remount-ro 0 1\n",
    # An initramfs trigger took ~20 minutes under TCG: the initrd is made once, natively.
    "etc/initramfs-tools/update-initramfs.conf": "update_initramfs=no\nbackup_initramfs=no\n",
    # A small initrd: only what mounts a virtio ext4 root (udev in a "most" initrd loads
    # IDE/SCSI/CD-ROM drivers first: ~40 s under TCG).
    "etc/initramfs-tools/conf.d/imagectl.conf": "MODULES=list\nCOMPRESS=gzip\n",
    "etc/initramfs-tools/modules": "virtio_pci\nvirtio_blk\nvirtio_net\next4\ncrc32c_generic\n",
    # Drivers udev would load for emulated hardware a QEMU guest never uses (each costs
    # seconds under TCG): the CD-ROM, nested KVM, CPU-specific crypto and frequency drivers.
    "etc/modprobe.d/imagectl-qemu-guest.conf": "".join(f"blacklist {m}\n" for m in BLACKLIST),
    # Light installs: the local stack's packages only, no recommends.
    "etc/apt/apt.conf.d/90imagectl-no-recommends": (
        'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n'
    ),
    # Only an ed25519 host key (RSA generation costs 11-22 s under TCG); a per-boot key
    # file under /run for validation access (never stored in the image).
    "etc/ssh/sshd_config.d/50-imagectl.conf": (
        "HostKey /etc/ssh/ssh_host_ed25519_key\n"
        f"AuthorizedKeysFile .ssh/authorized_keys {RUNTIME_KEYS}\n"
        "UseDNS no\n"
    ),
    "etc/systemd/system/imagectl-ssh-hostkey.service": (
        "[Unit]\n"
        "Description=imagectl: generate this machine's SSH host key on first boot\n"
        "Before=ssh.service\n"
        "ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key\n"
        # this boot made it (kept in /run: a saved boot's restored instances make their own)
        f"ExecStartPost=/bin/sh -c 'mkdir -p /run/imagectl && : > {HOSTKEY_MADE}'\n\n"
        "[Install]\n"
        "RequiredBy=ssh.service\n"
    ),
    "usr/local/sbin/imagectl-fwcfg-key": (
        "#!/bin/sh\n"
        "# Logins handed in by QEMU with -fw_cfg (the local and emulated clouds' guest agent).\n"
        "# On a real cloud there is no fw_cfg entry and this does nothing.\n"
        "#  opt/imagectl/authorized_keys: a per-boot key for root\n"
        "#  opt/imagectl/login: 'USER KEY' lines; USER is created (home, sudo without a\n"
        "#  password, as cloud-init and the Azure and Google guest agents do)\n"
        "# With a file argument: that file's 'USER KEY' lines (imagectl-handover's).\n"
        "# Keys go under /run (sshd's AuthorizedKeysFile), never into the image.\n"
        "set -u\n"
        "modprobe qemu_fw_cfg 2>/dev/null || true\n"
        "base=/sys/firmware/qemu_fw_cfg/by_name/opt/imagectl\n"
        "install -d -m 0755 /run/imagectl\n"
        'if [ $# -eq 0 ] && [ -r "$base/authorized_keys/raw" ]; then\n'
        '  install -m 0600 "$base/authorized_keys/raw" /run/imagectl/authorized_keys.root\n'
        "fi\n"
        'logins="${1:-$base/login/raw}"\n'
        '[ -r "$logins" ] || exit 0\n'
        "while read -r user key; do\n"
        '  case "$user" in ""|-*|*[!a-z0-9_.-]*) continue ;; esac\n'
        '  id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user" || continue\n'
        '  if [ "$user" != root ]; then\n'
        "    install -d -m 0750 /etc/sudoers.d\n"
        '    printf \'%s ALL=(ALL) NOPASSWD:ALL\\n\' "$user" > "/etc/sudoers.d/90-imagectl-$user"\n'
        '    chmod 0440 "/etc/sudoers.d/90-imagectl-$user"\n'
        "  fi\n"
        '  printf \'%s\\n\' "$key" >> "/run/imagectl/authorized_keys.$user"\n'
        '  chown "$user" "/run/imagectl/authorized_keys.$user"\n'
        '  chmod 0600 "/run/imagectl/authorized_keys.$user"\n'
        'done < "$logins"\n'
    ),
    "etc/systemd/system/imagectl-fwcfg-key.service": (
        "[Unit]\n"
        "Description=imagectl: per-boot logins from QEMU fw_cfg\n"
        "After=systemd-modules-load.service\n"
        "Before=ssh.service\n\n"
        "[Service]\n"
        "Type=oneshot\n"
        "ExecStart=/usr/local/sbin/imagectl-fwcfg-key\n\n"
        "[Install]\n"
        "WantedBy=ssh.service\n"
    ),
}

FILES.update(
    {
        "usr/local/sbin/imagectl-handover": (
            "#!/bin/bash\n"
            "# A saved boot's hand-over (the local and emulated clouds; the host side is\n"
            "# imagectl.clouds.local.saved_boot). Only when QEMU hands in\n"
            f"# {FW_CFG_HANDOVER_NAME}: once the boot has finished, this says\n"
            f"# '{HANDOVER_READY}' on the virtio-serial port {HANDOVER_PORT} (every\n"
            "# second until the host answers) and reads the host's lines there:\n"
            "#   clock SECONDS    the host's time (a restored VM's clock stood still)\n"
            "#   login USER KEY   as imagectl-fwcfg-key's lines\n"
            "#   end\n"
            "# The host may save the VM while this waits: each instance restored from that\n"
            "# state goes on from here with its own lines. Then: the clock is set, this\n"
            "# instance gets its own SSH host key when the boot made the one it has (not\n"
            "# the saved boot's; a key the image carries stays, for the hygiene check to\n"
            f"# see), the logins are installed, and '{HANDOVER_DONE}' is said.\n"
            "set -u\n"
            "modprobe qemu_fw_cfg 2>/dev/null || true\n"
            f"[ -r /sys/firmware/qemu_fw_cfg/by_name/{FW_CFG_HANDOVER_NAME}/raw ] || exit 0\n"
            "systemctl is-system-running --wait >/dev/null 2>&1\n"
            f"port=/dev/virtio-ports/{HANDOVER_PORT}\n"
            "# udev names the port (/dev/virtio-ports/NAME) once virtio_console is loaded\n"
            "modprobe virtio_console 2>/dev/null || true\n"
            'for _ in $(seq 100); do [ -e "$port" ] && break; sleep 0.1; done\n'
            # writes wait until the host is connected; reads without a host end at once
            'exec 3<>"$port" || exit 1\n'
            "logins=/run/imagectl/handover-logins\n"
            "install -d -m 0755 /run/imagectl\n"
            "got=\n"
            'until [ -n "$got" ]; do\n'
            f"  printf '{HANDOVER_READY}\\n' >&3\n"
            "  read -r -t 1 got <&3 || got=\n"
            "done\n"
            ": > $logins\n"
            'line="$got"\n'
            "while :; do\n"
            '  case "$line" in\n'
            '    "clock "*) date -u -s "@${line#clock }" >/dev/null ;;\n'
            '    "login "*) printf \'%s\\n\' "${line#login }" >> $logins ;;\n'
            "    end) break ;;\n"
            "  esac\n"
            "  read -r -t 30 line <&3 || exit 1\n"
            "done\n"
            f"if [ -e {HOSTKEY_MADE} ]; then\n"
            "  rm -f /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub\n"
            "  ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key\n"
            "  systemctl reload ssh.service\n"
            "fi\n"
            "/usr/local/sbin/imagectl-fwcfg-key $logins\n"
            f"printf '{HANDOVER_DONE}\\n' >&3\n"
        ),
        "etc/systemd/system/imagectl-handover.service": (
            "[Unit]\n"
            "Description=imagectl: hand-over of a saved boot (the local and emulated clouds)\n"
            "After=ssh.service imagectl-fwcfg-key.service\n\n"
            "[Service]\n"
            "Type=simple\n"
            "ExecStart=/usr/local/sbin/imagectl-handover\n\n"
            "[Install]\n"
            "WantedBy=multi-user.target\n"
        ),
    }
)

EXECUTABLE = {"usr/local/sbin/imagectl-fwcfg-key", "usr/local/sbin/imagectl-handover"}

ENABLE = [
    "systemd-networkd.service",
    "ssh.service",
    "imagectl-ssh-hostkey.service",
    "imagectl-fwcfg-key.service",
    "imagectl-handover.service",
]
MASK = [
    # removes stale e2scrub LVM snapshots at boot: a VM's disk has no LVM (5.5 s of a
    # TCG boot, systemd-analyze blame)
    "e2scrub_reap.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "systemd-networkd-wait-online.service",
    "e2scrub_all.timer",
    "fstrim.timer",
]
