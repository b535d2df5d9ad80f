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
  # the build VM: Shielded VM's vTPM and integrity monitoring, no serial port access, no
  # project-wide SSH keys (Compute Engine, "Shielded VM"; metadata serial-port-enable,
  # block-project-ssh-keys). Secure Boot stays off: the driver's DKMS-built modules are
  # unsigned, and Secure Boot refuses to load them ("Install GPU drivers", Secure Boot).
  enable_secure_boot          = false
  enable_vtpm                 = true
  enable_integrity_monitoring = true
  metadata = {
    serial-port-enable     = "FALSE"
    block-project-ssh-keys = "TRUE"
  }
}
