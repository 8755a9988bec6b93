//! Link Run's on-disk contract between `lnk-link-run` and `lnk-link-supervise`.
#![deny(missing_docs)]
