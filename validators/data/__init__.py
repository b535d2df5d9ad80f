"""Data files of the validator: thresholds and the XID/SXid catalog (each entry sourced)."""
