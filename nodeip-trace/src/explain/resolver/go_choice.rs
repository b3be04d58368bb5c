//! Which resolver a Go program's `net` uses for a name: Go's own, or the C library's
//! `getaddrinfo` through cgo — `(*conf).lookupOrder` and `initConfVal` in Go's `net/conf.go`
//! (Go 1.19–1.27 on Linux), replayed on the files and environment the program would read.
//! Pure: the caller reads the files.
//!
//! The checks, in Go's order: built without cgo (`CGO_ENABLED=0`, `netgo`): Go only;
//! `GODEBUG=netdns=go|cgo`; `LOCALDOMAIN` set (even empty), `RES_OPTIONS` or `HOSTALIASES`
//! non-empty: cgo; a name with `\` or `%`: cgo; `/etc/resolv.conf` unreadable (other than
//! missing or not permitted) or with an option or keyword Go does not know: cgo; no
//! `/etc/nsswitch.conf` or no `hosts:` line: Go (`files dns`); then each `hosts:` source:
//! `files`/`dns` with non-default `[STATUS=action]` criteria: cgo; `myhostname` when the name is
//! `localhost`, `_gateway`, `_outbound` or the machine's hostname: cgo (else skipped); `mdns*`
//! for a `.local` name or when `/etc/mdns.allow` exists: cgo (else skipped); any other source
//! (`resolve`, `sss`, …): cgo. Otherwise Go's own resolver.

/// A configuration file as the program would read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfFile<'a> {
    /// Read: its text.
    Text(&'a str),
    /// Not there (or not permitted): Go treats it as absent.
    Missing,
    /// Could not be read for another reason: Go gives the choice to libc.
    Unreadable,
}

impl ConfFile<'_> {
    /// A file as a read of it went: not found and not permitted are both "missing" to Go.
    pub fn from_read(read: &std::io::Result<String>) -> ConfFile<'_> {
        match read {
            Ok(text) => ConfFile::Text(text.as_str()),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
            {
                ConfFile::Missing
            }
            Err(_) => ConfFile::Unreadable,
        }
    }
}

/// What a Go program's choice of resolver depends on.
#[derive(Clone, Copy, Debug)]
pub struct GoResolverInputs<'a> {
    /// The program has cgo (a cgo build whose `net` can call `getaddrinfo`).
    pub cgo_available: bool,
    /// Its Go minor version (19 for Go 1.19): resolv.conf's `trust-ad`, `edns0` and
    /// `no-reload` are known from Go 1.20 on (checked: 1.21); before, they send it to cgo.
    pub go_minor: u32,
    /// Its `GODEBUG` (`netdns=go`, `netdns=cgo+1`, …), when set.
    pub godebug: Option<&'a str>,
    /// `LOCALDOMAIN` is set (even empty).
    pub localdomain_set: bool,
    /// `RES_OPTIONS` is set and not empty.
    pub res_options: bool,
    /// `HOSTALIASES` is set and not empty.
    pub hostaliases: bool,
    /// `/etc/resolv.conf`.
    pub resolv_conf: ConfFile<'a>,
    /// `/etc/nsswitch.conf`.
    pub nsswitch_conf: ConfFile<'a>,
    /// The machine's hostname (for `myhostname`).
    pub hostname: &'a str,
    /// `/etc/mdns.allow` exists.
    pub mdns_allow: bool,
}

impl<'a> GoResolverInputs<'a> {
    /// A cgo build of Go 1.`go_minor` on a node with these files, its environment clean (no
    /// `GODEBUG`, `LOCALDOMAIN`, `RES_OPTIONS`, `HOSTALIASES`) and no `/etc/mdns.allow`.
    pub fn cgo_build(
        go_minor: u32,
        nsswitch_conf: ConfFile<'a>,
        resolv_conf: ConfFile<'a>,
        hostname: &'a str,
    ) -> Self {
        GoResolverInputs {
            cgo_available: true,
            go_minor,
            godebug: None,
            localdomain_set: false,
            res_options: false,
            hostaliases: false,
            resolv_conf,
            nsswitch_conf,
            hostname,
            mdns_allow: false,
        }
    }
}

/// Go's choice for one name, and the check that made it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GoResolverChoice {
    /// The C library through cgo (true), or Go's own resolver.
    pub cgo: bool,
    /// The check that decided, as a person reads it.
    pub because: String,
}

fn cgo(because: String) -> GoResolverChoice {
    GoResolverChoice { cgo: true, because }
}

fn go(because: String) -> GoResolverChoice {
    GoResolverChoice {
        cgo: false,
        because,
    }
}

/// The `netdns` setting of a `GODEBUG` value: `go` or `cgo` (a `+N` debug level dropped).
fn netdns(godebug: &str) -> Option<&str> {
    godebug
        .split(',')
        .find_map(|kv| kv.trim().strip_prefix("netdns="))
        .map(|v| v.split('+').next().unwrap_or(v))
        .filter(|v| *v == "go" || *v == "cgo")
}

