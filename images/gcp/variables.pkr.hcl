# This cloud's variables; those of every cloud are in images/common/stack.pkr.hcl, which
# a build stages beside these files. Every variable that `imagectl plan` / `imagectl build`
# feed comes from pipeline/packer/variables.py:packer_vars(); `imagectl lint` checks the
# two agree. Variables with a default below that packer_vars does not feed are build knobs.

# --- Google Cloud, from the stack's clouds.gcp ---
variable "gcp_project" {
  type = string
}
variable "gcp_zone" {
  type        = string
  description = "The one zone a candidate is built in."
}
variable "gcp_machine_type" {
  type = string
}
variable "gcp_source_image_project" {
  type = string
}
variable "gcp_source_image" {
  type        = string
  description = "The base image's name: clouds.gcp.base_image.image, or the family's image resolved and recorded by imagectl."
}

# --- build knobs (defaults are production) ---
variable "ssh_username" {
  type    = string
  default = "packer"
}
variable "gcp_image_storage_location" {
  type        = string
  default     = ""
  description = "Multi-region of the image; empty = the zone's region (one location only)."
}
