# Plugins for current Packer (>= 1.7): run `packer init images/aws` once.
# Debian's packer 1.6.6 has these built in and does not know this block: imagectl's
# wrapper validates and builds from a copy of this folder without this file
# (see images/README.md).
packer {
  required_version = ">= 1.7.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = ">= 1.3.0"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = ">= 1.1.0"
    }
  }
}
