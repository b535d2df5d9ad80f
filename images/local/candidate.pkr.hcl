# The local candidate: a qcow2 built under QEMU from a Debian 12 disk, booted directly
# with the pinned kernel (no bootloader), provisioned over SSH by the same playbook as
# the clouds. imagectl run gives it a disk whose root site.yml already provisioned
# natively in a chroot, and ansible_tags=booted: this pass runs the roles that belong
# in the booted image (manifest, hygiene). Its "tags" travel in Packer's manifest.
source "qemu" "candidate" {
  disk_image       = true
  iso_url          = "${var.local_base_dir}/disk.qcow2"
  iso_checksum     = "none"
  output_directory = var.local_output_dir
  vm_name          = "${var.image_name}.qcow2"
  format           = "qcow2"
  disk_size        = "${var.local_disk_gib}G"
  disk_interface   = "virtio"
  net_device       = "virtio-net"
  accelerator      = var.local_accelerator
  memory           = var.local_memory_mib
  cpus             = var.local_cpus
  headless         = true
  qemuargs = [
    ["-kernel", "${var.local_base_dir}/vmlinuz"],
    ["-initrd", "${var.local_base_dir}/initrd.img"],
    # the build's own boot is not a fleet node's: the boot check (installed natively
    # before this pass) stays masked, so it neither spends the VM's CPU beside the
    # booted roles nor leaves a build boot's receipt in the image (systemd.mask=, see
    # systemd(1) "Kernel Command Line")
    ["-append", "root=/dev/vda rw console=ttyS0 systemd.mask=imagectl-boot-validate.service"],
    ["-cpu", var.local_cpu_model],
  ]
  communicator         = var.skip_provisioning ? "none" : "ssh"
  ssh_username         = var.ssh_username
  ssh_private_key_file = "${var.local_base_dir}/id_ed25519"
  ssh_timeout          = "20m"
  # sshd answers slowly under TCG on a busy machine: keep trying the handshake
  ssh_handshake_attempts = 60
  shutdown_command       = "systemctl poweroff"
}
