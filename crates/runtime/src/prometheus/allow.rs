//! `--prometheus-allowed-servers`: the servers a query may be sent to at all.
//!
//! Whoever may write an autoscaler names its server (`prometheus.serverAddress`, the native
//! `prometheus-server` annotation). Without a limit that makes the controller a port scanner
//! and a confused deputy: it would connect wherever a namespace user points it, from inside the
//! cluster. So an address is used only when it falls under one of the allowed prefixes, and
//! the check happens before a client exists (no DNS lookup, no connection).
//!
//! Matching is on the parsed URL, never on the raw text: the same scheme, the same host (ASCII
//! case-insensitively; IPv6 without brackets), the same port (80 or 443 when not written), and
//! the prefix's path segments first. So `http://prom.x` does not allow
//! `http://prom.x.evil.com` (another host) nor `http://prom.x@evil.com` (userinfo is refused),
//! and `http://prom:9090/a` allows `http://prom:9090/a/b` but not `http://prom:9090/ab`. An
//! address with userinfo, a query, a fragment, a `.` or `..` segment or an encoded `/`, `\` or
//! `.` in a segment is never allowed: a server that normalises its path could otherwise be made
//! to serve a path outside the prefix.

/// One parsed prefix (or address).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Prefix {
    https: bool,
    /// Lower case, without IPv6 brackets.
    host: String,
    port: u16,
    /// Non-empty path segments, as written.
    segments: Vec<String>,
}

impl Prefix {
    /// Reads `http(s)://host[:port][/path]`; `None` when it is not one, or carries anything an
    /// allowed address may not (userinfo, query, fragment, dot segments, encoded separators).
    fn parse(address: &str) -> Option<Self> {
        // `http::Uri` would drop a fragment silently; such an address is not a base URL.
        if address.contains('#') || address.chars().any(char::is_whitespace) {
            return None;
        }
        let uri: http::Uri = address.parse().ok()?;
        let https = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let authority = uri.authority()?;
        if authority.as_str().contains('@') || uri.query().is_some() {
            return None;
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        let segments: Vec<String> = uri
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if segments.iter().any(|s| !plain_segment(s)) {
            return None;
        }
        Some(Self {
            https,
            host,
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            segments,
        })
    }

    fn covers(&self, address: &Prefix) -> bool {
        self.https == address.https
            && self.host == address.host
            && self.port == address.port
            && address.segments.starts_with(&self.segments)
    }

    /// One spelling per prefix: `scheme://host[:port][/segments]`, the host in lower case (IPv6
    /// in brackets), the port only when it is not the scheme's default, no trailing slash.
    fn canonical(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = if self.port == if self.https { 443 } else { 80 } {
            String::new()
        } else {
            format!(":{}", self.port)
        };
        let mut canonical = format!("{scheme}://{host}{port}");
        for segment in &self.segments {
            canonical.push('/');
            canonical.push_str(segment);
        }
        canonical
    }
}

/// A path segment that means itself: not `.` or `..`, and no percent-encoded `.`, `/` or `\`
/// (which a server may decode into one of those).
fn plain_segment(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    segment != "."
        && segment != ".."
        && !lower.contains("%2e")
        && !lower.contains("%2f")
        && !lower.contains("%5c")
        && !segment.contains('\\')
}

/// The URL prefixes queries may go to. Empty allows nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedServers {
    prefixes: Vec<Prefix>,
}

impl AllowedServers {
    /// Nothing is allowed.
    pub fn none() -> Self {
        Self::default()
    }

    /// The prefixes among `addresses` that parse; the others are left out (and allow nothing).
    /// Flags are checked with [`parse_allowed_server`] first, so that a typo is an error at
    /// start rather than a silently smaller list.
    pub fn new<S: AsRef<str>>(addresses: impl IntoIterator<Item = S>) -> Self {
        Self {
            prefixes: addresses
                .into_iter()
                .filter_map(|a| Prefix::parse(a.as_ref()))
                .collect(),
        }
    }

    /// Whether `address` may be queried: it parses, and one prefix covers it.
    pub fn allows(&self, address: &str) -> bool {
        if self.prefixes.is_empty() {
            return false;
        }
        Prefix::parse(address).is_some_and(|a| self.prefixes.iter().any(|p| p.covers(&a)))
    }

