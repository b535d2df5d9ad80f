# This cloud's variables; those of every cloud are in images/common/stack.pkr.hcl, which
# a build stages beside these files. Every variable that `imagectl plan` / `imagectl build`
# feed comes from pipeline/stacks/variables.py:packer_vars(); `imagectl lint` checks the
# two agree. Variables with a default below that packer_vars does not feed are build knobs.

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
