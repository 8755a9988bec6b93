//! Where a request may go: the allow-list asked first, then the name resolved here, outside
//! the sandbox, once; every address it gives judged ([`super::special`]), and only those that
//! pass handed back. The connection goes to one of those very addresses, so a name that
//! resolves elsewhere a moment later (DNS rebinding) changes nothing.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use super::allow::{AllowList, Host};
use super::special;
use super::why::Why;

/// The addresses `host` at `port` may be reached at, in the resolver's order, or why none.
pub fn destinations(allow: &AllowList, host: &Host, port: u16) -> Result<Vec<SocketAddr>, Why> {
    allow.check(host, port).map_err(Why::NotAllowed)?;
    let name = match host {
        // Listed as an address: that address, whatever it is.
        Host::Address(address) => return Ok(vec![SocketAddr::new(*address, port)]),
        Host::Name(name) => name,
    };
    let resolved: Vec<IpAddr> = (name.as_str(), port)
        .to_socket_addrs()
        .map_err(|err| Why::Unresolved(err.to_string()))?
        .map(|address| address.ip())
        .collect();
    if resolved.is_empty() {
        return Err(Why::Unresolved("no address".into()));
    }
    pick(allow, port, &resolved, &special::own_addresses())
}

/// Of the addresses `resolved`, those a name may lead to at `port`: an address on the
/// internet that is not this machine's own (`own`), or one listed as an address. `Err` names
/// the first address refused when none is left.
pub fn pick(
    allow: &AllowList,
    port: u16,
    resolved: &[IpAddr],
    own: &[IpAddr],
) -> Result<Vec<SocketAddr>, Why> {
    let mut kept: Vec<SocketAddr> = Vec::new();
    let mut first_refused = None;
    for address in resolved.iter().map(|a| a.to_canonical()) {
        let kind = special::kind(address).or_else(|| {
            own.iter()
                .any(|mine| mine.to_canonical() == address)
                .then_some("this machine's own address")
        });
        match kind {
            Some(kind) if !allow.lists_address(address, port) => {
                first_refused.get_or_insert(Why::Special { address, kind });
            }
            _ => {
                let socket = SocketAddr::new(address, port);
                if !kept.contains(&socket) {
                    kept.push(socket);
                }
            }
        }
    }
    match (kept.is_empty(), first_refused) {
        (true, Some(why)) => Err(why),
        (true, None) => Err(Why::Unresolved("no address".into())),
        (false, _) => Ok(kept),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::net::allow::NotAllowed;

    fn allow(rules: &[&str]) -> AllowList {
        AllowList::parse(rules.iter().copied()).unwrap()
    }

    fn ips(list: &[&str]) -> Vec<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_name_leads_only_to_addresses_on_the_internet() {
        let list = allow(&["pkg.example"]);
        let picked = pick(&list, 443, &ips(&["10.0.0.1", "93.184.216.34"]), &[]).unwrap();
        assert_eq!(picked, ["93.184.216.34:443".parse().unwrap()]);
        let refused = pick(&list, 443, &ips(&["127.0.0.1", "::1"]), &[]).unwrap_err();
        assert_eq!(
            refused,
            Why::Special {
                address: "127.0.0.1".parse().unwrap(),
                kind: "a loopback address"
            }
        );
        let metadata = pick(&list, 80, &ips(&["169.254.169.254"]), &[]).unwrap_err();
        assert!(
            metadata.to_string().contains("cloud metadata"),
            "{metadata}"
        );
    }

    #[test]
    fn this_machines_own_addresses_are_refused_unless_listed() {
        let own = ips(&["198.51.100.7", "203.0.113.9", "2606:4700::9"]);
        let list = allow(&["pkg.example"]);
        let refused = pick(&list, 443, &ips(&["2606:4700::9"]), &own).unwrap_err();
        assert!(refused.to_string().contains("own address"), "{refused}");
        let listed = allow(&["pkg.example", "[2606:4700::9]:443"]);
        assert_eq!(
            pick(&listed, 443, &ips(&["2606:4700::9"]), &own).unwrap(),
            ["[2606:4700::9]:443".parse().unwrap()]
        );
    }

    #[test]
    fn a_special_address_listed_as_one_is_reached_by_name_at_its_port_only() {
        let list = allow(&["registry.test:8080", "127.0.0.1:8080"]);
        assert_eq!(
            pick(&list, 8080, &ips(&["127.0.0.1", "::ffff:127.0.0.1"]), &[]).unwrap(),
            ["127.0.0.1:8080".parse().unwrap()]
        );
        assert!(pick(&list, 9090, &ips(&["127.0.0.1"]), &[]).is_err());
    }

    #[test]
    fn the_list_is_asked_before_any_name_is_resolved() {
        let list = allow(&["pkg.example"]);
        let host = Host::Name("unlisted.invalid".into());
        assert_eq!(
            destinations(&list, &host, 443),
            Err(Why::NotAllowed(NotAllowed::NotListed))
        );
        let literal = Host::Address("127.0.0.1".parse().unwrap());
        let listed = allow(&["127.0.0.1:8080"]);
        assert_eq!(
            destinations(&listed, &literal, 8080).unwrap(),
            ["127.0.0.1:8080".parse().unwrap()]
        );
        assert_eq!(
            destinations(&listed, &literal, 22),
            Err(Why::NotAllowed(NotAllowed::Port(vec![8080])))
        );
    }

    #[test]
    fn localhost_resolves_here_and_is_refused_as_loopback() {
        let list = allow(&["localhost:8080"]);
        let host = Host::Name("localhost".into());
        let why = destinations(&list, &host, 8080).unwrap_err();
        assert!(matches!(why, Why::Special { .. }), "{why:?}");
    }
}
