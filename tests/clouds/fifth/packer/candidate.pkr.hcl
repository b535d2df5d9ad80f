# The fifth cloud's candidate: Packer's null builder (no machine; the test never runs it).
source "null" "candidate" {
  communicator = "none"
}
