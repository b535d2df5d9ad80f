# This cloud's variables; those of every cloud are in images/common/stack.pkr.hcl, which
# a build stages beside these files. Every variable that `imagectl plan` / `imagectl build`
# feed comes from pipeline/packer/variables.py:packer_vars(); `imagectl lint` checks the
# two agree. Variables with a default below that packer_vars does not feed are build knobs.

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
variable "azure_image_version" {
  type        = string
  description = "The marketplace image version: clouds.azure.base_image.version, or the newest, resolved and recorded by imagectl."
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
variable "azure_replica_count" {
  type        = number
  description = "Replicas in the build (home) region: clouds.azure.gallery.replica_count, as every region."
}
variable "azure_storage_account_type" {
  type        = string
  description = "The home region replicas' storage: clouds.azure.gallery.storage_account_type."
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
