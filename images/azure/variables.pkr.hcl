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

# --- Azure, from the stack's clouds.azure ---
variable "azure_subscription_id" {
  type = string
}
variable "azure_location" {
  type        = string
  description = "The one region a candidate version is replicated to."
}
variable "azure_vm_size" {
  type = string
}
variable "azure_build_resource_group" {
  type        = string
  description = "Existing resource group for the build VM and the intermediate managed image."
}
variable "azure_image_publisher" {
  type = string
}
variable "azure_image_offer" {
  type = string
}
variable "azure_image_sku" {
  type = string
}
variable "azure_gallery_resource_group" {
  type = string
}
variable "azure_gallery_name" {
  type = string
}
variable "azure_gallery_image_definition" {
  type = string
}
variable "azure_gallery_image_version" {
  type        = string
  description = "MAJOR.MINOR.PATCH derived from the build id."
}

# --- build knobs (defaults are production) ---
variable "ssh_username" {
  type    = string
  default = "packer"
}
variable "azure_use_cli_auth" {
  type        = bool
  default     = true
  description = "Authenticate with the logged-in Azure CLI (false: environment/managed identity)."
}
variable "skip_provisioning" {
  type    = bool
  default = false
}
