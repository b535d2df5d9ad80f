# Plugins for current Packer (>= 1.7): run `packer init images/gcp` once.
# Debian's packer 1.6.6 has these built in and rejects this block; see images/README.md.
packer {
  required_version = ">= 1.7.0"
  required_plugins {
    googlecompute = {
      source  = "github.com/hashicorp/googlecompute"
      version = ">= 1.1.0"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = ">= 1.1.0"
    }
  }
}
