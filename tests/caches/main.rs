//! The agent's cache layers: `serve --cache <folder>` and the sandbox line's `{caches}` give
//! programs the user's caches to read, and each sandbox a writable layer of its own over them,
//! so that nothing the agent writes there reaches the user's next build.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test caches`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// A real `cargo build --offline` from the user's registry, its writes kept in the layer.
mod build;
/// The check writes into each cache; a cache bound read-write without a layer is refused;
/// config finds this machine's caches.
mod check;
/// Writes, removes and renames stay in each sandbox's layer; the layer cannot be unmounted.
mod layer;
/// A stand-in package registry on 127.0.0.1, and a crate that depends on its one crate.
mod registry;
/// A test's folder with two caches of a user's, and snapshots that tell any change.
mod world;
