//! Untrusted text as a message shows it.

/// Cuts untrusted text to a length that reads well in a message.
pub(crate) fn shown(text: &str) -> String {
    const MAX_SHOWN: usize = 40;
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(MAX_SHOWN).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}
