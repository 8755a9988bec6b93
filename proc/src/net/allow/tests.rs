#![allow(clippy::unwrap_used)]

use super::*;

fn list(rules: &[&str]) -> AllowList {
    AllowList::parse(rules.iter().copied()).unwrap()
}

fn host(text: &str) -> Host {
    Host::parse(text).unwrap()
}

#[test]
fn a_name_without_a_port_is_443_and_80() {
    let allow = list(&["Registry.Example."]);
    assert_eq!(allow.texts(), ["registry.example"]);
    assert_eq!(allow.check(&host("registry.example"), 443), Ok(()));
    assert_eq!(allow.check(&host("REGISTRY.example."), 80), Ok(()));
    assert_eq!(
        allow.check(&host("registry.example"), 8080),
        Err(NotAllowed::Port(vec![443, 80]))
    );
    assert_eq!(
        allow.check(&host("other.example"), 443),
        Err(NotAllowed::NotListed)
    );
}

#[test]
fn a_port_given_is_the_only_port() {
    let allow = list(&["forge.example:8443", "forge.example:9418"]);
    assert_eq!(allow.texts(), ["forge.example:8443", "forge.example:9418"]);
    assert_eq!(allow.check(&host("forge.example"), 9418), Ok(()));
    assert_eq!(
        allow.check(&host("forge.example"), 443),
        Err(NotAllowed::Port(vec![8443, 9418]))
    );
}

#[test]
fn a_suffix_matches_the_names_below_it_only() {
    let allow = list(&["*.pkg.example"]);
    assert_eq!(allow.check(&host("a.pkg.example"), 443), Ok(()));
    assert_eq!(allow.check(&host("a.b.pkg.example"), 443), Ok(()));
    for other in [
        "pkg.example",
        "apkg.example",
        "pkg.example.evil",
        "evil-pkg.example",
    ] {
        assert_eq!(
            allow.check(&host(other), 443),
            Err(NotAllowed::NotListed),
            "{other}"
        );
    }
}

#[test]
fn an_address_is_allowed_only_when_listed_as_one() {
    let allow = list(&["127.0.0.1:8080", "[::1]:9000", "10.1.2.3", "host.example"]);
    assert_eq!(
        allow.texts(),
        ["127.0.0.1:8080", "[::1]:9000", "10.1.2.3", "host.example"]
    );
    assert_eq!(allow.check(&host("127.0.0.1"), 8080), Ok(()));
    assert_eq!(allow.check(&host("[::1]"), 9000), Ok(()));
    assert_eq!(allow.check(&host("10.1.2.3"), 443), Ok(()));
    assert_eq!(
        allow.check(&host("127.0.0.1"), 80),
        Err(NotAllowed::Port(vec![8080]))
    );
    assert_eq!(
        allow.check(&host("93.184.216.34"), 443),
        Err(NotAllowed::Address)
    );
    // A mapped address is the IPv4 one.
    assert_eq!(allow.check(&host("[::ffff:127.0.0.1]"), 8080), Ok(()));
    assert!(allow.lists_address("::ffff:10.1.2.3".parse().unwrap(), 80));
    assert!(!allow.lists_address("10.1.2.3".parse().unwrap(), 22));
    assert!(allow.lists_address_at_all("127.0.0.1".parse().unwrap()));
    assert!(!allow.lists_address_at_all("127.0.0.2".parse().unwrap()));
}

#[test]
fn a_number_in_disguise_is_no_name() {
    for disguised in [
        "127.1",
        "0x7f000001",
        "2130706433",
        "0x7f.0.0.1",
        "a.b.1",
        "017.0.0.1",
    ] {
        assert!(Host::parse(disguised).is_err(), "{disguised}");
        assert!(Rule::parse(disguised).is_err(), "{disguised}");
    }
    assert_eq!(host("1a.example"), Host::Name("1a.example".into()));
}

#[test]
fn what_is_not_a_rule_is_refused_with_why() {
    for bad in [
        "*",
        "*:443",
        "a*.example",
        "*.",
        "",
        "host:0",
        "host:65536",
        "host:+1",
        "host:",
        "exa mple.org",
        "bücher.example",
        "[::1",
        "[nope]:80",
        "*.10.0.0.1",
        "a..b",
    ] {
        let err = Rule::parse(bad).err();
        assert!(err.is_some(), "{bad:?} was taken");
    }
    let err = Rule::parse("*").unwrap_err();
    assert!(err.contains("every host"), "{err}");
}

#[test]
fn repeats_are_one_rule_and_the_texts_read_back() {
    let allow = list(&[
        "a.example",
        "A.example.",
        "*.b.example:8443",
        "::1",
        "[::1]",
    ]);
    assert_eq!(allow.texts(), ["a.example", "*.b.example:8443", "[::1]"]);
    let again = AllowList::parse(allow.texts().iter().map(String::as_str)).unwrap();
    assert_eq!(again, allow);
}

#[test]
fn nothing_listed_opens_nothing() {
    let allow = AllowList::default();
    assert!(allow.is_empty());
    assert_eq!(
        allow.check(&host("a.example"), 443),
        Err(NotAllowed::NotListed)
    );
    assert_eq!(
        allow.check(&host("127.0.0.1"), 443),
        Err(NotAllowed::Address)
    );
}
