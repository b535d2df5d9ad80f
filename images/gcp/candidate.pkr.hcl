# A candidate image in one project. It joins no image family: the family is the
# "latest" pointer and is set at promotion, after validation.
source "googlecompute" "candidate" {
  project_id              = var.gcp_project
  zone                    = var.gcp_zone
  machine_type            = var.gcp_machine_type
  source_image            = var.gcp_source_image # resolved from the family and recorded by imagectl
  source_image_project_id = [var.gcp_source_image_project]
  image_name              = var.image_name
  image_description       = "imagectl candidate ${var.stack_name} ${var.build_id} (driver ${var.driver_version}, CUDA ${var.cuda_version}, NCCL ${var.nccl_version}, digest ${var.stack_digest})"
  image_labels            = var.image_tags
  labels                  = var.image_tags
  image_storage_locations = var.gcp_image_storage_location == "" ? [] : [var.gcp_image_storage_location]
  disk_size               = 60
  communicator            = var.skip_provisioning ? "none" : "ssh"
  ssh_username            = var.ssh_username
}
