# Every variable that `imagectl plan` / `imagectl build` feed comes from
# pipeline/stacks/variables.py:packer_vars(); `imagectl lint` checks the two agree.
# Variables with a default below that packer_vars does not feed are build knobs.

# --- from the stack (identical in every cloud folder) ---
variable "stack_name" {
  type        = string
  description = "Stack name (images/stacks/<name>.yaml)."
}
variable "stack_digest" {
  type        = string
  description = "sha256 of the stack's pins."
}
variable "driver_version" {
  type        = string
  description = "NVIDIA driver version, or none."
}
variable "cuda_version" {
  type        = string
  description = "CUDA toolkit version, or none."
}
variable "nccl_version" {
  type        = string
  description = "NCCL package version, or none."
}
variable "image_name" {
  type        = string
  description = "Name of the candidate image (imagectl-<stack>-<build id>)."
}
variable "image_tags" {
  type        = map(string)
  description = "Tags of the candidate: stack, digest, driver, CUDA, NCCL, build id, commit, lifecycle."
}

# --- filled in per build ---
variable "build_id" {
  type    = string
  default = ""
}
variable "git_commit" {
  type    = string
  default = ""
}
variable "ansible_vars_file" {
  type        = string
  description = "JSON file of Ansible extra vars (ansible_vars() of the stack)."
}
variable "playbook_file" {
  type        = string
  description = "playbooks/site.yml"
}
variable "manifest_file" {
  type        = string
  description = "Where Packer's manifest post-processor writes the artifacts."
}

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
variable "ssh_username" {
  type    = string
  default = "root"
}
variable "ansible_tags" {
  type        = string
  default     = "all"
  description = "Which site.yml tags Packer's Ansible pass runs: all, or booted after a native chroot pass."
}
variable "skip_provisioning" {
  type    = bool
  default = false
}
