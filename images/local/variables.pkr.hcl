# This cloud's variables; those of every cloud are in images/common/stack.pkr.hcl, which
# a build stages beside these files. Every variable that `imagectl plan` / `imagectl build`
# feed comes from pipeline/packer/variables.py:packer_vars(); `imagectl lint` checks the
# two agree. Variables with a default below that packer_vars does not feed are build knobs.

# --- local QEMU target, from the stack's clouds.local ---
variable "local_memory_mib" {
  type = number
}
variable "local_cpus" {
  type = number
}
variable "local_disk_gib" {
  type = number
}
variable "local_kernel" {
  type        = string
  description = "Pinned kernel release; the base folder holds vmlinuz/initrd.img of it."
}
variable "local_base_dir" {
  type        = string
  description = "Base image folder: disk.qcow2 (Debian 12 debootstrap), vmlinuz, initrd.img, id_ed25519."
}
variable "local_output_dir" {
  type        = string
  description = "Folder Packer writes the candidate qcow2 into (must not exist)."
}

# --- build knobs (defaults suit a machine without KVM) ---
variable "local_accelerator" {
  type        = string
  default     = "tcg"
  description = "tcg (works everywhere) or kvm."
}
variable "local_cpu_model" {
  type        = string
  default     = "qemu64,+rdrand"
  description = "QEMU's -cpu: imagectl.clouds.local.qemu.cpu_model(accelerator) (host under kvm)."
}
variable "ssh_username" {
  type    = string
  default = "root"
}
