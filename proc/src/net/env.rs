//! The variables that tell a sandbox's programs where the proxy is: the standard ones every
//! HTTP client reads, in both cases, and the ones common package managers read in place of
//! them. `docs/network.md` lists them with the tools that read each.

use std::net::IpAddr;

use super::allow::AllowList;
use super::channel::PROXY_ADDRESS;

/// The variables that name the proxy's URL.
const PROXY_NAMES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    // npm (and pnpm, which reads npm's settings).
    "npm_config_proxy",
    "npm_config_https_proxy",
    // Yarn 2 and later.
    "YARN_HTTP_PROXY",
    "YARN_HTTPS_PROXY",
    // pip's own setting (its requests library reads the standard ones too).
    "PIP_PROXY",
    // Cargo's `http.proxy`, which it otherwise takes from a settings file.
    "CARGO_HTTP_PROXY",
    // Node programs that use global-agent (Electron's downloads among them).
    "GLOBAL_AGENT_HTTP_PROXY",
];
/// The variables that list the hosts reached without the proxy.
const NO_PROXY_NAMES: &[&str] = &["NO_PROXY", "no_proxy", "GLOBAL_AGENT_NO_PROXY"];

/// The proxy's URL, as the variables give it.
pub fn proxy_url() -> String {
    format!("http://{PROXY_ADDRESS}")
}

/// The variables for a sandbox whose proxy opens `allow`, in a fixed order: every proxy
/// variable the proxy's URL, and the no-proxy ones the sandbox's own loopback (`localhost`,
/// `127.0.0.1`, `::1`), less a loopback address listed as an address, which programs then
/// reach through the proxy (this machine's, not the sandbox's).
pub fn variables(allow: &AllowList) -> Vec<(String, String)> {
    let url = proxy_url();
    let mut own: Vec<&str> = vec!["localhost"];
    for (text, address) in [
        ("127.0.0.1", IpAddr::from([127, 0, 0, 1])),
        ("::1", IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])),
    ] {
        if !allow.lists_address_at_all(address) {
            own.push(text);
        }
    }
    let no_proxy = own.join(",");
    PROXY_NAMES
        .iter()
        .map(|name| ((*name).to_owned(), url.clone()))
        .chain(
            NO_PROXY_NAMES
                .iter()
                .map(|name| ((*name).to_owned(), no_proxy.clone())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn every_variable_names_the_proxy_and_loopback_goes_without() {
        let allow = AllowList::parse(["pkg.example"]).unwrap();
        let vars = variables(&allow);
        let get = |name: &str| {
            vars.iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .unwrap()
        };
        assert_eq!(get("HTTPS_PROXY"), "http://127.0.0.1:3128");
        assert_eq!(get("http_proxy"), "http://127.0.0.1:3128");
        assert_eq!(get("npm_config_https_proxy"), "http://127.0.0.1:3128");
        assert_eq!(get("NO_PROXY"), "localhost,127.0.0.1,::1");
        assert_eq!(get("no_proxy"), "localhost,127.0.0.1,::1");
    }

    #[test]
    fn a_listed_loopback_address_goes_through_the_proxy() {
        let allow = AllowList::parse(["127.0.0.1:4873"]).unwrap();
        let vars = variables(&allow);
        let no_proxy = vars.iter().find(|(n, _)| n == "NO_PROXY").unwrap();
        assert_eq!(no_proxy.1, "localhost,::1");
    }
}
