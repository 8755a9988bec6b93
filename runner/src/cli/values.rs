//! The parsers of one flag's value; clap calls them, and their message becomes the refusal.

use std::time::Duration;

/// A duration above zero: `500ms`, `30s`, `2m`, `1h`.
pub(super) fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text).map_err(|e| {
        format!(
            "`{text}` is not a duration like 500ms, 30s, 2m or 1h ({})",
            lnk_common::Causes(&e)
        )
    })?;
    if duration.is_zero() {
        return Err(format!("`{text}` is zero; give a duration above zero"));
    }
    Ok(duration)
}

/// A size above zero: `65536`, `64KiB`, `1MiB`.
pub(super) fn parse_bytes(text: &str) -> Result<u64, String> {
    let bytes = parse_size::parse_size(text).map_err(|e| {
        format!(
            "`{text}` is not a size like 65536, 64KiB or 1MiB ({})",
            lnk_common::Causes(&e)
        )
    })?;
    if bytes == 0 {
        return Err(format!("`{text}` is zero; give a size above zero"));
    }
    Ok(bytes)
}

/// `NAME=VALUE`, with a shell-like name and no NUL in the value.
pub(super) fn parse_var(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not NAME=VALUE"));
    };
    let mut chars = name.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    if value.contains('\0') {
        return Err(format!("the value of {name} holds a NUL byte"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_is_humantime_above_zero() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(
            parse_duration("0s"),
            Err("`0s` is zero; give a duration above zero".to_owned())
        );
        let err = parse_duration("soon").unwrap_or_default_err();
        assert!(
            err.starts_with("`soon` is not a duration like 500ms, 30s, 2m or 1h ("),
            "{err}"
        );
    }

    #[test]
    fn a_size_is_bytes_or_units_above_zero() {
        assert_eq!(parse_bytes("65536"), Ok(65536));
        assert_eq!(parse_bytes("64KiB"), Ok(65536));
        assert_eq!(parse_bytes("1MiB"), Ok(1 << 20));
        assert_eq!(
            parse_bytes("0"),
            Err("`0` is zero; give a size above zero".to_owned())
        );
        let err = parse_bytes("lots").unwrap_or_default_err();
        assert!(
            err.starts_with("`lots` is not a size like 65536, 64KiB or 1MiB ("),
            "{err}"
        );
    }

    #[test]
    fn a_var_is_a_name_and_everything_after_the_first_equals() {
        assert_eq!(
            parse_var("A_1=b=c"),
            Ok(("A_1".to_owned(), "b=c".to_owned()))
        );
        assert_eq!(parse_var("_x="), Ok(("_x".to_owned(), String::new())));
        assert_eq!(
            parse_var("NOVALUE"),
            Err("`NOVALUE` is not NAME=VALUE".to_owned())
        );
        for bad in ["1A=x", "=x", "A-B=x", "É=x"] {
            let err = parse_var(bad).unwrap_or_default_err();
            assert!(
                err.ends_with(
                    "is not a variable name (letters, digits and _, not starting with a digit)"
                ),
                "{bad}: {err}"
            );
        }
        assert_eq!(
            parse_var("A=x\0y"),
            Err("the value of A holds a NUL byte".to_owned())
        );
    }

    /// The error of a result that must be one (a test failure otherwise).
    trait ErrOf {
        fn unwrap_or_default_err(self) -> String;
    }

    impl<T: std::fmt::Debug> ErrOf for Result<T, String> {
        fn unwrap_or_default_err(self) -> String {
            match self {
                Ok(value) => panic!("expected a refusal, got {value:?}"),
                Err(err) => err,
            }
        }
    }
}
