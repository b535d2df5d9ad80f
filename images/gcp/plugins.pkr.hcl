# Plugins for current Packer (>= 1.7): run `packer init images/gcp/plugins.pkr.hcl` once.
# Exact versions: Packer keeps no lock file, so a range would let the plugin that builds a
# production image change without a commit. The templates' arguments are checked against
# these versions' documentation (tests/packer/test_plugin_arguments.py).
# Debian's packer 1.6.6 has these built in and rejects this block; see images/README.md.
packer {
  required_version = ">= 1.7.0" # the workflow pins 1.15.4
  required_plugins {
    googlecompute = {
      source  = "github.com/hashicorp/googlecompute"
      version = "1.2.7"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = "1.1.6"
    }
  }
}
