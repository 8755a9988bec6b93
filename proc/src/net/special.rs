//! Addresses a name may not lead to unless listed as themselves: loopback, private,
//! link-local, multicast, the cloud metadata address, and every other address the special-
//! purpose registries say is not a host on the internet, and this machine's own addresses.
//! (An address embedded in an IPv6 one, mapped, NAT64 or 6to4, is judged as itself.)

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What kind of special address `address` is, for a person ("a loopback address"); `None` for
/// an address on the internet.
pub fn kind(address: IpAddr) -> Option<&'static str> {
    match address.to_canonical() {
        IpAddr::V4(v4) => kind_v4(v4),
        IpAddr::V6(v6) => kind_v6(v6),
    }
}

fn kind_v4(v4: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = v4.octets();
    Some(match (a, b, c) {
        _ if v4 == Ipv4Addr::new(169, 254, 169, 254) => "the cloud metadata address",
        (0, _, _) => "an unspecified address",
        (127, _, _) => "a loopback address",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "a private address",
        (100, 64..=127, _) => "a shared (carrier-grade NAT) address",
        (169, 254, _) => "a link-local address",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (198, 18..=19, _) => "a benchmarking address",
        (192, 0, 0) | (192, 88, 99) => "a reserved address",
        (224..=239, _, _) => "a multicast address",
        (240..=255, _, _) => "a reserved address",
        _ => return None,
    })
}

fn kind_v6(v6: Ipv6Addr) -> Option<&'static str> {
    let s = v6.segments();
    if v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("the cloud metadata address");
    }
    if v6.is_unspecified() {
        return Some("an unspecified address");
    }
    if v6.is_loopback() {
        return Some("a loopback address");
    }
    let embedded = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    Some(match s {
        // NAT64 (64:ff9b::/96): the IPv4 address it stands for.
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => return kind_v4(embedded(high, low)),
        [0x64, 0xff9b, 1, ..] => "a private address",
        // 6to4 (2002::/16): the IPv4 address it embeds.
        [0x2002, high, low, ..] => return kind_v4(embedded(high, low)),
        // IPv4-compatible (::/96, deprecated) and the rest of ::/8.
        [0, ..] => "a reserved address",
        [0x100, 0, 0, 0, ..] => "a reserved address",
        [0x2001, 0xdb8, ..] => "a documentation address",
        [0x2001, 0..=0x1ff, ..] => "a reserved address",
        [first, ..] if first & 0xfe00 == 0xfc00 => "a private (unique local) address",
        [first, ..] if first & 0xffc0 == 0xfe80 => "a link-local address",
        [first, ..] if first & 0xffc0 == 0xfec0 => "a private (site-local) address",
        [first, ..] if first & 0xff00 == 0xff00 => "a multicast address",
        _ => return None,
    })
}

/// This machine's own addresses, as its interfaces have them now.
pub fn own_addresses() -> Vec<IpAddr> {
    let Ok(interfaces) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut own = Vec::new();
    for interface in interfaces {
        let Some(address) = interface.address else {
            continue;
        };
        let ip = if let Some(v4) = address.as_sockaddr_in() {
            IpAddr::V4(v4.ip())
        } else if let Some(v6) = address.as_sockaddr_in6() {
            IpAddr::V6(v6.ip())
        } else {
            continue;
        };
        if !own.contains(&ip) {
            own.push(ip.to_canonical());
        }
    }
    own
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn of(text: &str) -> Option<&'static str> {
        kind(text.parse().unwrap())
    }

    #[test]
    fn the_addresses_a_name_may_not_lead_to_are_named() {
        for (address, what) in [
            ("127.0.0.1", "a loopback address"),
            ("127.255.0.9", "a loopback address"),
            ("::1", "a loopback address"),
            ("::ffff:127.0.0.1", "a loopback address"),
            ("10.0.0.1", "a private address"),
            ("172.16.5.4", "a private address"),
            ("172.31.255.255", "a private address"),
            ("192.168.1.1", "a private address"),
            ("fd12::1", "a private (unique local) address"),
            ("169.254.169.254", "the cloud metadata address"),
            ("fd00:ec2::254", "the cloud metadata address"),
            ("169.254.1.1", "a link-local address"),
            ("fe80::1", "a link-local address"),
            ("224.0.0.251", "a multicast address"),
            ("ff02::fb", "a multicast address"),
            ("0.0.0.0", "an unspecified address"),
            ("::", "an unspecified address"),
            ("100.100.100.200", "a shared (carrier-grade NAT) address"),
            ("255.255.255.255", "a reserved address"),
            ("64:ff9b::a00:1", "a private address"),
            ("2002:7f00:1::", "a loopback address"),
            ("::127.0.0.1", "a reserved address"),
            ("2001:db8::1", "a documentation address"),
            ("192.0.2.1", "a documentation address"),
        ] {
            assert_eq!(of(address), Some(what), "{address}");
        }
    }

    #[test]
    fn addresses_on_the_internet_are_not_special() {
        for address in [
            "93.184.216.34",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert_eq!(of(address), None, "{address}");
        }
    }

    #[test]
    fn this_machine_has_its_loopback_among_its_addresses() {
        let own = own_addresses();
        assert!(own.contains(&"127.0.0.1".parse().unwrap()), "{own:?}");
    }
}
