# A candidate AMI: built and tagged in one region only. Copies to other regions happen
# after validation (promotion), never here: no ami_regions.
locals {
  emulated = var.aws_endpoint_ec2 != ""
}

source "amazon-ebs" "candidate" {
  region        = var.aws_region
  instance_type = var.aws_instance_type
  subnet_id     = var.aws_subnet_id
  ami_name      = var.image_name
  ami_description = "imagectl candidate ${var.stack_name} ${var.build_id} (driver ${var.driver_version}, CUDA ${var.cuda_version}, NCCL ${var.nccl_version})"

  # the base AMI by id: the stack's pin, or what `imagectl plan`/`build` resolved its owner
  # and name filter to (most recent match) and recorded on the build; never a filter here,
  # so the AMI a build used is the one its record, manifest, SBOM and attestation name
  source_ami = var.aws_source_ami

  # the root volume sized by the stack (clouds.aws.build.root_volume_gb)
  launch_block_device_mappings {
    device_name           = var.aws_root_device_name
    volume_size           = var.aws_root_volume_gb
    volume_type           = "gp3"
    iops                  = 3000 # gp3's baseline, stated: Packer 1.6.6 requires both
    throughput            = 125
    delete_on_termination = true
  }

  # a large AMI takes longer than the SDK waiters' defaults to become available
  aws_polling {
    delay_seconds = var.aws_polling_delay_seconds
    max_attempts  = var.aws_polling_max_attempts
  }

  # the build region's copy is encrypted with the stack's key of that region, as every
  # other region's (clouds.aws.kms_key_ids): an AMI on the AWS-managed aws/ebs key cannot
  # be shared (EC2 User Guide, "Share an AMI with specific AWS accounts")
  encrypt_boot = var.aws_kms_key_id != ""
  kms_key_id   = var.aws_kms_key_id

  tags          = var.image_tags
  snapshot_tags = var.image_tags
  run_tags      = merge(var.image_tags, { Name = "imagectl-build-${var.build_id}" })

  communicator = var.skip_provisioning ? "none" : "ssh"
  ssh_username = var.ssh_username
  # Packer's temporary security group admits SSH from the runner only (its default is
  # the whole internet); without IMAGECTL_RUNNER_CIDR a loopback range: it admits nobody
  temporary_security_group_source_cidrs = length(var.ssh_source_cidrs) > 0 ? var.ssh_source_cidrs : ["127.0.0.1/32"]

  # plugins-only: begin
  # IMDSv2 only, on the build instance and on every instance of the AMI (RegisterImage
  # ImdsSupport=v2.0: EC2 User Guide, "Configure the AMI"; amazon plugin imds_support,
  # metadata_options). Packer 1.6.6 knows neither; imagectl strips these lines for it.
  imds_support = "v2.0"
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }
  # plugins-only: end

  custom_endpoint_ec2        = var.aws_endpoint_ec2
  skip_credential_validation = local.emulated
  skip_metadata_api_check    = local.emulated
  skip_region_validation     = local.emulated
}
