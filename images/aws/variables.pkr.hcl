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

# --- AWS, from the stack's clouds.aws ---
variable "aws_region" {
  type        = string
  description = "The one region a candidate is built in (no replication before validation)."
}
variable "aws_instance_type" {
  type = string
}
variable "aws_source_ami_owner" {
  type = string
}
variable "aws_source_ami_name" {
  type        = string
  description = "Name filter of the base AMI; the most recent match is used."
}
variable "aws_subnet_id" {
  type    = string
  default = ""
}

# --- build knobs (defaults are production) ---
variable "aws_endpoint_ec2" {
  type        = string
  default     = ""
  description = "Custom EC2 endpoint (an emulator in tests); empty = the real endpoint."
}
variable "ssh_username" {
  type    = string
  default = "ubuntu"
}
variable "skip_provisioning" {
  type        = bool
  default     = false
  description = "Build without a communicator and without Ansible (emulated clouds only)."
}
