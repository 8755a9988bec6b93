//! Whether a settings file holds a secret, read the way a person would check it before
//! sharing it: a key named like a token or a password (`token = …` in cargo's
//! `config.toml`, `extraHeader = Authorization: …` or `smtpPass` in git's, `_authToken` in
//! npm's), or a URL with a password or a token in it (`https://user:pw@host`,
//! `https://ghp_…@host`). Such a file is not shown to the sandbox; `config` says which and
//! why (never the value), and `config --read <file>` shows it anyway when the person says so.

/// Parts of a key's name that mark a secret.
const SECRET_KEYS: &[&str] = &[
    "token",
    "password",
    "passwd",
    "secret",
    "extraheader",
    "apikey",
    "api_key",
    "api-key",
    "private_key",
    "private-key",
    "_auth",
    "smtppass",
    "credential-store",
];

/// Why `text` holds a secret (the key's name or "a URL with a password or token", and the
/// line's number), or `None`.
pub fn secret_in(text: &str) -> Option<String> {
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let pair = line.split_once('=').or_else(|| line.split_once(':'));
        if let Some((key, value)) = pair
            && !value.trim().is_empty()
        {
            let key = key.trim().trim_matches('"').to_ascii_lowercase();
            if let Some(part) = SECRET_KEYS.iter().find(|part| key.contains(*part)) {
                return Some(format!(
                    "line {} sets `{}`, which names a {}",
                    number + 1,
                    key,
                    if part.contains("pass") {
                        "password"
                    } else {
                        "token or key"
                    }
                ));
            }
        }
        if url_with_secret(line) {
            return Some(format!(
                "line {} holds a URL with a password or a token in it",
                number + 1
            ));
        }
    }
    None
}

/// Whether `line` holds a URL whose user part carries a secret: a password (`user:pw@`), or
/// something longer or more random than a user's name (`ghp_…@`); `ssh://git@host` does not.
fn url_with_secret(line: &str) -> bool {
    let mut rest = line;
    while let Some(at) = rest.find("://") {
        rest = &rest[at + 3..];
        let authority: &str = rest
            .split(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .next()
            .unwrap_or_default();
        if let Some((user, _host)) = authority.rsplit_once('@') {
            let digits = user.chars().any(|c| c.is_ascii_digit());
            let letters = user.chars().any(|c| c.is_ascii_alphabetic());
            if user.contains(':') || user.len() > 32 || (user.len() >= 16 && digits && letters) {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_passwords_and_urls_with_them_are_secrets() {
        for text in [
            "[registry]\ntoken = \"cio_abc\"\n",
            "[registries.corp]\ntoken=\"x\"",
            "[http]\n\textraHeader = Authorization: Basic eA==\n",
            "[sendemail]\n\tsmtpPass = hunter2\n",
            "//registry.example/:_authToken=abc\n",
            "[url \"https://ghp_0123456789abcdefghij@git.example/\"]\n\tinsteadOf = https://git.example/\n",
            "index-url = https://me:pw@pypi.internal/simple\n",
            "[env]\nAPI_KEY = \"abc\"\n",
            "[env]\nDATABASE_URL = \"postgres://app:pw@db/app\"\n",
        ] {
            assert!(secret_in(text).is_some(), "{text}");
        }
    }

    #[test]
    fn an_identity_and_ordinary_settings_are_not() {
        for text in [
            "[user]\n\tname = Me\n\temail = me@example.org\n",
            "[credential]\n\thelper = cache\n",
            "[url \"ssh://git@git.example/\"]\n\tinsteadOf = https://git.example/\n",
            "[registry]\nglobal-credential-providers = [\"cargo:token\"]\n# token = old\n",
            "[build]\njobs = 2\n[net]\ngit-fetch-with-cli = true\n",
            "[tools]\nnode = \"20\"\n",
            "[core]\n\tpager = less -FRX\n",
            "[http]\nproxy = \"http://proxy.internal:3128\"\n",
        ] {
            assert_eq!(secret_in(text), None, "{text}");
        }
    }
}
