//! One sandbox's figures as its connections add to them, from several threads at once: counts
//! in atomics, the refusals under a lock, kept to [`MAX_REFUSED`] destinations.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use lnk_common::network::{Network, Refused};

use super::why::Why;

/// The most refused destinations kept by name; the rest are counted in one last entry.
pub const MAX_REFUSED: usize = 32;
/// The most characters of a refused host kept (a name has 253 at most; what a program wrote
/// where a host should be may be anything).
const HOST_SHOWN: usize = 255;
/// The most characters of a reason kept.
const WHY_SHOWN: usize = 400;
/// The last entry's reason, once more destinations were refused than are kept.
const MORE: &str = "more destinations were refused than the answer names";

/// The figures being counted.
#[derive(Debug, Default)]
pub struct Figures {
    connections: AtomicU64,
    /// From the hosts to the programs.
    pub(super) bytes_in: AtomicU64,
    /// From the programs to the hosts.
    pub(super) bytes_out: AtomicU64,
    refused: Mutex<Vec<Refused>>,
}

impl Figures {
    /// A connection made to an allowed host.
    pub fn connected(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A refusal of `host` (as the program named it; empty for none) at `port`. What the
    /// program wrote goes into an answer: it is kept to printable ASCII, and cut.
    pub fn refused(&self, host: &str, port: u16, why: &Why) {
        let host = shown(host, HOST_SHOWN);
        let why = shown(&why.to_string(), WHY_SHOWN);
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(seen) = refused
            .iter_mut()
            .find(|r| r.host == host && r.port == port && r.why == why)
        {
            seen.count = seen.count.saturating_add(1);
            return;
        }
        if refused.len() < MAX_REFUSED {
            refused.push(Refused {
                host,
                port,
                count: 1,
                why,
            });
            return;
        }
        match refused.last_mut() {
            Some(last) if last.why == MORE => last.count = last.count.saturating_add(1),
            _ => {
                // The last one named gives its place to the count of those left unnamed.
                if let Some(last) = refused.last_mut() {
                    *last = Refused {
                        host: String::new(),
                        port: 0,
                        count: last.count.saturating_add(1),
                        why: MORE.to_owned(),
                    };
                }
            }
        }
    }

    /// The figures as they stand.
    pub fn snapshot(&self) -> Network {
        Network {
            connections: self.connections.load(Ordering::Relaxed),
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
            refused: self
                .refused
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// `text` as an answer may show it: printable ASCII (anything else `?`), `max` characters at
/// most (then `…`).
fn shown(text: &str, max: usize) -> String {
    let mut shown: String = text
        .chars()
        .take(max)
        .map(|c| {
            if c == ' ' || c.is_ascii_graphic() {
                c
            } else {
                '?'
            }
        })
        .collect();
    if text.chars().count() > max {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::allow::NotAllowed;

    #[test]
    fn what_a_program_wrote_is_shown_printable_and_short() {
        let figures = Figures::default();
        let why = Why::NotAHost("`\u{1b}[31mred` is not a host name".into());
        figures.refused("\u{1b}[31mred\u{202e}", 443, &why);
        figures.refused(&"x".repeat(10_000), 443, &why);
        let refused = figures.snapshot().refused;
        assert_eq!(refused[0].host, "?[31mred?");
        assert!(
            refused[0].why.starts_with("`?[31mred`"),
            "{}",
            refused[0].why
        );
        assert_eq!(refused[1].host.chars().count(), HOST_SHOWN + 1);
    }

    #[test]
    fn refusals_are_counted_by_destination_and_reason_and_kept_bounded() {
        let figures = Figures::default();
        let why = Why::NotAllowed(NotAllowed::NotListed);
        figures.refused("a.example", 443, &why);
        figures.refused("a.example", 443, &why);
        figures.refused("a.example", 80, &why);
        let seen = figures.snapshot().refused;
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0].count, 2);
        for n in 0..100 {
            figures.refused(&format!("h{n}.example"), 443, &why);
        }
        let seen = figures.snapshot().refused;
        assert_eq!(seen.len(), MAX_REFUSED);
        let last = seen.last().map(|r| (r.why.as_str(), r.count));
        assert_eq!(last, Some((MORE, 100 - (MAX_REFUSED as u64 - 2) + 1)));
        let total: u64 = seen.iter().map(|r| r.count).sum();
        assert_eq!(total, 103, "every refusal is counted somewhere");
    }
}
