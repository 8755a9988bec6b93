//! Under the recommended line with two `--cache` folders and `{caches}`, warm and cold, as root
//! and as `nobody`: a program reads the user's caches and writes, creates, removes and renames
//! in them, and all of it succeeds inside; the user's folders are byte for byte as they were
//! (names, modes, owners, times, bytes); the next call sees none of it (a layer lasts for one
//! sandbox); the program cannot unmount the layer to reach the folder below, not even from a
//! user namespace of its own; and a background run gets the same layer through its gate.
use std::time::Duration;

use serde_json::{Value, json};

use crate::world::{World, assert_unchanged, snapshot, users};
use lnk_tests::results::{ran, text, warnings};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{Serve, cold_starts};
use lnk_tests::tools::{start, wait_ended};

/// Reads both caches and changes each in every way a build or a hostile program would. Its
/// arguments: the registry-like cache, then the module cache.
const WRITES: &str = r#"set -e
R="$1"; M="$2"
cat "$R/src/dep-0.1.0/src/lib.rs" "$R/lib-link" "$M/example/m@v1.0.0/go.mod"
"$R/bin/tool"
echo new > "$R/new-file"
echo changed >> "$R/src/dep-0.1.0/src/lib.rs"
rm "$R/remove-me"
mv "$R/rename-me" "$R/renamed"
mkdir -p "$R/new-dir/sub"
touch "$R/new-dir/sub/f" "$R/cache/dep-0.1.0.crate"
rm -r "$R/src/old-0.0.1"
chmod 700 "$R/bin/tool"
ln -s new-file "$R/new-link"
chmod u+w "$M/example/m@v1.0.0" "$M/example/m@v1.0.0/m.go"
echo poisoned >> "$M/example/m@v1.0.0/m.go"
touch "$M/example/m@v1.0.0/dropped.go"
test -e "$R/new-file" && test ! -e "$R/remove-me" && test -e "$R/renamed"
test ! -e "$R/src/old-0.0.1" && test -L "$R/new-link"
grep -q changed "$R/src/dep-0.1.0/src/lib.rs" && grep -q poisoned "$M/example/m@v1.0.0/m.go"
echo all-writes-done
"#;

/// What a later sandbox sees: the user's caches as they are, none of the writes above.
const SEES: &str = r#"R="$1"; M="$2"
test ! -e "$R/new-file" && test -e "$R/remove-me" && test -e "$R/rename-me" \
  && test -e "$R/src/old-0.0.1/lib.rs" && ! grep -q changed "$R/src/dep-0.1.0/src/lib.rs" \
  && ! grep -q poisoned "$M/example/m@v1.0.0/m.go" && test ! -e "$M/example/m@v1.0.0/dropped.go" \
  && echo a-fresh-layer
"#;

/// Tries to unmount the layer, directly and from a user and mount namespace of the program's
/// own (where the kernel would allow it, were the mounts not locked), then writes where the
/// user's folder would be if it had worked.
const UNMOUNT: &str = r#"R="$1"
echo mine > "$R/mine"
umount "$R" 2>/dev/null && echo umount-worked
umount -l "$R" 2>/dev/null && echo lazy-umount-worked
unshare -Urm sh -c 'umount -l "$1" && echo escaped > "$1/escaped" && echo nested-umount-worked' sh "$R" 2>/dev/null
test -e "$R/mine" && echo the-layer-is-still-there
"#;

fn sh(serve: &mut Serve, world: &World, script: &str) -> Value {
    let args = [
        "-c".to_owned(),
        script.to_owned(),
        "sh".to_owned(),
        path_str(&world.registry),
        path_str(&world.modcache),
    ];
    serve.call(json!({"program": "sh", "args": args}))
}

/// Each half: the writes succeed inside, nothing reaches the user's folders, the next call
/// starts from the user's caches again, and the layer cannot be unmounted.
fn writes_stay_in_the_layer() {
    for user in users() {
        let world = World::new(user);
        let (registry, modcache) = (snapshot(&world.registry), snapshot(&world.modcache));
        let mut serve = world.serve(world.line()).start();
        let result = sh(&mut serve, &world, WRITES);
        let value = ran(&result);
        let shown = text(&result);
        assert_eq!(value["exit_code"], 0, "as {user:?}: {shown}");
        assert!(
            shown.contains("pub fn dep()") && shown.contains("tool"),
            "{shown}"
        );
        assert!(shown.contains("module example/m"), "{shown}");
        assert!(shown.contains("all-writes-done"), "as {user:?}: {shown}");
        assert_unchanged(&registry, &snapshot(&world.registry), "after the writes");
        assert_unchanged(&modcache, &snapshot(&world.modcache), "after the writes");

        let result = sh(&mut serve, &world, SEES);
        assert!(
            text(&result).contains("a-fresh-layer"),
            "as {user:?}: {}",
            text(&result)
        );

        let result = sh(&mut serve, &world, UNMOUNT);
        let shown = text(&result);
        assert!(
            shown.contains("the-layer-is-still-there"),
            "as {user:?}: {shown}"
        );
        for worked in [
            "umount-worked",
            "lazy-umount-worked",
            "nested-umount-worked",
        ] {
            assert!(!shown.contains(worked), "as {user:?}: {shown}");
        }
        assert_unchanged(&registry, &snapshot(&world.registry), "after the unmounts");
        assert_unchanged(&modcache, &snapshot(&world.modcache), "after the unmounts");

        // Every sandbox had its layers: no warning (the warm one was proven as the cold one).
        let stderr = serve.stderr();
        assert_eq!(
            warnings(&stderr),
            Vec::<&str>::new(),
            "as {user:?}: {stderr}"
        );
    }
}

#[test]
fn writes_stay_in_the_layer_warm() {
    if Sandbox::Bwrap.usable() {
        writes_stay_in_the_layer();
    }
}

#[test]
fn writes_stay_in_the_layer_cold() {
    if Sandbox::Bwrap.usable() {
        cold_starts(writes_stay_in_the_layer);
    }
}

/// A background run's gate makes the same layers: its writes succeed, and the user's caches are
/// as they were; its record names the cache folders.
#[test]
fn a_background_run_gets_its_own_layer() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for user in users() {
        let world = World::new(user);
        let (registry, modcache) = (snapshot(&world.registry), snapshot(&world.modcache));
        let mut serve = world.serve(world.line()).start();
        let args = [
            "-c".to_owned(),
            WRITES.to_owned(),
            "sh".to_owned(),
            path_str(&world.registry),
            path_str(&world.modcache),
        ];
        let id = start(&mut serve, json!({"program": "sh", "args": args}));
        let run = wait_ended(&mut serve, &id, Duration::from_secs(60));
        let output = std::fs::read_to_string(world.bg.output_path(&id)).unwrap_or_default();
        assert_eq!(run["exit_code"], 0, "as {user:?}: {run}\n{output}");
        assert!(output.contains("all-writes-done"), "as {user:?}: {output}");
        let record = world.bg.record(&id).unwrap_or_default();
        let named = json!([path_str(&world.registry), path_str(&world.modcache)]);
        assert_eq!(record["launch"]["caches"], named, "{record}");
        assert_unchanged(&registry, &snapshot(&world.registry), "after a run");
        assert_unchanged(&modcache, &snapshot(&world.modcache), "after a run");
    }
}
