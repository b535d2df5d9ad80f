# A candidate Compute Gallery image version, replicated to the build location only and
# excluded from "latest": a candidate, not yet latest. Promotion (after validation)
# replicates it and clears exclude_from_latest.
source "azure-arm" "candidate" {
  subscription_id     = var.azure_subscription_id
  use_azure_cli_auth  = var.azure_use_cli_auth
  build_resource_group_name = var.azure_build_resource_group
  vm_size             = var.azure_vm_size
  os_type             = "Linux"
  image_publisher     = var.azure_image_publisher
  image_offer         = var.azure_image_offer
  image_sku           = var.azure_image_sku
  image_version       = var.azure_image_version # never "latest": resolved and recorded by imagectl

  managed_image_name                = var.image_name
  managed_image_resource_group_name = var.azure_build_resource_group

  shared_image_gallery_destination {
    subscription        = var.azure_subscription_id
    resource_group      = var.azure_gallery_resource_group
    gallery_name        = var.azure_gallery_name
    image_name          = var.azure_gallery_image_definition
    image_version       = var.azure_gallery_image_version
    replication_regions = [var.azure_location]
    # plugins-only: begin
    storage_account_type = var.azure_storage_account_type # the stack's, like every region
    # plugins-only: end
  }
  # the home region gets the stack's replica count, like every other region
  shared_image_gallery_replica_count = var.azure_replica_count
  shared_gallery_image_version_exclude_from_latest = true

  azure_tags   = var.image_tags
  communicator = var.skip_provisioning ? "none" : "ssh"
  ssh_username = var.ssh_username
  # the build VM's NSG admits SSH from the runner only (Packer's default: any address)
  allowed_inbound_ip_addresses = length(var.ssh_source_cidrs) > 0 ? var.ssh_source_cidrs : ["127.0.0.1/32"]
}
