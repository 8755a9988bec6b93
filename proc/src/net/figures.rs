//! One sandbox's figures as its connections add to them, from several threads at once: counts
//! in atomics, the refusals under a lock, kept to [`MAX_REFUSED`] destinations.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use lnk_common::network::{Network, Refused};

use super::why::Why;

/// The most refused destinations kept by name; the rest are counted in one last entry.
pub const MAX_REFUSED: usize = 32;
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

    /// A refusal of `host` (as the program named it; empty for none) at `port`.
    pub fn refused(&self, host: &str, port: u16, why: &Why) {
        let why = why.to_string();
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
                host: host.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::allow::NotAllowed;

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
