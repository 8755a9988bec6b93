//! What a spare reaper and the stub inside its warm sandbox say to each other
//! ([`crate::reaper::warm`]), over a stream socket that is the stub's fd [`STUB_CHANNEL_FD`]:
//!
//! - the stub, set up and waiting, writes [`READY`];
//! - the reaper writes the call's [`StubSpec`]: its length (4 bytes, little-endian), then its
//!   fields, each ending in a NUL byte: the files folder (empty for a sandbox started for its
//!   call, whose stub stays in the folder it started in), the working folder relative to it,
//!   the files folder's device and inode (decimal), `1` or `0` for an empty stdin, `1` or `0`
//!   for a call with a proxy, then the program's path and arguments (with `/usr/bin/env
//!   NAME=VALUE…` first when `--var`s are given: the words after the sandbox's `--` on a cold
//!   call's command line). A call with a proxy sends the sandbox's end of its channel with the
//!   spec's first bytes (`SCM_RIGHTS`): the stub hands its listener out over it
//!   ([`crate::net::channel`]) just before its `exec`;
//! - the stub `exec`s the program: the socket is close-on-exec, so its end (EOF) says the exec
//!   happened. Or it writes [`FAILED`] (or [`FOLDER_REFUSED`], when the working folder is what
//!   it refused) and an errno (4 bytes, native order) and exits, having run nothing.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// The runner's hidden subcommand that makes it the stub.
pub const STUB: &str = "warm-stub";
/// The stub's descriptor for its own executable (closed first thing).
pub const STUB_EXE_FD: i32 = 3;
/// The stub's descriptor for its channel to the reaper.
pub const STUB_CHANNEL_FD: i32 = 4;
/// The stub is waiting for its call.
pub const READY: u8 = b'r';
/// The stub could not run the call; an errno follows.
pub const FAILED: u8 = b'f';
/// The stub refused the call's working folder: on its way in from the files folder it met a
/// link, something not a folder, or nothing (the folder changed after the call arrived and was
/// checked); an errno follows.
pub const FOLDER_REFUSED: u8 = b'd';
/// The largest spec a stub reads: a spare reaper's own limit ([`crate::reaper::MAX_SPEC`]).
pub const MAX_STUB_SPEC: usize = 8 << 20;

/// Where a call runs, as the stub finds it inside the sandbox.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// The files folder's path (canonical outside; the sandbox shows it at the same path).
    pub files: PathBuf,
    /// The working folder, relative to the files folder (canonical: no link, no `..`).
    pub dir: PathBuf,
    /// The files folder's device and inode when the call arrived: a folder the sandbox shows
    /// under that path that is another one is never used.
    pub id: (u64, u64),
}

impl Place {
    /// Adds this place's arguments to a reaper's command line ([`crate::reaper::Options::to_args`]).
    pub fn push_args(&self, args: &mut Vec<OsString>) {
        args.extend([
            "--warm-files".into(),
            self.files.clone().into_os_string(),
            "--warm-id".into(),
            format!("{}:{}", self.id.0, self.id.1).into(),
            "--warm-dir".into(),
            self.dir.clone().into_os_string(),
        ]);
    }

    /// Reads one of the arguments [`Place::push_args`] writes.
    pub fn parse_arg(&mut self, name: &str, value: OsString) -> Result<(), String> {
        match name {
            "--warm-files" => self.files = value.into(),
            "--warm-dir" => self.dir = value.into(),
            _ => {
                self.id = value
                    .to_str()
                    .and_then(|text| text.split_once(':'))
                    .and_then(|(dev, ino)| Some((dev.parse().ok()?, ino.parse().ok()?)))
                    .ok_or_else(|| format!("{name}: not DEV:INO"))?;
            }
        }
        Ok(())
    }
}

/// A call as the stub gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubSpec {
    /// Where it runs; `None` where the sandbox was started for the call, in its folder.
    pub place: Option<Place>,
    /// Whether stdin is empty (`/dev/null`) rather than the call's input pipe.
    pub null_stdin: bool,
    /// Whether the call has a proxy, whose channel came with the spec.
    pub net: bool,
    /// The program's path and arguments (never empty).
    pub argv: Vec<OsString>,
}

