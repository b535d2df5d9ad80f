# Plugins for current Packer (>= 1.7): run `packer init images/azure` once.
# Debian's packer 1.6.6 has these built in and rejects this block; see images/README.md.
packer {
  required_version = ">= 1.7.0"
  required_plugins {
    azure = {
      source  = "github.com/hashicorp/azure"
      version = ">= 2.0.0"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = ">= 1.1.0"
    }
  }
}
