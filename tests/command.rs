//! End-to-end tests of `lnk-link-run serve` and the `command` tool.