impl StubSpec {
    /// The spec as bytes, its length first; `None` when it is larger than [`MAX_STUB_SPEC`].
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        let mut field = |bytes: &[u8]| {
            body.extend_from_slice(bytes);
            body.push(0);
        };
        let none = Place::default();
        let place = self.place.as_ref().unwrap_or(&none);
        field(place.files.as_os_str().as_bytes());
        field(place.dir.as_os_str().as_bytes());
        field(place.id.0.to_string().as_bytes());
        field(place.id.1.to_string().as_bytes());
        field(if self.null_stdin { b"1" } else { b"0" });
        field(if self.net { b"1" } else { b"0" });
        for arg in &self.argv {
            field(arg.as_bytes());
        }
        if body.len() > MAX_STUB_SPEC {
            return None;
        }
        let len = u32::try_from(body.len()).ok()?;
        let mut spec = len.to_le_bytes().to_vec();
        spec.extend_from_slice(&body);
        Some(spec)
    }

    /// Reads a spec's body (after its length); `None` for anything else.
    pub fn decode(body: &[u8]) -> Option<Self> {
        let body = body.strip_suffix(&[0])?;
        let mut fields = body.split(|b| *b == 0);
        let mut next = || fields.next().map(|f| OsString::from_vec(f.to_vec()));
        let files = PathBuf::from(next()?);
        let dir = PathBuf::from(next()?);
        let number = |field: OsString| field.to_str()?.parse::<u64>().ok();
        let dev = number(next()?)?;
        let ino = number(next()?)?;
        let flag = |field: OsString| match field.as_bytes() {
            b"1" => Some(true),
            b"0" => Some(false),
            _ => None,
        };
        let null_stdin = flag(next()?)?;
        let net = flag(next()?)?;
        let argv: Vec<OsString> = std::iter::from_fn(next).collect();
        if argv.first().is_none_or(|program| program.is_empty()) {
            return None;
        }
        let place = (!files.as_os_str().is_empty()).then_some(Place {
            files,
            dir,
            id: (dev, ino),
        });
        Some(StubSpec {
            place,
            null_stdin,
            net,
            argv,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_spec_reads_back_whole() {
        let mut spec = StubSpec {
            place: Some(Place {
                files: "/w/files".into(),
                dir: "".into(),
                id: (2049, 77),
            }),
            null_stdin: true,
            net: false,
            argv: vec!["/usr/bin/env".into(), "A=b c".into(), "/bin/echo".into()],
        };
        let bytes = spec.encode().unwrap();
        let len = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(len, bytes.len() - 4);
        assert_eq!(StubSpec::decode(&bytes[4..]).unwrap(), spec);
        spec.place = None;
        spec.net = true;
        let bytes = spec.encode().unwrap();
        assert_eq!(StubSpec::decode(&bytes[4..]).unwrap(), spec);
    }

    #[test]
    fn a_spec_without_a_program_is_no_spec() {
        // Files, dir, device, inode, stdin, net: and no program.
        assert!(StubSpec::decode(b"/f\x00\x001\x002\x001\x000\x00").is_none());
        // A device that is no number.
        assert!(StubSpec::decode(b"/f\x00\x00x\x002\x001\x000\x00/bin/true\x00").is_none());
        // A net flag that is no flag.
        assert!(StubSpec::decode(b"/f\x00\x001\x002\x001\x00y\x00/bin/true\x00").is_none());
        assert!(StubSpec::decode(b"/f\x00\x001\x002\x001\x000\x00/bin/true\x00").is_some());
        assert!(StubSpec::decode(b"").is_none());
    }

    #[test]
    fn a_place_reads_back_from_its_arguments() {
        let place = Place {
            files: "/a b".into(),
            dir: "c".into(),
            id: (1, 2),
        };
        let mut args = Vec::new();
        place.push_args(&mut args);
        let mut read = Place::default();
        for pair in args.chunks(2) {
            read.parse_arg(pair[0].to_str().unwrap(), pair[1].clone())
                .unwrap();
        }
        assert_eq!(read, place);
    }
}
