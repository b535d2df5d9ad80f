# This cloud's variables; those of every cloud are in images/common/stack.pkr.hcl, which
# a build stages beside these files. Every variable that `imagectl plan` / `imagectl build`
# feed comes from pipeline/packer/variables.py:packer_vars(); `imagectl lint` checks the
# two agree. Variables with a default below that packer_vars does not feed are build knobs.

# --- AWS, from the stack's clouds.aws ---
variable "aws_region" {
  type        = string
  description = "The one region a candidate is built in (no replication before validation)."
}
variable "aws_instance_type" {
  type = string
}
variable "aws_source_ami" {
  type        = string
  description = "The base AMI's id: clouds.aws.base_image.id, or the most recent match of its owner and name filter, resolved and recorded by imagectl."
}
variable "aws_subnet_id" {
  type    = string
  default = ""
}
variable "aws_kms_key_id" {
  type        = string
  default     = ""
  description = "clouds.aws.kms_key_ids of the build region: the AMI's snapshots are encrypted with it (empty: the account's default encryption)."
}
variable "aws_root_volume_gb" {
  type        = number
  description = "Root EBS volume of the candidate, GiB (the base AMI's 8 GiB cannot hold CUDA)."
}

# --- build knobs (defaults are production) ---
variable "aws_endpoint_ec2" {
  type        = string
  default     = ""
  description = "Custom EC2 endpoint (an emulator in tests); empty = the real endpoint."
}
variable "aws_root_device_name" {
  type        = string
  default     = "/dev/sda1"
  description = "The base AMI's root device (Ubuntu's)."
}
variable "aws_polling_delay_seconds" {
  type        = number
  default     = 30
  description = "Packer's wait between EC2 state polls (aws_polling)."
}
variable "aws_polling_max_attempts" {
  type        = number
  default     = 360
  description = "Polls before Packer gives up (360 x 30 s = 3 h: a large AMI takes long)."
}
variable "ssh_username" {
  type    = string
  default = "ubuntu"
}