/// The first option or keyword of a resolv.conf text that Go 1.`go_minor` does not know.
fn unknown_resolv_option(text: &str, go_minor: u32) -> Option<String> {
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let mut words = line.split_whitespace();
        match words.next() {
            None | Some("nameserver" | "domain" | "search" | "lookup") => {}
            Some("options") => {
                for option in words {
                    let known = ["ndots:", "timeout:", "attempts:"]
                        .iter()
                        .any(|p| option.starts_with(p))
                        || matches!(
                            option,
                            "rotate"
                                | "single-request"
                                | "single-request-reopen"
                                | "use-vc"
                                | "usevc"
                                | "tcp"
                        )
                        || (go_minor >= 20 && matches!(option, "trust-ad" | "edns0" | "no-reload"));
                    if !known {
                        return Some(format!("option {option:?}"));
                    }
                }
            }
            Some(keyword) => return Some(format!("keyword {keyword:?}")),
        }
    }
    None
}

/// The `hosts:` sources of an nsswitch.conf text, each with its `[...]` criteria (lowercase).
fn hosts_sources(text: &str) -> Option<Vec<(String, Vec<String>)>> {
    let line = text.lines().find_map(|l| {
        let l = l.split('#').next().unwrap_or("").trim();
        l.strip_prefix("hosts:")
    })?;
    let mut sources: Vec<(String, Vec<String>)> = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']').unwrap_or(after.len());
            if let Some(last) = sources.last_mut() {
                last.1.extend(
                    after[..end]
                        .split_whitespace()
                        .map(|c| c.to_ascii_lowercase()),
                );
            }
            rest = after.get(end + 1..).unwrap_or("").trim_start();
        } else {
            let end = rest
                .find(|c: char| c.is_whitespace() || c == '[')
                .unwrap_or(rest.len());
            sources.push((rest[..end].to_ascii_lowercase(), Vec::new()));
            rest = rest[end..].trim_start();
        }
    }
    Some(sources)
}

/// Whether a criterion says what the default says (`success=return`, others `continue`; the
/// last criterion may also say `return`: nothing follows it anyway).
fn standard_criterion(criterion: &str, last: bool) -> bool {
    let Some((status, action)) = criterion.split_once('=') else {
        return false;
    };
    if status.starts_with('!') {
        return false;
    }
    let default = match status {
        "success" => "return",
        "notfound" | "unavail" | "tryagain" => "continue",
        _ => return false,
    };
    (last && action == "return") || action == default
}

