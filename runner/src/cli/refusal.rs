//! A refusal to start: one line for stderr.

/// A refusal to start: one line for stderr.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(String);

pub(super) fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(message.into()))
}

/// `value`, or a refusal that says `flag` is required for `what`.
pub(super) fn required<T>(value: Option<T>, flag: &str, what: &str) -> Result<T, Refusal> {
    match value {
        Some(v) => Ok(v),
        None => refuse(format!("{flag} is required: {what}")),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::Refusal;

    /// The refusal's text, or a test failure.
    pub(in crate::cli) fn refusal<T: std::fmt::Debug>(result: Result<T, Refusal>) -> String {
        match result {
            Ok(value) => panic!("expected a refusal, got {value:?}"),
            Err(refusal) => refusal.to_string(),
        }
    }
}
