//! Wall-clock times as the record stores them: whole milliseconds since the Unix epoch, UTC.
//!
//! A plain integer is what a third party reads most easily and what compares and subtracts
//! without parsing; [`UnixMs::rfc3339`] renders it for people and for the tools' answers
//! (`2024-05-01T12:00:00.000Z`). Wall-clock time can jump, so durations computed from two
//! `UnixMs` saturate at zero instead of going negative.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UnixMs(pub u64);

impl UnixMs {
    /// The last millisecond RFC 3339 can write with a four-digit year (9999-12-31T23:59:59.999Z);
    /// later values render as this one rather than failing.
    pub const LAST_RENDERABLE: UnixMs = UnixMs(253_402_300_799_999);

    /// Now. A clock set before 1970 reads as the epoch.
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    /// A `SystemTime`, truncated to the millisecond (before 1970 reads as the epoch).
    pub fn from_system_time(time: SystemTime) -> Self {
        let ms = time
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        UnixMs(ms)
    }

    /// As a `SystemTime` (values past [`Self::LAST_RENDERABLE`] are clamped to it).
    pub fn to_system_time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.min(Self::LAST_RENDERABLE).0)
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2024-05-01T12:00:00.000Z`.
    pub fn rfc3339(self) -> String {
        humantime::format_rfc3339_millis(self.to_system_time()).to_string()
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub fn saturating_since(self, earlier: UnixMs) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// This time plus `d`, saturating.
    pub fn saturating_add(self, d: Duration) -> UnixMs {
        UnixMs(
            self.0
                .saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        )
    }
}

impl fmt::Display for UnixMs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rfc3339())
    }
}

/// A duration as whole milliseconds, saturating (how the record stores durations).
pub fn duration_to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_rfc3339_utc_millis() {
        assert_eq!(UnixMs(0).rfc3339(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            UnixMs(1_714_564_800_123).rfc3339(),
            "2024-05-01T12:00:00.123Z"
        );
        assert_eq!(
            UnixMs(1_714_564_800_123).to_string(),
            "2024-05-01T12:00:00.123Z"
        );
    }

    #[test]
    fn absurd_times_render_without_panicking() {
        assert_eq!(UnixMs(u64::MAX).rfc3339(), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn now_is_after_2024_and_round_trips() {
        let now = UnixMs::now();
        assert!(now > UnixMs(1_704_067_200_000));
        assert_eq!(UnixMs::from_system_time(now.to_system_time()), now);
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(UnixMs(5).saturating_since(UnixMs(9)), Duration::ZERO);
        assert_eq!(
            UnixMs(9).saturating_since(UnixMs(5)),
            Duration::from_millis(4)
        );
        assert_eq!(
            UnixMs(u64::MAX).saturating_add(Duration::MAX),
            UnixMs(u64::MAX)
        );
        assert_eq!(duration_to_ms(Duration::from_secs(2)), 2000);
    }
}