    /// The entry that lets `address` be queried: the most specific prefix covering it (the
    /// most path segments), spelt canonically (`scheme://host[:port][/path]`, the default port
    /// left out); `None` when none does. What a server's circuit breaker and cap on queries in
    /// flight are kept by: an operator-written list, so their number is bounded by it however
    /// many addresses autoscalers name under one prefix.
    pub fn entry_of(&self, address: &str) -> Option<String> {
        let address = Prefix::parse(address)?;
        self.prefixes
            .iter()
            .filter(|p| p.covers(&address))
            .max_by_key(|p| p.segments.len())
            .map(Prefix::canonical)
    }

    /// Whether no address is allowed.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }
}

/// clap's check of one `--prometheus-allowed-servers` entry.
pub fn parse_allowed_server(input: &str) -> Result<String, String> {
    let trimmed = input.trim();
    Prefix::parse(trimmed)
        .map(|_| trimmed.to_owned())
        .ok_or_else(|| {
            format!(
                "{input:?} is not an http(s)://host[:port][/path] prefix (no userinfo, query, \
             fragment or dot segments)"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(prefixes: &[&str]) -> AllowedServers {
        AllowedServers::new(prefixes)
    }

    #[test]
    fn a_host_prefix_allows_that_host_only() {
        let a = allowed(&["http://prom.x"]);
        assert!(a.allows("http://prom.x"));
        assert!(a.allows("http://prom.x/"));
        assert!(a.allows("http://PROM.X:80/prometheus"));
        for other in [
            "http://prom.x.evil.com",
            "http://prom.xx",
            "http://prom.x:8080",
            "https://prom.x",
            "http://prom.x@evil.com",
            "http://evil.com@prom.x",
            "http://evil.com/http://prom.x",
            "http://prom.x/?x=1",
            "http://prom.x/#frag",
        ] {
            assert!(!a.allows(other), "{other}");
        }
    }

    #[test]
    fn path_prefixes_match_whole_segments() {
        let a = allowed(&["http://prom:9090/a"]);
        assert!(a.allows("http://prom:9090/a"));
        assert!(a.allows("http://prom:9090/a/"));
        assert!(a.allows("http://prom:9090/a/b"));
        for other in [
            "http://prom:9090/ab",
            "http://prom:9090/",
            "http://prom:9090/b/a",
            "http://prom:9090/a/../b",
            "http://prom:9090/a/./b",
            "http://prom:9090/a/%2e%2E/b",
            "http://prom:9090/a%2F..%2Fb",
            "http://prom:9090/a/%5C..",
        ] {
            assert!(!a.allows(other), "{other}");
        }
        // A trailing slash on the prefix changes nothing.
        assert_eq!(allowed(&["http://prom:9090/a/"]), a);
    }

    #[test]
    fn default_ports_ipv6_and_several_prefixes() {
        let a = allowed(&["https://[::1]", "http://prom.monitoring.svc:9090/tenant-a/"]);
        assert!(a.allows("https://[::1]:443/x"));
        assert!(!a.allows("http://[::1]"));
        assert!(a.allows("http://prom.monitoring.svc:9090/tenant-a/prometheus"));
        assert!(!a.allows("http://prom.monitoring.svc:9090/tenant-b"));
    }

    #[test]
    fn an_address_belongs_to_its_most_specific_entry() {
        let a = allowed(&[
            "http://Prom:9090",
            "http://prom:9090/team-a/",
            "https://[::1]:443",
            "http://thanos:80/x",
        ]);
        assert_eq!(
            a.entry_of("http://prom:9090/team-a/p1").as_deref(),
            Some("http://prom:9090/team-a")
        );
        assert_eq!(
            a.entry_of("http://PROM:9090/team-b").as_deref(),
            Some("http://prom:9090")
        );
        assert_eq!(
            a.entry_of("https://[::1]/q").as_deref(),
            Some("https://[::1]")
        );
        assert_eq!(
            a.entry_of("http://thanos/x/y").as_deref(),
            Some("http://thanos/x")
        );
        assert_eq!(a.entry_of("http://thanos/y"), None);
        assert_eq!(a.entry_of("not a url"), None);
    }

    #[test]
    fn nothing_is_allowed_by_an_empty_list_and_bad_prefixes_are_refused() {
        assert!(!AllowedServers::none().allows("http://prom:9090"));
        assert!(AllowedServers::new(["not a url", "ftp://x"]).is_empty());
        for bad in [
            "prom:9090",
            "ftp://prom",
            "http://",
            "http://u:p@prom",
            "http://prom/a/../b",
            "http://prom?x",
            " ",
        ] {
            assert!(parse_allowed_server(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_allowed_server(" http://prom:9090/a ").unwrap(),
            "http://prom:9090/a"
        );
    }
}