/// Which resolver a Go program whose inputs are `inputs` uses to look `name` up.
pub fn go_resolver_choice(inputs: &GoResolverInputs, name: &str) -> GoResolverChoice {
    if !inputs.cgo_available {
        return go("built without cgo (CGO_ENABLED=0 or the netgo tag): only Go's own resolver is linked in".into());
    }
    match inputs.godebug.and_then(netdns) {
        Some("go") => return go("GODEBUG=netdns=go".into()),
        Some("cgo") => return cgo("GODEBUG=netdns=cgo".into()),
        _ => {}
    }
    if inputs.localdomain_set {
        return cgo("LOCALDOMAIN is set".into());
    }
    if inputs.res_options {
        return cgo("RES_OPTIONS is set".into());
    }
    if inputs.hostaliases {
        return cgo("HOSTALIASES is set".into());
    }
    if name.contains('\\') || name.contains('%') {
        return cgo(format!("the name {name:?} contains \\ or %"));
    }
    match inputs.resolv_conf {
        ConfFile::Unreadable => return cgo("/etc/resolv.conf cannot be read".into()),
        ConfFile::Text(text) => {
            if let Some(unknown) = unknown_resolv_option(text, inputs.go_minor) {
                return cgo(format!(
                    "/etc/resolv.conf has {unknown}, which Go does not know"
                ));
            }
        }
        ConfFile::Missing => {}
    }
    let text = match inputs.nsswitch_conf {
        ConfFile::Missing => {
            return go("no /etc/nsswitch.conf: Go reads it as \"hosts: files dns\"".into())
        }
        ConfFile::Unreadable => {
            return cgo("/etc/nsswitch.conf cannot be read".into());
        }
        ConfFile::Text(text) => text,
    };
    let Some(sources) = hosts_sources(text).filter(|s| !s.is_empty()) else {
        return go("/etc/nsswitch.conf has no hosts: line: Go reads it as \"files dns\"".into());
    };
    let name = name.trim_end_matches('.');
    for (source, criteria) in &sources {
        match source.as_str() {
            "files" | "dns" => {
                let last = criteria.len().saturating_sub(1);
                let odd = criteria
                    .iter()
                    .enumerate()
                    .find(|(i, c)| !standard_criterion(c, *i == last));
                if let Some((_, c)) = odd {
                    return cgo(format!(
                        "/etc/nsswitch.conf's hosts: {source} has the criterion [{c}], which only libc applies"
                    ));
                }
            }
            "myhostname" => {
                let special = ["localhost", "_gateway", "_outbound"]
                    .iter()
                    .any(|s| name.eq_ignore_ascii_case(s) || name.to_ascii_lowercase().ends_with(&format!(".{s}")));
                if special || name.eq_ignore_ascii_case(inputs.hostname) {
                    return cgo(format!(
                        "/etc/nsswitch.conf's hosts: line has myhostname and {name:?} is {}",
                        if special { "a name it answers" } else { "this machine's hostname" }
                    ));
                }
            }
            s if s.starts_with("mdns") => {
                if name.to_ascii_lowercase().ends_with(".local") || inputs.mdns_allow {
                    return cgo(format!(
                        "/etc/nsswitch.conf's hosts: line has {s} and {}",
                        if inputs.mdns_allow { "/etc/mdns.allow exists" } else { "the name ends in .local" }
                    ));
                }
            }
            other => {
                return cgo(format!(
                    "/etc/nsswitch.conf's hosts: line has the source {other:?}, which only libc can ask"
                ))
            }
        }
    }
    let line: Vec<&str> = sources.iter().map(|(s, _)| s.as_str()).collect();
    go(format!(
        "nothing in resolv.conf or nsswitch.conf (hosts: {}) sends it to cgo",
        line.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs<'a>(nsswitch: &'a str, resolv: &'a str) -> GoResolverInputs<'a> {
        GoResolverInputs::cgo_build(
            27,
            ConfFile::Text(nsswitch),
            ConfFile::Text(resolv),
            "node-1",
        )
    }

    #[test]
    fn a_plain_node_keeps_go_s_own_resolver() {
        let i = inputs(
            "hosts: files dns\n",
            "nameserver 10.0.0.2\noptions ndots:2 edns0\n",
        );
        let c = go_resolver_choice(&i, "node-1");
        assert!(!c.cgo, "{c:?}");
        assert!(c.because.contains("files dns"), "{c:?}");
    }

    #[test]
    fn myhostname_sends_the_machine_s_own_name_to_cgo_only() {
        // The research note's measured case: RHEL-style nsswitch, kubelet looks its hostname up.
        let i = inputs("hosts:      files myhostname dns\n", "");
        assert!(go_resolver_choice(&i, "node-1").cgo);
        assert!(go_resolver_choice(&i, "NODE-1.").cgo);
        assert!(go_resolver_choice(&i, "localhost").cgo);
        assert!(!go_resolver_choice(&i, "other").cgo);
    }

    #[test]
    fn unknown_sources_criteria_and_options_go_to_cgo() {
        assert!(go_resolver_choice(&inputs("hosts: files resolve dns", ""), "x").cgo);
        // A last criterion may say return (Go's standardStatusAction); a negated one never.
        assert!(!go_resolver_choice(&inputs("hosts: files [NOTFOUND=return] dns", ""), "x").cgo);
        assert!(go_resolver_choice(&inputs("hosts: files [!UNAVAIL=return] dns", ""), "x").cgo);
        assert!(
            go_resolver_choice(
                &inputs("hosts: files [NOTFOUND=return UNAVAIL=continue] dns", ""),
                "x"
            )
            .cgo
        );
        assert!(!go_resolver_choice(&inputs("hosts: files [notfound=continue] dns", ""), "x").cgo);
        // Go 1.19 does not know edns0; 1.21 does.
        let mut i = inputs("hosts: files dns", "options edns0\n");
        assert!(!go_resolver_choice(&i, "x").cgo);
        i.go_minor = 19;
        assert!(go_resolver_choice(&i, "x").cgo);
        let c = go_resolver_choice(&inputs("hosts: files dns", "options inet6\n"), "x");
        assert!(c.cgo && c.because.contains("inet6"), "{c:?}");
        assert!(go_resolver_choice(&inputs("hosts: files dns", "sortlist 10.0.0.0\n"), "x").cgo);
        assert!(go_resolver_choice(&inputs("hosts: files mdns4_minimal dns", ""), "a.local").cgo);
        assert!(!go_resolver_choice(&inputs("hosts: files mdns4_minimal dns", ""), "a.lan").cgo);
    }

    #[test]
    fn build_godebug_and_environment_come_first() {
        let mut i = inputs("hosts: files resolve", "");
        i.godebug = Some("http2client=0,netdns=go+2");
        assert!(!go_resolver_choice(&i, "x").cgo);
        i.godebug = None;
        i.cgo_available = false;
        assert!(!go_resolver_choice(&i, "x").cgo);
        let mut i = inputs("hosts: files dns", "");
        i.res_options = true;
        assert!(go_resolver_choice(&i, "x").cgo);
        let mut i = inputs("hosts: files dns", "");
        i.godebug = Some("netdns=cgo");
        assert!(go_resolver_choice(&i, "x").cgo);
    }

    #[test]
    fn missing_files_mean_files_then_dns_and_unreadable_ones_cgo() {
        let mut i = inputs("", "");
        i.nsswitch_conf = ConfFile::Missing;
        i.resolv_conf = ConfFile::Missing;
        assert!(!go_resolver_choice(&i, "x").cgo);
        assert!(!go_resolver_choice(&inputs("passwd: files\n", ""), "x").cgo);
        let mut i = inputs("hosts: files dns", "");
        i.resolv_conf = ConfFile::Unreadable;
        assert!(go_resolver_choice(&i, "x").cgo);
    }
}
