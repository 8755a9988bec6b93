//! The allow-list, `--net-allow <name>[:<port>]` repeated: which destinations the proxy opens.
//!
//! A rule is an exact host name (`registry.example`), a suffix (`*.example`: every name below
//! `example`, not `example` itself), or an address written as one (`10.0.0.5`, `[::1]`), with
//! one port, or ports 443 and 80 when none is given. Names are compared in lower case without
//! a trailing dot. A name that reads as a number (`127.1`, `0x7f000001`: what `inet_aton`
//! takes for an address) is no name, so it can never stand in for an address.
//!
//! Nothing is allowed that no rule names: an address is allowed only when a rule lists that
//! very address (a name that resolves to it does not list it), and a name only when a name
//! rule matches it. (Which addresses a name may lead to is [`super::resolve`]'s.)

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The ports of a rule that gives none.
pub const DEFAULT_PORTS: [u16; 2] = [443, 80];
/// The longest host name (RFC 1035).
const MAX_NAME: usize = 253;
/// The longest label.
const MAX_LABEL: usize = 63;

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// This name exactly.
    Exact(String),
    /// Every name that ends with `.` and this suffix.
    Below(String),
    /// This address, written as one.
    Address(IpAddr),
}

/// One `--net-allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// What it matches.
    pub pattern: Pattern,
    /// Its ports: the one given, or [`DEFAULT_PORTS`].
    pub ports: Vec<u16>,
    /// Whether the port was given.
    port_given: bool,
}

/// A host as a request names it: a name, or an address written as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A host name, in lower case, without a trailing dot.
    Name(String),
    /// An address (an IPv4-mapped IPv6 address is taken as the IPv4 one).
    Address(IpAddr),
}

impl Host {
    /// Reads a host as a request or a rule writes it: `[v6]`, a dotted IPv4 address, or a
    /// name. `Err` says why it is neither.
    pub fn parse(text: &str) -> Result<Host, String> {
        if let Some(inner) = text.strip_prefix('[') {
            let inner = inner
                .strip_suffix(']')
                .ok_or_else(|| format!("`{text}` opens a bracket it does not close"))?;
            let v6: Ipv6Addr = inner
                .parse()
                .map_err(|_| format!("`{inner}` is not an IPv6 address"))?;
            return Ok(Host::Address(IpAddr::V6(v6).to_canonical()));
        }
        if let Ok(v4) = text.parse::<Ipv4Addr>() {
            return Ok(Host::Address(IpAddr::V4(v4)));
        }
        if let Ok(v6) = text.parse::<Ipv6Addr>() {
            return Ok(Host::Address(IpAddr::V6(v6).to_canonical()));
        }
        name(text).map(Host::Name)
    }

    /// The host as a person reads it (an IPv6 address without brackets).
    pub fn text(&self) -> String {
        match self {
            Host::Name(name) => name.clone(),
            Host::Address(address) => address.to_string(),
        }
    }
}

/// `text` as a host name: lower case, no trailing dot, letters, digits, `-` and `_` in labels
/// of 1 to 63, 253 at most, and not a number in disguise.
fn name(text: &str) -> Result<String, String> {
    let lower = text.to_ascii_lowercase();
    let name = lower.strip_suffix('.').unwrap_or(&lower);
    let bad = |why: &str| Err(format!("`{text}` is not a host name: {why}"));
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME {
        return bad("it is longer than 253 characters");
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > MAX_LABEL {
            return bad("a label is empty or longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return bad(
                "only letters, digits, `-` and `_` (an international name in its xn-- form)",
            );
        }
    }
    if reads_as_number(name) {
        return bad("it reads as an address; write an address as one (a.b.c.d or [v6])");
    }
    Ok(name.to_owned())
}

