//! What a conversation's replies say, summarised as facts a person looks for: addresses with
//! primary/secondary, routes with table/type/dev/src, links, generic netlink family ids, IPVS
//! objects — capped, so a million-route dump stays one small event.
use compact_str::{CompactString, ToCompactString};
use serde::{Deserialize, Serialize};

use super::ip_text::push_decimal;
use super::netlink::{af, rt_table, rtn, IpvsCommand, MessageBody, Name, NetlinkMessage};

/// `NLM_F_REQUEST`: a message a process sent, not one the kernel did.
const NLM_F_REQUEST: u16 = 0x1;

/// Facts kept per conversation; beyond this they are only counted (`omitted`).
pub const MAX_FACTS: usize = 256;

/// The facts in a conversation's replies (capped; see `omitted`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConversationFacts {
    /// Addresses answered (`RTM_NEWADDR`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<AddressFact>,
    /// Routes answered (`RTM_NEWROUTE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteFact>,
    /// Links answered (`RTM_NEWLINK`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkFact>,
    /// Generic netlink families answered (nlctrl `NEWFAMILY`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub families: Vec<FamilyFact>,
    /// IPVS services/destinations/info answered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipvs: Vec<IpvsCommand>,
    /// Facts beyond the cap, counted only.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: u32,
}

/// `dst/len`, as `format!("{dst}/{len}")` writes it, inline up to 24 bytes (each reply route's
/// fact has one; the formatter was 1% of the live consumer's CPU per event).
fn prefix_text(dst: &str, len: u8) -> CompactString {
    let mut out = CompactString::with_capacity(dst.len() + 4);
    out.push_str(dst);
    out.push('/');
    push_decimal(&mut out, len.into());
    out
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One address in an address dump.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressFact {
    /// Interface name (or index when unknown).
    pub ifname: CompactString,
    /// The address (`IFA_LOCAL`, else `IFA_ADDRESS`).
    pub address: CompactString,
    /// Prefix length.
    pub prefix_len: u8,
    /// `IFA_F_SECONDARY`: never the kernel's source choice on this prefix.
    pub secondary: bool,
    /// Label, when it differs from the interface name (`eth0:1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<CompactString>,
    /// What `ip address` says of it beyond a plain static address, from the kernel's own
    /// messages (a request's flags are the asker's, not the address's): `dynamic` (no
    /// `IFA_F_PERMANENT`: a lifetime, from DHCP or SLAAC), `temporary` (an IPv6 privacy
    /// address), `deprecated`, `tentative`, `mngtmpaddr`, `noprefixroute`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<Name>,
}

impl AddressFact {
    /// Whether `ip address` would say `flag` of it ([`AddressFact::flags`]).
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// [`AddressFact::flags`] of an address the kernel described with `ifa_flags` `raw` (`v6`: an
/// IPv6 address, where bit 0 means temporary rather than secondary).
fn address_flags(raw: u32, v6: bool) -> Vec<Name> {
    use super::netlink::ifa;
    let mut flags = Vec::new();
    if raw & ifa::PERMANENT == 0 {
        flags.push(Name::Borrowed("dynamic"));
    }
    for (bit, name, only_v6) in [
        (ifa::TEMPORARY, "temporary", true),
        (ifa::DEPRECATED, "deprecated", false),
        (ifa::TENTATIVE, "tentative", false),
        (ifa::MANAGETEMPADDR, "mngtmpaddr", false),
        (ifa::NOPREFIXROUTE, "noprefixroute", false),
    ] {
        if raw & bit != 0 && (v6 || !only_v6) {
            flags.push(Name::Borrowed(name));
        }
    }
    flags
}

/// One route in an answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteFact {
    /// Table name.
    pub table: Name,
    /// Route type (`local`, `unicast`, ...).
    #[serde(rename = "type")]
    pub route_type: Name,
    /// `dst/len`, or `default`.
    pub dst: CompactString,
    /// Output interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<CompactString>,
    /// Preferred source (`src`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<CompactString>,
    /// Gateway (`via`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<CompactString>,
}

impl RouteFact {
    /// Whether it is in table `table` (an `RT_TABLE_*` id, [`rt_table`]).
    pub fn in_table(&self, table: u32) -> bool {
        rt_table::id(&self.table) == Some(table)
    }

    /// Whether its type is `kind` (an `RTN_*` id, [`rtn`]).
    pub fn is_type(&self, kind: u8) -> bool {
        rtn::id(&self.route_type) == Some(kind)
    }
}

/// One link in an answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkFact {
    /// Interface index.
    pub index: u32,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// `IFLA_INFO_KIND` (`veth`, `dummy`, `kube-ipvs0`'s `dummy`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// A generic netlink family the kernel named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyFact {
    /// Family name (`IPVS`).
    pub name: String,
    /// Family id (the `nlmsg_type` its messages use).
    pub id: u16,
}

impl ConversationFacts {
    /// Adds what one message says (an address, route, link, generic netlink family or IPVS
    /// object); beyond [`MAX_FACTS`] facts it is only counted in `omitted`.
    pub fn add(&mut self, m: &NetlinkMessage) {
        let facts = self;
        let room = facts.addresses.len()
            + facts.routes.len()
            + facts.links.len()
            + facts.families.len()
            + facts.ipvs.len()
            < MAX_FACTS;
        let counted = match &m.body {
            MessageBody::Address(a) => {
                if room {
                    facts.addresses.push(AddressFact {
                        ifname: a
                            .ifname
                            .clone()
                            .unwrap_or_else(|| a.index.to_compact_string()),
                        address: a
                            .local
                            .clone()
                            .or_else(|| a.address.clone())
                            .unwrap_or_default(),
                        prefix_len: a.prefix_len,
                        secondary: a.secondary,
                        label: a.label.clone().filter(|l| Some(l) != a.ifname.as_ref()),
                        flags: if m.header.flags_raw & NLM_F_REQUEST == 0 {
                            address_flags(a.flags_raw, af::id(&a.family) == Some(af::INET6))
                        } else {
                            Vec::new()
                        },
                    });
                }
                true
            }
            MessageBody::Route(r) => {
                if room {
                    facts.routes.push(RouteFact {
                        table: r.table.clone(),
                        route_type: r.route_type.clone(),
                        dst: r
                            .dst
                            .as_ref()
                            .map(|d| prefix_text(d, r.dst_len))
                            .unwrap_or_else(|| "default".into()),
                        dev: r
                            .oif_name
                            .clone()
                            .or_else(|| r.oif.map(|i| i.to_compact_string())),
                        src: r.prefsrc.clone(),
                        gateway: r.gateway.clone(),
                    });
                }
                true
            }
            MessageBody::Link(l) => {
                if room {
                    facts.links.push(LinkFact {
                        index: l.index,
                        ifname: l.ifname.clone(),
                        kind: l.info_kind.clone(),
                    });
                }
                true
            }
            MessageBody::Nlctrl(n) => {
                if let (true, Some(name), Some(id)) = (room, &n.family_name, n.family_id) {
                    facts.families.push(FamilyFact {
                        name: name.clone(),
                        id,
                    });
                }
                true
            }
            MessageBody::Ipvs(command) => {
                if room {
                    facts.ipvs.push(command.as_ref().clone());
                }
                true
            }
            _ => false,
        };
        if counted && !room {
            facts.omitted += 1;
        }
    }
}
