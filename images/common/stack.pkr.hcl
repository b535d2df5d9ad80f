# The variables every cloud's template declares, kept once. Packer loads the *.pkr.hcl
# files of one folder only, so a build stages this file beside the cloud's own
# (pipeline/packer/templates.py:stage_templates). The stack-fed names come from
# pipeline/packer/variables.py:packer_vars(); `imagectl lint` checks the two agree.

# --- from the stack ---
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
variable "ssh_source_cidrs" {
  type        = list(string)
  default     = []
  description = "The runner's address (IMAGECTL_RUNNER_CIDR): the only source the build instance's temporary SSH access admits. Empty: it admits nobody, never 0.0.0.0/0."
}

# --- the shared build block (build.pkr.hcl.tmpl), set per cloud by its CloudSpec ---
variable "skip_provisioning" {
  type        = bool
  default     = false
  description = "Build without a communicator and without Ansible (emulated clouds only)."
}
variable "ansible_tags" {
  type        = string
  default     = "all"
  description = "Which site.yml tags Packer's Ansible pass runs: all, or booted after a native chroot pass."
}
variable "ansible_become" {
  type        = bool
  default     = true
  description = "Ansible runs with --become (the cloud's SSH user is not root)."
}
variable "manifest_strip_path" {
  type        = bool
  default     = true
  description = "The manifest keeps only the artifact's file name (false: a local disk's path)."
}
variable "deprovision_command" {
  type        = string
  default     = ""
  description = "A shell command run after Ansible to generalise the image (Azure: waagent), or empty."
}
