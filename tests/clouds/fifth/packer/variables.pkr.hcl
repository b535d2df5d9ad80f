# The fifth cloud's variables (its stack section's build site and machine, and the base
# image); images/common/stack.pkr.hcl is staged beside them.
variable "fifth_site" {
  type = string
}
variable "fifth_machine" {
  type = string
}
variable "fifth_base_image" {
  type = string
}
variable "ssh_username" {
  type    = string
  default = "ubuntu"
}