/// Whether the resolver would take `name` for an IPv4 address (`inet_aton`'s forms: one to
/// four parts, each decimal, octal or `0x` hexadecimal), or its last label is all digits.
fn reads_as_number(name: &str) -> bool {
    let number = |part: &str| {
        let hex = part
            .strip_prefix("0x")
            .map(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
        hex.unwrap_or_else(|| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
    };
    let parts: Vec<&str> = name.split('.').collect();
    let last_digits = parts
        .last()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    last_digits || (parts.len() <= 4 && parts.iter().all(|part| number(part)))
}

impl Rule {
    /// Reads one `--net-allow` value.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let (host, port) = split_port(text)?;
        let pattern = if host == "*" {
            return Err(format!(
                "`{text}` allows every host: that is no allow-list (a sandbox line without \
                 --unshare-net gives a program the whole network)"
            ));
        } else if let Some(suffix) = host.strip_prefix("*.") {
            match Host::parse(suffix)? {
                Host::Name(suffix) => Pattern::Below(suffix),
                Host::Address(_) => {
                    return Err(format!("`{text}`: an address has no names below it"));
                }
            }
        } else if host.contains('*') {
            return Err(format!(
                "`{text}`: `*` may only stand first, as `*.<suffix>` (every name below it)"
            ));
        } else {
            match Host::parse(host)? {
                Host::Name(name) => Pattern::Exact(name),
                Host::Address(address) => Pattern::Address(address),
            }
        };
        Ok(Rule {
            pattern,
            ports: port.map_or_else(|| DEFAULT_PORTS.to_vec(), |port| vec![port]),
            port_given: port.is_some(),
        })
    }

    /// Whether the rule's pattern matches `host` (at any port).
    fn matches(&self, host: &Host) -> bool {
        match (&self.pattern, host) {
            (Pattern::Exact(rule), Host::Name(name)) => rule == name,
            (Pattern::Below(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Address(rule), Host::Address(address)) => rule == address,
            _ => false,
        }
    }
}

/// Splits `host[:port]` (`[v6][:port]`, or a bare IPv6 address without a port).
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let port = |digits: &str| {
        digits
            .parse::<u16>()
            .ok()
            .filter(|port| *port > 0 && digits.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| format!("`{text}`: `{digits}` is not a port (1 to 65535)"))
    };
    if text.starts_with('[') {
        return match text.rsplit_once("]:") {
            Some((host, digits)) => Ok((&text[..=host.len()], Some(port(digits)?))),
            None => Ok((text, None)),
        };
    }
    if text.matches(':').count() > 1 {
        // A bare IPv6 address: no port can follow it unbracketed.
        return Ok((text, None));
    }
    match text.split_once(':') {
        Some((host, digits)) => Ok((host, Some(port(digits)?))),
        None => Ok((text, None)),
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.pattern {
            Pattern::Exact(name) => name.clone(),
            Pattern::Below(suffix) => format!("*.{suffix}"),
            Pattern::Address(IpAddr::V6(v6)) => format!("[{v6}]"),
            Pattern::Address(IpAddr::V4(v4)) => v4.to_string(),
        };
        match (self.port_given, self.ports.first()) {
            (true, Some(port)) => write!(f, "{host}:{port}"),
            _ => f.write_str(&host),
        }
    }
}

/// Why the allow-list does not open a destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAllowed {
    /// No rule names the host.
    NotListed,
    /// Rules name the host, at these other ports.
    Port(Vec<u16>),
    /// An address no rule lists as such.
    Address,
}

impl fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAllowed::NotListed => f.write_str("not on the allow-list"),
            NotAllowed::Port(ports) => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(
                    f,
                    "not on the allow-list at this port (it has this host at {})",
                    ports.join(", ")
                )
            }
            NotAllowed::Address => f.write_str(
                "an address that is not on the allow-list (only an address listed as one is \
                 reached by its address)",
            ),
        }
    }
}

/// The rules of one `serve` (or one run), in the order given, without repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    rules: Vec<Rule>,
}

impl AllowList {
    /// Reads the rules; the first that cannot be read is the error.
    pub fn parse<'a>(rules: impl IntoIterator<Item = &'a str>) -> Result<AllowList, String> {
        let mut list = AllowList::default();
        for text in rules {
            let rule = Rule::parse(text)?;
            if !list.rules.contains(&rule) {
                list.rules.push(rule);
            }
        }
        Ok(list)
    }

    /// Whether it has no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rules as text, in the form [`AllowList::parse`] reads (what a run's record keeps).
    pub fn texts(&self) -> Vec<String> {
        self.rules.iter().map(Rule::to_string).collect()
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Whether `host` at `port` is on the list, as the host a program asked for.
    pub fn check(&self, host: &Host, port: u16) -> Result<(), NotAllowed> {
        let mut ports: Vec<u16> = Vec::new();
        for rule in self.rules.iter().filter(|rule| rule.matches(host)) {
            if rule.ports.contains(&port) {
                return Ok(());
            }
            for port in &rule.ports {
                if !ports.contains(port) {
                    ports.push(*port);
                }
            }
        }
        match host {
            _ if !ports.is_empty() => Err(NotAllowed::Port(ports)),
            Host::Address(_) => Err(NotAllowed::Address),
            Host::Name(_) => Err(NotAllowed::NotListed),
        }
    }

    /// Whether `address` at `port` is listed as an address: the one way a name may lead to a
    /// loopback, private or otherwise special address.
    pub fn lists_address(&self, address: IpAddr, port: u16) -> bool {
        self.check(&Host::Address(address.to_canonical()), port)
            .is_ok()
    }

    /// Whether `address` is listed as an address at any port.
    pub fn lists_address_at_all(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        self.rules
            .iter()
            .any(|rule| rule.pattern == Pattern::Address(address))
    }
}

#[cfg(test)]
mod tests;
